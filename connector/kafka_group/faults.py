"""Fault injection for crash tests: kill the whole query at a named point.

Inactive unless the environment variable ``KAFKA_GROUP_FAULT_POINT`` names a
point; then the ``KAFKA_GROUP_FAULT_HIT``-th time (default 1) a process reaches
that point, it sends SIGKILL to its whole process group, as a machine failure
would end the driver, the JVM and the Python workers at once. The crash tests
start each query in a process group of its own for this.

Points: ``sink.before_write``, ``sink.before_commit``, ``sink.after_commit``
(before Spark records the batch as done), ``source.before_kafka_commit`` (all of
them in :data:`POINTS`, which every batch reaches), and ``delta.after_schema_merge``
(between the ``ADD COLUMN`` commit of ``DeltaSink(merge_schema=True)`` and the
batch's data commit; reached only by a batch that adds columns).
"""

from __future__ import annotations

import os
import signal
from collections import Counter

__all__ = ["crash_point", "POINTS"]

POINTS = ("sink.before_write", "sink.before_commit", "sink.after_commit", "source.before_kafka_commit")
_hits: Counter[str] = Counter()


def crash_point(name: str) -> None:
    """Die here (SIGKILL to the process group) if the environment asks for it."""
    if os.environ.get("KAFKA_GROUP_FAULT_POINT") != name:
        return
    _hits[name] += 1
    if _hits[name] >= int(os.environ.get("KAFKA_GROUP_FAULT_HIT", "1")):
        os.killpg(os.getpgrp(), signal.SIGKILL)
