"""The driver's check that a commit's files hold no NULL in a column the table declares NOT NULL.

Delta commits such files (delta-rs does not look into them), and then delta-rs refuses to read
the table ("declared as non-nullable but contains null values") and delta-spark reads NULLs its
schema says cannot be. The counts come from the executors (:attr:`DataFile.null_counts`, see
:mod:`kafka_group.delta.rules.not_null`), else from the file's statistics.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Sequence

from kafka_group.delta.files.commit_files import DataFile
from kafka_group.delta.rules.not_null import ColumnPath, describe_path, not_null_paths
from kafka_group.errors import NotNullViolationError

__all__ = ["check_not_null"]


def check_not_null(table_path: str, table: Any, files: Sequence[DataFile],
                   metadata: Optional[Mapping[str, Any]]) -> None:
    """Refuse ``files`` when one holds a NULL in a column ``table`` (the version committed on)
    declares NOT NULL, or when nothing tells whether it does.

    The count comes from :attr:`DataFile.null_counts`, else from the file's ``nullCount``
    statistic (top-level columns with statistics), and for a partition column from its
    partition value.

    Raises
    ------
    NotNullViolationError
        Names the column, the table, the rows and the fix; nothing is committed.
    """
    paths = not_null_paths(json.loads(table.schema().to_json()))
    if not paths or not files:
        return
    partition_columns = set(table.metadata().partition_columns)
    nulls: Dict[ColumnPath, int] = {}
    unknown: List[ColumnPath] = []
    for path in paths:
        for f in files:
            count = _file_nulls(f, path, partition_columns)
            if count is None:
                unknown.append(path)
                break
            if count:
                nulls[path] = nulls.get(path, 0) + count
    if not nulls and not unknown:
        return
    batch = f"batch {metadata['kafkaGroup.batchId']}" if metadata and "kafkaGroup.batchId" in metadata \
        else "the batch"
    if nulls:
        found = "; ".join(f"{count} row(s) with NULL in column '{describe_path(path)}'"
                          for path, count in nulls.items())
        named = sorted({describe_path(path) for path in nulls})[0]
        raise NotNullViolationError(
            f"refusing to commit {batch} to Delta table '{table_path}': {found}, which the table declares "
            f"NOT NULL (Delta readers cannot read a table with NULLs there). Nothing of the batch was committed "
            f"and no offset moved. Fill or drop those rows in the transform (DeltaSink(transform=...), e.g. "
            f"coalesce(`{named}`, ...) or .where(\"`{named}` IS NOT NULL\")), or make the column nullable "
            f"(ALTER TABLE ... ALTER COLUMN `{named}` DROP NOT NULL); then restart the query: Spark replays "
            f"this batch through the fixed query"
        )
    raise NotNullViolationError(
        f"refusing to commit {batch} to Delta table '{table_path}': nothing tells whether its files hold "
        f"NULLs in the NOT NULL column(s) {', '.join(repr(describe_path(p)) for p in unknown)} (the table's "
        "NOT NULL columns changed while they were written, or they were written without counting them). "
        "Nothing of the batch was committed and no offset moved; restart the query: Spark replays this batch "
        "and its files are written and checked again"
    )


def _file_nulls(f: DataFile, path: ColumnPath, partition_columns: Any) -> Optional[int]:
    """How many NULLs ``f`` holds at ``path`` (None: nothing tells)."""
    if len(path) == 1 and path[0] in partition_columns:
        return f.num_records if f.partition_values.get(str(path[0])) is None else 0  # one value per file
    if f.null_counts is not None and path in f.null_counts:
        return int(f.null_counts[path])
    if len(path) == 1 and f.stats is not None:
        try:
            count = json.loads(f.stats).get("nullCount", {}).get(path[0])
        except (ValueError, AttributeError):
            return None
        if isinstance(count, int):
            return count
    if f.num_records == 0:
        return 0
    return None
