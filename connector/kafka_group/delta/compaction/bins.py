"""Which small files of a table the sink compacts, and into which bins (pure: no I/O, no clock).

The rules (docs/tables.md, "File sizes"):

- **On or off**: the table property ``delta.autoOptimize.autoCompact``, read as Databricks documents
  it: ``false`` turns compaction off; ``true``, ``legacy`` (an alias of ``true``) and ``auto`` turn
  it on. Unset, the sink compacts (the point is that nobody has to schedule it); the Spark
  session's ``spark.databricks.delta.autoCompact.enabled`` (delta-spark's name) set to ``false``
  turns it off for tables that do not set the property. The table property wins.
- **Target size**: the table's ``delta.targetFileSize``; else, for ``true``/``legacy``, Databricks'
  auto-compaction size, 128 MiB; else the session's ``spark.databricks.delta.autoCompact.maxFileSize``;
  else :data:`DEFAULT_TARGET_SIZE` (128 MiB, delta-spark's ``autoCompact.maxFileSize`` default).
- **Small**: a file below ``min_file_size`` (delta-spark's ``autoCompact.minFileSize``: half the
  target unless set). A file at or above it is never rewritten.
- **Threshold**: a partition (the whole table when unpartitioned) is compacted once it holds at
  least ``min_num_files`` small files (delta-spark's ``autoCompact.minNumFiles``, default 50).
- **Bins**: within a partition, small files in their commit order (oldest first, so a bin holds
  rows of neighbouring batches), packed greedily: a bin is closed when the next file would take it
  past the target. A bin of one file is dropped (rewriting it gains nothing). Partitions are never
  mixed in a bin.
- **Deletion vectors**: a file with a deletion vector is a candidate like any other; its bin's
  rewrite leaves the deleted rows out (``FileEntry.deleted_rows``), and its size counts as written.

Caller: :mod:`kafka_group.delta.compaction.auto_compact`, on the driver, after the sink's commit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from kafka_group.delta.rules.table_properties import parse_size

__all__ = [
    "AUTO_COMPACT_PROPERTY",
    "DEFAULT_MIN_NUM_FILES",
    "DEFAULT_TARGET_SIZE",
    "Bin",
    "CompactionSettings",
    "FileEntry",
    "plan_bins",
    "settings_of",
]

#: The table property that turns the sink's compaction on or off (Databricks' name and values).
AUTO_COMPACT_PROPERTY = "delta.autoOptimize.autoCompact"
#: The target size when neither the table nor the session names one: delta-spark's and Databricks'
#: auto-compaction size (``spark.databricks.delta.autoCompact.maxFileSize``), 128 MiB.
DEFAULT_TARGET_SIZE = 128 * 1024 * 1024
#: Small files a partition needs before it is compacted (delta-spark's ``autoCompact.minNumFiles``).
DEFAULT_MIN_NUM_FILES = 50

#: The Spark session settings read (delta-spark's names); the table's properties win over them.
SESSION_ENABLED = "spark.databricks.delta.autoCompact.enabled"
SESSION_MAX_FILE_SIZE = "spark.databricks.delta.autoCompact.maxFileSize"
SESSION_MIN_FILE_SIZE = "spark.databricks.delta.autoCompact.minFileSize"
SESSION_MIN_NUM_FILES = "spark.databricks.delta.autoCompact.minNumFiles"
SESSION_KEYS = (SESSION_ENABLED, SESSION_MAX_FILE_SIZE, SESSION_MIN_FILE_SIZE, SESSION_MIN_NUM_FILES)

_ON = {"true", "legacy", "auto"}


@dataclass(frozen=True)
class CompactionSettings:
    """What the sink's compaction of one table does (:func:`settings_of`)."""

    enabled: bool
    """Whether the sink compacts the table at all."""
    target_size: int
    """Bytes a compacted file aims at (a bin is closed before it passes it)."""
    min_file_size: int
    """Files below this many bytes are small (candidates)."""
    min_num_files: int
    """Small files a partition needs before it is compacted."""
    why: str = ""
    """Where ``enabled`` came from, for the log."""


@dataclass(frozen=True)
class FileEntry:
    """One live data file of the table, as the plan needs it."""

    path: str
    """Relative to the table root, decoded."""
    size: int
    """Bytes on the store."""
    num_records: int
    """Rows in the file (its ``numRecords``), deleted ones included."""
    partition: Tuple[Tuple[str, Optional[str]], ...] = ()
    """Its partition values, sorted by column (empty: unpartitioned)."""
    order: int = 0
    """Its position in commit order (older first); ties keep the input order."""
    deleted_rows: int = 0
    """Rows its deletion vector deletes (0: none)."""


@dataclass(frozen=True)
class Bin:
    """Small files of one partition rewritten into one file."""

    partition: Tuple[Tuple[str, Optional[str]], ...]
    files: Tuple[FileEntry, ...] = field(default_factory=tuple)

    @property
    def size(self) -> int:
        """The bytes of its files."""
        return sum(f.size for f in self.files)

    @property
    def live_rows(self) -> int:
        """The rows the compacted file holds: its files' rows less their deleted ones."""
        return sum(f.num_records - f.deleted_rows for f in self.files)


def _truth(raw: Optional[str]) -> Optional[str]:
    return None if raw is None else raw.strip().lower()


def _positive(raw: Optional[str], name: str) -> Optional[int]:
    if raw is None:
        return None
    value = parse_size(raw, name)
    return value


def settings_of(configuration: Mapping[str, Optional[str]], session: Mapping[str, Optional[str]]) -> CompactionSettings:
    """The compaction settings of a table with these properties, under these Spark session settings.

    Parameters
    ----------
    configuration : mapping
        The table's properties (``metaData.configuration``).
    session : mapping
        The Spark session's values of :data:`SESSION_KEYS` that are set (missing: unset).

    Raises
    ------
    ConfigError
        A size or count that is not a positive number (the message names the setting).
    """
    prop = _truth(configuration.get(AUTO_COMPACT_PROPERTY))
    if prop is not None and prop not in _ON | {"false"}:
        from kafka_group.errors import ConfigError

        raise ConfigError(f"the table's property {AUTO_COMPACT_PROPERTY} is {prop[:20]!r}; Delta's values are auto, "
                          "legacy, true and false: fix it with ALTER TABLE ... SET TBLPROPERTIES")
    if prop is not None:
        enabled, why = prop != "false", f"{AUTO_COMPACT_PROPERTY}={prop}"
    elif _truth(session.get(SESSION_ENABLED)) == "false":
        enabled, why = False, f"{SESSION_ENABLED}=false"
    else:
        enabled, why = True, "the sink's default"
    table_target = _positive(configuration.get("delta.targetFileSize"), "the table's delta.targetFileSize")
    if table_target is not None:
        target = table_target
    elif prop in ("true", "legacy"):
        target = DEFAULT_TARGET_SIZE
    else:
        target = _positive(session.get(SESSION_MAX_FILE_SIZE), SESSION_MAX_FILE_SIZE) or DEFAULT_TARGET_SIZE
    min_size = _positive(session.get(SESSION_MIN_FILE_SIZE), SESSION_MIN_FILE_SIZE) or target // 2
    raw_count = session.get(SESSION_MIN_NUM_FILES)
    count = DEFAULT_MIN_NUM_FILES
    if raw_count is not None:
        try:
            count = int(raw_count.strip())
        except ValueError:
            count = 0
        if count < 2:
            from kafka_group.errors import ConfigError

            raise ConfigError(f"{SESSION_MIN_NUM_FILES} is {raw_count[:20]!r}: it takes a whole number of at least 2")
    return CompactionSettings(enabled, target, min(min_size, target), count, why)


def plan_bins(files: Sequence[FileEntry], settings: CompactionSettings) -> List[Bin]:
    """The bins to rewrite now: every partition holding at least ``settings.min_num_files`` small
    files, its small files packed in commit order into bins of at most ``settings.target_size``
    bytes (bins of one file are dropped).

    Returns
    -------
    list of Bin
        In partition order (sorted by partition values, NULL first), then commit order; empty when
        compaction is off or no partition has reached the threshold.
    """
    if not settings.enabled:
        return []
    small: Dict[Tuple[Tuple[str, Optional[str]], ...], List[Tuple[int, int, FileEntry]]] = {}
    for index, f in enumerate(files):
        if f.size < settings.min_file_size and f.num_records > f.deleted_rows:
            small.setdefault(f.partition, []).append((f.order, index, f))
    bins: List[Bin] = []
    for partition in sorted(small, key=_partition_key):
        entries = [f for _, _, f in sorted(small[partition], key=lambda item: (item[0], item[1]))]
        if len(entries) < settings.min_num_files:
            continue
        current: List[FileEntry] = []
        size = 0
        for f in entries:
            if current and size + f.size > settings.target_size:
                bins.append(Bin(partition, tuple(current)))
                current, size = [], 0
            current.append(f)
            size += f.size
        if current:
            bins.append(Bin(partition, tuple(current)))
    return [b for b in bins if len(b.files) > 1]


def _partition_key(partition: Tuple[Tuple[str, Optional[str]], ...]) -> Tuple[Tuple[str, int, str], ...]:
    return tuple((name, 0 if value is None else 1, value or "") for name, value in partition)
