"""The Parquet data files of a Delta table, written without Spark's writer, Hadoop or a JVM.

DeltaSink's executors write each task's rows through :func:`table_filesystem` (any store
delta-rs reaches: local paths, ``s3://``, ``abfss://``, ``gs://``, with the same storage
options) and describe every file by a :class:`WrittenFile`: the ``add`` action the driver
commits, with the offsets, in one Delta transaction. Nothing here imports pyspark.

What this module owns
---------------------
* file naming: ``data/[<col>=<value>/...]part-<batch>-<uuid>.snappy.parquet``, relative to the
  table root (delta-rs percent-encodes it into the ``add`` action's ``path``, a URI);
* Delta's per-file statistics (``numRecords``, ``minValues``, ``maxValues``, ``nullCount``) of
  the rows written, as *safe bounds* for data skipping (:class:`FileStats`);
* partition values serialized per the Delta protocol (:func:`partition_value`) and Hive-style
  folder names (:func:`escape_path_name`, Spark's escaping).

Why :class:`deltalake.fs.DeltaStorageHandler` as the file system: it is delta-rs's own
object store, so every URI and storage option (credentials, endpoint, region, ``AWS_*``,
``AZURE_*``, ``GOOGLE_*`` environment variables) that delta-rs commits with also writes the
data files; pyarrow's native ``S3FileSystem`` would need its own, differently named
options and covers fewer stores.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import uuid
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

from kafka_group.delta.table_location import DATA_FOLDER
from kafka_group.errors import ConfigError

__all__ = [
    "DEFAULT_INDEXED_COLUMNS",
    "HIVE_DEFAULT_PARTITION",
    "STRING_PREFIX_LENGTH",
    "FileStats",
    "WrittenFile",
    "check_partition_columns",
    "data_file_path",
    "escape_path_name",
    "partition_value",
    "write_partitioned",
]

#: Columns with statistics: delta-spark's default ``delta.dataSkippingNumIndexedCols``.
DEFAULT_INDEXED_COLUMNS = 32

#: Characters kept of a string's min and max (delta-spark's ``delta.stats.truncate`` default, 32).
STRING_PREFIX_LENGTH = 32

#: Folder name of a null partition value (Hive's and Spark's).
HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"

# Spark's ExternalCatalogUtils.escapePathName: these and the control characters become %XX.
_ESCAPED = frozenset('"#%\'*/:=?\\\x7f{[]^')


def escape_path_name(text: str) -> str:
    """``text`` as a Hive-style folder name component (Spark's ``escapePathName``)."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED or ord(c) < 0x20 else c for c in text)


def partition_value(value: Any, arrow_type: Any, column: str) -> Optional[str]:
    """One partition value as the Delta protocol serializes it in ``partitionValues``.

    Parameters
    ----------
    value : object
        The column's value (a Python scalar, as ``pyarrow`` returns it), or None.
    arrow_type : pyarrow.DataType
        The column's type.
    column : str
        The column's name, for the error.

    Returns
    -------
    str or None
        Strings as they are (the empty string is null, as in Spark), integers in
        decimal, booleans ``true``/``false``, dates ``YYYY-MM-DD``; None for null.

    Raises
    ------
    ConfigError
        The type is not one the sink partitions by (see :func:`check_partition_columns`).
    """
    import pyarrow as pa

    _check_partition_type(column, arrow_type)
    if value is None:
        return None
    if pa.types.is_boolean(arrow_type):
        return "true" if value else "false"
    if pa.types.is_integer(arrow_type):
        return str(int(value))
    if pa.types.is_date(arrow_type):
        return f"{value.year:04d}-{value.month:02d}-{value.day:02d}"
    text = str(value)
    return text if text else None


def _check_partition_type(column: str, arrow_type: Any) -> None:
    import pyarrow as pa

    if not (pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type) or pa.types.is_integer(arrow_type)
            or pa.types.is_boolean(arrow_type) or pa.types.is_date(arrow_type)):
        raise ConfigError(
            f"DeltaSink(partition_by=...) names column '{column}' of type {arrow_type}: partition by a string, "
            "integer, boolean or date column (derive one in the transform, e.g. to_date(timestamp) AS date)"
        )


def check_partition_columns(arrow_schema: Any, partition_by: Sequence[str], *, table: str) -> None:
    """Refuse a ``partition_by`` that names a missing column, a column twice, every column, or
    a type the sink does not partition by, before anything is written.

    Raises
    ------
    ConfigError
        The message names the column and the fix.
    """
    names = list(arrow_schema.names)
    seen: set[str] = set()
    for column in partition_by:
        if column not in names:
            raise ConfigError(
                f"DeltaSink('{table}', partition_by=...) names column '{column}', which the batch does not have "
                f"(its columns: {', '.join(names)}): partition by columns the transform produces"
            )
        if column in seen:
            raise ConfigError(f"DeltaSink('{table}', partition_by=...) names column '{column}' twice")
        seen.add(column)
        _check_partition_type(column, arrow_schema.field(column).type)
    if partition_by and len(seen) == len(names):
        raise ConfigError(
            f"DeltaSink('{table}', partition_by=...) names every column of the batch: keep at least one data column"
        )


def data_file_path(batch_id: int, partition: Sequence[Tuple[str, Optional[str]]] = ()) -> str:
    """A new data file's path relative to the table root (not percent-encoded).

    ``partition`` holds ``(column, serialized value)`` pairs, in ``partition_by`` order.
    """
    folders = "".join(
        f"{escape_path_name(column)}={HIVE_DEFAULT_PARTITION if value is None else escape_path_name(value)}/"
        for column, value in partition
    )
    return f"{DATA_FOLDER}/{folders}part-{batch_id:08d}-{uuid.uuid4().hex}.snappy.parquet"


# -- statistics -----------------------------------------------------------------------


@dataclass
class _ColumnStats:
    kind: str  # "int", "float", "date", "timestamp", "string", "count" (nullCount only)
    null_count: int = 0
    low: Any = None
    high: Any = None
    bounded: bool = True  # False once a value makes min/max unsafe (NaN, infinity)


@dataclass
class FileStats:
    """Delta statistics of one data file, accumulated batch by batch.

    Bounds are safe for data skipping: every value of the file lies within
    ``[minValues, maxValues]`` of its column as Delta readers compare them.

    * integers and finite floats exactly (a NaN or infinity drops the column's min/max:
      Spark orders NaN above every number, JSON has neither);
    * dates as ``YYYY-MM-DD``; timestamps with a time zone as UTC instants at millisecond
      precision (``2026-11-24T12:00:00.123Z``), the minimum rounded down and the maximum up;
    * strings cut to :data:`STRING_PREFIX_LENGTH` characters: the minimum's prefix, and for a
      longer maximum the prefix with its last character incremented (still above every
      string that starts with it);
    * booleans, binary, decimals, timestamps without a time zone: null counts only; nested
      columns: nothing.

    Only the first ``indexed_columns`` leaf columns (delta-spark's
    ``delta.dataSkippingNumIndexedCols``; -1 for all) get statistics; partition columns,
    which the file does not hold, get none.
    """

    schema: Any
    indexed_columns: int = DEFAULT_INDEXED_COLUMNS
    num_records: int = 0
    _columns: Dict[str, _ColumnStats] = field(default_factory=dict)

    def __post_init__(self) -> None:
        import pyarrow as pa

        budget = self.indexed_columns
        for f in self.schema:
            leaves = _leaf_count(f.type)
            if budget >= 0 and leaves > budget:
                break
            if budget >= 0:
                budget -= leaves
            t = f.type
            if pa.types.is_nested(t):
                continue
            if pa.types.is_integer(t):
                kind = "int"
            elif pa.types.is_floating(t):
                kind = "float"
            elif pa.types.is_date(t):
                kind = "date"
            elif pa.types.is_timestamp(t) and t.tz is not None:
                kind = "timestamp"
            elif pa.types.is_string(t) or pa.types.is_large_string(t):
                kind = "string"
            else:
                kind = "count"
            self._columns[f.name] = _ColumnStats(kind)

    def update(self, table: Any) -> None:
        """Add the rows of ``table`` (a ``pyarrow.Table`` or ``RecordBatch`` of this schema)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        self.num_records += table.num_rows
        for name, stats in self._columns.items():
            column = table.column(name)
            stats.null_count += column.null_count
            if stats.kind == "count" or not stats.bounded or column.null_count == len(column):
                continue
            if stats.kind == "float":
                if pc.any(pc.invert(pc.is_finite(column))).as_py():
                    stats.bounded = False
                    continue
            elif stats.kind == "timestamp":
                # As integers: a Python datetime cannot hold a year outside 1-9999.
                column = pc.cast(column, pa.int64())
            if stats.kind == "date":
                low, high = _day_range(column)
            else:
                extremes = pc.min_max(column)
                low, high = extremes["min"].as_py(), extremes["max"].as_py()
            if stats.kind == "timestamp":
                unit = table.schema.field(name).type.unit
                per_ms = {"s": None, "ms": 1, "us": 1000, "ns": 1_000_000}[unit]
                if per_ms is None:
                    low, high = low * 1000, high * 1000
                else:
                    low, high = low // per_ms, -((-high) // per_ms)  # floor, ceiling (ms)
            stats.low = low if stats.low is None else min(stats.low, low)
            stats.high = high if stats.high is None else max(stats.high, high)

    def to_json(self) -> str:
        """The ``stats`` field of the file's ``add`` action (a JSON string)."""
        mins: Dict[str, Any] = {}
        maxes: Dict[str, Any] = {}
        for name, stats in self._columns.items():
            if stats.low is None or not stats.bounded:
                continue
            low, high = _json_bound(stats.kind, stats.low, upper=False), _json_bound(stats.kind, stats.high, upper=True)
            if low is not None:
                mins[name] = low
            if high is not None:
                maxes[name] = high
        doc = {
            "numRecords": self.num_records,
            "minValues": mins,
            "maxValues": maxes,
            "nullCount": {name: stats.null_count for name, stats in self._columns.items()},
        }
        return json.dumps(doc, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _leaf_count(arrow_type: Any) -> int:
    import pyarrow as pa

    if pa.types.is_struct(arrow_type):
        return sum(_leaf_count(arrow_type.field(i).type) for i in range(arrow_type.num_fields))
    return 1


def _json_bound(kind: str, value: Any, *, upper: bool) -> Any:
    if kind == "int":
        return int(value)
    if kind == "float":
        return float(value) if math.isfinite(value) else None
    # A bound outside years 1-9999 is dropped: no bound is safe for data skipping, and
    # neither JSON's ISO text nor Python's dates reach there.
    if kind == "date":
        return _iso_date(value) if _FIRST_DAY <= value <= _LAST_DAY else None
    if kind == "timestamp":
        if not _FIRST_MS <= value <= _LAST_MS:
            return None
        instant = _EPOCH + datetime.timedelta(milliseconds=value)
        return (f"{instant.year:04d}-{instant.month:02d}-{instant.day:02d}T{instant.hour:02d}:{instant.minute:02d}:"
                f"{instant.second:02d}.{instant.microsecond // 1000:03d}Z")
    if kind == "string":
        return _string_upper_bound(value) if upper else value[:STRING_PREFIX_LENGTH]
    return None


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_MS_PER_DAY = 86_400_000
#: Days since the epoch of 0001-01-01 and 9999-12-31: the dates Python (and ISO text) hold.
_FIRST_DAY, _LAST_DAY = -719_162, 2_932_896
#: Milliseconds since the epoch of 0001-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z.
_FIRST_MS, _LAST_MS = -62_135_596_800_000, 253_402_300_799_999


def _iso_date(days: int) -> str:
    """``YYYY-MM-DD`` of a day since the epoch in years 1-9999 (the year zero-padded)."""
    day = datetime.date(1970, 1, 1) + datetime.timedelta(days=days)
    return f"{day.year:04d}-{day.month:02d}-{day.day:02d}"


def _day_range(column: Any) -> Tuple[int, int]:
    """The first and last day (since the epoch) of a date column with a non-null value, as
    integers: a Python date cannot hold a year outside 1-9999."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_date64(column.type):  # milliseconds; whole days floored
        extremes = pc.min_max(pc.cast(column, pa.int64()))
        return int(extremes["min"].as_py()) // _MS_PER_DAY, int(extremes["max"].as_py()) // _MS_PER_DAY
    extremes = pc.min_max(pc.cast(column, pa.int32()))
    return int(extremes["min"].as_py()), int(extremes["max"].as_py())


def _check_partition_dates(table: Any, partition_by: Sequence[str]) -> None:
    """Refuse a date partition value outside years 1-9999 (before any of ``table`` is written)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for column in partition_by:
        arrow_type = table.schema.field(column).type
        if not pa.types.is_date(arrow_type) or table.column(column).null_count == len(table.column(column)):
            continue
        low, high = _day_range(table.column(column))
        if low < _FIRST_DAY or high > _LAST_DAY:
            bad = low if low < _FIRST_DAY else high
            raise ConfigError(
                f"DeltaSink(partition_by=...) column '{column}' holds a date {bad} days from 1970-01-01, outside "
                "years 1 to 9999, which a Delta partition value (YYYY-MM-DD) cannot hold: filter such rows out or "
                "fix the transform (CAST(epoch milliseconds AS TIMESTAMP) reads them as seconds; use "
                "timestamp_millis(...))"
            )


def _string_upper_bound(text: str) -> Optional[str]:
    """A string of at most :data:`STRING_PREFIX_LENGTH` characters that is >= ``text`` (code point,
    i.e. UTF-8 byte, order), or None when there is none."""
    if len(text) <= STRING_PREFIX_LENGTH:
        return text
    prefix = text[:STRING_PREFIX_LENGTH]
    for i in range(len(prefix) - 1, -1, -1):
        point = ord(prefix[i]) + 1
        if 0xD800 <= point <= 0xDFFF:
            point = 0xE000
        if point <= 0x10FFFF:
            return prefix[:i] + chr(point)
    return None


# -- writing --------------------------------------------------------------------------


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


def write_partitioned(
    batches: Iterable[Any],
    *,
    filesystem: Any,
    schema: Any,
    batch_id: int,
    partition_by: Sequence[str] = (),
    indexed_columns: int = DEFAULT_INDEXED_COLUMNS,
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
                if current is None:
                    relative = data_file_path(batch_id, list(zip(partition_by, values)))
                    current = _OpenFile(values, relative, filesystem.open_output_stream(relative), data_schema,
                                        FileStats(data_schema, indexed_columns))
                current.add(part.select(data_schema.names))
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
                 stats: FileStats) -> None:
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
        self.buffer: List[Any] = []
        self.buffered_rows = 0
        self.buffered_bytes = 0

    def add(self, data: Any) -> None:
        self.stats.update(data)
        self.buffer.append(data)
        self.buffered_rows += data.num_rows
        self.buffered_bytes += data.nbytes
        if self.buffered_rows >= ROW_GROUP_ROWS or self.buffered_bytes >= ROW_GROUP_BYTES:
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
                           dict(zip(partition_by, self.values)))

    def abandon(self) -> None:
        """Close after a failure (the file stays in no commit); the original error is the one to report."""
        if not self.stream.closed:
            try:
                self.writer.close()
                self.stream.close()
            except Exception:
                pass


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
