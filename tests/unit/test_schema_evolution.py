"""merge_schemas: the schema-evolution rule of DeltaSink(merge_schema=...) on Delta schemas (no process, no table)."""

from __future__ import annotations

import json
from typing import Any, Dict, List

import pyarrow as pa
from deltalake.schema import Schema

from kafka_group.delta.rules.schema_evolution import merge_schemas, merged_columns


def delta(*fields: Any) -> Dict[str, Any]:
    """The Delta JSON of an Arrow schema."""
    result: Dict[str, Any] = json.loads(Schema.from_arrow(pa.schema(list(fields))).to_json())
    return result


def names(schema: Dict[str, Any]) -> List[str]:
    return [f["name"] for f in schema["fields"]]


TABLE = delta(("value", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()))
STRUCT = pa.struct([("id", pa.int64()), ("name", pa.string())])


def test_the_same_columns_fit_and_change_nothing_with_or_without_merge() -> None:
    batch = delta(pa.field("value", pa.large_string(), nullable=False), ("partition", pa.int32()), ("offset", pa.int64()))
    for merge in (False, True):
        result = merge_schemas(TABLE, batch, merge_schema=merge)
        assert (result.problems, result.added, result.changes_table, result.schema) == ([], [], False, TABLE)


def test_a_new_column_is_refused_without_merge_naming_the_option() -> None:
    batch = delta(("value", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()), ("length", pa.int32()))
    [problem] = merge_schemas(TABLE, batch, merge_schema=False).problems
    assert "'length'" in problem and "DeltaSink(..., merge_schema=True)" in problem


def test_a_new_column_is_added_nullable_after_the_tables_columns_with_merge() -> None:
    batch = delta(pa.field("length", pa.int32(), nullable=False), ("value", pa.string()), ("partition", pa.int32()),
                  ("offset", pa.int64()))
    result = merge_schemas(TABLE, batch, merge_schema=True)
    assert result.problems == [] and result.added == ["length"] and result.changes_table
    assert names(result.schema) == ["value", "partition", "offset", "length"]
    assert result.schema["fields"][-1] == {"name": "length", "type": "integer", "nullable": True, "metadata": {}}
    assert merged_columns(TABLE, result.schema) == [result.schema["fields"][-1]]


def test_a_missing_column_is_refused_without_merge_and_filled_with_null_with_it() -> None:
    batch = delta(("partition", pa.int32()), ("offset", pa.int64()))
    [problem] = merge_schemas(TABLE, batch, merge_schema=False).problems
    assert "'value'" in problem and "missing" in problem and "merge_schema=True" in problem
    result = merge_schemas(TABLE, batch, merge_schema=True)
    assert (result.problems, result.filled_with_null, result.changes_table) == ([], ["value"], False)
    assert result.schema == TABLE


def test_a_not_null_column_of_the_table_cannot_be_filled_with_null() -> None:
    table = delta(pa.field("id", pa.int64(), nullable=False), ("value", pa.string()))
    [problem] = merge_schemas(table, delta(("value", pa.string())), merge_schema=True).problems
    assert "'id'" in problem and "NOT NULL" in problem


def test_a_type_change_is_refused_even_with_merge_naming_both_types_and_the_fix() -> None:
    batch = delta(("value", pa.string()), ("partition", pa.int32()), ("offset", pa.string()))
    for merge in (False, True):
        [problem] = merge_schemas(TABLE, batch, merge_schema=merge).problems
        assert "'offset' is string in the batch but long in the table" in problem
        assert "CAST(offset AS BIGINT)" in problem and "typeWidening" in problem


def test_widening_is_a_type_change_too() -> None:
    batch = delta(("value", pa.string()), ("partition", pa.int64()), ("offset", pa.int64()))
    [problem] = merge_schemas(TABLE, batch, merge_schema=True).problems
    assert "'partition' is long in the batch but integer in the table" in problem


def test_a_field_added_inside_a_struct_is_merged_into_that_struct() -> None:
    table = delta(("key", pa.string()), ("order", STRUCT))
    wider = pa.struct([("id", pa.int64()), ("name", pa.string()), ("price", pa.float64())])
    batch = delta(("key", pa.string()), ("order", wider))
    [problem] = merge_schemas(table, batch, merge_schema=False).problems
    assert "'order.price' is not in the table" in problem
    result = merge_schemas(table, batch, merge_schema=True)
    assert result.problems == [] and result.added == ["order.price"]
    order = result.schema["fields"][1]
    assert [f["name"] for f in order["type"]["fields"]] == ["id", "name", "price"]
    assert merged_columns(table, result.schema) == [order]


def test_struct_fields_in_arrays_and_maps_are_merged_and_checked() -> None:
    table = delta(("items", pa.list_(STRUCT)), ("by_key", pa.map_(pa.string(), STRUCT)))
    wider = pa.struct([("id", pa.int64()), ("name", pa.string()), ("qty", pa.int32())])
    result = merge_schemas(table, delta(("items", pa.list_(wider)), ("by_key", pa.map_(pa.string(), wider))),
                           merge_schema=True)
    assert result.problems == [] and result.added == ["items.element.qty", "by_key.value.qty"]
    retyped = pa.struct([("id", pa.string()), ("name", pa.string())])
    [problem] = merge_schemas(table, delta(("items", pa.list_(retyped)), ("by_key", pa.map_(pa.string(), STRUCT))),
                              merge_schema=True).problems
    assert "'items.element.id' is string in the batch but long in the table" in problem


def test_a_struct_replacing_a_primitive_is_a_type_change() -> None:
    table = delta(("order", pa.string()))
    [problem] = merge_schemas(table, delta(("order", STRUCT)), merge_schema=True).problems
    assert "'order' is {\"type\":\"struct\"" in problem and "but string in the table" in problem


def test_a_missing_struct_field_is_filled_with_null_with_merge() -> None:
    table = delta(("order", STRUCT))
    result = merge_schemas(table, delta(("order", pa.struct([("id", pa.int64())]))), merge_schema=True)
    assert (result.problems, result.filled_with_null, result.changes_table) == ([], ["order.name"], False)


def test_a_column_differing_only_in_case_is_refused_not_matched_nor_added() -> None:
    batch = delta(("VALUE", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()))
    for merge in (False, True):
        result = merge_schemas(TABLE, batch, merge_schema=merge)
        [problem] = result.problems
        assert "'VALUE'" in problem and "'value'" in problem and "only in case" in problem
        assert result.added == []


def test_two_batch_columns_differing_only_in_case_are_refused() -> None:
    batch = delta(("value", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()), ("Extra", pa.int32()))
    batch["fields"].append({**batch["fields"][-1], "name": "extra"})  # deltalake's Schema refuses to build it
    [problem] = merge_schemas(TABLE, batch, merge_schema=True).problems
    assert "'Extra' and 'extra'" in problem


def test_nullability_and_field_metadata_of_existing_columns_are_kept_and_not_compared() -> None:
    table = json.loads(json.dumps(TABLE))
    table["fields"][0]["metadata"] = {"comment": "the record's value"}
    table["fields"][0]["nullable"] = False
    batch = delta(("value", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()), ("more", pa.bool_()))
    result = merge_schemas(table, batch, merge_schema=True)
    assert result.problems == []
    assert result.schema["fields"][0] == table["fields"][0]
    assert merged_columns(table, result.schema) == [result.schema["fields"][-1]]


def test_an_added_nested_column_is_nullable_at_every_depth() -> None:
    inner = pa.struct([pa.field("id", pa.int64(), nullable=False)])
    batch = delta(("value", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
                  pa.field("tags", pa.list_(pa.field("item", inner, nullable=False)), nullable=False))
    added = merge_schemas(TABLE, batch, merge_schema=True).schema["fields"][-1]
    assert added["nullable"] and added["type"]["containsNull"]
    assert added["type"]["elementType"]["fields"][0]["nullable"]
