"""The Parquet data files of a Delta table, written without Spark's writer, Hadoop or a JVM.

DeltaSink's executors write each task's rows through
:func:`~kafka_group.delta.storage.table_location.table_filesystem` (any store
delta-rs reaches: local paths, ``s3://``, ``abfss://``, ``gs://``, with the same storage
options) and describe every file by a :class:`WrittenFile`: the ``add`` action the driver
commits, with the offsets, in one Delta transaction. Nothing here imports pyspark.

This module writes the files (:func:`write_partitioned`: one file per partition value of a
task, row groups bounded in rows and bytes), counting per file the NULLs of the columns the
table declares NOT NULL (:mod:`kafka_group.delta.rules.not_null`) for the driver to check. Around
it: file naming and partition values (:mod:`kafka_group.delta.files.partition_values`), Delta's
per-file statistics (:mod:`kafka_group.delta.files.file_stats`), the table's file system
(:func:`kafka_group.delta.storage.table_location.table_filesystem`).

Why :class:`deltalake.fs.DeltaStorageHandler` as the file system: it is delta-rs's own
object store, so every URI and storage option (credentials, endpoint, region, ``AWS_*``,
``AZURE_*``, ``GOOGLE_*`` environment variables) that delta-rs commits with also writes the
data files; pyarrow's native ``S3FileSystem`` would need its own, differently named
options and covers fewer stores.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from kafka_group.delta.files.file_stats import DEFAULT_INDEXED_COLUMNS, FIRST_DAY, LAST_DAY, FileStats, day_range
from kafka_group.delta.files.partition_values import data_file_path, partition_value
from kafka_group.delta.rules.column_mapping import ColumnMapping
from kafka_group.delta.rules.not_null import ColumnPath, count_nulls
from kafka_group.errors import ConfigError, OffsetStoreError

__all__ = ["WrittenFile", "write_partitioned"]


@dataclass(frozen=True)
class WrittenFile:
    """One data file written into the table, as its ``add`` action describes it."""

    path: str
    """The file's path relative to the table root, as on the store (delta-rs percent-encodes it into the
    ``add`` action's ``path``)."""
    size: int
    """Its size in bytes."""
    num_records: int
    """Its row count."""
    stats: str
    """Delta statistics (JSON)."""
    partition_values: Dict[str, Optional[str]]
    """Serialized partition values (empty for an unpartitioned table)."""
    null_counts: Dict[ColumnPath, int] = field(default_factory=dict)
    """The NULLs the file holds in each column it was asked to count (``not_null`` of
    :func:`write_partitioned`; see :func:`~kafka_group.delta.rules.not_null.count_nulls`), zero counts included."""


def write_partitioned(
    batches: Iterable[Any],
    *,
    filesystem: Any,
    schema: Any,
    batch_id: int,
    partition_by: Sequence[str] = (),
    indexed_columns: int = DEFAULT_INDEXED_COLUMNS,
    not_null: Sequence[ColumnPath] = (),
    mapping: Optional[ColumnMapping] = None,
    target_file_size: Optional[int] = None,
    stats_columns: Optional[Sequence[str]] = None,
) -> List[WrittenFile]:
    """Write ``batches`` (Arrow record batches) as Parquet files into the table: one file per
    run of rows with the same partition values (one file without ``partition_by``), none for no rows.

    At most one file is open at a time: a file is closed as soon as the partition values
    change, so rows should arrive sorted by ``partition_by`` (DeltaSink sorts within each
    Spark partition); unsorted rows still land correctly, in more files (each incoming
    batch is sorted, so at most one file per key and batch). Rows are buffered into row
    groups of at least :data:`ROW_GROUP_ROWS` rows or :data:`ROW_GROUP_BYTES` bytes,
    whichever comes first (the rest at the file's end), not one per incoming batch.

    Parameters
    ----------
    batches : iterable of pyarrow.RecordBatch
        The rows; cast to ``schema`` (so timestamps are written as microsecond UTC instants).
    filesystem : pyarrow.fs.FileSystem
        Rooted at the table (:func:`table_filesystem`).
    schema : pyarrow.Schema
        The table's columns, partition columns included.
    batch_id : int
        The micro-batch, in the file names.
    partition_by : sequence of str
        Partition columns; they are left out of the files (Delta keeps them in the log).
    indexed_columns : int
        Leaf columns with statistics (-1: all).
    not_null : sequence of ColumnPath
        Columns whose NULLs each file counts (:attr:`WrittenFile.null_counts`): the ones the
        table declares NOT NULL. Partition columns are not in the files and not counted.
    mapping : ColumnMapping, optional
        The table's column mapping: the files are then written under its physical names with its
        field ids, and their statistics keyed by physical names
        (:mod:`kafka_group.delta.rules.column_mapping`); partition values stay logical here.
    target_file_size : int, optional
        The table's ``delta.targetFileSize`` in bytes: a file is closed and the next one opened
        once it reaches this size (checked at each row group, whose size is then at most a quarter
        of it), so files end near it, not far past it. None: one file per partition value.
    stats_columns : sequence of str, optional
        The table's ``delta.dataSkippingStatsColumns``: the columns with statistics, instead of the
        first ``indexed_columns`` (see :class:`~kafka_group.delta.files.file_stats.FileStats`).

    Returns
    -------
    list of WrittenFile
        The files written, for the driver to commit. A failure leaves the files written so far
        in no commit (invisible).

    Raises
    ------
    ConfigError
        A date partition value outside years 1-9999 (before any row of its batch is written).

    Caller: a Spark task (DeltaSink's ``mapInArrow`` function), on an executor.
    """
    import pyarrow as pa

    partition_by = list(partition_by)
    data_schema = pa.schema([f for f in schema if f.name not in partition_by])
    file_schema = data_schema if mapping is None else mapping.physical_schema(data_schema)
    # The table's stats columns are logical names; the files' statistics are keyed as the files are written.
    file_stats_columns: Optional[Sequence[str]] = (
        stats_columns if stats_columns is None or mapping is None
        else [_physical_path(mapping, c) for c in stats_columns])
    counted = [tuple(p) for p in not_null if p and p[0] in data_schema.names]
    written: List[WrittenFile] = []
    current: Optional[_OpenFile] = None
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            table = pa.Table.from_batches([batch]).select(schema.names).cast(schema)
            _check_partition_dates(table, partition_by)
            for values, part in _runs(table, partition_by, schema):
                if current is not None and current.values != values:
                    written.append(current.close(filesystem, partition_by))
                    current = None
                for chunk in _chunks(part.select(data_schema.names), target_file_size):
                    if current is None:
                        relative = data_file_path(batch_id, list(zip(partition_by, values)))
                        current = _OpenFile(values, relative, filesystem.open_output_stream(relative), file_schema,
                                            FileStats(file_schema, indexed_columns, stats_columns=file_stats_columns),
                                            counted, target_file_size)
                    current.add(chunk, chunk if mapping is None else mapping.physical_table(chunk, file_schema))
                    if current.reached_target():
                        written.append(current.close(filesystem, partition_by))
                        current = None
        if current is not None:
            done, current = current, None
            written.append(done.close(filesystem, partition_by))
        return written
    finally:
        if current is not None:
            current.abandon()


#: A Parquet row group is written once this many rows are buffered ...
ROW_GROUP_ROWS = 128 * 1024
#: ... or this many bytes of Arrow data, whichever comes first.
ROW_GROUP_BYTES = 64 * 1024 * 1024


class _OpenFile:
    """The one data file a task has open: its rows buffered into row groups, its statistics."""

    def __init__(self, values: Tuple[Optional[str], ...], relative: str, stream: Any, data_schema: Any,
                 stats: FileStats, not_null: Sequence[ColumnPath] = (), target_file_size: Optional[int] = None) -> None:
        import pyarrow.parquet as pq

        self.values = values
        self.relative = relative
        self.stream = stream
        try:
            self.writer = pq.ParquetWriter(stream, data_schema, compression="snappy")
        except BaseException:
            stream.close()
            raise
        self.stats = stats
        self.null_counts: Dict[ColumnPath, int] = {path: 0 for path in not_null}
        self.buffer: List[Any] = []
        self.buffered_rows = 0
        self.buffered_bytes = 0
        self.target_file_size = target_file_size
        # Row groups of at most a quarter of the target, so that a file's size is known often enough to roll it.
        self.row_group_bytes = ROW_GROUP_BYTES if not target_file_size else max(1, min(ROW_GROUP_BYTES,
                                                                                     target_file_size // 4))

    def reached_target(self) -> bool:
        """Whether the file has reached the table's ``delta.targetFileSize`` (its bytes written so far)."""
        return bool(self.target_file_size) and self.stream.tell() >= (self.target_file_size or 0)

    def add(self, data: Any, stored: Any) -> None:
        """Buffer ``stored`` (``data`` as the file holds it: physical names under column mapping); the
        NULLs of the NOT NULL columns are counted in ``data`` (logical names, as the table declares them)."""
        self.stats.update(stored)
        for path in self.null_counts:
            # A path the data does not hold (a type that does not match) counts as unknown: refused.
            found = count_nulls(data, path)
            self.null_counts[path] += data.num_rows if found is None else found
        self.buffer.append(stored)
        self.buffered_rows += stored.num_rows
        self.buffered_bytes += stored.nbytes
        if self.buffered_rows >= ROW_GROUP_ROWS or self.buffered_bytes >= self.row_group_bytes:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        if self.buffered_rows:
            group = pa.concat_tables(self.buffer)
            self.writer.write_table(group, row_group_size=group.num_rows)  # one row group
        self.buffer, self.buffered_rows, self.buffered_bytes = [], 0, 0

    def close(self, filesystem: Any, partition_by: Sequence[str]) -> WrittenFile:
        self._flush()
        self.writer.close()
        self.stream.close()
        size = filesystem.get_file_info(self.relative).size
        return WrittenFile(self.relative, int(size), self.stats.num_records, self.stats.to_json(),
                           dict(zip(partition_by, self.values)), dict(self.null_counts))

    def abandon(self) -> None:
        """Close after a failure (the file stays in no commit); the original error is the one to report."""
        if not self.stream.closed:
            try:
                self.writer.close()
                self.stream.close()
            except Exception:
                pass


def _chunks(part: Any, target_file_size: Optional[int]) -> Iterator[Any]:
    """``part`` whole, or with a target file size in slices of about an eighth of it (Arrow bytes),
    so that a file can be rolled inside one incoming batch."""
    if not target_file_size or part.nbytes <= target_file_size // 8 or part.num_rows <= 1:
        yield part
        return
    rows = max(1, part.num_rows * (target_file_size // 8) // max(1, part.nbytes))
    for start in range(0, part.num_rows, rows):
        yield part.slice(start, rows)


def _runs(table: Any, partition_by: Sequence[str], schema: Any) -> Iterator[Tuple[Tuple[Optional[str], ...], Any]]:
    """``table``'s rows as runs of equal partition values: ``(serialized values, rows)``.

    The table is sorted by ``partition_by`` first (stably, nulls and empty strings first,
    as DeltaSink's ``sortWithinPartitions`` orders them: rows that arrive sorted keep their
    order), so each key is one run; finding the runs compares each row with the one before
    it (linear in the rows).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if not partition_by:
        yield (), table
        return
    # Keys as they are serialized: an empty string is a null partition value (Spark's rule).
    keys = pa.table({c: _empty_as_null(table.column(c)) for c in partition_by})
    order = pc.sort_indices(keys, sort_keys=[(c, "ascending", "at_start") for c in partition_by])
    table, keys = table.take(order), keys.take(order)
    n = table.num_rows
    changed: Any = None  # row i + 1 starts a new key
    for column in partition_by:
        values = keys.column(column)
        this, before = values.slice(1), values.slice(0, n - 1)
        differs = pc.or_(pc.fill_null(pc.not_equal(this, before), False), pc.xor(pc.is_null(this), pc.is_null(before)))
        changed = differs if changed is None else pc.or_(changed, differs)
    starts = [0] + [int(i) + 1 for i in pc.indices_nonzero(changed).to_pylist()] + [n]
    for start, end in zip(starts, starts[1:]):
        key = keys.slice(start, 1).to_pylist()[0]
        yield tuple(partition_value(key[c], schema.field(c).type, c) for c in partition_by), table.slice(start, end - start)


def _empty_as_null(column: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        return column
    return pc.if_else(pc.equal(column, pa.scalar("", column.type)), pa.scalar(None, column.type), column)


def _check_partition_dates(table: Any, partition_by: Sequence[str]) -> None:
    """Refuse a date partition value outside years 1-9999 (before any of ``table`` is written)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for column in partition_by:
        arrow_type = table.schema.field(column).type
        if not pa.types.is_date(arrow_type) or table.column(column).null_count == len(table.column(column)):
            continue
        low, high = day_range(table.column(column))
        if low < FIRST_DAY or high > LAST_DAY:
            bad = low if low < FIRST_DAY else high
            raise ConfigError(
                f"DeltaSink(partition_by=...) column '{column}' holds a date {bad} days from 1970-01-01, outside "
                "years 1 to 9999, which a Delta partition value (YYYY-MM-DD) cannot hold: filter such rows out or "
                "fix the transform (CAST(epoch milliseconds AS TIMESTAMP) reads them as seconds; use "
                "timestamp_millis(...))"
            )


def _physical_path(mapping: ColumnMapping, column: str) -> str:
    """A ``delta.dataSkippingStatsColumns`` entry under physical names: its top-level column mapped
    (nested parts are kept as written: such entries get no statistics, see FileStats)."""
    head, dot, rest = column.partition(".")
    try:
        return mapping.physical_name(head) + dot + rest
    except OffsetStoreError:  # a stats column the table does not have: no statistics for it either way
        return column
