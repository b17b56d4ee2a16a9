"""Avro reader defaults and field aliases as the specification and Java read them (issue 35 review).

A ``bytes`` or ``fixed`` default is a JSON string whose code points 0-255 are the bytes; a writer
that has both a reader field's name and one of its aliases is read by the name.
"""

from __future__ import annotations

import decimal
from typing import Any

import pytest

fastavro = pytest.importorskip("fastavro")

from kafka_group.errors import ConfigError  # noqa: E402
from kafka_group.registry.avro_codec import AvroCodec  # noqa: E402
from tests.unit.test_avro_hostile import encode, registered  # noqa: E402

W = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}


def reader_with(*fields: Any) -> Any:
    return {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}, *fields]}


def test_bytes_and_fixed_defaults_are_their_code_points_not_utf_8() -> None:
    inner = {"type": "record", "name": "In", "fields": [{"name": "raw", "type": "bytes"}]}
    reader = reader_with(
        {"name": "b", "type": "bytes", "default": "\u00ff\u0001"},
        {"name": "f", "type": {"type": "fixed", "name": "F", "size": 2}, "default": "\u00ff\u0001"},
        {"name": "r", "type": inner, "default": {"raw": "\u00e9"}},
        {"name": "l", "type": {"type": "array", "items": "bytes"}, "default": ["\u0080", ""]},
        {"name": "m", "type": {"type": "map", "values": "F"}, "default": {"k": "\u00ff\u00fe"}},
        {"name": "u", "type": ["bytes", "null"], "default": "\u00ff"},
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2},
         "default": "\u00ff\u0001"})
    column = AvroCodec().decode(registered(W, 2), registered(reader), [encode(W, {"a": 1})])
    assert column.errors == (None,)
    assert column.values.to_pylist() == [{
        "a": 1, "b": b"\xff\x01", "f": b"\xff\x01", "r": {"raw": b"\xe9"}, "l": [b"\x80", b""],
        "m": [("k", b"\xff\xfe")], "u": b"\xff", "d": decimal.Decimal("-2.55")}]


@pytest.mark.parametrize("field, fix", [
    ({"name": "b", "type": "bytes", "default": "\u0100"}, "255"),
    ({"name": "f", "type": {"type": "fixed", "name": "F", "size": 2}, "default": "\u00ff"}, "size"),
    ({"name": "l", "type": {"type": "array", "items": "bytes"}, "default": ["\u20ac"]}, "255"),
])
def test_a_bytes_default_that_is_no_bytes_is_refused_when_the_query_starts(field: Any, fix: str) -> None:
    with pytest.raises(ConfigError, match=fix) as refused:
        AvroCodec().arrow_type(registered(reader_with(field)))
    assert field["name"] in str(refused.value)


def test_a_writer_with_a_field_and_its_alias_is_read_by_the_name_as_java_does() -> None:
    writer = {"type": "record", "name": "R", "fields": [{"name": "new", "type": "int"}, {"name": "old", "type": "int"}]}
    reader = {"type": "record", "name": "R", "fields": [{"name": "new", "type": "int", "aliases": ["old"]}]}
    column = AvroCodec().decode(registered(writer, 2), registered(reader), [encode(writer, {"new": 1, "old": 2})])
    assert column.errors == (None,) and column.values.to_pylist() == [{"new": 1}]
    swapped = {"type": "record", "name": "R", "fields": [{"name": "old", "type": "int"}, {"name": "new", "type": "int"}]}
    column = AvroCodec().decode(registered(swapped, 4), registered(reader), [encode(swapped, {"new": 1, "old": 2})])
    assert column.errors == (None,) and column.values.to_pylist() == [{"new": 1}]  # fastavro read 'old' first
    renamed = {"type": "record", "name": "R", "fields": [{"name": "old", "type": "int"}]}
    column = AvroCodec().decode(registered(renamed, 3), registered(reader), [encode(renamed, {"old": 5})])
    assert column.errors == (None,) and column.values.to_pylist() == [{"new": 5}]
