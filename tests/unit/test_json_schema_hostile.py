"""A hostile or careless writer schema or payload against the JSON Schema codec (review of issue 29's codec).

Whatever the registry serves, decoding gives each record a value or an error: a writer schema that cannot
be used is each of its records' error, and nothing the registry sends is turned into Python source.
"""

from __future__ import annotations

import json
from typing import Any, Dict

import pytest

from kafka_group.registry.codec import RegisteredSchema
from kafka_group.registry.json_schema_codec import JsonSchemaCodec

NUMBER = {"type": "object", "properties": {"a": {"type": "number"}}}
STRING = {"type": "object", "properties": {"a": {"type": "string"}}}
DATE_TIME = {"type": "object", "properties": {"a": {"type": "string", "format": "date-time"}}}


def _schema(document: Dict[str, Any], schema_id: int = 1) -> RegisteredSchema:
    return RegisteredSchema("JSON", json.dumps(document), schema_id, ())


def _with(keyword_json: str, schema_id: int = 7) -> RegisteredSchema:
    """A writer schema whose property ``a`` holds ``keyword_json`` verbatim (``1e999`` is not json.dumps')."""
    return RegisteredSchema("JSON", '{"type": "object", "properties": {"a": %s}}' % keyword_json, schema_id, ())


@pytest.mark.parametrize("keywords", ['{"minimum": 1e999}', '{"maximum": 1e999}', '{"enum": [1e999, 2]}',
                                      '{"const": -1e999}', '{"multipleOf": 1e-320}'])
def test_validation_with_numbers_beyond_a_double_in_the_writer_schema_never_escapes(keywords: str) -> None:
    column = JsonSchemaCodec(validate=True).decode(_with(keywords), _schema(NUMBER, 2), [b'{"a": 5}'])
    assert len(column.errors) == 1
    value, = column.values.to_pylist()
    assert (value is None) != (column.errors[0] is None)


def test_validation_interprets_the_schema_and_never_compiles_it_into_python() -> None:
    import kafka_group.registry.json_schema_codec as codec_module

    source = open(codec_module.__file__, encoding="utf-8").read()
    assert "fastjsonschema" not in source


def test_a_catastrophic_pattern_is_checked_in_linear_time() -> None:
    """``^(a+)+$`` backtracks exponentially in Python's re (5 s at 26 characters, doubling per one);
    checked with RE2 a payload of 5,000 of them is answered (the test would not finish otherwise)."""
    writer = _schema({"type": "object", "properties": {"a": {"type": "string", "pattern": "^(a+)+$"}}})
    column = JsonSchemaCodec(validate=True).decode(writer, _schema(STRING, 2), [
        json.dumps({"a": "a" * 5000 + "!"}).encode(), json.dumps({"a": "aaa"}).encode()])
    assert column.errors[0] is not None and "does not match" in column.errors[0]
    assert column.errors[1] is None and column.values.to_pylist()[1] == {"a": "aaa"}


def test_a_pattern_re2_cannot_run_is_each_of_the_writers_records_error() -> None:
    writer = _schema({"type": "object", "properties": {"a": {"type": "string", "pattern": "(a)\\1"}}}, 9)
    column = JsonSchemaCodec(validate=True).decode(writer, _schema(STRING, 2), [b'{"a": "aa"}', b'{"a": "b"}'])
    assert column.values.to_pylist() == [None, None]
    assert all(e is not None and "(id 9)" in e and "pattern" in e for e in column.errors)


def test_pattern_properties_and_additional_properties_use_the_same_bounded_matcher() -> None:
    writer = _schema({"type": "object", "patternProperties": {"^(x+)+$": {"type": "integer"}},
                      "additionalProperties": False, "properties": {"a": {"type": "string"}}})
    column = JsonSchemaCodec(validate=True).decode(writer, _schema(STRING, 2), [
        json.dumps({"a": "s", "x" * 3000 + "!": 1}).encode(), json.dumps({"a": "s", "xx": "no"}).encode(),
        json.dumps({"a": "s", "xx": 3}).encode()])
    assert column.errors[0] is not None and column.errors[1] is not None and column.errors[2] is None


def test_an_offset_moving_a_date_time_beyond_year_one_is_that_records_error() -> None:
    payloads = [b'{"a": "0001-01-01T00:00:00+01:00"}', b'{"a": "9999-12-31T23:59:59-01:00"}', b'{}']
    for options in ({}, {"fast": False}, {"validate": True}):
        column = JsonSchemaCodec(**options).decode(_schema(DATE_TIME), _schema(DATE_TIME), payloads)
        assert column.values.to_pylist() == [None, None, {"a": None}], options
        assert column.errors[0] is not None and "property 'a'" in column.errors[0], options
        assert column.errors[1] is not None and column.errors[2] is None, options


HUGE = b'{"a": 1' + b"0" * 400 + b"}"


@pytest.mark.parametrize("options", [{}, {"fast": False}, {"validate": True}])
def test_an_integer_beyond_a_double_for_a_number_is_that_records_error_on_every_path(options: Dict[str, bool]) -> None:
    column = JsonSchemaCodec(**options).decode(_schema(NUMBER), _schema(NUMBER), [HUGE, b'{"a": 1.5}'])
    assert column.values.to_pylist() == [None, {"a": 1.5}]
    assert column.errors[0] is not None and "property 'a'" in column.errors[0] and column.errors[1] is None


def test_the_fast_path_refuses_infinity_like_the_record_path_in_a_large_batch() -> None:
    good = b'{"a": 2.5}'
    payloads = [good] * 40 + [HUGE, b'{"a": -1e400}', b'{"a": NaN}'] + [good] * 40
    fast = JsonSchemaCodec().decode(_schema(NUMBER), _schema(NUMBER), payloads)
    slow = JsonSchemaCodec(fast=False).decode(_schema(NUMBER), _schema(NUMBER), payloads)
    assert fast.values.to_pylist() == slow.values.to_pylist() and fast.errors == slow.errors
    assert fast.values.to_pylist()[40:43] == [None, None, None] and None not in fast.errors[40:43]
    assert fast.errors.count(None) == 80


def test_unique_items_of_objects_is_checked_by_value() -> None:
    writer = _schema({"type": "object", "properties": {"a": {"type": "array", "uniqueItems": True}}})
    reader = _schema({"type": "object", "properties": {"a": {}}}, 2)
    many = [{"i": i} for i in range(20000)]
    column = JsonSchemaCodec(validate=True).decode(writer, reader, [
        json.dumps({"a": many}).encode(), json.dumps({"a": many + [{"i": 5}]}).encode(),
        b'{"a": [1, 1.0]}', b'{"a": [1, true, {"x": [1]}, {"x": [1.5]}]}'])
    assert column.errors[0] is None and column.errors[3] is None
    assert column.errors[1] is not None and "non-unique" in column.errors[1]
    assert column.errors[2] is not None


def test_the_fast_path_sends_nested_infinities_and_out_of_range_times_to_the_record_path() -> None:
    document = {"type": "object", "properties": {
        "l": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "number"}}}},
        "o": {"type": "object", "properties": {"t": {"type": "string", "format": "date-time"}}}}}
    good = b'{"l": [{"x": 1.5}, {"x": null}], "o": {"t": "2026-01-01T00:00:00Z"}}'
    payloads = [good] * 20 + [b'{"l": [{"x": 1}, {"x": 1e400}]}', b'{"o": {"t": "0001-01-01T00:00:00+01:00"}}',
                              b'{"l": [], "o": null}'] + [good] * 20
    fast = JsonSchemaCodec().decode(_schema(document), _schema(document), payloads)
    slow = JsonSchemaCodec(fast=False).decode(_schema(document), _schema(document), payloads)
    assert fast.errors == slow.errors and fast.values.to_pylist() == slow.values.to_pylist()
    assert fast.errors[20] is not None and fast.errors[21] is not None and fast.errors.count(None) == 41


def test_a_writer_schema_that_cannot_validate_stays_each_records_error_in_later_batches() -> None:
    codec = JsonSchemaCodec(validate=True)
    writer = _schema({"type": "object", "properties": {"a": {"type": "string", "pattern": "(?=a)"}}}, 11)
    first = codec.decode(writer, _schema(STRING, 2), [b'{"a": "a"}'])
    second = codec.decode(writer, _schema(STRING, 2), [b'{"a": "a"}', b'{"a": "b"}'])
    assert first.errors[0] is not None and "(id 11)" in first.errors[0]
    assert second.errors == (first.errors[0], first.errors[0])
