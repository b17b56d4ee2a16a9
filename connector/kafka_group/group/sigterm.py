"""Leave the group when Spark ends the source's process with SIGTERM, and end that process within a bound.

Spark runs a Python streaming source's planning calls in a process of their own (the source runner, a child of
the driver's JVM) and ends it with SIGTERM when the query stops. The handler installed here leaves the group
(``close``), then lets SIGTERM end the process. Leaving talks to the cluster, which may not answer: every step
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

    ``close`` runs on the main thread, in the handler (it may find the locks the
    main thread held when the signal came, which are reentrant). A daemon thread
    ends the process ``bound_s`` after SIGTERM if ``close`` has not returned by
    then: with the cluster gone a Kafka client's synchronous commit or close could
    wait for ever, and a stopped query left its process behind its JVM. Another
    daemon thread watches the process's parent: once it changes (the JVM is gone,
    whether or not it stopped the query) the process ends within ``bound_s``.
    It does not send itself SIGTERM: the JVM's end also ends the runner's socket,
    whose reader then calls ``stop()``, and a handler run inside that ``close``
    would end the process before the member left.

    Further SIGTERMs while ``close`` runs are ignored: Spark can send two, and a
    second handler run inside the first one's ``close`` waited for ever on a lock
    the first one held (a ``threading.Event``'s), leaving the process behind its
    JVM.

    Only works when called from the main thread; does nothing elsewhere.

    Parameters
    ----------
    close : callable
        Leaves the group and releases the clients.
    bound_s : float, default :data:`CLOSE_BOUND_S`
        Seconds after SIGTERM, or after the JVM went away, when the process ends whatever ``close`` does.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGTERM)
    closed = threading.Event()

    def handler(signum: int, frame: Optional[FrameType]) -> None:
        # Python runs handlers only in the main thread, between bytecodes: nothing can
        # run between entering this handler and ignoring the signal.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        _start_daemon(lambda: _end_after(bound_s, closed, "leaving the group on SIGTERM"), "kafka-group-close-bound")
        try:
            close()
        finally:
            closed.set()
            if callable(previous):
                previous(signum, frame)
            else:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, handler)
    parent = os.getppid()
    _start_daemon(lambda: _end_when_orphaned(parent, bound_s, closed), "kafka-group-parent-watch")


def _start_daemon(target: Callable[[], None], name: str) -> None:
    threading.Thread(target=target, name=name, daemon=True).start()


def _end_after(bound_s: float, closed: threading.Event, what: str) -> None:
    """End the process unless ``closed`` is set within ``bound_s``. Caller: a daemon thread of its own."""
    if closed.wait(bound_s):
        return
    logger.error("%s did not finish within %g s (the Kafka cluster does not answer): the process ends without it; "
                 "the group drops this member when its session times out", what, bound_s)
    os._exit(_EXIT_STATUS)  # the main thread is stuck in the client: nothing else can end the process


def _end_when_orphaned(parent: int, bound_s: float, closed: threading.Event) -> None:
    """Once the process's parent is no longer ``parent`` (the JVM is gone), end the process ``bound_s`` later if
    it still runs (it normally ends by itself first). Caller: a daemon thread of its own, for the process's life."""
    while os.getppid() == parent:
        time.sleep(_PARENT_CHECK_S)
    logger.warning("the process's JVM (pid %d) is gone: this process ends within %g s", parent, bound_s)
    _end_after(bound_s, closed, "ending after the JVM went away")
