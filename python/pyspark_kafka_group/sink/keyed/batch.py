"""What every keyed batch does before its MERGE as Spark tasks (SCD1 and SCD2), and what both MERGEs share.

:func:`prepare_batch` runs one Spark job whose single row is the batch's statistics (its count, its
deletes, NULL keys and sequences, each key's bounds), refuses a NULL key or sequence before anything is
written, passes the ``sink.before_commit`` crash point, and records the batch's deletes as tombstones
(written by the executors: :mod:`~pyspark_kafka_group.sink.keyed.tombstone_tasks`) before the commit
(:mod:`kafka_group.delta.keyed.tombstones` says why in that order). The rest are the small helpers both
MERGEs use: :data:`JOIN`, :func:`shipped_files`, :func:`arrow_schema`, :func:`num_records`.

Caller: the driver, one batch at a time.
"""

from __future__ import annotations

import json
from typing import Any, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from kafka_group.delta.keyed.change_rules import DELETE_COLUMN, SEQ, KeyedSpec, quote
from kafka_group.delta.keyed.commit import KeyedOffsetStore, table_schema
from kafka_group.delta.keyed.refusals import refuse_null_key_count
from kafka_group.delta.keyed.task_merge import CandidateFile
from kafka_group.delta.keyed.tombstones import Tombstones
from kafka_group.faults import crash_point
from kafka_group.offsets import OffsetRange
from pyspark_kafka_group.sink.keyed.changes import refuse_null_sequences
from pyspark_kafka_group.sink.keyed.tombstone_tasks import record_tombstones

__all__ = ["JOIN", "BatchFacts", "arrow_schema", "num_records", "prepare_batch", "shipped_files"]

#: Every join of the MERGE as tasks is a sort-merge join: Spark estimates a scan's size from its input, the
#: small list of files, and would broadcast a table's worth of keys (at 100,000,000 rows: "Not enough memory
#: to build and broadcast the table"); a sort-merge join spills instead, so a task's memory stays its share.
JOIN = "merge"
#: Candidate files per scan task at most (a task reads one file at a time).
_FILES_PER_TASK = 4


class BatchFacts(NamedTuple):
    """What the driver knows of a batch before its MERGE (one row of statistics, never the changes)."""

    #: The change set's rows (SCD1: changed keys; SCD2: events).
    rows: int
    #: Per key column: the batch's lowest and highest value (a column all NULL is absent).
    bounds: Mapping[str, Tuple[Any, Any]]
    #: The table's Arrow schema for the batch (:func:`~kafka_group.delta.keyed.commit.table_schema`).
    schema: Any


def prepare_batch(events: Any, stored: List[str], batch_id: int, ranges: Sequence[OffsetRange],
                  store: KeyedOffsetStore, spec: KeyedSpec, tombstones: Optional[Tombstones], *,
                  truncate: bool = False) -> Optional[BatchFacts]:
    """The batch's :class:`BatchFacts`, its refusals checked and its deletes recorded as tombstones;
    None when there is nothing to land (no change, no range, no truncate).

    Raises
    ------
    OffsetStoreError
        A key column is NULL in some event (nothing of the batch landed, no offset moved).
    ConfigError
        ``sequence_by`` is NULL in some event.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructField, StructType

    keys = list(spec.keys)
    aggregates = [F.count(F.lit(1)).alias("n"), F.sum(F.col(DELETE_COLUMN).cast("long")).alias("deletes"),
                  F.sum(F.col(SEQ).isNull().cast("long")).alias("null_seq")]
    for i, k in enumerate(keys):
        aggregates += [F.sum(F.col(quote(k)).isNull().cast("long")).alias(f"null{i}"),
                       F.min(quote(k)).alias(f"min{i}"), F.max(quote(k)).alias(f"max{i}")]
    stats = events.agg(*aggregates).collect()[0]
    if not ranges and not stats["n"] and not truncate:
        return None
    for i, k in enumerate(keys):
        refuse_null_key_count(spec, store.table_path, k, int(stats[f"null{i}"] or 0))
    refuse_null_sequences(spec, int(stats["null_seq"] or 0))
    bounds = {k: (stats[f"min{i}"], stats[f"max{i}"]) for i, k in enumerate(keys) if stats[f"min{i}"] is not None}
    arrow = to_arrow_schema(StructType([StructField(f.name, f.dataType, True) for f in events.schema.fields]),
                            timezone="UTC")
    crash_point("sink.before_commit")
    if tombstones is not None and stats["deletes"]:  # before the commit: kafka_group.delta.keyed.tombstones
        record_tombstones(tombstones, events.where(F.col(DELETE_COLUMN)), batch_id, count=int(stats["deletes"]))
    return BatchFacts(int(stats["n"]), bounds, table_schema(arrow, spec, stored))


def shipped_files(session: Any, files: Sequence[CandidateFile]) -> Any:
    """``files`` as a DataFrame of ``(file_id, path, add)`` (their ``add`` actions as JSON), a few files
    per task: what the executors' scans read."""
    shipped = session.createDataFrame([(f.file_id, f.path, json.dumps(f.add)) for f in files],
                                      "file_id long, path string, add string")
    return shipped.repartition(max(1, -(-len(files) // _FILES_PER_TASK)))


def arrow_schema(struct: Any) -> Any:
    """A Spark ``StructType`` as the Arrow schema ``mapInArrow`` functions yield (timestamps in UTC)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(struct, timezone="UTC")


def num_records(f: CandidateFile, fs: Any) -> int:
    """A touched file's physical row count (its statistics', else its Parquet footer's)."""
    import pyarrow.parquet as pq

    known = f.num_records()
    if known is not None:
        return known
    with fs.open_input_file(f.path) as handle:
        return int(pq.ParquetFile(handle).metadata.num_rows)
