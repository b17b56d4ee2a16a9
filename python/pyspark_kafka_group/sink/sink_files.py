"""The data files of a :class:`~pyspark_kafka_group.sink.delta_sink.DeltaSink` batch, written by the executors.

``batch.mapInArrow`` has each Spark task write its rows into the table (one file per
partition-value combination, through delta-rs's object store: local paths, ``s3://``,
``abfss://`` and ``gs://`` alike; see :mod:`kafka_group.delta.files.parquet_writer`) and return each
file's ``add`` action. The files are invisible until the driver commits them.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterator, List, Mapping, Optional, Sequence

from kafka_group.delta.files.commit_files import DataFile, delete_files
from kafka_group.delta.files.parquet_writer import write_partitioned
from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
from kafka_group.delta.files.file_stats import DEFAULT_INDEXED_COLUMNS
from kafka_group.delta.rules.not_null import ColumnPath
from kafka_group.delta.files.partition_values import check_partition_columns
from kafka_group.delta.rules.table_properties import stats_columns, target_file_size
from kafka_group.delta.storage.table_location import normalize_table_path, table_filesystem
from kafka_group.delta.rules.write_contract import WriteContract
from kafka_group.errors import ConstraintViolationError
from pyspark_kafka_group.sink.sink_rules import first_violation

__all__ = ["partition_columns", "write_files"]


def partition_columns(store: DeltaOffsetStore, partition_by: Optional[Sequence[str]], table: str,
                      schema: Any) -> List[str]:
    """The partition columns this batch's files are written for (the sink's ``partition_by``, else the
    table's), checked against the batch and the table before any file is written. Caller: the driver."""
    existing = store.partition_columns()
    columns = list(partition_by) if partition_by is not None else list(existing or [])
    check_partition_columns(schema, columns, table=table)
    if existing is not None:
        store.check_partition_columns(columns)
    return columns


def write_files(
    batch: Any, batch_id: int, schema: Any, partition_by: Sequence[str], store: DeltaOffsetStore, table: str,
    storage_options: Mapping[str, str], contract: Optional[WriteContract] = None, checked: bool = False,
) -> List[DataFile]:
    """Have the executors write ``batch`` into ``table``; the files' ``add`` actions. Caller: the driver.

    Under ``contract``'s column mapping the files carry physical names (the ``add`` actions' partition
    values stay logical until the commit). With ``checked``, ``batch`` has
    :data:`~pyspark_kafka_group.sink.sink_rules.VIOLATION_COLUMN`
    (:func:`~pyspark_kafka_group.sink.sink_rules.apply_rules`): a row that breaks a rule makes its task stop writing and report it.

    Raises
    ------
    ConstraintViolationError
        A row breaks a CHECK constraint, an invariant or a generated column: the batch's files are
        deleted (in no commit), nothing lands and no offset moves.
    """
    contract = contract or WriteContract()
    # Resolved here: a relative local path means the driver's working directory, not a worker's.
    configuration = store.configuration()
    write = _file_writer(normalize_table_path(table), storage_options, schema, batch_id, partition_by,
                         _indexed_columns(configuration), store.not_null_columns(), contract, checked,
                         target_file_size(configuration), stats_columns(configuration))
    if partition_by:
        # Each task then writes one file per key, one at a time (write_partitioned closes a
        # file when the key changes). Empty strings sort with nulls: both are the null value.
        batch = batch.sortWithinPartitions(*[_sort_key(c, schema.field(c).type) for c in partition_by])
    rows = batch.mapInArrow(write, _WRITTEN_FILE_SCHEMA).collect()
    files = [
        DataFile(row["path"], int(row["size"]), int(row["num_records"]), row["stats"],
                 json.loads(row["partition_values"]),
                 {tuple(path): int(count) for path, count in json.loads(row["null_counts"])})
        for row in rows if row["violation"] is None
    ]
    violations = sorted(row["violation"] for row in rows if row["violation"] is not None)
    if violations:
        delete_files(table, storage_options, files)  # in no commit; the replay writes its own
        more = f" (and {len(violations) - 1} more task(s) found such rows)" if len(violations) > 1 else ""
        raise ConstraintViolationError(
            f"refusing to commit batch {batch_id} to Delta table '{table}': the {violations[0]}{more}. Nothing of "
            "the batch was committed and no offset moved. Correct or drop such rows in the transform "
            "(DeltaSink(transform=...)), or change the table's rule with delta-spark (ALTER TABLE ... DROP "
            "CONSTRAINT); then restart the query: Spark replays this batch through the fixed query"
        )
    return files


#: One row per written file, as the executors return them (``mapInArrow``'s result schema).
#: A row with ``violation`` set describes the first row of its task that broke a table rule (no file).
_WRITTEN_FILE_SCHEMA = ("path string, size long, num_records long, stats string, partition_values string, "
                        "null_counts string, violation string")


def _sort_key(column: str, arrow_type: Any) -> Any:
    """The ``sortWithinPartitions`` key of a partition column: ascending, nulls first, and for a
    string column the empty string as null (the order ``write_partitioned`` groups by)."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    ref = F.col("`" + column.replace("`", "``") + "`")
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        ref = F.nullif(ref, F.lit(""))
    return ref.asc_nulls_first()


def _indexed_columns(configuration: Mapping[str, Optional[str]]) -> int:
    """The table's ``delta.dataSkippingNumIndexedCols`` (delta-spark's default, 32, when unset)."""
    raw = configuration.get("delta.dataSkippingNumIndexedCols")
    try:
        return int(raw) if raw is not None else DEFAULT_INDEXED_COLUMNS
    except ValueError:
        return DEFAULT_INDEXED_COLUMNS


def _file_writer(
    table: str, storage_options: Mapping[str, str], schema: Any, batch_id: int, partition_by: Sequence[str],
    indexed_columns: int, not_null: Sequence[ColumnPath] = (), contract: Optional[WriteContract] = None,
    checked: bool = False, target_size: Optional[int] = None, stats: Optional[Sequence[str]] = None,
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The ``mapInArrow`` function: writes a task's rows, yields one row per file written.

    Caller: Spark tasks on the executors (the closure is pickled, storage options included;
    they are never logged)."""
    options = dict(storage_options)
    columns = list(partition_by)
    counted = [tuple(path) for path in not_null]
    rules = contract or WriteContract()
    result_schema = ("path", "size", "num_records", "stats", "partition_values", "null_counts", "violation")

    def write(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        types = pa.schema([("path", pa.string()), ("size", pa.int64()), ("num_records", pa.int64()),
                           ("stats", pa.string()), ("partition_values", pa.string()),
                           ("null_counts", pa.string()), ("violation", pa.string())])
        violation: List[str] = []

        def kept(incoming: Iterator[Any]) -> Iterator[Any]:
            for batch in incoming:
                found = first_violation(batch, rules) if checked else None
                if found is not None:
                    violation.append(found)
                    return  # the files written so far are reported, to be deleted
                yield batch

        written = write_partitioned(kept(batches), filesystem=table_filesystem(table, options), schema=schema,
                                    batch_id=batch_id, partition_by=columns, indexed_columns=indexed_columns,
                                    not_null=counted, mapping=rules.mapping,
                                    target_file_size=target_size, stats_columns=stats)
        if violation:
            yield pa.RecordBatch.from_pydict({name: [violation[0] if name == "violation" else None]
                                              for name in result_schema}, schema=types)
        for f in written:
            yield pa.RecordBatch.from_pydict(
                {"path": [f.path], "size": [f.size], "num_records": [f.num_records], "stats": [f.stats],
                 "partition_values": [json.dumps(f.partition_values)],
                 "null_counts": [json.dumps([[list(path), count] for path, count in f.null_counts.items()])],
                 "violation": [None]},
                schema=types,
            )

    return write
