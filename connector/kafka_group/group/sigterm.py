"""Leave the group when Spark ends the source's process with SIGTERM, and end that process within a bound.

Spark runs a Python streaming source's planning calls in a process of their own (the source runner, a child of
the driver's JVM) and ends it with SIGTERM when the query stops. The handler installed here leaves the group
(``close``, on a thread of its own: the main thread may be inside a lock it needs), then ends the process as
SIGTERM would have. Leaving talks to the cluster, which may not answer: every step
of it is bounded where it is made, and the process ends :data:`CLOSE_BOUND_S` after SIGTERM whatever ``close``
still waits for. A process whose JVM is gone (its parent changed) ends within the same bound: its socket to the
JVM ends, so pyspark calls the reader's ``stop()``, which leaves the group; should that not end the process, it
ends without it.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from types import FrameType
from typing import Callable, List, Optional, Set, Tuple, Union

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

#: The exit status of a process this module ends: that of a process SIGTERM ended (128 + 15), which it is.
_EXIT_STATUS = 128 + signal.SIGTERM

#: Seconds the bound waits for its own log line before it ends the process.
_LOG_WAIT_S = 1.0

#: What the first SIGTERM closes, in the order given (main thread only: appended to at installs).
_closes: List[Callable[[], None]] = []
#: This process's install, empty before it: what a forked child undoes (the SIGTERM disposition before it, the
#: pipe's ends).
_undo: List[Tuple[object, int, int]] = []
#: The forking thread's signal mask before a fork, while SIGTERM is held over it.
_fork_mask: List[Set[Union[int, signal.Signals]]] = []


def leave_group_on_sigterm(close: Callable[[], None], bound_s: float = CLOSE_BOUND_S) -> None:
    """Make SIGTERM leave the group before the process ends, and end the process within ``bound_s``.

    Spark ends the process that hosts a Python streaming source with SIGTERM
    when the query stops, without calling ``stop()``. Without a handler the
    member would linger in the group until its session times out, and the
    other members would wait that long for its partitions.

    The handler runs on the main thread, the one that serves Spark's planning
    calls, between two bytecodes of whatever that thread was doing, possibly
    inside a locked block (reading the offsets table's positions, whose lock is
    not reentrant; or one of :mod:`threading`'s own). So it takes no lock and
    starts no thread: it wakes a thread started here, through a pipe, and
    returns. That thread runs ``close`` once the interrupted call has let go of
    what ``close`` needs, then ends the process with the status of one SIGTERM
    ended (or, when another handler was installed before, sends SIGTERM again,
    which the handler hands on to that one).

    A daemon thread ends the process ``bound_s`` after SIGTERM if it has not
    ended by then: with the cluster gone a Kafka client's synchronous commit or
    close could wait for ever, and a stopped query left its process behind its
    JVM. Another daemon thread watches the process's parent: once it changes
    (the JVM is gone, whether or not it stopped the query) the process ends
    within ``bound_s``. It does not send itself SIGTERM: the JVM's end also
    ends the runner's socket, whose reader then calls ``stop()``, which leaves
    the group (and waits for a close already under way).

    Further SIGTERMs while ``close`` runs are ignored: Spark can send two.
    Called again in the same process, it adds ``close`` to those the first
    SIGTERM runs (in order, under the one bound).

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
    _closes.append(close)
    if _undo:  # installed: the one handler closes this too
        return
    previous = signal.getsignal(signal.SIGTERM)
    wake_read, wake_write = os.pipe()  # the handler's one syscall: no lock the interrupted frame may hold
    first = threading.Lock()  # taken, without waiting, by the first SIGTERM's handler
    closed: List[bool] = []  # appended to once every close returned

    def handler(signum: int, frame: Optional[FrameType]) -> None:
        # Python runs handlers only in the main thread, between bytecodes: a SIGTERM landing inside this
        # handler runs it again there, so it blocks on nothing.
        if closed and callable(previous):  # our own SIGTERM, after closing: the handler installed before ours
            previous(signum, frame)
        elif first.acquire(blocking=False):
            os.write(wake_write, b"\0")
        # else: a second SIGTERM while closing; the closing thread ends the process

    def close_then_end() -> None:
        os.read(wake_read, 1)
        _start_daemon(lambda: _end_after(bound_s, "leaving the group on SIGTERM", closed), "kafka-group-close-bound")
        for each in list(_closes):
            try:
                each()
            except Exception:  # the process ends all the same; say why it may not have left
                logger.exception("leaving the group on SIGTERM failed")
        closed.append(True)
        if callable(previous):
            os.kill(os.getpid(), signal.SIGTERM)  # handed on by the handler, on the main thread
        else:
            _exit_as_sigterm()  # not waiting for the main thread, which may be inside a long client call

    # A daemon: the interpreter must not wait for it when the process ends without SIGTERM.
    _start_daemon(close_then_end, "kafka-group-close-on-sigterm")
    _undo.append((previous, wake_read, wake_write))
    signal.signal(signal.SIGTERM, handler)
    parent = os.getppid()
    _start_daemon(lambda: _end_when_orphaned(parent, bound_s), "kafka-group-parent-watch")


def _hold_sigterm_over_fork() -> None:
    """Block SIGTERM in the forking thread until the child has undone the install (a SIGTERM to the child in
    between would run the parent's handler there). Caller: the forking thread (``os.register_at_fork``)."""
    if _undo:
        _fork_mask[:] = [signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})]


def _release_sigterm_after_fork() -> None:
    """Give the forking thread its signal mask back (in the parent; in the child after the undo)."""
    if _fork_mask:
        signal.pthread_sigmask(signal.SIG_SETMASK, _fork_mask.pop())


def _forget_in_child() -> None:
    """In a child forked after the install (by code in the runner: pyspark forks its workers before): none of
    the threads exist there and the pipe is the parent's, whose close thread a SIGTERM to the child would wake.
    The child gets SIGTERM's disposition of before and closes nothing of its parent's; a SIGTERM that came
    meanwhile was held (:func:`_hold_sigterm_over_fork`) and is delivered now. Caller: the forking thread, in
    the child (``os.register_at_fork``)."""
    for previous, wake_read, wake_write in _undo:
        for fd in (wake_read, wake_write):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            signal.signal(signal.SIGTERM, previous)  # type: ignore[arg-type]
        except (ValueError, TypeError):  # not the main thread, or None (set outside Python): left as it is
            pass
    _undo.clear()
    _closes.clear()
    _release_sigterm_after_fork()


os.register_at_fork(before=_hold_sigterm_over_fork, after_in_parent=_release_sigterm_after_fork,
                    after_in_child=_forget_in_child)


def _start_daemon(target: Callable[[], None], name: str) -> None:
    threading.Thread(target=target, name=name, daemon=True).start()


def _exit_as_sigterm() -> None:
    """End the process now with the status of one SIGTERM ended, after flushing what it wrote."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more to say
            pass
    os._exit(_EXIT_STATUS)


def _end_after(bound_s: float, what: str, closed: Optional[List[bool]] = None) -> None:
    """End the process ``bound_s`` from now if it still runs. ``closed``: non-empty once ``close`` returned (for
    the message). Caller: a daemon thread of its own."""
    time.sleep(bound_s)
    if closed:
        args: Tuple[object, ...] = ("%s left the group, but the process did not end within %g s: it ends now",
                                    what, bound_s)
    else:
        args = ("%s did not finish within %g s (the Kafka cluster does not answer): the process ends without it; "
                "the group drops this member when its session times out", what, bound_s)
    # Said on a thread of its own, waited for briefly: a thread stuck writing to a stderr nobody reads holds the
    # logging handler's lock, and the process must end all the same.
    said = threading.Event()

    def say() -> None:
        logger.error(*args)
        said.set()

    _start_daemon(say, "kafka-group-close-bound-log")
    said.wait(_LOG_WAIT_S)
    os._exit(_EXIT_STATUS)  # a thread is stuck in the client or the main thread in a call: nothing else ends it


def _end_when_orphaned(parent: int, bound_s: float) -> None:
    """Once the process's parent is no longer ``parent`` (the JVM is gone), end the process ``bound_s`` later if
    it still runs (it normally ends by itself first). Caller: a daemon thread of its own, for the process's life."""
    while os.getppid() == parent:
        time.sleep(_PARENT_CHECK_S)
    logger.warning("the process's JVM (pid %d) is gone: this process ends within %g s", parent, bound_s)
    _end_after(bound_s, "ending after the JVM went away")
