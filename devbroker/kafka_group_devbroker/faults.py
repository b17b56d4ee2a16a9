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
order of events a race needs (``group.before_refused_client_close``).
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter

__all__ = ["crash_point"]

_hits: Counter[str] = Counter()


def crash_point(name: str) -> None:
    """Die here (SIGKILL to the process group) if the environment asks for ``name``.

    Caller: :func:`kafka_group.faults.crash_point`, on whichever thread reaches the point.
    """
    if os.environ.get("KAFKA_GROUP_FAULT_POINT") != name:
        return
    _hits[name] += 1
    if _hits[name] < int(os.environ.get("KAFKA_GROUP_FAULT_HIT", "1")):
        return
    sleep_s = os.environ.get("KAFKA_GROUP_FAULT_SLEEP_S")
    if sleep_s is not None:
        time.sleep(float(sleep_s))
        return
    os.killpg(os.getpgrp(), signal.SIGKILL)
