"""The Avro codec and the framing (issue 29): pure functions, payloads written by fastavro."""

from __future__ import annotations

import datetime
import decimal
import io
import json
from typing import Any, Dict, List

import pyarrow as pa
import pytest

fastavro = pytest.importorskip("fastavro")

from kafka_group.errors import ConfigError  # noqa: E402
from kafka_group.registry.avro_codec import AvroCodec  # noqa: E402
from kafka_group.registry.codec import RegisteredSchema  # noqa: E402
from kafka_group.registry.framing import frame, split_frames  # noqa: E402

V1: Dict[str, Any] = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "customer", "type": "string"},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "placed_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "at", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": "int"}},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "qty", "type": "int"},
    {"name": "ok", "type": "boolean"},
    {"name": "ratio", "type": "float"},
    {"name": "code", "type": {"type": "fixed", "name": "Code", "size": 2}},
]}
UTC = datetime.timezone.utc
RECORD: Dict[str, Any] = {
    "id": 7, "customer": "ann", "amount": decimal.Decimal("12.34"),
    "placed": datetime.datetime(2026, 11, 26, 1, 2, 3, 456000, tzinfo=UTC),
    "placed_us": datetime.datetime(2026, 11, 26, 1, 2, 3, 456789, tzinfo=UTC),
    "local": datetime.datetime(2026, 11, 26, 1, 2, 3, 456000),
    "day": datetime.date(2026, 11, 26), "at": datetime.time(1, 2, 3, 4000),
    "ref": "0b1c2d3e-0000-4000-8000-000000000001", "kind": "B", "tags": ["x", "y"], "attrs": {"a": 1},
    "note": None, "qty": 3, "ok": True, "ratio": 0.5, "code": b"ab",
}


def schema(doc: Any, schema_id: int | None = 1) -> RegisteredSchema:
    return RegisteredSchema("AVRO", json.dumps(doc), schema_id)


def payload(doc: Any, record: Any) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(doc), record)
    return out.getvalue()


def test_framing_groups_records_by_schema_id_and_names_what_is_not_framed() -> None:
    values = [frame(3, b"a"), None, b"\x01\x00\x00\x00\x03x", frame(4, b"b"), b"\x00\x00", frame(3, b"")]
    frames = split_frames(values)
    assert frames.schema_ids == [3, None, None, 4, None, 3]
    assert frames.by_id == {3: [0, 5], 4: [3]} and frames.payloads == {3: [b"a", b""], 4: [b"b"]}
    assert frames.errors == {
        2: "not registry-framed: first byte is 1, not the magic byte 0 (was it written by a Schema Registry serializer?)",
        4: "not registry-framed: 2 bytes, shorter than the 5-byte frame (magic byte 0 and a 4-byte schema id)",
    }


def test_types_map_to_spark_columns() -> None:
    typ = AvroCodec().arrow_type(schema(V1))
    assert typ == pa.struct([
        ("id", pa.int64()), ("customer", pa.string()), ("amount", pa.decimal128(10, 2)),
        ("placed", pa.timestamp("us", tz="UTC")), ("placed_us", pa.timestamp("us", tz="UTC")),
        ("local", pa.timestamp("us")), ("day", pa.date32()), ("at", pa.int32()), ("ref", pa.string()),
        ("kind", pa.string()), ("tags", pa.list_(pa.string())), ("attrs", pa.map_(pa.string(), pa.int32())),
        ("note", pa.string()), ("qty", pa.int32()), ("ok", pa.bool_()), ("ratio", pa.float32()),
        ("code", pa.binary()),
    ])


def test_values_decode_with_logical_types() -> None:
    codec = AvroCodec()
    column = codec.decode(schema(V1), schema(V1), [payload(V1, RECORD), payload(V1, dict(RECORD, note="n", id=8))])
    assert column.errors == (None, None)
    rows = column.values.to_pylist()
    expected = dict(RECORD, at=3723004, attrs=[("a", 1)])
    assert rows[0] == expected
    assert rows[1] == dict(expected, note="n", id=8)


def test_a_recursive_type_is_refused_not_a_recursion_error() -> None:
    node = {"type": "record", "name": "Node", "fields": [
        {"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"]}]}
    with pytest.raises(ConfigError, match="contains itself"):
        AvroCodec().arrow_type(schema(node))
    # a named type used twice, side by side, is no recursion
    twice = {"type": "record", "name": "P", "fields": [
        {"name": "a", "type": {"type": "record", "name": "Point", "fields": [{"name": "x", "type": "int"}]}},
        {"name": "b", "type": "Point"}]}
    assert AvroCodec().arrow_type(schema(twice)) == pa.struct([("a", pa.struct([("x", pa.int32())])),
                                                               ("b", pa.struct([("x", pa.int32())]))])


@pytest.mark.parametrize("construct,fix", [
    (["null", "string", "long"], "has 2 non-null branches"),
    ({"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 2}, "wider than Spark's 38 digits"),
])
def test_constructs_without_a_spark_column_are_refused_when_the_query_starts(construct: Any, fix: str) -> None:
    doc = {"type": "record", "name": "R", "fields": [{"name": "f", "type": construct}]}
    with pytest.raises(ConfigError, match=fix):
        AvroCodec().arrow_type(schema(doc))


def test_a_newer_writer_reads_through_the_reader_schema() -> None:
    fields: List[Any] = [{"name": "id", "type": "long"}, {"name": "qty", "type": "long"}]
    reader = {"type": "record", "name": "R", "fields": fields}
    writer = {"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"}, {"name": "qty", "type": "int"},  # int promotes to long
        {"name": "extra", "type": "string", "default": ""}]}
    column = AvroCodec().decode(schema(writer, 2), schema(reader, 1), [payload(writer, {"id": 1, "qty": 2, "extra": "e"})])
    assert column.errors == (None,) and column.values.to_pylist() == [{"id": 1, "qty": 2}]
    # and an older writer through a newer reader: the added field takes its default
    newer = {"type": "record", "name": "R", "fields": fields + [
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "level", "type": "int", "default": 5}]}
    column = AvroCodec().decode(schema(reader, 1), schema(newer, 3), [payload(reader, {"id": 1, "qty": 2})])
    assert column.values.to_pylist() == [{"id": 1, "qty": 2, "note": None, "level": 5}]


def test_an_incompatible_writer_is_an_error_per_record_not_a_wrong_value() -> None:
    reader = {"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"}, {"name": "must", "type": "string"}]}  # no default
    writer = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}
    column = AvroCodec().decode(schema(writer, 2), schema(reader, 1), [payload(writer, {"id": 1})] * 2)
    assert column.values.to_pylist() == [None, None]
    assert all(e is not None and "does not decode" in e and "must" in e for e in column.errors)


def test_corrupt_payloads_are_errors_and_their_neighbours_still_decode() -> None:
    doc = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "s", "type": "string"}]}
    good = payload(doc, {"id": 1, "s": "abc"})
    payloads: List[bytes] = [good, good + b"\x02", good[:-2], b"\x02\xff", good]
    column = AvroCodec().decode(schema(doc), schema(doc), payloads)
    assert column.values.to_pylist() == [{"id": 1, "s": "abc"}, None, None, None, {"id": 1, "s": "abc"}]
    assert column.errors[0] is None and column.errors[4] is None
    assert column.errors[1] == ("Avro payload of 6 bytes does not end where its record does (read 5 bytes): "
                                "corrupt, or written with another schema than its id says")
    assert column.errors[2] is not None and column.errors[3] is not None


def test_a_decimal_wider_than_its_precision_is_an_error_for_that_record() -> None:
    doc = {"type": "record", "name": "R", "fields": [
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}}]}
    wide = {"type": "record", "name": "R", "fields": [
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}}]}
    column = AvroCodec().decode(schema(doc), schema(doc), [
        payload(doc, {"d": decimal.Decimal("1.50")}), payload(wide, {"d": decimal.Decimal("1234567.89")})])
    assert column.values.to_pylist() == [{"d": decimal.Decimal("1.50")}, None]
    assert column.errors[0] is None and column.errors[1] is not None


def test_a_top_level_primitive_schema_is_a_plain_column() -> None:
    column = AvroCodec().decode(schema("string"), schema("string"), [payload("string", "hi")])
    assert column.values.type == pa.string() and column.values.to_pylist() == ["hi"]
