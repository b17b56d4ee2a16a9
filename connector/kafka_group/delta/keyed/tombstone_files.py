"""SCD1's tombstones written by the executors: the Parquet files of a batch's deletes, and their schema.

The keyed MERGE as Spark tasks keeps the batch's change set on the executors; its deletes become
tombstones (:mod:`kafka_group.delta.keyed.tombstones`) the same way: each Spark task writes its share
of the deletes (keys, ``__SEQUENCE``, the time the driver chose as :data:`RECORDED_AT`) as Parquet files
into the tombstones' table folder, with Delta statistics (so that the lookups' file pruning by key
bounds works on them as on the files delta-rs writes), through the writer the append path uses
(:func:`~kafka_group.delta.files.parquet_writer.write_partitioned`), and returns one row per file; the
driver then commits the files' ``add`` actions in one blind append
(:meth:`~kafka_group.delta.keyed.tombstones.Tombstones.commit_files`), before the batch's
data-and-offsets commit. The driver holds one row per file, never the deletes.

Files a failed or duplicated task attempt wrote are in no commit (invisible); the tombstones'
garbage collection vacuums them. Nothing here imports pyspark.
"""

from __future__ import annotations

import datetime
from typing import Any, Callable, Iterator, Mapping

from kafka_group.delta.keyed.change_rules import SEQUENCE_COLUMN
from kafka_group.delta.storage.table_location import table_filesystem

__all__ = ["RECORDED_AT", "WRITTEN_COLUMNS", "tombstone_schema", "tombstone_writer"]

#: When a tombstone was recorded (UTC): garbage collection compares it with the retention.
RECORDED_AT = "__RECORDED_AT"
#: One row per file a task wrote (``mapInArrow``'s result schema, Spark DDL).
WRITTEN_COLUMNS = "path string, size long, num_records long, stats string"


def tombstone_schema(keys_and_sequence: Any) -> Any:
    """The tombstones' table schema (pyarrow) from the deletes' ``keys..., __SEQUENCE`` schema: strings
    as ``string`` (whatever width Spark's Arrow gives), then :data:`RECORDED_AT` (UTC microseconds)."""
    import pyarrow as pa

    fields = [pa.field(f.name, pa.string()) if pa.types.is_large_string(f.type) or pa.types.is_string_view(f.type)
              else pa.field(f.name, f.type) for f in keys_and_sequence]
    return pa.schema(fields + [pa.field(RECORDED_AT, pa.timestamp("us", tz="UTC"))])


def tombstone_writer(path: str, storage_options: Mapping[str, str], schema: Any, batch_id: int,
                     recorded_at: datetime.datetime) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The ``mapInArrow`` function: a task's deletes (record batches of ``schema``'s keys and
    ``__SEQUENCE``) written as Parquet files into the tombstones' table at ``path``, one row of
    :data:`WRITTEN_COLUMNS` out per file.

    Caller: Spark tasks on the executors (the closure is pickled, storage options included; they are
    never logged)."""
    options = dict(storage_options)
    wanted = [f.name for f in schema if f.name != RECORDED_AT]
    if wanted[-1:] != [SEQUENCE_COLUMN]:
        raise ValueError(f"a tombstones' schema ends with {SEQUENCE_COLUMN!r} and {RECORDED_AT!r}, got {schema.names}")

    def write(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        from kafka_group.delta.files.parquet_writer import write_partitioned

        when = pa.scalar(recorded_at, pa.timestamp("us", tz="UTC"))

        def stamped() -> Iterator[Any]:
            for batch in batches:
                if batch.num_rows:
                    yield pa.RecordBatch.from_arrays(
                        [batch.column(name) for name in wanted] + [pa.repeat(when, batch.num_rows)],
                        names=wanted + [RECORDED_AT])

        out = pa.schema([("path", pa.string()), ("size", pa.int64()), ("num_records", pa.int64()),
                         ("stats", pa.string())])
        for f in write_partitioned(stamped(), filesystem=table_filesystem(path, options), schema=schema,
                                   batch_id=batch_id):
            yield pa.RecordBatch.from_pydict({"path": [f.path], "size": [f.size], "num_records": [f.num_records],
                                              "stats": [f.stats]}, schema=out)

    return write
