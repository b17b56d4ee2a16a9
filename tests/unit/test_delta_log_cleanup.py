"""Checkpoints and expired log files after the connector's own commit (no process: logs on disk, delta-rs).

A table whose writer features send its appends through the own commit
(:mod:`kafka_group.delta.log.commit`, then :mod:`kafka_group.delta.log.checkpoints`) gets what delta-spark and delta-rs's post-commit hook give
every other table: a checkpoint every ``delta.checkpointInterval`` versions, then the log files
older than ``delta.logRetentionDuration`` that the checkpoint covers removed, unless
``delta.enableExpiredLogCleanup`` is ``false``; with ``delta.checkpointPolicy = v2`` the
checkpoint follows the V2 spec (a ``checkpointMetadata`` action).
"""

from __future__ import annotations

import pathlib
from typing import List

import pyarrow.parquet as pq
from deltalake import DeltaTable

from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
from kafka_group.offsets import TopicPartition
from tests.unit.test_delta_own_commit import _batch, _tracked_table

_EXPIRED_AT_ONCE = {"delta.enableInCommitTimestamps": "true", "delta.checkpointInterval": "2",
                    "delta.logRetentionDuration": "interval 0 seconds",
                    "delta.deletedFileRetentionDuration": "interval 0 seconds"}


def _land(root: pathlib.Path, batches: int) -> DeltaOffsetStore:
    store = DeltaOffsetStore(str(root), "g")
    for n in range(batches):
        assert _batch(root, store, 3 * n, 3) == n + 1
    return store


def _log(root: pathlib.Path) -> List[str]:
    return sorted(p.name for p in (root / "_delta_log").iterdir() if p.name[:1].isdigit())


def test_own_commits_remove_the_expired_log_files_a_checkpoint_covers(tmp_path: pathlib.Path) -> None:
    _tracked_table(tmp_path, ["inCommitTimestamp"], _EXPIRED_AT_ONCE)
    store = _land(tmp_path, 5)
    # Checkpoints at 2 and 4; then everything before the newest checkpoint is expired (retention 0):
    # its commit file stays (PROTOCOL.md, "Metadata Cleanup"), as does every commit after it.
    listed = _log(tmp_path)
    assert listed == [f"{4:020d}.checkpoint.parquet", f"{4:020d}.json", f"{5:020d}.json"], listed
    assert DeltaTable(str(tmp_path)).version() == 5
    assert store.positions([TopicPartition("t", 0)]) == {TopicPartition("t", 0): 15}
    assert _batch(tmp_path, store, 15, 3) == 6  # the next commit reads its in-commit timestamp from commit 5


def test_expired_log_cleanup_off_keeps_every_log_file(tmp_path: pathlib.Path) -> None:
    _tracked_table(tmp_path, ["inCommitTimestamp"], {**_EXPIRED_AT_ONCE, "delta.enableExpiredLogCleanup": "false"})
    _land(tmp_path, 5)
    assert _log(tmp_path) == sorted([f"{v:020d}.json" for v in range(6)]
                                    + [f"{v:020d}.checkpoint.parquet" for v in (2, 4)])


def test_a_v2_checkpoint_policy_gets_v2_spec_checkpoints(tmp_path: pathlib.Path) -> None:
    _tracked_table(tmp_path, ["v2Checkpoint", "inCommitTimestamp"], {**_EXPIRED_AT_ONCE, "delta.checkpointPolicy": "v2"},
                   reader_features=["v2Checkpoint"])
    _land(tmp_path, 2)
    checkpoint = tmp_path / "_delta_log" / f"{2:020d}.checkpoint.parquet"
    assert checkpoint.exists(), _log(tmp_path)
    rows = pq.read_table(checkpoint, columns=["checkpointMetadata"]).column("checkpointMetadata").to_pylist()
    assert [r for r in rows if r] == [{"version": 2}]  # V2 spec: exactly one checkpointMetadata action
    assert _log(tmp_path) == [f"{2:020d}.checkpoint.parquet", f"{2:020d}.json"]
