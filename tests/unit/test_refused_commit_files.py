"""The files of a refused commit (delta-rs on a local table, no process).

Review of issue 15: a commit whose answer was lost is refused as "already committed"; its
files were deleted when the latest snapshot did not reference them, but a concurrent
OPTIMIZE may have removed them from the snapshot while older versions (time travel, a
reader on an older version) still read them. Files are deleted only on a conflict with
another writer.
"""

from __future__ import annotations

import os
import pathlib
from typing import List

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kafka_group.delta.files.commit_files import DataFile
from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
from kafka_group.errors import OffsetConflictError
from kafka_group.offsets import OffsetRange, TopicPartition

TP = TopicPartition("t", 0)
ROWS = pa.table({"offset": pa.array([0, 1], pa.int64())})


def files(root: pathlib.Path, batch: int, count: int = 2) -> List[DataFile]:
    result = []
    (root / "data").mkdir(parents=True, exist_ok=True)
    for i in range(count):
        relative = f"data/part-{batch:08d}-{i}.snappy.parquet"
        pq.write_table(ROWS, root / relative)
        result.append(DataFile(relative, os.path.getsize(root / relative), ROWS.num_rows))
    return result


def test_files_of_a_commit_refused_as_already_committed_are_kept_even_when_optimize_removed_them(
    tmp_path: pathlib.Path,
) -> None:
    from deltalake import DeltaTable

    root = tmp_path / "table"
    store = DeltaOffsetStore(str(root), "g")
    landed = files(root, 0)
    store.commit(landed, ROWS.schema, [OffsetRange(TP, 0, 4)])
    DeltaTable(str(root)).optimize.compact()  # a concurrent OPTIMIZE: the files leave the latest snapshot
    assert not DeltaOffsetStore(str(root), "g").references_any([f.path for f in landed])
    with pytest.raises(OffsetConflictError, match="already holds exactly these ranges"):
        DeltaOffsetStore(str(root), "g").commit(landed, ROWS.schema, [OffsetRange(TP, 0, 4)])  # the lost answer
    assert all((root / f.path).exists() for f in landed)  # version 0 still reads them
    assert DeltaTable(str(root), version=0).to_pyarrow_dataset().count_rows() == 4


def test_files_of_a_commit_refused_for_another_writers_offsets_are_deleted(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "table"
    DeltaOffsetStore(str(root), "g").commit(files(root, 0), ROWS.schema, [OffsetRange(TP, 0, 4)])
    late = files(root, 1)
    with pytest.raises(OffsetConflictError, match="t-0 planned \\[2, 6\\) but the table is at 4"):
        DeltaOffsetStore(str(root), "g").commit(late, ROWS.schema, [OffsetRange(TP, 2, 6)])
    assert not any((root / f.path).exists() for f in late)  # in no commit: gone


def test_a_local_table_refuses_files_the_driver_cannot_see_before_committing(tmp_path: pathlib.Path) -> None:
    # Executors of a multi-node cluster write a local path on their own disks.
    from kafka_group.errors import OffsetStoreError

    root = tmp_path / "table"
    store = DeltaOffsetStore(str(root), "g")
    written = files(root, 0)
    missing = DataFile("data/part-00000000-on-another-node.snappy.parquet", 123, 2)
    with pytest.raises(OffsetStoreError, match="on-another-node.*shared file system.*or use an object store"):
        store.commit([*written, missing], ROWS.schema, [OffsetRange(TP, 0, 4)])
    assert not (root / "_delta_log").exists()  # nothing committed, no offset moved
    assert all((root / f.path).exists() for f in written)
    truncated = DataFile(written[0].path, written[0].size + 1, 2)
    with pytest.raises(OffsetStoreError, match=f"{written[0].path}.*{written[0].size} bytes"):
        store.commit([truncated], ROWS.schema, [OffsetRange(TP, 0, 4)])
    assert store.commit(written, ROWS.schema, [OffsetRange(TP, 0, 4)]) == 0
