"""Leave the group when Spark ends the source's process with SIGTERM, and end that process within a bound.

Spark runs a Python streaming source's planning calls in a process of their own (the source runner, a child of
the driver's JVM) and ends it with SIGTERM when the query stops. The handler installed here leaves the group
(``close``, on a thread of its own: the main thread may be inside a lock it needs), then lets SIGTERM end the
process. Leaving talks to the cluster, which may not answer: every step
of it is bounded where it is made, and the process ends :data:`CLOSE_BOUND_S` after SIGTERM whatever ``close``
still waits for. A process whose JVM is gone (its parent changed) ends within the same bound: its socket to the
JVM ends, so pyspark calls the reader's ``stop()``, which leaves the group; should that not end the process, it
ends without it.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from types import FrameType
from typing import Callable, Optional

__all__ = ["CLOSE_BOUND_S", "leave_group_on_sigterm"]

logger = logging.getLogger(__name__)

#: Seconds SIGTERM gives ``close`` before the process ends without it. Closing a member waits at most about
#: 37 s (the polling thread 5 s, the last commits' answers and the consumer lock 10 s, the lock for the close
#: 10 s, a static member's leave 2 s, the client's close 10 s: see ``GroupMember.close`` in
#: ``kafka_group.group.membership``), and each wait ends early when the cluster answers; the source's own last
#: steps (its final commits, an assign-mode committer's 10-s commit and close) come on top. This bound is the
#: backstop: whatever is still waiting when it passes is given up, and the group drops the member at its
#: session timeout.
CLOSE_BOUND_S = 45.0

#: Seconds between two looks at whether the process's parent (the JVM) is still there.
_PARENT_CHECK_S = 1.0

#: The exit status when the bound passes: that of a process SIGTERM ended (128 + 15), which it is.
_EXIT_STATUS = 128 + signal.SIGTERM


def leave_group_on_sigterm(close: Callable[[], None], bound_s: float = CLOSE_BOUND_S) -> None:
    """Make SIGTERM leave the group before the process ends, and end the process within ``bound_s``.

    Spark ends the process that hosts a Python streaming source with SIGTERM
    when the query stops, without calling ``stop()``. Without a handler the
    member would linger in the group until its session times out, and the
    other members would wait that long for its partitions.

    The handler runs on the main thread, the one that serves Spark's planning
    calls, between two bytecodes of whatever that thread was doing, possibly
    inside a locked block (reading the offsets table's positions, whose lock is
    not reentrant). So it only starts ``close`` on a thread of its own and
    returns: the interrupted call finishes and lets its locks go, which
    ``close`` may need. Once ``close`` returned, that thread sends SIGTERM
    again, and the handler, back on the main thread, ends the process as
    SIGTERM would have (the previous handler, or the default action).

    A daemon thread ends the process ``bound_s`` after SIGTERM if it has not
    ended by then: with the cluster gone a Kafka client's synchronous commit or
    close could wait for ever, and a stopped query left its process behind its
    JVM. Another daemon thread watches the process's parent: once it changes
    (the JVM is gone, whether or not it stopped the query) the process ends
    within ``bound_s``. It does not send itself SIGTERM: the JVM's end also
    ends the runner's socket, whose reader then calls ``stop()``, which leaves
    the group (and waits for a close already under way).

    Further SIGTERMs while ``close`` runs are ignored: Spark can send two.

    Only works when called from the main thread; does nothing elsewhere.

    Parameters
    ----------
    close : callable
        Leaves the group and releases the clients. Called at most once here, on a thread of its own.
    bound_s : float, default :data:`CLOSE_BOUND_S`
        Seconds after SIGTERM, or after the JVM went away, when the process ends whatever ``close`` does.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGTERM)
    closing = threading.Event()  # set by the first SIGTERM's handler
    closed = threading.Event()  # set once close returned
    ended = threading.Event()  # set by the handler that ends the process: the bound stands down

    def close_then_end() -> None:
        try:
            close()
        except Exception:  # the process ends all the same; say why it may not have left
            logger.exception("leaving the group on SIGTERM failed")
        finally:
            closed.set()
            os.kill(os.getpid(), signal.SIGTERM)  # the handler, on the main thread, ends the process

    def handler(signum: int, frame: Optional[FrameType]) -> None:
        # Python runs handlers only in the main thread, between bytecodes.
        if closed.is_set():
            ended.set()
            if callable(previous):
                previous(signum, frame)
            else:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                os.kill(os.getpid(), signal.SIGTERM)
            return
        if closing.is_set():
            return  # a second SIGTERM while closing: the close's own SIGTERM ends the process
        closing.set()
        _start_daemon(lambda: _end_after(bound_s, ended, "leaving the group on SIGTERM", closed),
                      "kafka-group-close-bound")
        # Not a daemon: the interpreter waits for it should the main thread end first.
        threading.Thread(target=close_then_end, name="kafka-group-close-on-sigterm").start()

    signal.signal(signal.SIGTERM, handler)
    parent = os.getppid()
    _start_daemon(lambda: _end_when_orphaned(parent, bound_s, ended), "kafka-group-parent-watch")


def _start_daemon(target: Callable[[], None], name: str) -> None:
    threading.Thread(target=target, name=name, daemon=True).start()


def _end_after(bound_s: float, ended: threading.Event, what: str, closed: Optional[threading.Event] = None) -> None:
    """End the process unless ``ended`` is set within ``bound_s`` (the handler ends it, or hands SIGTERM on to the
    previous handler). ``closed``: whether ``close`` returned, for the message. Caller: a daemon thread of its own."""
    if ended.wait(bound_s):
        return
    if closed is not None and closed.is_set():
        logger.error("%s left the group, but the process did not end within %g s: its main thread is held in a "
                     "call; it ends now", what, bound_s)
    else:
        logger.error("%s did not finish within %g s (the Kafka cluster does not answer): the process ends without "
                     "it; the group drops this member when its session times out", what, bound_s)
    os._exit(_EXIT_STATUS)  # a thread is stuck in the client or the main thread in a call: nothing else ends it


def _end_when_orphaned(parent: int, bound_s: float, ended: threading.Event) -> None:
    """Once the process's parent is no longer ``parent`` (the JVM is gone), end the process ``bound_s`` later if
    it still runs (it normally ends by itself first). Caller: a daemon thread of its own, for the process's life."""
    while os.getppid() == parent:
        time.sleep(_PARENT_CHECK_S)
    logger.warning("the process's JVM (pid %d) is gone: this process ends within %g s", parent, bound_s)
    _end_after(bound_s, ended, "ending after the JVM went away")
