"""The connector's own Delta commit for tables delta-rs cannot commit to (no process: logs on disk).

Action building (in-commit timestamps, row ids and their high-water mark, txns), the conflict rule
after a lost race, the put-if-absent of a commit file, the high-water mark read back from commits
and checkpoints, and DeltaOffsetStore landing batches through it on tables written as delta-spark
writes them.
"""

from __future__ import annotations

import json
import os
import pathlib
import uuid
from typing import Any, Dict, List, Optional

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kafka_group.delta.files.commit_files import DataFile
from kafka_group.delta.log.actions import TableState, commit_actions, in_commit_timestamp, winners_conflict
from kafka_group.delta.log.commit import own_commit_refusal, put_if_absent
from kafka_group.delta.log.snapshot import row_id_high_water_mark
from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
from kafka_group.delta.storage.table_location import table_filesystem
from kafka_group.errors import UnsupportedTableFeatureError
from kafka_group.offsets import OffsetRange, TopicPartition

_TRACKED = frozenset({"rowTracking", "domainMetadata", "inCommitTimestamp"})
_ON = {"delta.enableRowTracking": "true", "delta.enableInCommitTimestamps": "true"}


def _files(*counts: int) -> List[DataFile]:
    return [DataFile(f"data/b/part {i}%.parquet", 100, n) for i, n in enumerate(counts)]


def test_commit_info_comes_first_with_an_in_commit_timestamp_past_the_previous() -> None:
    state = TableState(4, _TRACKED, _ON, last_in_commit_timestamp=10_000, row_id_high_water_mark=None)
    actions = commit_actions(state, [], [("a", 1)], now_ms=9_000, operation="WRITE", info={"kafkaGroup.groupId": "g"})
    info = actions[0]["commitInfo"]
    assert info["inCommitTimestamp"] == 10_001 == info["timestamp"]  # the clock is behind the last writer's
    assert info["readVersion"] == 4 and info["kafkaGroup.groupId"] == "g"
    assert in_commit_timestamp(10_000, 12_000) == 12_000 and in_commit_timestamp(None, 5) == 5


def test_no_in_commit_timestamp_while_the_property_is_off() -> None:
    state = TableState(0, frozenset({"inCommitTimestamp"}), {}, last_in_commit_timestamp=None)
    assert "inCommitTimestamp" not in commit_actions(state, [], [], now_ms=1, operation="WRITE", info={})[0]["commitInfo"]


def test_info_cannot_overwrite_the_protocols_fields() -> None:
    state = TableState(0, _TRACKED, _ON, last_in_commit_timestamp=50)
    info = commit_actions(state, [], [], now_ms=1, operation="WRITE", info={"inCommitTimestamp": 0})[0]["commitInfo"]
    assert info["inCommitTimestamp"] == 51


def test_row_ids_follow_the_high_water_mark_and_the_mark_moves_to_the_last() -> None:
    state = TableState(6, _TRACKED, _ON, row_id_high_water_mark=99)
    actions = commit_actions(state, _files(3, 0, 5), [("app", 7)], now_ms=1, operation="WRITE", info={})
    adds = [a["add"] for a in actions if "add" in a]
    assert [(a["baseRowId"], a["defaultRowCommitVersion"]) for a in adds] == [(100, 7), (103, 7), (103, 7)]
    assert adds[0]["path"] == "data/b/part%200%25.parquet"  # a relative URI
    assert json.loads(adds[0]["stats"]) == {"numRecords": 3}
    [domain] = [a["domainMetadata"] for a in actions if "domainMetadata" in a]
    assert domain["domain"] == "delta.rowTracking" and json.loads(domain["configuration"])["rowIdHighWaterMark"] == 107
    assert [a["txn"] for a in actions if "txn" in a] == [{"appId": "app", "version": 7, "lastUpdated": 1}]


def test_first_row_ids_start_at_zero_and_no_mark_without_rows() -> None:
    state = TableState(0, _TRACKED, _ON, row_id_high_water_mark=None)
    actions = commit_actions(state, _files(2), [], now_ms=1, operation="WRITE", info={})
    assert actions[1]["add"]["baseRowId"] == 0
    assert json.loads(actions[-1]["domainMetadata"]["configuration"])["rowIdHighWaterMark"] == 1
    empty = commit_actions(TableState(3, _TRACKED, _ON, row_id_high_water_mark=0), [], [("a", 1)], now_ms=1,
                           operation="kafkaGroup.hold", info={})
    assert not any("domainMetadata" in a for a in empty)


def test_suspended_row_tracking_assigns_nothing() -> None:
    state = TableState(0, _TRACKED, {"delta.rowTrackingSuspended": "true"}, row_id_high_water_mark=4)
    actions = commit_actions(state, _files(2), [], now_ms=1, operation="WRITE", info={})
    assert "baseRowId" not in actions[1]["add"] and not any("domainMetadata" in a for a in actions)


def test_winning_commits_that_change_protocol_or_metadata_or_move_our_ids_are_named() -> None:
    assert winners_conflict([{"commitInfo": {}}, {"add": {}}, {"domainMetadata": {}}], ["a"]) is None
    assert "protocol or metadata" in (winners_conflict([{"metaData": {}}], ["a"]) or "")
    assert "'a'" in (winners_conflict([{"txn": {"appId": "a", "version": 3}}], ["a"]) or "")
    assert winners_conflict([{"txn": {"appId": "b", "version": 3}}], ["a"]) is None


def test_put_if_absent_never_overwrites_and_leaves_no_temporary_file(tmp_path: pathlib.Path) -> None:
    (tmp_path / "_delta_log").mkdir()
    assert put_if_absent(str(tmp_path), {}, "_delta_log/00000000000000000001.json", b"first\n")
    assert not put_if_absent(str(tmp_path), {}, "_delta_log/00000000000000000001.json", b"second\n")
    assert (tmp_path / "_delta_log" / "00000000000000000001.json").read_bytes() == b"first\n"
    assert os.listdir(tmp_path / "_delta_log") == ["00000000000000000001.json"]


def test_stores_without_a_create_if_absent_here_are_named() -> None:
    assert own_commit_refusal("/lake/t") is None and own_commit_refusal("s3://b/t") is None
    assert "abfss://" in (own_commit_refusal("abfss://c@a.dfs.core.windows.net/t") or "")


def _write_log(root: pathlib.Path, version: int, actions: List[Dict[str, Any]]) -> None:
    (root / "_delta_log").mkdir(parents=True, exist_ok=True)
    (root / "_delta_log" / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))


def _mark(value: int) -> Dict[str, Any]:
    return {"domainMetadata": {"domain": "delta.rowTracking", "configuration": json.dumps({"rowIdHighWaterMark": value}),
                               "removed": False}}


def test_the_high_water_mark_is_read_from_the_newest_commit_then_the_checkpoint(tmp_path: pathlib.Path) -> None:
    _write_log(tmp_path, 3, [{"commitInfo": {}}, _mark(41)])
    _write_log(tmp_path, 4, [{"commitInfo": {}}, {"txn": {"appId": "a", "version": 1}}])
    pq.write_table(pa.table({"domainMetadata": [None, {"domain": "delta.rowTracking",
                                                       "configuration": json.dumps({"rowIdHighWaterMark": 17}),
                                                       "removed": False}]}),
                   tmp_path / "_delta_log" / f"{2:020d}.checkpoint.parquet")
    (tmp_path / "_delta_log" / "_last_checkpoint").write_text(json.dumps({"version": 2, "size": 2}))
    fs = table_filesystem(str(tmp_path))
    assert row_id_high_water_mark(fs, 4) == 41  # commit 4 sets none, commit 3 does
    assert row_id_high_water_mark(fs, 2) == 17  # only the checkpoint
    (tmp_path / "_delta_log" / f"{3:020d}.json").write_text(json.dumps({"commitInfo": {}}) + "\n")
    assert row_id_high_water_mark(fs, 4) == 17


def _tracked_table(root: pathlib.Path, writer_features: List[str], configuration: Dict[str, str],
                   reader_features: Optional[List[str]] = None) -> None:
    fields = [{"name": n, "type": t, "nullable": True, "metadata": {}}
              for n, t in (("value", "string"), ("partition", "integer"), ("offset", "long"))]
    _write_log(root, 0, [
        {"commitInfo": {"timestamp": 0, "inCommitTimestamp": 4_000_000_000_000, "operation": "CREATE TABLE"}},
        {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps({"type": "struct", "fields": fields}), "partitionColumns": [],
                      "configuration": configuration, "createdTime": 0}},
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": writer_features}
         if reader_features is None else {"minReaderVersion": 3, "minWriterVersion": 7,
                                          "readerFeatures": reader_features, "writerFeatures": writer_features}},
    ])


def _batch(root: pathlib.Path, store: DeltaOffsetStore, start: int, rows: int) -> int:
    table = pa.table({"value": ["x"] * rows, "partition": pa.array([0] * rows, pa.int32()),
                      "offset": pa.array(range(start, start + rows), pa.int64())})
    name = f"data/part-{uuid.uuid4().hex}.parquet"
    (root / "data").mkdir(exist_ok=True)
    pq.write_table(table, root / name)
    ranges = [OffsetRange(TopicPartition("t", 0), start, start + rows)]
    store.check(ranges)
    store.check_schema(table.schema)
    return store.commit([DataFile(name, os.path.getsize(root / name), rows)], table.schema, ranges)


def _actions(root: pathlib.Path, version: int) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in (root / "_delta_log" / f"{version:020d}.json").read_text().splitlines()]


def test_batches_land_with_row_ids_commit_versions_and_increasing_timestamps(tmp_path: pathlib.Path) -> None:
    _tracked_table(tmp_path, ["rowTracking", "domainMetadata", "inCommitTimestamp", "clustering"], _ON)
    store = DeltaOffsetStore(str(tmp_path), "g")
    assert _batch(tmp_path, store, 0, 3) == 1
    assert _batch(tmp_path, store, 3, 2) == 2
    first, second = _actions(tmp_path, 1), _actions(tmp_path, 2)
    assert list(first[0]) == ["commitInfo"] and list(second[0]) == ["commitInfo"]
    assert 4_000_000_000_000 < first[0]["commitInfo"]["inCommitTimestamp"] < second[0]["commitInfo"]["inCommitTimestamp"]
    assert [(a["add"]["baseRowId"], a["add"]["defaultRowCommitVersion"]) for a in first + second if "add" in a] == [
        (0, 1), (3, 2)]
    assert store.positions([TopicPartition("t", 0)]) == {TopicPartition("t", 0): 5}


def test_a_lost_race_is_committed_again_on_the_winners_version_with_new_row_ids(tmp_path: pathlib.Path) -> None:
    _tracked_table(tmp_path, ["rowTracking", "domainMetadata"], {"delta.enableRowTracking": "true"})
    store = DeltaOffsetStore(str(tmp_path), "g")
    store.check([OffsetRange(TopicPartition("t", 0), 0, 3)])  # loads version 0
    # Another writer (delta-spark, say) takes version 1 with ten rows right before this commit.
    _write_log(tmp_path, 1, [{"commitInfo": {}}, _mark(9)])
    assert _batch(tmp_path, store, 0, 3) == 2
    [add] = [a["add"] for a in _actions(tmp_path, 2) if "add" in a]
    assert (add["baseRowId"], add["defaultRowCommitVersion"]) == (10, 2)


def test_data_less_offset_commits_go_through_the_own_commit(tmp_path: pathlib.Path) -> None:
    _tracked_table(tmp_path, ["inCommitTimestamp"], {"delta.enableInCommitTimestamps": "true"})
    store = DeltaOffsetStore(str(tmp_path), "g")
    store.hold_unseen([OffsetRange(TopicPartition("t", 0), 5, 9)], reason="test")
    assert store.positions([TopicPartition("t", 0)]) == {TopicPartition("t", 0): 5}
    assert "inCommitTimestamp" in _actions(tmp_path, 1)[0]["commitInfo"]


def test_merging_columns_into_such_a_table_is_refused_before_any_file(tmp_path: pathlib.Path) -> None:
    _tracked_table(tmp_path, ["inCommitTimestamp"], {"delta.enableInCommitTimestamps": "true"})
    wider = pa.schema([("value", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()), ("new", pa.int64())])
    with pytest.raises(UnsupportedTableFeatureError, match="ALTER TABLE ... ADD COLUMNS"):
        DeltaOffsetStore(str(tmp_path), "g").check_schema(wider, merge_schema=True)


def test_data_less_commits_never_go_to_a_writer_feature_the_connector_does_not_know(tmp_path: pathlib.Path) -> None:
    # delta-rs refused these commits (an unknown writer feature); the own commit must too.
    _tracked_table(tmp_path, ["inCommitTimestamp", "someFutureFeature"], {"delta.enableInCommitTimestamps": "true"})
    store = DeltaOffsetStore(str(tmp_path), "g")
    tp = TopicPartition("t", 0)
    with pytest.raises(UnsupportedTableFeatureError, match="someFutureFeature"):
        store.hold_unseen([OffsetRange(tp, 5, 9)], reason="test")
    with pytest.raises(UnsupportedTableFeatureError, match="someFutureFeature"):
        store.reset({tp: 3}, reason="test")
    assert sorted(os.listdir(tmp_path / "_delta_log")) == [f"{0:020d}.json"]  # nothing committed


def test_the_high_water_mark_comes_from_the_newest_checkpoint_when_last_checkpoint_does_not_point_at_it(
        tmp_path: pathlib.Path) -> None:
    # Commits 0-2 were cleaned up behind checkpoint 2; _last_checkpoint is only a hint (PROTOCOL.md): it may be
    # missing, or name a checkpoint newer than the version read (a writer checkpointed meanwhile).
    _write_log(tmp_path, 3, [{"commitInfo": {}}])
    _write_log(tmp_path, 4, [{"commitInfo": {}}, {"txn": {"appId": "a", "version": 1}}])
    pq.write_table(pa.table({"domainMetadata": [None, {"domain": "delta.rowTracking",
                                                       "configuration": json.dumps({"rowIdHighWaterMark": 17}),
                                                       "removed": False}]}),
                   tmp_path / "_delta_log" / f"{2:020d}.checkpoint.parquet")
    fs = table_filesystem(str(tmp_path))
    assert row_id_high_water_mark(fs, 4) == 17  # no _last_checkpoint
    (tmp_path / "_delta_log" / "_last_checkpoint").write_text(json.dumps({"version": 5, "size": 2}))
    assert row_id_high_water_mark(fs, 4) == 17  # _last_checkpoint ahead of the version read


def test_an_incomplete_multi_part_checkpoint_is_not_taken_from_the_listing(tmp_path: pathlib.Path) -> None:
    _write_log(tmp_path, 3, [{"commitInfo": {}}, _mark(41)])
    _write_log(tmp_path, 4, [{"commitInfo": {}}])
    pq.write_table(pa.table({"domainMetadata": [None]}, schema=pa.schema([("domainMetadata", pa.struct([
        ("domain", pa.string()), ("configuration", pa.string()), ("removed", pa.bool_())]))])),
        tmp_path / "_delta_log" / f"{4:020d}.checkpoint.0000000001.0000000002.parquet")  # part 2 never written
    assert row_id_high_water_mark(table_filesystem(str(tmp_path)), 4) == 41


def test_a_stale_last_checkpoint_naming_a_removed_checkpoint_falls_back_to_the_listing(tmp_path: pathlib.Path) -> None:
    _write_log(tmp_path, 3, [{"commitInfo": {}}])
    pq.write_table(pa.table({"domainMetadata": [{"domain": "delta.rowTracking",
                                                 "configuration": json.dumps({"rowIdHighWaterMark": 17}),
                                                 "removed": False}]}),
                   tmp_path / "_delta_log" / f"{2:020d}.checkpoint.parquet")
    (tmp_path / "_delta_log" / "_last_checkpoint").write_text(json.dumps({"version": 1, "size": 2}))  # cleaned up
    assert row_id_high_water_mark(table_filesystem(str(tmp_path)), 3) == 17


def test_live_adds_fall_back_to_the_listing_when_last_checkpoint_leads_to_cleaned_up_commits(
        tmp_path: pathlib.Path) -> None:
    """The own commit now cleans expired log files behind each checkpoint: a ``_last_checkpoint`` hint still
    naming checkpoint 2 while commits 0-3 went behind checkpoint 4 must not fail the own MERGE's look-up of
    a file's live ``add`` (the log is listed again, as for the row-id high-water mark)."""
    from kafka_group.delta.log.live_adds import live_adds

    add = {"path": "data/a.parquet", "size": 1, "modificationTime": 0, "dataChange": True}
    _write_log(tmp_path, 5, [{"commitInfo": {}}, {"txn": {"appId": "a", "version": 1}}])
    pq.write_table(pa.table({"add": [add, None]}), tmp_path / "_delta_log" / f"{4:020d}.checkpoint.parquet")
    (tmp_path / "_delta_log" / "_last_checkpoint").write_text(json.dumps({"version": 2, "size": 1}))  # stale hint
    found = live_adds(table_filesystem(str(tmp_path)), 5, ["data/a.parquet"])
    assert found["data/a.parquet"]["path"] == "data/a.parquet"


def test_a_retried_commit_put_that_finds_its_own_first_attempt_lands_the_batch_once(
        tmp_path: pathlib.Path, monkeypatch: Any) -> None:
    """The commit's conditional PUT lands, but the S3 client retried it after the first answer was lost, and the
    retry's ``If-None-Match`` answered 412: the batch is committed (this writer's own commit), not refused."""
    import kafka_group.delta.log.commit as module

    real = module.put_if_absent

    def put(table_path: str, storage_options: Any, path: str, body: bytes) -> bool:
        created = real(table_path, storage_options, path, body)
        return False if created and path.endswith(f"{1:020d}.json") else created

    monkeypatch.setattr(module, "put_if_absent", put)
    _tracked_table(tmp_path, ["inCommitTimestamp"], {"delta.enableInCommitTimestamps": "true"})
    store = DeltaOffsetStore(str(tmp_path), "g")
    assert _batch(tmp_path, store, 0, 3) == 1
    assert store.positions([TopicPartition("t", 0)]) == {TopicPartition("t", 0): 3}
    assert not (tmp_path / "_delta_log" / f"{2:020d}.json").exists()
