"""Hostile Avro records whose cost is not their size (issue 35 review: decimals, zero-byte items, odd names).

A record's work must be bounded by a constant times its bytes, and a writer schema the codec cannot
analyse must make its records bad records, never an exception out of ``decode``. Spins are shown by
work counts (what fastavro was handed, what a record claims), never by timings.
"""

from __future__ import annotations

import decimal
from typing import Any, Dict, List

import pytest

fastavro = pytest.importorskip("fastavro")

from kafka_group.errors import ConfigError  # noqa: E402
from kafka_group.registry.avro_bounds import DECIMALS_CHECKED_FROM  # noqa: E402
from kafka_group.registry.avro_codec import AvroCodec  # noqa: E402
from tests.unit.test_avro_hostile import encode, registered, zigzag  # noqa: E402

DEC = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "int"},
    {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}}]}


@pytest.fixture
def handed(monkeypatch: pytest.MonkeyPatch) -> List[int]:
    """The sizes of the payloads fastavro's reader was handed (its work is set by them)."""
    sizes: List[int] = []
    real = fastavro.schemaless_reader

    def counting(stream: Any, *args: Any, **kwargs: Any) -> Any:
        sizes.append(len(stream.getvalue()))
        return real(stream, *args, **kwargs)

    monkeypatch.setattr(fastavro, "schemaless_reader", counting)
    return sizes


# -- finding 1: a decimal's bytes longer than its precision holds ---------------------------------

def test_a_decimal_longer_than_its_precision_is_a_bad_record_never_handed_to_fastavro(handed: List[int]) -> None:
    """1 MB of 0x7f in a decimal(10, 2) took fastavro 96 s (then decimal.Overflow): quadratic in its bytes."""
    good = encode(DEC, {"id": 1, "d": decimal.Decimal("12345678.90")})
    hostile = zigzag(2) + zigzag(10_000) + b"\x7f" * 10_000
    column = AvroCodec().decode(registered(DEC), registered(DEC), [good, hostile, good])
    assert column.values.to_pylist() == [{"id": 1, "d": decimal.Decimal("12345678.90")}, None,
                                         {"id": 1, "d": decimal.Decimal("12345678.90")}]
    assert column.errors[0] is None and column.errors[2] is None
    assert ".d" in (column.errors[1] or "") and "precision" in (column.errors[1] or "")
    assert max(handed) < 100, f"fastavro was handed payloads of {handed} bytes"


@pytest.mark.parametrize("precision", [1, 2, 9, 10, 18, 19, 38])
def test_every_decimal_within_its_precision_still_decodes_as_fastavro_reads_it(precision: int) -> None:
    """fastavro is the oracle: the largest, smallest and small values of each precision, in bytes,
    in a fixed just big enough, in a union and in an array; in short payloads and in long ones (walked)."""
    fixed_size = max(1, -(-(int(precision * 3.3219280948873626) + 2) // 8))
    doc = {"type": "record", "name": "R", "fields": [
        {"name": "b", "type": {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": 0}},
        {"name": "f", "type": {"type": "fixed", "name": "F", "size": fixed_size, "logicalType": "decimal",
                               "precision": precision, "scale": 0}},
        {"name": "u", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": 0}]},
        {"name": "a", "type": {"type": "array", "items": {"type": "bytes", "logicalType": "decimal",
                                                          "precision": precision, "scale": 0}}},
        {"name": "pad", "type": "string"}]}
    top = decimal.Decimal(10 ** precision - 1)
    records: List[Dict[str, Any]] = [
        {"b": v, "f": v, "u": v, "a": [v, -v, decimal.Decimal(0)], "pad": pad}
        for v in (top, -top, decimal.Decimal(1), decimal.Decimal(-1), decimal.Decimal(0), decimal.Decimal(127),
                  decimal.Decimal(-128), decimal.Decimal(128))
        for pad in ("", "x" * 300)
        if abs(v) <= top]
    payloads = [encode(doc, r) for r in records]
    assert max(map(len, payloads)) > DECIMALS_CHECKED_FROM > min(map(len, payloads))
    column = AvroCodec().decode(registered(doc), registered(doc), payloads)
    assert column.errors == (None,) * len(records)
    assert column.values.to_pylist() == records


def test_a_fixed_decimal_larger_than_decimal256_is_refused_when_loaded() -> None:
    doc = {"type": "record", "name": "R", "fields": [
        {"name": "f", "type": {"type": "fixed", "name": "F", "size": 1_000_000, "logicalType": "decimal",
                               "precision": 10, "scale": 2}}]}
    with pytest.raises(ConfigError, match="decimal"):
        AvroCodec().arrow_type(registered(doc))
    reader = {"type": "record", "name": "R", "fields": [{"name": "x", "type": ["null", "int"], "default": None}]}
    column = AvroCodec().decode(registered(doc, 2), registered(reader), [b"\x7f" * 1_000_000])
    assert column.values.to_pylist() == [None] and "decimal" in (column.errors[0] or "")


# -- finding 2: zero-byte items charged by what each one holds ------------------------------------

X = {"type": "record", "name": "R", "fields": [{"name": "x", "type": ["null", "int"], "default": None}]}


def test_zero_byte_items_are_charged_by_the_size_of_their_type() -> None:
    """12.5 KB claiming 100,000 records of 4,000 null fields each took 9.2 s: 8 items per byte, each
    4,001 nodes. A payload's zero-byte work is bounded by its bytes, whatever each item holds."""
    empty = {"type": "record", "name": "E", "fields": [{"name": f"f{i}", "type": "null"} for i in range(1000)]}
    writer = {"type": "record", "name": "R", "fields": [
        {"name": "pad", "type": "bytes"}, {"name": "a", "type": {"type": "array", "items": empty}}]}
    items = 20_000
    hostile = zigzag(items // 8) + b"\x00" * (items // 8) + zigzag(items) + zigzag(0)
    column = AvroCodec().decode(registered(writer, 2), registered(X), [hostile, zigzag(0) + zigzag(1) + zigzag(0)])
    assert column.values.to_pylist() == [None, {"x": None}]
    assert "take no bytes" in (column.errors[0] or "") and ".a" in (column.errors[0] or "")
    assert column.errors[1] is None


def test_a_zero_byte_record_that_doubles_at_each_level_is_a_bad_record_even_outside_an_array() -> None:
    """No array needed: a record of two copies of the level below, 22 levels, is 4 million nodes in 0 bytes."""
    doc: Any = {"type": "record", "name": "L0", "fields": [{"name": "n", "type": "null"}]}
    for level in range(1, 23):
        doc = {"type": "record", "name": f"L{level}", "fields": [
            {"name": "a", "type": doc}, {"name": "b", "type": f"L{level - 1}"}]}
    writer = {"type": "record", "name": "R", "fields": [{"name": "x", "type": ["null", "int"]}, {"name": "t", "type": doc}]}
    column = AvroCodec().decode(registered(writer, 2), registered(X), [zigzag(0)])
    assert column.values.to_pylist() == [None] and "take no bytes" in (column.errors[0] or "")


# -- finding 4: a writer the analysis cannot read is that writer's error ---------------------------

@pytest.mark.parametrize("extra", [{"name": [1]}, {"name": {}}, {"name": 3}])
def test_a_writer_with_an_odd_name_on_an_array_is_a_bad_record_not_an_exception(extra: Dict[str, Any]) -> None:
    writer = {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": dict({"type": "array", "items": "int"}, **extra)}]}
    column = AvroCodec().decode(registered(writer, 2), registered(X), [zigzag(0), zigzag(1) + zigzag(5) + zigzag(0)])
    assert column.errors[0] is None or "id 2" in column.errors[0]
    assert column.values.to_pylist() in ([{"x": None}] * 2, [None, None])


def test_any_exception_analysing_a_writer_makes_its_records_bad(monkeypatch: pytest.MonkeyPatch) -> None:
    import kafka_group.registry.avro_codec as avro_codec

    def broken(writer: Any) -> Any:
        raise IndexError("a writer nobody foresaw")

    monkeypatch.setattr(avro_codec, "bounds_for", broken)
    column = AvroCodec().decode(registered(X, 2), registered(X), [zigzag(0)])
    assert column.values.to_pylist() == [None]
    assert "id 2" in (column.errors[0] or "") and "IndexError" in (column.errors[0] or "")
