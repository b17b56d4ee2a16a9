"""Leave the group when Spark ends the source's process with SIGTERM."""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType
from typing import Callable, Optional

__all__ = ["leave_group_on_sigterm"]


def leave_group_on_sigterm(close: Callable[[], None]) -> None:
    """Make SIGTERM leave the group before the process ends.

    Spark ends the process that hosts a Python streaming source with SIGTERM
    when the query stops, without calling ``stop()``. Without a handler the
    member would linger in the group until its session times out, and the
    other members would wait that long for its partitions.

    Further SIGTERMs while ``close`` runs are ignored: Spark can send two, and a
    second handler run inside the first one's ``close`` waited for ever on a lock
    the first one held (a ``threading.Event``'s), leaving the process behind its
    JVM.

    Only works when called from the main thread; does nothing elsewhere.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGTERM)

    def handler(signum: int, frame: Optional[FrameType]) -> None:
        # Python runs handlers only in the main thread, between bytecodes: nothing can
        # run between entering this handler and ignoring the signal.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            close()
        finally:
            if callable(previous):
                previous(signum, frame)
            else:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, handler)
