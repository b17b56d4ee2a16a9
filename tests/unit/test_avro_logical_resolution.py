"""Logical types across schema resolution: a writer's unit is never read in the reader's unit.

Payloads are written by fastavro with the writer schema and read through a reader schema whose
logical type differs at the same field (review finding: a timestamp-millis writer read through a
timestamp-micros reader landed in 1970).
"""

from __future__ import annotations

import datetime
import decimal
import io
import json
from typing import Any, Dict, List

import pytest

fastavro = pytest.importorskip("fastavro")

from kafka_group.registry.avro_codec import AvroCodec  # noqa: E402
from kafka_group.registry.codec import RegisteredSchema  # noqa: E402

UTC = datetime.timezone.utc
INSTANT = datetime.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)
MILLIS = 1_700_000_000_123
MICROS = MILLIS * 1000


def _ts(logical: str) -> Dict[str, Any]:
    return {"type": "long", "logicalType": logical}


def _doc(logical: str) -> Dict[str, Any]:
    """One timestamp three ways: a plain field, a nullable field, inside an array of records."""
    item = {"type": "record", "name": "Item", "fields": [{"name": "at", "type": _ts(logical)}]}
    return {"type": "record", "name": "R", "fields": [
        {"name": "ts", "type": _ts(logical)},
        {"name": "maybe", "type": ["null", _ts(logical)], "default": None},
        {"name": "items", "type": {"type": "array", "items": item}},
    ]}


def _schema(doc: Any, schema_id: int) -> RegisteredSchema:
    return RegisteredSchema("AVRO", json.dumps(doc), schema_id)


def _payload(doc: Any, record: Any) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(doc), record)
    return out.getvalue()


def _raw(value: int) -> Dict[str, Any]:
    return {"ts": value, "maybe": value, "items": [{"at": value}]}


def _decoded(instant: datetime.datetime) -> Dict[str, Any]:
    return {"ts": instant, "maybe": instant, "items": [{"at": instant}]}


def test_a_millis_writer_read_through_a_micros_reader_gives_the_same_instant() -> None:
    writer, reader = _doc("timestamp-millis"), _doc("timestamp-micros")
    column = AvroCodec().decode(_schema(writer, 2), _schema(reader, 1),
                                [_payload(writer, _raw(MILLIS)), _payload(writer, _raw(2**62))])
    assert column.values.to_pylist() == [_decoded(INSTANT), None]
    assert column.errors[0] is None and column.errors[1] is not None  # 2**62 ms has no value in micros


def test_a_micros_writer_read_through_a_millis_reader_is_exact_or_an_error_per_record() -> None:
    writer, reader = _doc("timestamp-micros"), _doc("timestamp-millis")
    column = AvroCodec().decode(_schema(writer, 2), _schema(reader, 1), [
        _payload(writer, _raw(MICROS)), _payload(writer, _raw(MICROS + 7)), _payload(writer, _raw(MICROS))])
    assert column.values.to_pylist() == [_decoded(INSTANT), None, _decoded(INSTANT)]
    assert column.errors[0] is None and column.errors[2] is None
    assert column.errors[1] is not None and "would lose data" in column.errors[1]


def test_local_timestamps_are_rescaled_like_timestamps() -> None:
    writer, reader = _doc("local-timestamp-millis"), _doc("local-timestamp-micros")
    column = AvroCodec().decode(_schema(writer, 2), _schema(reader, 1), [_payload(writer, _raw(MILLIS))])
    assert column.errors == (None,)
    assert column.values.to_pylist() == [_decoded(INSTANT.replace(tzinfo=None))]


@pytest.mark.parametrize("written,read", [
    ({"type": "int", "logicalType": "date"}, _ts("timestamp-millis")),  # int promotes to long: days as ms
    (_ts("timestamp-millis"), _ts("local-timestamp-millis")),  # an instant is not a wall-clock time
    (_ts("local-timestamp-micros"), _ts("timestamp-micros")),
    ({"type": "int", "logicalType": "time-millis"}, {"type": "long", "logicalType": "time-micros"}),
])
def test_a_logical_type_the_reader_cannot_take_exactly_makes_every_record_an_error(written: Any, read: Any) -> None:
    writer = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "f", "type": written}]}
    reader = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "f", "type": read}]}
    column = AvroCodec().decode(_schema(writer, 2), _schema(reader, 1),
                                [_payload(writer, {"id": i, "f": 19_000}) for i in range(3)])
    assert column.values.to_pylist() == [None, None, None]
    for error in column.errors:
        assert error is not None
        assert "id 2" in error and "f" in error
        assert str(written["logicalType"]) in error and str(read["logicalType"]) in error


def test_a_logical_type_on_one_side_only_is_read_as_the_reader_says() -> None:
    # a writer without a logical type: the reader's declaration is all there is (adding one later is usual)
    plain = {"type": "record", "name": "R", "fields": [{"name": "ts", "type": "long"}]}
    typed = {"type": "record", "name": "R", "fields": [{"name": "ts", "type": _ts("timestamp-millis")}]}
    column = AvroCodec().decode(_schema(plain, 2), _schema(typed, 1), [_payload(plain, {"ts": MILLIS})])
    assert column.errors == (None,) and column.values.to_pylist() == [{"ts": INSTANT}]
    # a reader without one asks for the number as written
    column = AvroCodec().decode(_schema(typed, 2), _schema(plain, 1), [_payload(typed, {"ts": MILLIS})])
    assert column.errors == (None,) and column.values.to_pylist() == [{"ts": MILLIS}]


def _dec(precision: int, scale: int) -> Dict[str, Any]:
    return {"type": "record", "name": "R", "fields": [
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale}}]}


def test_a_decimal_scale_change_keeps_the_value_where_exact_and_is_an_error_per_record_elsewhere() -> None:
    writer = _dec(10, 2)
    values: List[bytes] = [_payload(writer, {"d": decimal.Decimal(v)}) for v in ("1.23", "1.20", "12345678.90")]
    finer = AvroCodec().decode(_schema(writer, 2), _schema(_dec(10, 3), 1), values)
    assert finer.values.to_pylist() == [{"d": decimal.Decimal("1.230")}, {"d": decimal.Decimal("1.200")}, None]
    assert finer.errors[:2] == (None, None) and finer.errors[2] is not None  # 11 digits do not fit in 10
    coarser = AvroCodec().decode(_schema(writer, 2), _schema(_dec(10, 1), 1), values)
    assert coarser.values.to_pylist() == [None, {"d": decimal.Decimal("1.2")}, {"d": decimal.Decimal("12345678.9")}]
    assert coarser.errors[0] is not None and coarser.errors[1:] == (None, None)
