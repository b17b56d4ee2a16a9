"""NULLs in the columns a Delta table declares NOT NULL are refused before the commit (issue 26, item 3).

No process: tables created with deltalake, files written with the sink's writer. Delta commits such
files (delta-rs does not look into them), and then delta-rs cannot read the table.
"""

from __future__ import annotations

import json
import pathlib
from typing import List

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from kafka_group.delta.files.commit_files import DataFile
from kafka_group.delta.files.parquet_writer import write_partitioned
from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
from kafka_group.delta.rules.not_null import ELEMENT, MAP_VALUE, count_nulls, describe_path, not_null_paths
from kafka_group.delta.storage.table_location import table_filesystem
from kafka_group.errors import NotNullViolationError, SchemaMismatchError
from kafka_group.offsets import OffsetRange, TopicPartition

_INNER = pa.struct([pa.field("id", pa.string())])  # as Spark's batches have it: nullable
_TABLE_SCHEMA = pa.schema([
    pa.field("key", pa.string(), nullable=False),
    pa.field("payload", pa.struct([pa.field("id", pa.string(), nullable=False)])),
    pa.field("offset", pa.int64()),
])


def test_not_null_paths_and_counts_respect_enclosing_nulls() -> None:
    schema = {"type": "struct", "fields": [
        {"name": "key", "type": "string", "nullable": False, "metadata": {}},
        {"name": "payload", "type": {"type": "struct", "fields": [
            {"name": "id", "type": "string", "nullable": False, "metadata": {}}]}, "nullable": True, "metadata": {}},
        {"name": "tags", "type": {"type": "array", "elementType": "string", "containsNull": False},
         "nullable": True, "metadata": {}},
        {"name": "attrs", "type": {"type": "map", "keyType": "string", "valueType": "long",
                                   "valueContainsNull": False}, "nullable": True, "metadata": {}},
    ]}
    paths = not_null_paths(schema)
    assert paths == [("key",), ("payload", "id"), ("tags", ELEMENT), ("attrs", MAP_VALUE)]
    assert [describe_path(p) for p in paths] == ["key", "payload.id", "tags[]", "attrs{}"]
    data = pa.table({
        "key": pa.array(["a", None, "c"]),
        # A NULL payload holds no id: only the second row's NULL id counts.
        "payload": pa.array([None, {"id": None}, {"id": "x"}], pa.struct([pa.field("id", pa.string())])),
        "tags": pa.array([["a", None], None, []], pa.list_(pa.string())),
        "attrs": pa.array([[("k", 1)], [("k", None)], None], pa.map_(pa.string(), pa.int64())),
    })
    assert [count_nulls(data.slice(0, 3), p) for p in paths] == [1, 1, 1, 1]
    assert [count_nulls(data.slice(2, 1), p) for p in paths] == [0, 0, 0, 0]
    assert count_nulls(data, ("missing",)) is None


def _store(root: pathlib.Path) -> DeltaOffsetStore:
    DeltaTable.create(str(root), _TABLE_SCHEMA)
    return DeltaOffsetStore(str(root), "g")


def _write(root: pathlib.Path, store: DeltaOffsetStore, rows: pa.Table) -> List[DataFile]:
    schema = pa.schema([("key", pa.string()), ("payload", _INNER), ("offset", pa.int64())])  # all nullable
    written = write_partitioned([rows.cast(schema).to_batches()[0]], filesystem=table_filesystem(str(root)),
                                schema=schema, batch_id=0, not_null=store.not_null_columns())
    return [DataFile(f.path, f.size, f.num_records, f.stats, f.partition_values, f.null_counts) for f in written]


def test_a_batch_with_nulls_in_a_not_null_column_is_refused_and_its_files_deleted(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "table"
    store = _store(root)
    rows = pa.table({"key": ["a", None], "payload": pa.array([{"id": "1"}, {"id": None}], _INNER),
                     "offset": pa.array([0, 1], pa.int64())})
    files = _write(root, store, rows)
    ranges = [OffsetRange(TopicPartition("t", 0), 0, 2)]
    with pytest.raises(NotNullViolationError) as refused:
        store.commit(files, rows.schema, ranges, metadata={"kafkaGroup.batchId": 7})
    message = str(refused.value)
    assert isinstance(refused.value, SchemaMismatchError)
    assert "batch 7" in message and str(root) in message and "DROP NOT NULL" in message, message
    assert "1 row(s) with NULL in column 'key'" in message and "1 row(s) with NULL in column 'payload.id'" in message
    assert DeltaTable(str(root)).version() == 0 and store.positions([TopicPartition("t", 0)]) == {}
    assert not list((root / "data").iterdir()), "the refused files are still there"

    fixed = _write(root, store, rows.set_column(0, "key", pa.array(["a", "b"])).set_column(
        1, "payload", pa.array([{"id": "1"}, {"id": "2"}], _INNER)))
    store.commit(fixed, rows.schema, ranges)
    assert DeltaTable(str(root)).to_pyarrow_dataset().to_table().num_rows == 2


def test_files_that_do_not_say_are_checked_by_their_null_count_statistic_or_refused(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "table"
    store = _store(root)
    rows = pa.table({"key": ["a", None], "payload": pa.array([{"id": "1"}, {"id": "2"}], _INNER),
                     "offset": pa.array([0, 1], pa.int64())})
    [f] = _write(root, store, rows)
    ranges = [OffsetRange(TopicPartition("t", 0), 0, 2)]
    stats_only = DataFile(f.path, f.size, f.num_records, f.stats)  # no counts: key's nullCount tells
    with pytest.raises(NotNullViolationError, match="1 row\\(s\\) with NULL in column 'key'"):
        store.commit([stats_only], rows.schema, ranges)
    assert json.loads(f.stats or "{}")["nullCount"]["key"] == 1
    [g] = _write(root, store, rows.set_column(0, "key", pa.array(["a", "b"])))
    nothing = DataFile(g.path, g.size, g.num_records)  # nothing tells about payload.id: refused
    with pytest.raises(NotNullViolationError, match="nothing tells whether"):
        store.commit([nothing], rows.schema, ranges)
    assert DeltaTable(str(root)).version() == 0
