"""The JSON Schema codec (issue 29): JSON Schema -> Arrow type, JSON payloads -> Arrow values.

Payloads are what Confluent's JSONSerializer writes after the magic byte and schema id: the
object's ``json.dumps`` text (UTF-8). Schemas are the draft-07 ones it registers by default and
the 2020-12 ones pydantic writes. Every decode runs both paths (Arrow's JSON reader, the
per-record one) and asserts they agree.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence

import pyarrow as pa
import pytest

from kafka_group.errors import ConfigError
from kafka_group.registry.codec import DecodedColumn, RegisteredSchema, SchemaReference
from kafka_group.registry.json_schema_codec import JsonSchemaCodec

ORDER = {
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
    "properties": {
        "id": {"type": "integer"}, "sku": {"type": "string"}, "price": {"type": "number"},
        "paid": {"type": "boolean"}, "placed_at": {"type": "string", "format": "date-time"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": ["string", "null"]}},
                    "additionalProperties": False},
        "note": {"oneOf": [{"type": "null"}, {"type": "string"}]},
        "extra": {"type": "object", "additionalProperties": {"type": "string"}},
        "either": {"oneOf": [{"type": "object", "properties": {"a": {"type": "integer"}}},
                             {"type": "object", "properties": {"b": {"type": "string"}}}]},
    },
    "required": ["id", "sku"],
}
#: ORDER without its JSON-text properties: a reader type Arrow's JSON reader produces (the fast path)
PLAIN_ORDER = {**ORDER, "properties": {k: v for k, v in ORDER["properties"].items()  # type: ignore[attr-defined]
                                       if k not in ("extra", "either")}}
ORDER_TYPE = pa.struct([
    ("id", pa.int64()), ("sku", pa.string()), ("price", pa.float64()), ("paid", pa.bool_()),
    ("placed_at", pa.timestamp("us", tz="UTC")), ("tags", pa.list_(pa.string())),
    ("address", pa.struct([("city", pa.string()), ("zip", pa.string())])), ("note", pa.string()),
    ("extra", pa.string()), ("either", pa.string()),
])


def schema(document: Dict[str, Any], schema_id: int = 1, references: Sequence[SchemaReference] = ()) -> RegisteredSchema:
    return RegisteredSchema("JSON", json.dumps(document), schema_id, tuple(references))


def serialize(value: Any) -> bytes:
    """The payload Confluent's JSONSerializer writes for ``value`` (after the 5 framing bytes)."""
    return json.dumps(value).encode("utf-8")


def decode_both(writer: RegisteredSchema, reader: RegisteredSchema, payloads: List[bytes]) -> DecodedColumn:
    """Decode with Arrow's reader and with the per-record path; they must agree."""
    fast = JsonSchemaCodec().decode(writer, reader, payloads)
    slow = JsonSchemaCodec(fast=False).decode(writer, reader, payloads)
    assert fast.values.to_pylist() == slow.values.to_pylist() and fast.errors == slow.errors
    assert fast.values.type == slow.values.type == JsonSchemaCodec().arrow_type(reader)
    return fast


def test_the_arrow_type_follows_the_mapping_table() -> None:
    assert JsonSchemaCodec().arrow_type(schema(ORDER)) == ORDER_TYPE


def test_2020_12_defs_refs_anyof_null_and_dates() -> None:
    """What pydantic's model_json_schema() writes: $defs, $ref, anyOf [T, null] for Optional."""
    document = {
        "$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "title": "Shipment",
        "$defs": {"Parcel": {"type": "object", "properties": {"kg": {"type": "number"}}, "required": ["kg"]}},
        "properties": {"due": {"type": "string", "format": "date"},
                       "parcel": {"anyOf": [{"$ref": "#/$defs/Parcel"}, {"type": "null"}], "default": None},
                       "count": {"type": ["integer", "number"]}},
    }
    reader = schema(document)
    assert JsonSchemaCodec().arrow_type(reader) == pa.struct([
        ("due", pa.date32()), ("parcel", pa.struct([("kg", pa.float64())])), ("count", pa.float64())])
    column = decode_both(reader, reader, [serialize({"due": "2026-11-26", "parcel": {"kg": 2}, "count": 3}),
                                          serialize({"due": "2026-13-01"})])
    assert [str(v["due"]) if v else None for v in column.values.to_pylist()] == ["2026-11-26", None]
    assert column.values.to_pylist()[0]["parcel"] == {"kg": 2.0}
    assert column.errors[1] == ("the record cannot be read with the reader schema: property 'due' '2026-13-01' "
                                "is not a date (YYYY-MM-DD)")


def test_payloads_decode_into_typed_values() -> None:
    order = {"id": 7, "sku": "A-1", "price": 10, "paid": True, "placed_at": "2026-11-26T10:00:00.5+01:00",
             "tags": ["x", "y"], "address": {"city": "Oslo", "zip": None, "unknown": 1},
             "note": "fragile", "extra": {"k": "v"}, "either": {"b": "two"}}
    column = decode_both(schema(ORDER), schema(ORDER), [serialize(order), serialize({"id": 8, "sku": "B"})])
    assert column.errors == (None, None)
    first, second = column.values.to_pylist()
    assert first["placed_at"].isoformat() == "2026-11-26T09:00:00.500000+00:00"
    assert {k: v for k, v in first.items() if k != "placed_at"} == {
        "id": 7, "sku": "A-1", "price": 10.0, "paid": True, "tags": ["x", "y"],
        "address": {"city": "Oslo", "zip": None}, "note": "fragile", "extra": '{"k":"v"}', "either": '{"b":"two"}'}
    assert second == {"id": 8, "sku": "B", "price": None, "paid": None, "placed_at": None, "tags": None,
                      "address": None, "note": None, "extra": None, "either": None}


def test_arrow_fast_path_reads_a_batch_with_one_bad_record_like_the_slow_path() -> None:
    """The bad record in the middle of 200 good ones is found by halving; the others keep their values."""
    payloads = [serialize({"id": i, "sku": f"s{i}", "placed_at": "2026-01-01T00:00:00Z"}) for i in range(200)]
    reader = schema({"type": "object", "properties": {"id": {"type": "integer"}, "sku": {"type": "string"},
                                                      "placed_at": {"type": "string", "format": "date-time"}}})
    payloads[123] = serialize({"id": "123", "sku": "s123"})
    column = decode_both(reader, reader, payloads)
    assert [v["id"] if v else None for v in column.values.to_pylist()] == [
        None if i == 123 else i for i in range(200)]
    assert column.errors[123] == ("the record cannot be read with the reader schema: property 'id' is a string, "
                                  "the schema says integer")
    assert sum(e is not None for e in column.errors) == 1


def test_evolution_reads_by_property_name() -> None:
    """A record of a newer writer (a property added, one removed) read with the older reader, and back."""
    v1 = {"type": "object", "properties": {"id": {"type": "integer"}, "sku": {"type": "string"}}}
    v2 = {"type": "object", "properties": {"id": {"type": "integer"}, "channel": {"type": "string"}}}
    new_as_old = decode_both(schema(v2, 2), schema(v1, 1), [serialize({"id": 1, "channel": "web"})])
    assert new_as_old.values.to_pylist() == [{"id": 1, "sku": None}] and new_as_old.errors == (None,)
    old_as_new = decode_both(schema(v1, 1), schema(v2, 2), [serialize({"id": 2, "sku": "A"})])
    assert old_as_new.values.to_pylist() == [{"id": 2, "channel": None}] and old_as_new.errors == (None,)


@pytest.mark.parametrize("payload, error", [
    (b"", "the payload is not JSON: Expecting value at character 0"),
    (b"{\"id\": 1", "the payload is not JSON: Expecting ',' delimiter at character 8"),
    (b"null", "the payload is JSON null"),
    (b"[1, 2]", "the record cannot be read with the reader schema: the value is an array, the schema says object"),
    (b"{\"id\": 1.5}", "the record cannot be read with the reader schema: property 'id' is a number, the schema says integer"),
    (b"{\"id\": 99999999999999999999}",
     "the record cannot be read with the reader schema: property 'id' 99999999999999999999 does not fit a 64-bit integer"),
    (b"{\"id\": true}", "the record cannot be read with the reader schema: property 'id' is a boolean, the schema says integer"),
    (b"{\"price\": 1e400}", "the record cannot be read with the reader schema: property 'price' does not fit a double"),
    (b"{\"sku\": 5}", "the record cannot be read with the reader schema: property 'sku' is a number, the schema says string"),
    (b"{\"tags\": [\"a\", 1]}",
     "the record cannot be read with the reader schema: property 'tags[1]' is a number, the schema says string"),
    (b"{\"placed_at\": \"yesterday\"}",
     "the record cannot be read with the reader schema: property 'placed_at' 'yesterday' is not an RFC 3339 date-time"),
    (b"{\"address\": {\"city\": {}}}",
     "the record cannot be read with the reader schema: property 'address.city' is an object, the schema says string"),
    (b"{\"id\": 1}{\"id\": 2}", "the payload is not JSON: Extra data at character 9"),
    (b"\xff{}", "the payload is not JSON: not UTF-8 (byte 0)"),
    (b"{\"sku\": \"a\\ud800\"}", "the record cannot be read with the reader schema: property 'sku' holds a lone "
                                "surrogate (character 1), which is not Unicode text"),
    (b"[" * 100 + b"]" * 100, "the payload is not JSON: nested more than 64 levels deep"),
])
def test_a_bad_payload_is_an_error_with_its_reason_and_never_a_value(payload: bytes, error: str) -> None:
    good = serialize({"id": 1, "sku": "a"})
    column = decode_both(schema(PLAIN_ORDER), schema(PLAIN_ORDER), [good] * 20 + [payload] + [good] * 20)
    assert column.errors[20] == error
    assert column.values.to_pylist()[20] is None
    assert column.errors.count(None) == 40 and column.values.to_pylist()[0]["sku"] == "a"


def test_validation_against_the_writer_schema_is_optional() -> None:
    strict = {"type": "object", "properties": {"id": {"type": "integer", "minimum": 0}}, "required": ["id"]}
    payloads = [serialize({"id": 1}), serialize({"id": -1}), serialize({})]
    assert JsonSchemaCodec().decode(schema(strict), schema(strict), payloads).errors == (None, None, None)
    checked = JsonSchemaCodec(validate=True).decode(schema(strict), schema(strict), payloads)
    assert checked.errors == (None, "the record does not conform to the writer's JSON schema: at '$.id': -1 is "
                                    "less than the minimum of 0",
                              "the record does not conform to the writer's JSON schema: at '$': 'id' is a "
                              "required property")
    assert checked.values.to_pylist() == [{"id": 1}, None, None]


def test_references_resolve_by_name() -> None:
    address = {"type": "object", "properties": {"city": {"type": "string"}}}
    reference = SchemaReference("address.json", "address-value", 1, schema(address, 20))
    customer = schema({"type": "object", "properties": {"name": {"type": "string"}, "home": {"$ref": "address.json"}}},
                      21, [reference])
    assert JsonSchemaCodec().arrow_type(customer) == pa.struct([("name", pa.string()),
                                                                ("home", pa.struct([("city", pa.string())]))])
    column = decode_both(customer, customer, [serialize({"name": "n", "home": {"city": "c"}})])
    assert column.values.to_pylist() == [{"name": "n", "home": {"city": "c"}}]


def test_a_recursive_schema_is_a_config_error_naming_the_property() -> None:
    tree = {"type": "object", "properties": {"root": {"$ref": "#/definitions/node"}},
            "definitions": {"node": {"type": "object", "properties": {
                "value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/definitions/node"}}}}}}
    with pytest.raises(ConfigError, match=r"property 'root\.children\[\]' is recursive"):
        JsonSchemaCodec().arrow_type(schema(tree))


def test_an_unresolvable_ref_and_a_schema_that_is_not_json_are_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"property 'a' refers to 'other.json', which is neither in the schema"):
        JsonSchemaCodec().arrow_type(schema({"type": "object", "properties": {"a": {"$ref": "other.json"}}}))
    with pytest.raises(ConfigError, match=r"the JSON schema \(id 3\) is not JSON"):
        JsonSchemaCodec().arrow_type(RegisteredSchema("JSON", "{", 3))


def test_validation_resolves_references_by_name_and_fetches_nothing() -> None:
    address = {"type": "object", "properties": {"city": {"type": "string"}}}
    reference = SchemaReference("address.json", "address-value", 1, schema(address, 30))
    reader = schema({"type": "object", "properties": {"home": {"$ref": "address.json"}}}, 31, [reference])
    writer = schema({"$id": "https://schemas.example.invalid/customer.json", "type": "object",
                     "properties": {"home": {"$ref": "address.json"}}}, 32, [reference])
    column = JsonSchemaCodec(validate=True).decode(writer, reader, [serialize({"home": {"city": "c"}}),
                                                                    serialize({"home": {"city": 5}})])
    assert column.errors == (None, "the record does not conform to the writer's JSON schema: "
                                   "at '$.home.city': 5 is not of type 'string'")
    elsewhere = schema({"$id": "https://schemas.example.invalid/customer.json", "type": "object",
                        "properties": {"x": {"$ref": "https://schemas.example.invalid/other.json"}}}, 33)
    refused = JsonSchemaCodec(validate=True).decode(elsewhere, reader, [serialize({"x": 1})])
    assert refused.errors == ("the JSON schema (id 33) refers to 'https://schemas.example.invalid/other.json', "
                              "which is not one of its references",)


def test_the_fast_path_reads_nested_objects_ignoring_unknown_properties(monkeypatch: pytest.MonkeyPatch) -> None:
    import kafka_group.registry.json_schema_codec as codec_module

    read: List[bool] = []
    real = codec_module._read_lines

    def spy(chunk: Sequence[bytes], arrow_schema: pa.Schema) -> Optional[pa.Table]:
        table = real(chunk, arrow_schema)
        read.append(table is not None)
        return table

    monkeypatch.setattr(codec_module, "_read_lines", spy)
    document = {"type": "object", "properties": {
        "a": {"type": "object", "properties": {"b": {"type": "integer"}}},
        "l": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "string"}}}},
        "t": {"type": "string", "format": "date-time"}}}
    values = [{"a": {"b": 1, "zz": [1, {"q": 2}]}, "l": [{"x": "1", "y": 2}, {}], "t": "2026-01-01T00:00:00.123+05:30",
               "other": {"deep": [1]}}, {"a": None, "l": [], "t": None}, {}]
    column = decode_both(schema(document), schema(document), [serialize(v) for v in values])
    assert read == [True] and column.errors == (None, None, None)
    first, *rest = column.values.to_pylist()
    assert (first["a"], first["l"], first["t"].isoformat()) == ({"b": 1}, [{"x": "1"}, {"x": None}],
                                                                "2025-12-31T18:30:00.123000+00:00")
    assert rest == [{"a": None, "l": [], "t": None}, {"a": None, "l": None, "t": None}]


def test_a_used_codec_pickles_with_its_options_and_decodes_after() -> None:
    import pickle

    strict = schema({"type": "object", "properties": {"id": {"type": "integer", "minimum": 0}}})
    codec = JsonSchemaCodec(validate=True)
    codec.decode(strict, strict, [serialize({"id": 1})])
    copy = pickle.loads(pickle.dumps(codec))
    assert copy.decode(strict, strict, [serialize({"id": -1})]).errors == (
        "the record does not conform to the writer's JSON schema: at '$.id': -1 is less than the minimum of 0",)


#: Number literals whose float is not the literal (digits lost, beyond a double, -0, exponents).
EXACT_NUMBERS = ["12345678901234567.89", "0.1000000000000000055511151231257827", "1e400", "-0.0", "1E+2", "2.50",
                 "123456789012345678901234567890", "-1.5e-400", "1.0"]


@pytest.mark.parametrize("validate", [False, True])
def test_json_text_positions_keep_each_number_as_written(validate: bool) -> None:
    """Issue 33 finding 3: the text of a JSON-text position is the payload's own text of each number."""
    document = {"type": "object", "properties": {"id": {"type": "integer"}, "any": {}, "price": {"type": "number"}}}
    payloads = [('{"id": 1, "any": {"n": %s, "list": [%s, "x"]}, "price": 2.5}' % (n, n)).encode()
                for n in EXACT_NUMBERS]
    codec = JsonSchemaCodec(validate=validate)
    column = codec.decode(schema(document), schema(document), payloads)
    assert column.errors == (None,) * len(payloads)
    texts = [row["any"] for row in column.values.to_pylist()]
    assert texts == ['{"n":%s,"list":[%s,"x"]}' % (n, n) for n in EXACT_NUMBERS]
    assert [row["price"] for row in column.values.to_pylist()] == [2.5] * len(payloads)
