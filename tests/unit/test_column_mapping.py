"""Column mapping (issue 35): the sink's files carry the physical names and field ids of a column-mapped
table, nested fields too, and their statistics are keyed by physical names; NOT NULL counts stay logical."""

from __future__ import annotations

import json
import pathlib
from typing import Any, Dict

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kafka_group.delta.files.parquet_writer import write_partitioned
from kafka_group.delta.rules.column_mapping import column_mapping_of, refuse_new_columns
from kafka_group.delta.storage.table_location import table_filesystem
from kafka_group.errors import UnsupportedTableFeatureError


def _field(name: str, kind: Any, number: int) -> Dict[str, Any]:
    return {"name": name, "type": kind, "nullable": True,
            "metadata": {"delta.columnMapping.id": number, "delta.columnMapping.physicalName": f"col-{number}"}}


SCHEMA = {"type": "struct", "fields": [
    _field("payload", "string", 1),
    _field("meta", {"type": "struct", "fields": [_field("p", "integer", 3), _field("o", "long", 4)]}, 2),
    _field("tags", {"type": "array", "elementType": {"type": "struct", "fields": [_field("k", "string", 6)]},
                    "containsNull": True}, 5),
    _field("partition", "integer", 7),
]}


def test_files_are_written_under_physical_names_with_field_ids_and_physical_statistics(tmp_path: pathlib.Path) -> None:
    mapping = column_mapping_of(SCHEMA, {"delta.columnMapping.mode": "id"}, "/t")
    assert mapping is not None and mapping.physical_name("partition") == "col-7"
    batch = pa.RecordBatch.from_pydict({
        "payload": ["a", None, "c"], "meta": [{"p": 0, "o": 1}, None, {"p": 1, "o": 3}],
        "tags": [[{"k": "x"}], None, []], "partition": pa.array([0, 0, 1], pa.int32())})
    root = tmp_path / "t"
    files = write_partitioned([batch], filesystem=table_filesystem(str(root)), schema=batch.schema, batch_id=1,
                              partition_by=["partition"], not_null=[("payload",)], mapping=mapping)
    assert [f.partition_values for f in files] == [{"partition": "0"}, {"partition": "1"}]  # logical until the commit
    assert mapping.physical_partition_values(files[0].partition_values) == {"col-7": "0"}
    assert [f.null_counts for f in files] == [{("payload",): 1}, {("payload",): 0}]
    stats = json.loads(files[0].stats)
    assert stats["minValues"] == {"col-1": "a"} and stats["nullCount"] == {"col-1": 1}, stats
    parquet = pq.ParquetFile(root / files[0].path)
    text = str(parquet.schema)
    for physical, number in [("col-1", 1), ("col-2", 2), ("col-3", 3), ("col-4", 4), ("col-5", 5), ("col-6", 6)]:
        assert f"field_id={number} {physical}" in text, text
    assert "payload" not in text and "meta" not in text and "col-7" not in text, text
    assert parquet.read().to_pylist()[0] == {"col-1": "a", "col-2": {"col-3": 0, "col-4": 1},
                                              "col-5": [{"col-6": "x"}]}


def test_a_table_without_column_mapping_has_none_and_a_broken_one_is_refused() -> None:
    assert column_mapping_of(SCHEMA, {}, "/t") is None
    assert column_mapping_of(SCHEMA, {"delta.columnMapping.mode": "none"}, "/t") is None
    with pytest.raises(UnsupportedTableFeatureError, match="mode='other'"):
        column_mapping_of(SCHEMA, {"delta.columnMapping.mode": "other"}, "/t")
    broken = {"type": "struct", "fields": [{"name": "a", "type": "string", "nullable": True, "metadata": {}}]}
    with pytest.raises(UnsupportedTableFeatureError, match="column 'a' of column-mapped Delta table '/t'"):
        column_mapping_of(broken, {"delta.columnMapping.mode": "name"}, "/t")


def test_new_columns_on_a_column_mapped_table_are_refused() -> None:
    mapping = column_mapping_of(SCHEMA, {"delta.columnMapping.mode": "name"}, "/t")
    refuse_new_columns("/t", None, ["extra"])
    refuse_new_columns("/t", mapping, [])
    with pytest.raises(UnsupportedTableFeatureError, match="ALTER TABLE ... ADD COLUMNS"):
        refuse_new_columns("/t", mapping, ["extra"])
