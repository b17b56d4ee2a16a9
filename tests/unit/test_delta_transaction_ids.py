"""Delta transaction ids of the offsets table name one group, topic and partition each (issue 26, item 6).

No process: tables written with deltalake. The ids were ``kafka-group:<group>:<topic>:<partition>`` and
the group marker ``kafka-group:<group>``; a group id may hold ``:``, so the marker of group
``x:orders:0`` was group ``x``'s position of ``orders-0``: the group check took the wrong table and the
first commit moved group ``x``'s ``orders-0`` back to 1.
"""

from __future__ import annotations

import os
import pathlib
from typing import Dict, List

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from deltalake.transaction import CommitProperties, Transaction

from kafka_group.delta.files.commit_files import DataFile
from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
from kafka_group.errors import OffsetStoreError
from kafka_group.offsets import OffsetRange, TopicPartition

_ROWS = pa.table({"value": pa.array(["a"]), "offset": pa.array([0], pa.int64())})
_ORDERS_0 = TopicPartition("orders", 0)


def _file(root: pathlib.Path, name: str) -> DataFile:
    (root / "data").mkdir(parents=True, exist_ok=True)
    pq.write_table(_ROWS, root / "data" / name)
    return DataFile(f"data/{name}", os.path.getsize(root / "data" / name), _ROWS.num_rows)


def _land(root: pathlib.Path, group: str, tp: TopicPartition, start: int, until: int) -> int:
    store = DeltaOffsetStore(str(root), group)
    return store.commit([_file(root, f"{group.replace(':', '_')}-{until}.parquet")], _ROWS.schema,
                        [OffsetRange(tp, start, until)])


def test_a_group_whose_id_holds_colons_neither_takes_nor_moves_another_groups_positions(tmp_path: pathlib.Path) -> None:
    table = tmp_path / "table"
    _land(table, "x", _ORDERS_0, 0, 100)
    assert DeltaOffsetStore(str(table), "x").positions([_ORDERS_0]) == {_ORDERS_0: 100}

    # Group "x:orders:0" on group x's table: refused like any other group's table.
    refused = ""
    try:
        _land(table, "x:orders:0", TopicPartition("other", 0), 0, 5)
    except OffsetStoreError as exc:
        refused = str(exc)
    assert DeltaOffsetStore(str(table), "x").positions([_ORDERS_0]) == {_ORDERS_0: 100}
    assert "holds the offsets of consumer group 'x'" in refused


def _legacy_commit(root: pathlib.Path, group: str, positions: Dict[TopicPartition, int], name: str) -> None:
    """A commit as the connector wrote it before issue 26: ``kafka-group:<group>:<topic>:<partition>``
    positions, the ``kafka-group:<group>`` marker and the group in the commit's metadata."""
    from deltalake.schema import Schema
    from deltalake.transaction import AddAction, create_table_with_add_actions

    f = _file(root, name)
    txns: List[Transaction] = [Transaction(f"kafka-group:{group}:{tp.topic}:{tp.partition}", pos)
                               for tp, pos in positions.items()]
    txns.append(Transaction(f"kafka-group:{group}", 1))
    properties = CommitProperties(app_transactions=txns, custom_metadata={"kafkaGroup.groupId": group})
    add = AddAction(f.path, f.size, {}, 0, True, '{"numRecords":1}')
    if not (root / "_delta_log").exists():
        create_table_with_add_actions(str(root), Schema.from_arrow(_ROWS.schema), [add], mode="append",
                                      commit_properties=properties)
    else:
        dt = DeltaTable(str(root))
        dt.create_write_transaction([add], mode="append", schema=dt.schema(), commit_properties=properties)


def test_a_table_written_with_the_old_ids_is_read_and_kept_moving(tmp_path: pathlib.Path) -> None:
    table = tmp_path / "table"
    orders_1 = TopicPartition("orders", 1)
    _legacy_commit(table, "x:y", {_ORDERS_0: 40, orders_1: 7}, "old.parquet")

    store = DeltaOffsetStore(str(table), "x:y")
    assert store.positions([_ORDERS_0, orders_1]) == {_ORDERS_0: 40, orders_1: 7}
    assert store.check([OffsetRange(_ORDERS_0, 0, 50)]).conflicts == {_ORDERS_0: 40}
    # A batch planned from the old position commits, and the table moves on from there.
    _land(table, "x:y", _ORDERS_0, 40, 60)
    assert DeltaOffsetStore(str(table), "x:y").positions([_ORDERS_0, orders_1]) == {_ORDERS_0: 60, orders_1: 7}
    assert DeltaOffsetStore(str(table), "x:y").check([OffsetRange(orders_1, 7, 9)]).committable

    # The old table stays another group's: refused for group "x" (whose old position id of
    # topic "y" partition ... would not match anyway) and for any other group.
    with pytest.raises(OffsetStoreError, match="consumer group 'x:y'"):
        DeltaOffsetStore(str(table), "x")


def test_another_groups_table_is_refused_however_long_ago_that_group_committed(tmp_path: pathlib.Path) -> None:
    table = tmp_path / "table"
    _land(table, "a", _ORDERS_0, 0, 10)
    dt = DeltaTable(str(table))
    for _ in range(60):  # commits of other writers (delta-spark maintenance, say) with no group in them
        dt.create_write_transaction([], mode="append", schema=dt.schema())
        dt.update_incremental()
    with pytest.raises(OffsetStoreError, match="consumer group 'a'"):
        DeltaOffsetStore(str(table), "b")
