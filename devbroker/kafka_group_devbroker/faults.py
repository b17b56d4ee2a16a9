"""The crash tests' fault hook: kill the whole query at a named point.

Development only. It lives in this distribution (``kafka-group-devbroker``), which the
connector does not require and whose code the connector's wheel does not hold
(``tests/unit/test_packaging.py`` checks): :func:`kafka_group.faults.crash_point` looks this
module up where it can be imported, and hands it every named point a process reaches. Do
not install this distribution where queries run for real.

Inactive unless the environment variable ``KAFKA_GROUP_FAULT_POINT`` names a point; then
the ``KAFKA_GROUP_FAULT_HIT``-th time (default 1) a process reaches that point, it sends
SIGKILL to its whole process group, as a machine failure would end the driver, the JVM and
the Python workers at once. The crash tests start each query in a process group of its
own for this. The points are listed in :mod:`kafka_group.faults`.

With ``KAFKA_GROUP_FAULT_SLEEP_S`` set, a process that reaches the point (the hit-th time and
every time after) sleeps that many seconds there instead: a thread held back, to force an
order of events a race needs (``group.before_refused_client_close``, ``delta.reading_transactions``). Each sleep
is logged (WARNING, with the process id), so a test can tell when a process sits at the point. With
``KAFKA_GROUP_FAULT_THREAD`` set, only a thread of that name reaches the point (``MainThread``: the thread
that serves a source runner's planning calls, not the ones that close it).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections import Counter

__all__ = ["crash_point"]

logger = logging.getLogger(__name__)

_hits: Counter[str] = Counter()


def crash_point(name: str) -> None:
    """Die here (SIGKILL to the process group) if the environment asks for ``name``.

    Caller: :func:`kafka_group.faults.crash_point`, on whichever thread reaches the point.
    """
    if os.environ.get("KAFKA_GROUP_FAULT_POINT") != name:
        return
    thread = os.environ.get("KAFKA_GROUP_FAULT_THREAD")
    if thread is not None and threading.current_thread().name != thread:
        return
    _hits[name] += 1
    if _hits[name] < int(os.environ.get("KAFKA_GROUP_FAULT_HIT", "1")):
        return
    sleep_s = os.environ.get("KAFKA_GROUP_FAULT_SLEEP_S")
    if sleep_s is not None:
        # With no handler configured, logging's last resort writes this to stderr (the query's log).
        logger.warning("fault point %s reached in pid %d: sleeping %s s", name, os.getpid(), sleep_s)
        time.sleep(float(sleep_s))
        return
    os.killpg(os.getpgrp(), signal.SIGKILL)
