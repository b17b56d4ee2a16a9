"""Recorded starts in the offsets table (issue 33, finding 4): positioning records where it started a
partition the table had not seen, as its position and the version of ``...:<partition>:start``.

No process: real Delta tables written with deltalake.
"""

from __future__ import annotations

import os
import pathlib

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

from kafka_group.delta.files.commit_files import DataFile
from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
from kafka_group.delta.offsets.transaction_ids import partitions_transaction_id, start_transaction_id, transaction_id
from kafka_group.offsets import OffsetRange, TopicPartition

_ROWS = pa.table({"value": pa.array(["a"]), "offset": pa.array([0], pa.int64())})
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def _land(root: pathlib.Path, tp: TopicPartition, start: int, until: int) -> None:
    (root / "data").mkdir(parents=True, exist_ok=True)
    name = f"{tp.partition}-{until}.parquet"
    pq.write_table(_ROWS, root / "data" / name)
    DeltaOffsetStore(str(root), "g").commit([DataFile(f"data/{name}", os.path.getsize(root / "data" / name), 1)],
                                            _ROWS.schema, [OffsetRange(tp, start, until)])


def test_no_table_yet_records_nothing(tmp_path: pathlib.Path) -> None:
    store = DeltaOffsetStore(str(tmp_path / "table"), "g")
    assert store.hold_starts({T0: 5}, reason="test") == frozenset()
    assert not (tmp_path / "table" / "_delta_log").exists()


def test_a_start_is_recorded_as_position_and_start_and_never_over_a_position(tmp_path: pathlib.Path) -> None:
    table = tmp_path / "table"
    _land(table, T0, 0, 10)
    store = DeltaOffsetStore(str(table), "g")
    version = DeltaTable(str(table)).version()
    assert store.hold_starts({T0: 3, T1: 7}, reason="test") == {T0, T1}
    dt = DeltaTable(str(table))
    assert dt.version() == version + 1 and len(dt.file_uris()) == 1  # one commit, no data
    assert dt.transaction_version(transaction_id("g", T1)) == 7
    assert dt.transaction_version(start_transaction_id("g", T1)) == 7
    assert dt.transaction_version(start_transaction_id("g", T0)) is None  # t-0 had landed: kept at 10
    assert store.positions([T0, T1]) == {T0: 10, T1: 7}
    assert store.starts([T0, T1]) == {T1: 7}
    assert store.hold_starts({T1: 9}, reason="test") == {T1}  # seen now: nothing moves, nothing committed
    assert DeltaTable(str(table)).version() == version + 1
    _land(table, T1, 7, 12)  # a batch lands from the recorded start: its position moves past it
    assert store.positions([T1]) == {T1: 12} and store.starts([T1]) == {T1: 7}


def test_a_start_is_never_committed_over_a_position_landed_after_its_check(tmp_path: pathlib.Path) -> None:
    """Review of issue 33's fix, finding 2: hold_starts checked 'unseen' on the store's shared table object and
    committed on it after other threads (the poll thread's revoke, the SIGTERM handler's close) had refreshed it
    in place: the commit then landed on a version holding a landed position and moved it back."""
    table = tmp_path / "table"
    _land(table, T0, 0, 10)
    store = DeltaOffsetStore(str(table), "g")
    checks: list[int] = []

    def another_thread_meanwhile() -> None:  # between hold_starts' check and its commit (it probes the store there)
        if not checks:
            _land(table, T1, 7, 20)  # another member lands t-1
            store.positions([T1])  # another thread of this process refreshes the shared table object
        checks.append(1)

    store.check_conditional_put = another_thread_meanwhile  # type: ignore[method-assign]
    assert store.hold_starts({T1: 7}, reason="test") == {T1}
    assert DeltaTable(str(table)).transaction_version(transaction_id("g", T1)) == 20  # the landed position
    assert store.positions([T1]) == {T1: 20} and store.starts([T1]) == {}


def test_a_topics_partition_count_is_recorded_once_and_never_changed(tmp_path: pathlib.Path) -> None:
    """Review of issue 33's fix, finding 1: the count tells a partition added since from one of a new query."""
    table = tmp_path / "table"
    u0, u1 = TopicPartition("u", 0), TopicPartition("u", 1)
    _land(table, u0, 0, 10)
    store = DeltaOffsetStore(str(table), "g")
    assert store.hold_starts({T0: 3}, reason="test", counts={"t": 2}) == {T0}
    assert DeltaTable(str(table)).transaction_version(partitions_transaction_id("g", "t")) == 2
    assert store.positions([T0]) == {T0: 3} and store.partition_counts(["t", "u"]) == {"t": 2}  # as of that read
    version = DeltaTable(str(table)).version()
    assert store.hold_starts({T1: 4}, reason="test", counts={"t": 3}) == {T1}  # recorded already: kept
    assert DeltaTable(str(table)).version() == version + 1
    assert store.positions([T1]) == {T1: 4} and store.partition_counts(["t"]) == {"t": 2}
    # Every start landed before it was recorded (the first batch created the table): the count alone is recorded.
    assert store.hold_starts({u0: 0}, reason="test", counts={"u": 2}) == {u0}
    assert DeltaTable(str(table)).version() == version + 2
    assert store.positions([u0, u1]) == {u0: 10} and store.partition_counts(["u"]) == {"u": 2}
    assert store.hold_starts({u0: 0}, reason="test", counts={"u": 2}) == {u0}  # nothing left to record
    assert DeltaTable(str(table)).version() == version + 2
