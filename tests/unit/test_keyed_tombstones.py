"""SCD1's tombstones (issue 36) on real local Delta tables written by delta-rs (no process): the filter,
idempotent recording, garbage collection, the retention parameter, and the table folder they live in."""

from __future__ import annotations

import datetime
import pathlib
import time
from typing import Any, List, Optional, Sequence, Tuple

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from kafka_group.delta.keyed import tombstones as keyed_tombstones
from kafka_group.delta.keyed.change_rules import DELETE_COLUMN, OFFSET, SEQ, SEQUENCE_COLUMN, KeyedSpec
from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
from kafka_group.delta.keyed.tombstones import (
    DEFAULT_RETENTION_SECONDS,
    RECORDED_AT,
    Tombstones,
    retention_seconds,
    tombstones_location,
)
from kafka_group.errors import ConfigError
from kafka_group.offsets import OffsetRange, TopicPartition


def spec(keys: Sequence[str] = ("id",)) -> KeyedSpec:
    return KeyedSpec.build(list(keys), "seq", None, None, None, 1)


def changes(rows: List[Tuple[Any, ...]], keys: Sequence[str] = ("id",),
            key_types: Optional[List[pa.DataType]] = None) -> pa.Table:
    """A change set: keys, a struct column (the join must not carry it), SEQ, DELETE, OFFSET."""
    types = key_types or [pa.string()] * len(keys)
    cols = {k: pa.array([r[i] for r in rows], t) for i, (k, t) in enumerate(zip(keys, types))}
    n = len(keys)
    cols["payload"] = pa.array([{"a": [i]} for i in range(len(rows))], pa.struct([("a", pa.list_(pa.int64()))]))
    cols[SEQ] = pa.array([r[n] for r in rows], pa.int64())
    cols[DELETE_COLUMN] = pa.array([r[n + 1] for r in rows], pa.bool_())
    cols[OFFSET] = pa.array(range(len(rows)), pa.int64())
    return pa.table(cols)


def keys_and_seqs(table: pa.Table, keys: Sequence[str] = ("id",)) -> List[Tuple[Any, ...]]:
    return sorted(zip(*[table.column(c).to_pylist() for c in list(keys) + [SEQ]]), key=repr)


def test_an_upsert_older_than_its_keys_tombstone_is_dropped_deletes_ties_and_newer_ones_pass(
        tmp_path: pathlib.Path) -> None:
    t = Tombstones(str(tmp_path / "t"), {}, spec(), 3600)
    first = changes([("k", 10, True), ("gone", 3, True), ("live", 1, False)])
    assert t.apply(first) is first  # no tombstones yet: unchanged
    t.record(t.deletes(first))
    second = changes([("k", 5, False), ("gone", 3, False), ("live", 2, False), ("new", 1, False),
                      ("k2", 1, True)])
    kept = t.apply(second)
    # 'gone' at the tombstone's sequence: a tie with the delete, from a later batch, so a later offset: it wins
    assert keys_and_seqs(kept) == [("gone", 3), ("k2", 1), ("live", 2), ("new", 1)]
    assert kept.schema == second.schema
    # a delete older than the tombstone passes (the MERGE ignores it); a newer upsert passes
    third = changes([("k", 4, True), ("gone", 4, False)])
    assert keys_and_seqs(t.apply(third)) == [("gone", 4), ("k", 4)]


def test_recording_again_keeps_the_highest_sequence_and_changes_nothing(tmp_path: pathlib.Path) -> None:
    t = Tombstones(str(tmp_path / "t"), {}, spec(), 3600)
    batch = changes([("k", 10, True)])
    t.record(t.deletes(batch))
    t.record(t.deletes(batch))  # a replay after a crash records the same tombstone
    t.record(t.deletes(changes([("k", 7, True)])))  # an older delete of the key
    assert keys_and_seqs(t.apply(changes([("k", 9, False), ("k2", 0, False)]))) == [("k2", 0)]
    assert keys_and_seqs(t.apply(changes([("k", 10, False)]))) == [("k", 10)]
    assert t.deletes(changes([("a", 1, False)])).num_rows == 0
    t.record(t.deletes(changes([("a", 1, False)])))  # nothing to record: no commit
    assert DeltaTable(t.path).version() == 2


def test_composite_keys_of_other_types_match_whole(tmp_path: pathlib.Path) -> None:
    keys = ("tenant", "id")
    t = Tombstones(str(tmp_path / "t"), {}, spec(keys), 3600)
    types: List[pa.DataType] = [pa.int32(), pa.string()]
    t.record(t.deletes(changes([(1, "a", 9, True)], keys, types)))
    kept = t.apply(changes([(1, "a", 8, False), (2, "a", 8, False), (1, "b", 8, False)], keys, types))
    assert keys_and_seqs(kept, keys) == [(1, "b", 8), (2, "a", 8)]


def test_tombstones_of_many_files_are_read_for_the_batchs_keys(tmp_path: pathlib.Path) -> None:
    t = Tombstones(str(tmp_path / "t"), {}, spec(), 3600)
    for n in range(5):
        t.record(t.deletes(changes([(f"k{n}-{i}", 100, True) for i in range(3)])))
    assert keys_and_seqs(t.apply(changes([("k3-1", 50, False), ("k9-9", 50, False)]))) == [("k9-9", 50)]


def test_garbage_collection_removes_tombstones_older_than_the_retention_now_and_then(
        tmp_path: pathlib.Path) -> None:
    t = Tombstones(str(tmp_path / "t"), {}, spec(), 3600)
    t.record(t.deletes(changes([("old", 10, True)])))
    t.record(t.deletes(changes([("young", 10, True)])))
    recorded = DeltaTable(t.path).to_pyarrow_dataset().to_table().column(RECORDED_AT).to_pylist()
    assert all(r.tzinfo is not None for r in recorded)
    # 'old' was recorded first; collect as if it were an hour later, between the two
    cut = datetime.datetime.now(datetime.timezone.utc)
    t.record(t.deletes(changes([("later", 10, True)])))
    t.collect_garbage(now=cut.timestamp() + 3600)
    survivors = DeltaTable(t.path).to_pyarrow_dataset().to_table().column("id").to_pylist()
    assert survivors == ["later"]
    assert keys_and_seqs(t.apply(changes([("old", 5, False), ("later", 5, False)]))) == [("old", 5)]
    t.collect_garbage(now=time.time() + 10 * 3600)  # within the interval: not again
    assert DeltaTable(t.path).to_pyarrow_dataset().to_table().num_rows == 1


def test_compacted_tombstones_still_filter(tmp_path: pathlib.Path) -> None:
    """Garbage collection compacts the table (delta-rs rewrites the files): the filter reads the result."""
    t = Tombstones(str(tmp_path / "t"), {}, spec(), 3600)
    for n in range(4):
        t.record(t.deletes(changes([(f"k{n}", 10, True)])))
    t.collect_garbage()
    files = DeltaTable(t.path).file_uris()
    assert len(files) == 1
    assert keys_and_seqs(t.apply(changes([("k2", 9, False), ("k5", 9, False)]))) == [("k5", 9)]


def test_retention_takes_seconds_or_a_timedelta() -> None:
    assert retention_seconds(60) == 60.0
    assert retention_seconds(datetime.timedelta(days=2)) == 172800.0
    assert DEFAULT_RETENTION_SECONDS == 7 * 24 * 3600
    for bad in (0, -1, "2d", True, float("nan"), float("inf"), datetime.timedelta(0)):
        with pytest.raises(ConfigError, match="tombstone_retention"):
            retention_seconds(bad)


def test_the_tombstones_live_in_an_underscore_folder_of_the_table() -> None:
    assert tombstones_location("/lake/t/") == "/lake/t/_kafka_group_tombstones"
    assert tombstones_location("s3://b/lake/t") == "s3://b/lake/t/_kafka_group_tombstones"
    assert keyed_tombstones.TOMBSTONES_FOLDER.startswith("_")
    with pytest.raises(ConfigError, match=RECORDED_AT):
        Tombstones("/lake/t", {}, spec([RECORDED_AT]), 1)


def test_a_table_folder_holding_only_tombstones_is_still_the_tables(tmp_path: pathlib.Path) -> None:
    """Tombstones are recorded before the first commit creates the table: the folder stays usable."""
    table = tmp_path / "t"
    t = Tombstones(str(table), {}, spec(), 3600)
    t.record(t.deletes(changes([("k", 1, True)])))
    store = DeltaOffsetStore(str(table), "g")
    check = store.check([OffsetRange(TopicPartition("x", 0), 0, 1)])
    assert not check.conflicts
    assert SEQUENCE_COLUMN in DeltaTable(t.path).schema().to_arrow().names


@pytest.mark.parametrize("kw, message", [
    ({"tombstone_retention": 60}, "belong to the keyed mode"),
    ({"keys": ["id"], "stored_as_scd_type": 2, "tombstone_retention": 0}, "must be a positive duration"),
    ({"keys": ["id"], "tombstone_retention": "2 days"}, "takes seconds or a datetime.timedelta"),
])
def test_delta_sink_checks_tombstone_retention(kw: Any, message: str) -> None:
    from pyspark_kafka_group import DeltaSink

    with pytest.raises(ConfigError, match=message):
        DeltaSink("/lake/t", **kw)


def test_delta_sink_keeps_deletes_seven_days_by_default() -> None:
    from pyspark_kafka_group import DeltaSink

    assert DeltaSink("/lake/t", keys=["id"]).tombstone_retention == 7 * 24 * 3600
    assert DeltaSink("/lake/t", keys=["id"], stored_as_scd_type="2", tombstone_retention=60).tombstone_retention == 60
    assert DeltaSink("/lake/t", keys=["id"], tombstone_retention=datetime.timedelta(hours=1)).tombstone_retention == 3600
