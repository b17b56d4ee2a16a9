"""The data files a commit adds: their description, the check that a local table's files are
on the driver's disk, and the deletion of a refused commit's files."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

from kafka_group.delta.rules.not_null import ColumnPath
from kafka_group.delta.storage.table_location import local_table_path, table_filesystem
from kafka_group.errors import OffsetStoreError

__all__ = ["DataFile", "check_local_files", "delete_files"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DataFile:
    """A Parquet file written into the table folder, to be added by a commit."""

    path: str
    """The file's path relative to the table root, as on the store (not percent-encoded: delta-rs
    encodes it into the ``add`` action)."""
    size: int
    """Its size in bytes."""
    num_records: int
    """Its row count (Delta's ``numRecords`` statistic)."""
    stats: Optional[str] = None
    """Delta statistics (JSON: ``numRecords``, ``minValues``, ``maxValues``, ``nullCount``); None
    for ``numRecords`` alone."""
    partition_values: Mapping[str, Optional[str]] = field(default_factory=dict)
    """Serialized partition values, one per partition column of the table."""
    null_counts: Optional[Mapping[ColumnPath, int]] = None
    """The NULLs the file holds in the columns it was asked to count (the table's NOT NULL
    columns when it was written, see :func:`kafka_group.delta.files.parquet_writer.write_partitioned`); None
    when nothing was counted (then only the ``nullCount`` of ``stats`` tells)."""


def check_local_files(table_path: str, files: Sequence[DataFile]) -> None:
    """Refuse, before committing, files of a local table that are not on this machine's disk at
    their size: on a multi-node cluster, executors write a local path on their own disks, and
    the committed table would reference files no reader finds."""
    root = local_table_path(table_path)
    if root is None:
        return
    for f in files:
        full = os.path.join(root, f.path)
        size = os.path.getsize(full) if os.path.isfile(full) else None
        if size != f.size:
            found = "is missing" if size is None else f"has {size} bytes"
            raise OffsetStoreError(
                f"refusing to commit to offsets.table '{table_path}': the data file {full} {found} on the "
                f"driver, where the executor wrote {f.size} bytes. Executors on other machines write a local "
                "path on their own disks: a local table path needs a shared file system mounted at the same "
                "path on every node, or use an object store (s3://, abfss://, gs://). Nothing was committed "
                "and no offset moved"
            )


def delete_files(table_path: str, storage_options: Mapping[str, str], files: Sequence[DataFile]) -> None:
    """Delete ``files`` (in no commit) from the table folder; a file that cannot be deleted is
    logged and left (invisible; VACUUM removes it)."""
    filesystem = table_filesystem(table_path, storage_options)
    for f in files:
        try:
            filesystem.delete_file(f.path)
        except Exception as exc:  # invisible anyway; VACUUM removes what is left
            logger.warning("could not delete %s of a refused commit from offsets.table '%s' (in no commit, "
                           "invisible): %s", f.path, table_path, type(exc).__name__)

