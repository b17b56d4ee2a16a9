"""Named points in the commit path, where the crash tests stop a query.

The connector only names the points and calls :func:`crash_point` at each; by itself it does
nothing there. The crash tests' hook, which kills the query at a chosen point, belongs to
the development distribution ``kafka-group-devbroker`` (``kafka_group_devbroker.faults``):
the connector does not require it and its wheel holds none of that code. Where that module
can be imported, :func:`crash_point` hands it each point reached; elsewhere a point costs
one failed import per process, then nothing.

Points: ``sink.before_write``, ``sink.before_commit``, ``sink.after_commit``
(before Spark records the batch as done), ``source.before_kafka_commit`` (all of
them in :data:`POINTS`, which every batch reaches), and ``delta.after_schema_merge``
(between the ``ADD COLUMN`` commit of ``DeltaSink(merge_schema=True)`` and the
batch's data commit; reached only by a batch that adds columns), and ``sink.between_tables``
(``RoutedDeltaSink``: one table's share of a batch committed, the next table's not yet). The keyed sink
(``DeltaSink(keys=...)``) adds ``delta.after_create`` (its first batch created the empty table,
nothing merged yet), ``delta.before_merge`` (the offsets checked, the MERGE about to run and
commit) and, in SCD type 1, ``keyed.after_tombstones`` (a batch with deletes recorded their
tombstones, its data and offsets not committed yet); its own MERGE (tables with deletion vectors)
adds ``delta.own_merge_written`` (its data and deletion vector files written, its commit not). The sink's
compaction by the connector's own rewrite adds ``compaction.written`` (a bin's compacted file written, the
commit that removes its small files not; reached only when a table is compacted that way). The group member
adds ``group.before_refused_client_close`` (a refused static member's dead client about to be closed, on the
thread that closes it, while the member joins again with a new client). Reading a table's Delta transaction
versions (the offsets, on any thread of the source or the sink) reaches ``delta.reading_transactions``, under
the lock that guards them.
"""

from __future__ import annotations

from typing import Callable, Optional

__all__ = ["crash_point", "POINTS"]

POINTS = ("sink.before_write", "sink.before_commit", "sink.after_commit", "source.before_kafka_commit")

#: The development package's hook once looked up (None: not installed).
_hook: Optional[Callable[[str], None]] = None
_looked_up = False


def crash_point(name: str) -> None:
    """Hand the point ``name`` to the crash tests' hook, if the development package is installed.

    Caller: the sink and the source's driver, on whichever thread reaches the point (two
    threads looking the hook up at once both find the same module).
    """
    global _hook, _looked_up
    if not _looked_up:
        try:
            from kafka_group_devbroker import faults
        except ImportError:
            _hook = None
        else:
            _hook = faults.crash_point
        _looked_up = True
    if _hook is not None:
        _hook(name)
