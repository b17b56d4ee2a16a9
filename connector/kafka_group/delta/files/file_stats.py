"""Delta's per-file statistics of the rows the sink writes, as safe bounds for data skipping.

``numRecords``, ``minValues``, ``maxValues`` and ``nullCount`` of a data file
(:class:`FileStats`), as delta-spark writes them: the first
:data:`DEFAULT_INDEXED_COLUMNS` leaf columns, strings cut to :data:`STRING_PREFIX_LENGTH`
characters, bounds a reader may skip files by without losing a row.
"""

from __future__ import annotations

import datetime
import json
import math
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Sequence, Tuple

__all__ = ["DEFAULT_INDEXED_COLUMNS", "FIRST_DAY", "LAST_DAY", "STRING_PREFIX_LENGTH", "FileStats", "day_range"]

#: Columns with statistics: delta-spark's default ``delta.dataSkippingNumIndexedCols``.
DEFAULT_INDEXED_COLUMNS = 32

#: Characters kept of a string's min and max (delta-spark's ``delta.stats.truncate`` default, 32).
STRING_PREFIX_LENGTH = 32


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
    stats_columns: Optional[Sequence[str]] = None
    """delta-spark's ``delta.dataSkippingStatsColumns``: when given, exactly these columns (names as the
    table spells them, compared case-insensitively; a struct's name covers its fields, which get none
    here) have statistics, whatever ``indexed_columns`` says."""

    def __post_init__(self) -> None:
        import pyarrow as pa

        budget = self.indexed_columns
        chosen = None if self.stats_columns is None else {c.strip().lower() for c in self.stats_columns}
        for f in self.schema:
            if chosen is not None:
                if f.name.lower() not in chosen:
                    continue
                budget = -1
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
                low, high = day_range(column)
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
        return _iso_date(value) if FIRST_DAY <= value <= LAST_DAY else None
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
FIRST_DAY, LAST_DAY = -719_162, 2_932_896
#: Milliseconds since the epoch of 0001-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z.
_FIRST_MS, _LAST_MS = -62_135_596_800_000, 253_402_300_799_999


def _iso_date(days: int) -> str:
    """``YYYY-MM-DD`` of a day since the epoch in years 1-9999 (the year zero-padded)."""
    day = datetime.date(1970, 1, 1) + datetime.timedelta(days=days)
    return f"{day.year:04d}-{day.month:02d}-{day.day:02d}"


def day_range(column: Any) -> Tuple[int, int]:
    """The first and last day (since the epoch) of a date column with a non-null value, as
    integers: a Python date cannot hold a year outside 1-9999."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_date64(column.type):  # milliseconds; whole days floored
        extremes = pc.min_max(pc.cast(column, pa.int64()))
        return int(extremes["min"].as_py()) // _MS_PER_DAY, int(extremes["max"].as_py()) // _MS_PER_DAY
    extremes = pc.min_max(pc.cast(column, pa.int32()))
    return int(extremes["min"].as_py()), int(extremes["max"].as_py())


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
