"""Checkpoints and expired log files after the connector's own commit (no process: logs on disk, delta-rs).

A table whose writer features send its appends through the own commit
(:mod:`kafka_group.delta.log.commit`, then :mod:`kafka_group.delta.log.checkpoints`) gets what delta-spark and delta-rs's post-commit hook give
every other table: a checkpoint every ``delta.checkpointInterval`` versions, then the log files
older than ``delta.logRetentionDuration`` that the checkpoint covers removed, unless
``delta.enableExpiredLogCleanup`` is ``false``; with ``delta.checkpointPolicy = v2`` the
checkpoint follows the V2 spec (a ``checkpointMetadata`` action).
"""

from __future__ import annotations

import logging
import os
import pathlib
import time
from typing import List

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from kafka_group.delta.log.checkpoints import _boundary, _interval_s
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


def _crashed_multi_part_checkpoint(root: pathlib.Path, version: int) -> pathlib.Path:
    """What a delta-spark writer that crashed while writing its two-part checkpoint of ``version`` (the table's
    current one) leaves: part 1 of 2, and no ``_last_checkpoint`` naming it."""
    log = root / "_delta_log"
    hint = (log / "_last_checkpoint").read_text() if (log / "_last_checkpoint").exists() else None
    DeltaTable(str(root)).create_checkpoint()
    part = log / f"{version:020d}.checkpoint.{1:010d}.{2:010d}.parquet"
    (log / f"{version:020d}.checkpoint.parquet").rename(part)
    if hint is None:
        (log / "_last_checkpoint").unlink()
    else:
        (log / "_last_checkpoint").write_text(hint)
    return part


def _age(root: pathlib.Path, up_to: int, days: float) -> None:
    """Make the log files of versions up to ``up_to`` ``days`` old (their modification time)."""
    then = time.time() - days * 86_400
    for path in (root / "_delta_log").iterdir():
        if path.name[:20].isdigit() and int(path.name[:20]) <= up_to:
            os.utime(path, (then, then))


def test_an_incomplete_multi_part_checkpoint_never_bounds_the_log_cleanup(
        tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture) -> None:
    """A writer that crashed while writing a multi-part checkpoint leaves some of its parts: readers skip it (a
    checkpoint is there once all its parts are) and read from an older complete checkpoint and the commits after
    it. The cleanup after the connector's own checkpoint must keep those: every version within
    ``delta.logRetentionDuration`` stays readable."""
    _tracked_table(tmp_path, ["inCommitTimestamp"], {"delta.enableInCommitTimestamps": "true",
                                                     "delta.checkpointInterval": "4"})  # 30 days of log retention
    store = _land(tmp_path, 6)  # versions 1 to 6; the own commit checkpointed version 4
    part = _crashed_multi_part_checkpoint(tmp_path, 6)
    assert _batch(tmp_path, store, 18, 3) == 7
    _age(tmp_path, 6, days=40)  # versions 0 to 6 expired; 7 (within retention) must stay readable
    with caplog.at_level(logging.WARNING, logger="kafka_group.delta.log.checkpoints"):
        assert _batch(tmp_path, store, 21, 3) == 8  # due: a checkpoint of 8, then the cleanup
    assert (tmp_path / "_delta_log" / f"{8:020d}.checkpoint.parquet").exists(), _log(tmp_path)
    assert DeltaTable(str(tmp_path)).version() == 8
    assert DeltaTable(str(tmp_path), version=7).version() == 7, _log(tmp_path)
    assert store.positions([TopicPartition("t", 0)]) == {TopicPartition("t", 0): 24}
    assert [r for r in caplog.records if part.name in r.getMessage()], caplog.text  # the warning names it


def test_an_incomplete_checkpoint_older_than_the_cleanup_boundary_lets_the_cleanup_run(tmp_path: pathlib.Path) -> None:
    """The guard above blocks only a cleanup bounded by an incomplete checkpoint: one older than the complete
    checkpoint the cleanup keeps costs nothing (delta-rs leaves multi-part checkpoint files to delta-spark)."""
    _tracked_table(tmp_path, ["inCommitTimestamp"], {"delta.enableInCommitTimestamps": "true",
                                                     "delta.checkpointInterval": "4"})
    store = _land(tmp_path, 2)
    part = _crashed_multi_part_checkpoint(tmp_path, 2)
    for n in range(2, 7):
        assert _batch(tmp_path, store, 3 * n, 3) == n + 1  # versions 3 to 7, the own commit checkpointed 4
    _age(tmp_path, 6, days=40)
    assert _batch(tmp_path, store, 21, 3) == 8
    assert _log(tmp_path) == sorted([part.name, f"{4:020d}.checkpoint.parquet", f"{8:020d}.checkpoint.parquet"]
                                    + [f"{v:020d}.json" for v in range(4, 9)])
    assert DeltaTable(str(tmp_path), version=7).version() == 7


@pytest.mark.parametrize(("value", "seconds"), [
    ("interval 30 days", 30 * 86_400), ("interval 1 week", 604_800), ("interval 0 seconds", 0),
    ("interval 90 minute", 5_400), ("interval 1500 milliseconds", 1.5),
    ("30 days", None), ("interval -1 days", None), ("interval 1 fortnight", None), ("interval 1", None),
    ("INTERVAL 0 SECONDS", None)])
def test_the_log_retention_is_read_as_delta_rs_reads_it(value: str, seconds: object) -> None:
    """None: a value delta-rs 1.6.6 does not parse either, and takes for its default, 30 days."""
    assert _interval_s(value) == seconds


def test_a_retention_delta_rs_does_not_parse_is_its_default_of_30_days(tmp_path: pathlib.Path) -> None:
    """delta-rs keeps 30 days of log for ``INTERVAL 0 SECONDS``; so does the guard, which lets it clean up."""
    _tracked_table(tmp_path, ["inCommitTimestamp"], {"delta.enableInCommitTimestamps": "true",
                                                     "delta.checkpointInterval": "4",
                                                     "delta.logRetentionDuration": "INTERVAL 0 SECONDS"})
    store = _land(tmp_path, 3)
    _age(tmp_path, 3, days=40)
    assert _batch(tmp_path, store, 9, 3) == 4
    assert _log(tmp_path) == [f"{4:020d}.checkpoint.parquet", f"{4:020d}.json"]


def test_the_cleanup_boundary_is_the_newest_checkpoint_before_the_oldest_retained_log_file() -> None:
    """delta-rs's choice: any checkpoint file counts, complete or not; only commits and classic checkpoints count
    as log files for the retention."""
    old, new = 0.0, 100.0
    listed = [(f"{0:020d}.json", old), (f"{2:020d}.checkpoint.parquet", old), (f"{2:020d}.json", old),
              (f"{3:020d}.checkpoint.{1:010d}.{2:010d}.parquet", new), (f"{3:020d}.json", old),
              (f"{4:020d}.json", new), (f"{5:020d}.json", new), ("_last_checkpoint", old)]
    assert _boundary(listed, 5, cutoff=50.0) == 3  # version 4 is the oldest retained; 3 is the newest checkpoint
    assert _boundary(listed, 5, cutoff=-1.0) is None  # everything retained: the oldest is 0, no checkpoint before
    assert _boundary(listed, 2, cutoff=200.0) == 2  # nothing retained: up to the version itself
