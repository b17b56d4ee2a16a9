"""Positions of many partitions are read from the offsets table without one delta-rs scan per partition.

No process: tables written with deltalake. delta-rs answers one application transaction per
``transaction_version`` call and scans the snapshot's transactions for each: a plan of 200 topics
of 8 partitions read 1,600 of them at every planning call, and DeltaSink twice per batch
(:mod:`kafka_group.delta.offsets.app_transactions`). The store asks delta-rs for an id once and
follows later versions through their commit files; every answer must stay delta-rs's own.
"""

from __future__ import annotations

import pathlib
import shutil
from typing import Dict, Iterator, List

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from deltalake.transaction import CommitProperties, Transaction

from kafka_group.delta.offsets import app_transactions as app_transactions_module
from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
from kafka_group.delta.offsets.transaction_ids import transaction_id
from kafka_group.offsets import OffsetRange, TopicPartition

_SCHEMA = pa.schema([pa.field("value", pa.binary())])
_GROUP = "orders-group"
_PARTITIONS = [TopicPartition(f"topic-{t:03d}", p) for t in range(25) for p in range(8)]  # 200


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> Iterator[List[str]]:
    """Every application transaction id asked of delta-rs (``DeltaTable.transaction_version``)."""
    asked: List[str] = []
    original = DeltaTable.transaction_version

    def counted(self: DeltaTable, app_id: str) -> "int | None":
        asked.append(app_id)
        return original(self, app_id)

    monkeypatch.setattr(DeltaTable, "transaction_version", counted)
    yield asked


def _land(root: pathlib.Path, batch: int, partitions: List[TopicPartition] = _PARTITIONS) -> None:
    """One batch of 10 records per partition, committed as DeltaSink commits it (a new store per batch)."""
    store = DeltaOffsetStore(str(root), _GROUP)
    store.commit([], _SCHEMA, [OffsetRange(tp, batch * 10, (batch + 1) * 10) for tp in partitions])


def _other_writer(root: pathlib.Path, positions: Dict[TopicPartition, int]) -> None:
    """A commit of ``positions`` by another writer (delta-rs directly: nothing of this process sees it)."""
    table = DeltaTable(str(root))
    txns = [Transaction(transaction_id(_GROUP, tp), position) for tp, position in positions.items()]
    table.create_write_transaction([], mode="append", schema=table.schema(),
                                   commit_properties=CommitProperties(app_transactions=txns))


def _delta_rs(root: pathlib.Path, partitions: List[TopicPartition]) -> Dict[TopicPartition, int]:
    """The positions as delta-rs alone reads them, from a fresh table object."""
    table = DeltaTable(str(root))
    found = {tp: table.transaction_version(transaction_id(_GROUP, tp)) for tp in partitions}
    return {tp: v for tp, v in found.items() if v is not None}


def test_positions_after_a_new_commit_are_read_from_it_not_asked_per_partition(
        tmp_path: pathlib.Path, lookups: List[str]) -> None:
    _land(tmp_path, 0)
    planner = DeltaOffsetStore(str(tmp_path), _GROUP)  # the source's store, kept for the query
    assert planner.positions(_PARTITIONS) == {tp: 10 for tp in _PARTITIONS}
    for batch in (1, 2, 3):
        _land(tmp_path, batch)  # the sink's commit, through another store
        lookups.clear()
        assert planner.positions(_PARTITIONS) == {tp: (batch + 1) * 10 for tp in _PARTITIONS}
        assert not [a for a in lookups if a.startswith("kafka-group")], (
            f"{len(lookups)} delta-rs lookups for {len(_PARTITIONS)} partitions after one new commit")


def test_the_sinks_store_of_each_batch_shares_what_was_read(tmp_path: pathlib.Path, lookups: List[str]) -> None:
    _land(tmp_path, 0)
    _land(tmp_path, 1)
    lookups.clear()
    store = DeltaOffsetStore(str(tmp_path), _GROUP)  # DeltaSink opens the table again at every batch
    check = store.check([OffsetRange(tp, 20, 30) for tp in _PARTITIONS])
    assert check.committable and not check.conflicts and not check.already_committed
    store.commit([], _SCHEMA, [OffsetRange(tp, 20, 30) for tp in _PARTITIONS])
    assert not [a for a in lookups if a in {transaction_id(_GROUP, tp) for tp in _PARTITIONS}], len(lookups)
    assert DeltaOffsetStore(str(tmp_path), _GROUP).positions(_PARTITIONS) == {tp: 30 for tp in _PARTITIONS}


def test_another_writers_commit_between_two_reads_is_seen(tmp_path: pathlib.Path) -> None:
    _land(tmp_path, 0)
    planner = DeltaOffsetStore(str(tmp_path), _GROUP)
    assert planner.positions(_PARTITIONS[:3]) == {tp: 10 for tp in _PARTITIONS[:3]}
    moved = _PARTITIONS[1]
    _other_writer(tmp_path, {moved: 7})
    assert planner.positions(_PARTITIONS[:3]) == {_PARTITIONS[0]: 10, moved: 7, _PARTITIONS[2]: 10}
    assert planner.positions(_PARTITIONS) == _delta_rs(tmp_path, _PARTITIONS)


def test_a_table_created_again_at_the_same_place_is_read_as_the_new_table(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "offsets"
    for batch in range(3):
        _land(root, batch)
    assert DeltaOffsetStore(str(root), _GROUP).positions(_PARTITIONS[:2]) == {tp: 30 for tp in _PARTITIONS[:2]}
    shutil.rmtree(root)
    for batch in range(5):  # more versions than the old table had: no commit file tells the two apart
        _land(root, batch, _PARTITIONS[1:2])
    assert DeltaOffsetStore(str(root), _GROUP).positions(_PARTITIONS[:2]) == {_PARTITIONS[1]: 50}


def test_a_table_object_of_an_older_version_gets_that_versions_positions(tmp_path: pathlib.Path) -> None:
    _land(tmp_path, 0)
    _land(tmp_path, 1)
    store = DeltaOffsetStore(str(tmp_path), _GROUP)
    assert store.positions(_PARTITIONS[:2]) == {tp: 20 for tp in _PARTITIONS[:2]}
    older = DeltaTable(str(tmp_path), version=0)
    assert store._positions_in(older, _PARTITIONS[:2]) == {tp: 10 for tp in _PARTITIONS[:2]}
    assert store.positions(_PARTITIONS[:2]) == {tp: 20 for tp in _PARTITIONS[:2]}


def test_many_new_versions_or_expiring_transactions_are_asked_of_delta_rs(
        tmp_path: pathlib.Path, lookups: List[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app_transactions_module, "CATCH_UP_LIMIT", 2)
    _land(tmp_path, 0)
    store = DeltaOffsetStore(str(tmp_path), _GROUP)
    assert store.positions(_PARTITIONS[:4]) == {tp: 10 for tp in _PARTITIONS[:4]}
    for batch in (1, 2, 3):
        _other_writer(tmp_path, {tp: (batch + 1) * 10 for tp in _PARTITIONS[:4]})
    lookups.clear()
    assert store.positions(_PARTITIONS[:4]) == {tp: 40 for tp in _PARTITIONS[:4]}
    assert len(lookups) == 4  # three new versions, more than the limit: asked again
    DeltaTable(str(tmp_path)).alter.set_table_properties({app_transactions_module.RETENTION_PROPERTY: "interval 1 days"})
    _other_writer(tmp_path, {tp: 50 for tp in _PARTITIONS[:4]})
    for _ in range(2):
        lookups.clear()
        assert store.positions(_PARTITIONS[:4]) == {tp: 50 for tp in _PARTITIONS[:4]}
        assert len(lookups) == 4  # transactions that may expire: delta-rs answers every time


def test_an_unreadable_commit_file_makes_it_ask_delta_rs_again(tmp_path: pathlib.Path, lookups: List[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    _land(tmp_path, 0)
    store = DeltaOffsetStore(str(tmp_path), _GROUP)
    assert store.positions(_PARTITIONS[:4]) == {tp: 10 for tp in _PARTITIONS[:4]}
    _other_writer(tmp_path, {tp: 20 for tp in _PARTITIONS[:4]})

    def gone(fs: object, version: int) -> None:
        raise FileNotFoundError(version)

    monkeypatch.setattr(app_transactions_module, "commit_actions_of", gone)
    lookups.clear()
    assert store.positions(_PARTITIONS[:4]) == {tp: 20 for tp in _PARTITIONS[:4]}
    assert len(lookups) == 4


def test_storage_options_are_a_key_of_the_process_cache_without_their_secrets(tmp_path: pathlib.Path) -> None:
    """The cache is shared by location, storage options and table id; a secret of the options (an S3 key) is
    part of what tells two caches apart but never kept in the cache's keys or shown by their reprs."""
    _land(tmp_path, 0)
    table = DeltaTable(str(tmp_path))
    secret = "wJalrXUtnFEMI-not-a-real-secret"
    first = app_transactions_module.app_transactions(str(tmp_path), table, {"aws_secret_access_key": secret})
    assert app_transactions_module.app_transactions(str(tmp_path), table, {"aws_secret_access_key": secret}) is first
    assert app_transactions_module.app_transactions(str(tmp_path), table, {"aws_secret_access_key": "x"}) is not first
    assert secret not in repr(app_transactions_module._tables) and secret not in repr(first)
