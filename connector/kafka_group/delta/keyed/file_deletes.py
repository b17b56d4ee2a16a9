"""Positions to delete per file -> the file's new deletion vector or its rewrite, in a Spark task.

The step SCD2's MERGE as Spark tasks (:mod:`kafka_group.delta.keyed.scd2_tasks`, whose rows are chosen
per key) ends with, as SCD1's (:func:`~kafka_group.delta.keyed.task_merge.dv_writer`, whose rows fire by
sequence). Given a touched file and the physical positions of the rows the MERGE deletes there,
:meth:`~kafka_group.delta.keyed.task_rewrite.RowDropper.drop` unites them with the file's old deletion
vector and writes a new deletion vector (a table with them enabled) or the file again without those
rows (copy-on-write), and says what the driver commits
(:func:`~kafka_group.delta.keyed.task_rewrite.dropped_files`). :func:`positions_writer` is that step
as a ``mapInArrow`` function over ``(FILE_ID, POSITION)`` rows.

Nothing here imports pyspark. Callers: Spark tasks (the closures are pickled, storage options included;
never logged).
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping, Optional, Tuple

from kafka_group.delta.keyed.task_rewrite import FILE_ID, RowDropper
from kafka_group.delta.log.dv_bitmap import union_rows
from kafka_group.delta.storage.table_location import table_filesystem

__all__ = ["DROP_RESULT_COLUMNS", "matches_by_file", "positions_writer"]

#: :func:`positions_writer`'s columns, one row per touched file (:meth:`RowDropper.drop`'s values).
DROP_RESULT_COLUMNS = ((FILE_ID, "long"), ("dv", "string"), ("dv_path", "string"), ("dv_size", "long"),
                       ("all_deleted", "boolean"), ("deleted", "long"), ("rewritten", "string"))


def matches_by_file(batches: Iterator[Any], column: str) -> Iterator[Tuple[int, Any]]:
    """A task's input batches (every row of a file in this task) as ``(file id, its rows)``, one file at a
    time (pyarrow; ``column`` holds the file id)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    parts = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
    if not parts:
        return
    matches = pa.concat_tables(parts)
    for file_id in pc.unique(matches.column(column)).to_pylist():
        yield file_id, matches.filter(pc.equal(matches.column(column), file_id))


def positions_writer(dropper: RowDropper, files: Mapping[int, Tuple[str, Mapping[str, Any], Optional[int]]],
                     out_schema: Any) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The ``mapInArrow`` function: rows ``(FILE_ID, POSITION)`` in (every row of a file in one task:
    repartition by file), one :data:`DROP_RESULT_COLUMNS` row per touched file out (``out_schema``).

    ``files``: file id -> (path, its live ``add``, its statistics' row count or None)."""

    def write(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        fs = table_filesystem(dropper.table_path, dropper.storage_options)
        for file_id, mine in matches_by_file(batches, FILE_ID):
            positions = union_rows(mine.column(1).to_numpy())
            path, add, num_records = files[file_id]
            done = dropper.drop(fs, path, add, num_records, positions)
            values = {FILE_ID: file_id, "deleted": len(positions), **done}
            yield pa.RecordBatch.from_pydict({f.name: [values.get(f.name)] for f in out_schema}, schema=out_schema)

    return write
