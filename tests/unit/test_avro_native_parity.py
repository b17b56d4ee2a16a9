"""The compiled Avro decoder against the Python codec (issue 37 part 2): same rows, same errors.

Each case decodes one batch of registry-framed values twice with :func:`decode_batch`, with
``badRecords=quarantine``: by the Python codec alone, and with the compiled read path's module
(Rust where it has a plan, the codec for what it hands back). The two batches must be equal,
column by column (values, schema ids, quarantined bytes and reasons). The cases are those of the
Avro unit tests (schemas, logical types, unions, resolution, bad and hostile payloads), edge cases
of the Rust decoder, and random records of a rich schema with random corruptions.
"""

from __future__ import annotations

import datetime
import decimal
import io
import json
import random
import re
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import pyarrow as pa
import pytest

fastavro = pytest.importorskip("fastavro")
native = pytest.importorskip("kafka_group._native")

from kafka_group.read.record_schema import arrow_schema  # noqa: E402
from kafka_group.registry import client  # noqa: E402
from kafka_group.registry.avro_bounds import SLOTS_BASE, SLOTS_PER_BYTE  # noqa: E402
from kafka_group.registry.avro_codec import AvroCodec  # noqa: E402
from kafka_group.registry.codec import RegisteredSchema, SchemaReference  # noqa: E402
from kafka_group.registry.decoding import decode_batch, decoded_arrow_schema, plan_decoding  # noqa: E402
from kafka_group.registry.framing import frame  # noqa: E402
from kafka_group.registry.settings import RegistryOptions, SideDecoding  # noqa: E402
from tests.unit.test_avro_hostile import encode  # noqa: E402

SLOTS = (SLOTS_BASE, SLOTS_PER_BYTE)
URL = "http://127.0.0.1:1/apis/ccompat/v7"  # nothing listens on port 1: an id not cached is unknown
UTC = datetime.timezone.utc


@pytest.fixture(autouse=True)
def empty_cache() -> Iterator[None]:
    client.clear_cache()
    yield
    client.clear_cache()


def zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63) if n >= 0 else ((-n - 1) << 1) | 1
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def both(reader: Any, writers: Dict[int, Any], values: Sequence[Optional[bytes]]) -> Tuple[pa.RecordBatch, int]:
    """The batch decoded both ways (asserted equal), and how many values the compiled decoder decoded itself."""
    for schema_id, doc in writers.items():
        client._by_id[(URL, schema_id)] = RegisteredSchema("AVRO", json.dumps(doc), schema_id)
    client._unknown[(URL, 9)] = (float("inf"), None)  # id 9: the registry said it does not know it
    options = RegistryOptions(URL, None, SideDecoding("value", "AVRO", None, "latest", json.dumps(reader)),
                              quarantine=True)
    plan = plan_decoding(options)
    schema = decoded_arrow_schema(arrow_schema(False), plan)
    n = len(values)
    batch = pa.RecordBatch.from_arrays([
        pa.array([None] * n, pa.binary()), pa.array(values, pa.binary()), pa.array(["t"] * n),
        pa.array([0] * n, pa.int32()), pa.array(range(n), pa.int64()),
        pa.array([0] * n, pa.timestamp("us", tz="UTC")), pa.array([0] * n, pa.int32())], schema=arrow_schema(False))
    reference = decode_batch(batch, plan, schema)
    compiled = decode_batch(batch, plan, schema, native)
    assert compiled.schema == reference.schema
    for name in reference.schema.names:  # equal arrays (NaN, unequal to itself, compared by its text)
        ours, theirs = compiled.column(name), reference.column(name)
        assert ours.equals(theirs) or _text(ours) == _text(theirs), (name, ours.to_pylist(), theirs.to_pylist())
    decoded_here = 0
    codec = AvroCodec()
    for schema_id, doc in writers.items():
        registered = RegisteredSchema("AVRO", json.dumps(doc), schema_id)
        planned = codec.native_plan(registered, RegisteredSchema("AVRO", json.dumps(reader)))
        if planned is not None:
            column, handed_back = native.avro_decode(pa.array(values, pa.binary()), schema_id, planned, SLOTS)
            decoded_here += len(column) - len(handed_back)
    return reference, decoded_here


def _text(values: pa.Array) -> str:
    """The values as text, a memory address in an error ("from <_io.BytesIO object at 0x...>") left out."""
    return re.sub(r" at 0x[0-9a-f]+", " at 0x", repr(values.to_pylist()))


def errors_of(batch: pa.RecordBatch) -> List[Optional[str]]:
    errors: List[Optional[str]] = batch.column("value_error").to_pylist()
    return errors


# -- the cases of test_avro_codec.py ------------------------------------------------------------

V1: Dict[str, Any] = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "customer", "type": "string"},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "placed_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "local_us", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "at", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "at_us", "type": {"type": "long", "logicalType": "time-micros"}},
    {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": "int"}},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "qty", "type": "int"},
    {"name": "ok", "type": "boolean"},
    {"name": "ratio", "type": "float"},
    {"name": "share", "type": "double"},
    {"name": "code", "type": {"type": "fixed", "name": "Code", "size": 2}},
    {"name": "price", "type": {"type": "fixed", "name": "Price", "size": 8, "logicalType": "decimal",
                               "precision": 18, "scale": 4}},
    {"name": "blob", "type": "bytes"},
]}
RECORD: Dict[str, Any] = {
    "id": 7, "customer": "ann", "amount": decimal.Decimal("12.34"),
    "placed": datetime.datetime(2026, 11, 26, 1, 2, 3, 456000, tzinfo=UTC),
    "placed_us": datetime.datetime(2026, 11, 26, 1, 2, 3, 456789, tzinfo=UTC),
    "local": datetime.datetime(2026, 11, 26, 1, 2, 3, 456000),
    "local_us": datetime.datetime(2026, 11, 26, 1, 2, 3, 456789),
    "day": datetime.date(2026, 11, 26), "at": datetime.time(1, 2, 3, 4000), "at_us": datetime.time(1, 2, 3, 4),
    "ref": "0b1c2d3e-0000-4000-8000-000000000001", "kind": "B", "tags": ["x", "y"], "attrs": {"a": 1, "b": -2},
    "note": None, "qty": 3, "ok": True, "ratio": 0.5, "share": -1e300, "code": b"ab",
    "price": decimal.Decimal("-12345.6789"), "blob": b"\x00\xff",
}


def test_every_type_of_the_rich_schema_decodes_in_rust_with_the_codecs_values() -> None:
    other = dict(RECORD, note="n", tags=[], attrs={}, amount=decimal.Decimal("-0.01"), kind="A", ok=False)
    good: List[Optional[bytes]] = [frame(1, encode(V1, RECORD)), frame(1, encode(V1, other))]
    batch, decoded_here = both(V1, {1: V1}, good + [None] + good)
    assert decoded_here == 4 and errors_of(batch) == [None] * 5
    assert batch.column("value").to_pylist()[0]["price"] == decimal.Decimal("-12345.6789")


def test_corrupt_and_unframed_values_and_unknown_ids_give_the_codecs_errors() -> None:
    doc = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "s", "type": "string"}]}
    good = encode(doc, {"id": 1, "s": "abc"})
    values = [frame(1, good), frame(1, good + b"\x02"), frame(1, good[:-2]), frame(1, b"\x02\xff"), frame(1, b""),
              b"plain text", b"\x00\x00", frame(9, good), None, frame(1, good)]
    batch, decoded_here = both(doc, {1: doc}, values)
    assert decoded_here == 2
    assert [e is None for e in errors_of(batch)] == [True] + [False] * 7 + [True, True]


def test_a_decimal_wider_than_its_precision_is_the_codecs_error() -> None:
    doc = {"type": "record", "name": "R", "fields": [
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}}]}
    wide = {"type": "record", "name": "R", "fields": [
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 2}}]}
    values = [frame(1, encode(doc, {"d": decimal.Decimal("1.50")})),
              frame(1, encode(wide, {"d": decimal.Decimal("1234567.89")})),
              frame(1, encode(wide, {"d": decimal.Decimal("99.99")})),
              frame(1, encode(wide, {"d": decimal.Decimal("-100.00")})),
              frame(1, b"\x00"),  # no bytes: the codec's 0
              frame(1, zigzag(17) + b"\x01" * 17)]  # wider than 16 bytes
    batch, decoded_here = both(doc, {1: doc}, values)
    assert decoded_here == 3
    assert [e is None for e in errors_of(batch)] == [True, False, True, False, True, False]


@pytest.mark.parametrize("doc,value", [
    ("string", "hi"), ("long", -5), ("int", 2 ** 31 - 1), ("boolean", True), ("double", 1.5), ("bytes", b"x"),
    (["null", "long"], None), (["long", "null"], 3), ({"type": "array", "items": "int"}, [1, 2]),
    ({"type": "int", "logicalType": "date"}, datetime.date(1970, 1, 2)),
])
def test_a_top_level_primitive_schema(doc: Any, value: Any) -> None:
    batch, decoded_here = both(doc, {1: doc}, [frame(1, encode(doc, value))])
    assert decoded_here == 1 and errors_of(batch) == [None]


# -- resolution (test_avro_codec, test_avro_logical_resolution): the codec decodes these ---------

def test_writers_of_other_versions_are_the_codecs_resolution() -> None:
    reader = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "qty", "type": "long"},
                                                        {"name": "note", "type": ["null", "string"], "default": None}]}
    newer = {"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"}, {"name": "qty", "type": "int"}, {"name": "extra", "type": "string", "default": ""}]}
    incompatible = {"type": "record", "name": "R", "fields": [{"name": "qty", "type": "string"}]}
    same = json.loads(json.dumps(reader))  # the reader's text registered under another id
    values = [frame(2, encode(newer, {"id": 1, "qty": 2, "extra": "e"})), frame(3, encode(incompatible, {"qty": "x"})),
              frame(1, encode(reader, {"id": 4, "qty": 5, "note": "n"})), frame(4, encode(same, {"id": 6, "qty": 7}))]
    batch, decoded_here = both(reader, {1: reader, 2: newer, 3: incompatible, 4: same}, values)
    assert decoded_here == 2  # the reader's text (ids 1 and 4); the others need resolution
    assert [e is None for e in errors_of(batch)] == [True, False, True, True]


def test_timestamp_units_resolved_between_writer_and_reader_match() -> None:
    def doc(logical: str) -> Dict[str, Any]:
        return {"type": "record", "name": "R", "fields": [{"name": "ts", "type": {"type": "long", "logicalType": logical}}]}
    reader, writer = doc("timestamp-micros"), doc("timestamp-millis")
    values = [frame(2, encode(doc("long"), {"ts": 1_700_000_000_123})), frame(1, encode(doc("long"), {"ts": 5})),
              frame(2, encode(doc("long"), {"ts": 2 ** 62}))]  # overflows as micros: the codec's error
    batch, _ = both(reader, {1: reader, 2: writer}, values)
    assert [e is None for e in errors_of(batch)] == [True, True, False]


def test_a_millis_timestamp_beyond_the_micros_range_is_the_codecs_error() -> None:
    doc = {"type": "record", "name": "R", "fields": [{"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
                                                     {"name": "lt", "type": {"type": "long", "logicalType": "local-timestamp-millis"}}]}
    values = [frame(1, zigzag(2 ** 62) + zigzag(0)), frame(1, zigzag(0) + zigzag(-(2 ** 62))),
              frame(1, zigzag(-(2 ** 40)) + zigzag(2 ** 40))]
    batch, decoded_here = both(doc, {1: doc}, values)
    assert decoded_here == 1 and [e is None for e in errors_of(batch)] == [False, False, True]


# -- payloads the Rust decoder hands back ---------------------------------------------------------

EDGES: Dict[str, Any] = {"type": "record", "name": "E", "fields": [
    {"name": "b", "type": "boolean"},
    {"name": "i", "type": "int"},
    {"name": "f", "type": "float"},
    {"name": "e", "type": {"type": "enum", "name": "Sym", "symbols": ["X", "Y", "Z"]}},
    {"name": "u", "type": ["null", {"type": "record", "name": "In", "fields": [
        {"name": "s", "type": "string"}, {"name": "m", "type": {"type": "map", "values": ["null", "long"]}}]}]},
    {"name": "a", "type": {"type": "array", "items": "In"}},
]}


def edge(b: bytes = b"\x01", i: bytes = zigzag(1), f: bytes = b"\x00\x00\x80\x3f", e: bytes = zigzag(2),
         u: bytes = zigzag(0), a: bytes = zigzag(0)) -> bytes:
    return frame(1, b + i + f + e + u + a)


def inner(s: bytes, entries: List[Tuple[bytes, Optional[int]]], count: Optional[int] = None) -> bytes:
    body = b"".join(zigzag(len(k)) + k + (zigzag(0) if v is None else zigzag(1) + zigzag(v)) for k, v in entries)
    head = zigzag(len(entries) if count is None else count) if entries or count else b""
    return zigzag(len(s)) + s + head + body + zigzag(0)


@pytest.mark.parametrize("value,decoded", [
    (edge(), True),
    (edge(b=b"\x02"), True),  # any byte but 0 is true, as the codec reads it
    (edge(b=b"\xff"), True),
    (edge(i=zigzag(2 ** 31)), False),  # wider than int
    (edge(i=b"\xff" * 10 + b"\x01"), False),  # an 11-byte varint
    (edge(i=b"\x80" * 9 + b"\x00"), True),  # a padded zero
    (edge(f=b"\x00\x00\xc0\x7f"), False),  # NaN: left to the codec
    (edge(e=zigzag(3)), False), (edge(e=zigzag(-1)), False),  # enum index out of range
    (edge(u=zigzag(2)), False), (edge(u=zigzag(-1)), False),  # union branch out of range
    (edge(u=zigzag(1) + inner(b"ok", [(b"k", 1), (b"j", None)])), True),
    (edge(u=zigzag(1) + inner(b"ok", [(b"k", 1), (b"k", 2)])), False),  # a duplicate map key
    (edge(u=zigzag(1) + inner(b"\xff\xfe", [])), False),  # not UTF-8
    (edge(u=zigzag(1) + inner("é".encode(), [(b"\xc3", 1)])), False),  # a key not UTF-8
    (edge(u=zigzag(1) + inner(b"s", [(b"k", 1)], count=-1)[:-1] + zigzag(0)), False),
    (edge(a=zigzag(2 ** 40)), False),  # more items than bytes: nothing allocated
    (edge(a=zigzag(-(2 ** 63)) + zigzag(1)), False),
    (edge(a=zigzag(2) + inner(b"a", []) + inner(b"b", [(b"x", 3)]) + zigzag(0)), True),
    (edge(a=zigzag(-1) + zigzag(3) + inner(b"a", []) + zigzag(0)), True),  # a block with its byte size
    (edge()[:-1], False), (edge() + b"\x00", False),
])
def test_payloads_at_the_edges_of_the_rust_decoder(value: bytes, decoded: bool) -> None:
    batch, decoded_here = both(EDGES, {1: EDGES}, [value, edge()])
    assert decoded_here == (2 if decoded else 1)


def test_a_negative_block_count_in_a_map_is_read_as_the_codec_reads_it() -> None:
    body = zigzag(-2) + zigzag(9) + zigzag(1) + b"a" + zigzag(1) + zigzag(5) + zigzag(1) + b"b" + zigzag(0) + zigzag(0)
    batch, decoded_here = both(EDGES, {1: EDGES}, [edge(u=zigzag(1) + zigzag(1) + b"s" + body)])
    assert decoded_here == 1 and errors_of(batch) == [None]


# -- hostile writers (test_avro_hostile): bounded in both --------------------------------------

def test_zero_byte_items_and_recursion_are_left_to_the_bounded_codec() -> None:
    nulls = {"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"}, {"name": "marks", "type": {"type": "array", "items": "null"}}]}
    reader = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}
    listed = {"type": "record", "name": "Node", "fields": [
        {"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"], "default": None}]}
    zeros = {"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"}, {"name": "z", "type": {"type": "array", "items": {"type": "fixed", "name": "Z", "size": 0}}}]}
    hostile = zigzag(1) + zigzag(2 ** 40) + zigzag(0)
    deep = zigzag(1) + (zigzag(1) + zigzag(1)) * 2_000 + zigzag(0)
    batch, decoded_here = both(reader, {1: nulls, 2: zeros}, [frame(1, hostile), frame(2, hostile),
                                                               frame(1, encode(nulls, {"id": 1, "marks": [None]}))])
    assert decoded_here == 0 and [e is None for e in errors_of(batch)] == [False, False, True]
    with pytest.raises(Exception, match="recursive"):
        both(listed, {1: listed}, [frame(1, deep)])  # no Spark column for a recursive reader
    batch, decoded_here = both(reader, {1: reader, 3: listed}, [frame(3, deep), frame(1, encode(reader, {"id": 2}))])
    assert decoded_here == 1 and [e is None for e in errors_of(batch)] == [False, True]


# -- random records of a rich schema, and random corruptions ------------------------------------

def random_record(rng: random.Random) -> Dict[str, Any]:
    def text() -> str:
        return "".join(rng.choice("ab€\U0001F600 \x00") for _ in range(rng.randrange(6)))
    def item() -> Dict[str, Any]:
        return {"s": text(), "m": {text(): rng.choice([None, rng.randrange(-2 ** 63, 2 ** 63)]) for _ in range(rng.randrange(3))}}
    return dict(
        RECORD, id=rng.randrange(-2 ** 63, 2 ** 63), customer=text(), qty=rng.randrange(-2 ** 31, 2 ** 31),
        amount=decimal.Decimal(rng.randrange(-10 ** 10 + 1, 10 ** 10)).scaleb(-2),
        price=decimal.Decimal(rng.randrange(-10 ** 18 + 1, 10 ** 18)).scaleb(-4),
        placed=datetime.datetime(1970, 1, 1, tzinfo=UTC) + datetime.timedelta(milliseconds=rng.randrange(-2 ** 45, 2 ** 47)),
        day=datetime.date(1970, 1, 1) + datetime.timedelta(days=rng.randrange(-700_000, 2_900_000)),
        kind=rng.choice("AB"), tags=[text() for _ in range(rng.randrange(4))],
        attrs={text(): rng.randrange(-2 ** 31, 2 ** 31) for _ in range(rng.randrange(4))},
        note=rng.choice([None, text()]), ok=rng.random() < 0.5, ratio=rng.uniform(-1e30, 1e30),
        share=rng.choice([rng.uniform(-1e300, 1e300), float("inf"), -0.0]), blob=rng.randbytes(rng.randrange(5)),
        items=[item() for _ in range(rng.randrange(3))], maybe=rng.choice([None, item()]))


RICH: Dict[str, Any] = dict(V1, fields=V1["fields"] + [
    {"name": "items", "type": {"type": "array", "items": {"type": "record", "name": "It", "fields": [
        {"name": "s", "type": "string"}, {"name": "m", "type": {"type": "map", "values": ["null", "long"]}}]}}},
    {"name": "maybe", "type": ["null", "It"], "default": None}])


@pytest.mark.parametrize("seed", range(4))
def test_random_records_and_corruptions_decode_alike(seed: int) -> None:
    rng = random.Random(seed)
    values: List[Optional[bytes]] = []
    for _ in range(150):
        body = encode(RICH, random_record(rng))
        roll = rng.random()
        if roll < 0.15:
            body = body[:rng.randrange(len(body))]
        elif roll < 0.3:
            at = rng.randrange(len(body))
            body = body[:at] + bytes([rng.randrange(256)]) + body[at + 1:]
        elif roll < 0.35:
            body += bytes([rng.randrange(256)])
        values.append(None if roll > 0.97 else frame(1, body))
    batch, decoded_here = both(RICH, {1: RICH}, values)
    assert decoded_here >= 90
    assert sum(e is None for e in errors_of(batch)) >= decoded_here


def test_a_sliced_column_is_decoded_from_its_offset() -> None:
    doc = {"type": "record", "name": "R", "fields": [{"name": "s", "type": "string"}]}
    values = pa.array([frame(1, encode(doc, {"s": str(i)})) for i in range(6)] + [b"x"], pa.binary()).slice(2, 4)
    column, handed_back = native.avro_decode(values, 1, AvroCodec().native_plan(
        RegisteredSchema("AVRO", json.dumps(doc), 1), RegisteredSchema("AVRO", json.dumps(doc))), SLOTS)
    assert column.to_pylist() == [{"s": "2"}, {"s": "3"}, {"s": "4"}, {"s": "5"}] and handed_back == []
    assert native.frame_ids(values).to_pylist() == [1, 1, 1, 1]


# -- named types (test_avro_names): namespaces, a type used twice, references ------------------

ORDER: Dict[str, Any] = {"type": "record", "name": "Order", "namespace": "com.acme", "fields": [
    {"name": "home", "type": {"type": "record", "name": "Address", "fields": [{"name": "street", "type": "string"}]}},
    {"name": "billing", "type": {"type": "record", "name": "Address", "namespace": "com.acme.billing",
                                 "fields": [{"name": "iban", "type": "string"}]}},
    {"name": "returns", "type": "Address"},
    {"name": "more", "type": {"type": "array", "items": ["null", "com.acme.billing.Address"]}},
]}


def test_named_types_resolve_by_full_name_in_both() -> None:
    record = {"home": {"street": "Main St 1"}, "billing": {"iban": "DE00"}, "returns": {"street": "Dock 9"},
              "more": [None, {"iban": "FR11"}]}
    batch, decoded_here = both(ORDER, {1: ORDER}, [frame(1, encode(ORDER, record))])
    assert decoded_here == 1 and batch.column("value").to_pylist() == [record]


def test_a_writer_with_schema_references_decodes_in_rust_as_the_codec_does() -> None:
    home = {"type": "record", "name": "Address", "namespace": "com.acme", "fields": [{"name": "street", "type": "string"}]}
    bill = {"type": "record", "name": "Address", "namespace": "com.acme.billing", "fields": [{"name": "iban", "type": "string"}]}
    order = {"type": "record", "name": "Order", "namespace": "com.acme", "fields": [
        {"name": "returns", "type": "Address"}, {"name": "billing", "type": "com.acme.billing.Address"}]}
    refs = tuple(SchemaReference(name, f"{name}-value", 1, RegisteredSchema("AVRO", json.dumps(doc), i))
                 for name, doc, i in (("home", home, 4), ("bill", bill, 5)))
    writer = RegisteredSchema("AVRO", json.dumps(order), 3, refs)
    known: Dict[str, Any] = {}
    for doc in (home, bill):
        fastavro.parse_schema(doc, named_schemas=known)
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(order, named_schemas=known),
                               {"returns": {"street": "Dock 9"}, "billing": {"iban": "DE00"}})
    payloads = [out.getvalue(), out.getvalue()[:-1]]
    codec = AvroCodec()
    reference = codec.decode(writer, writer, payloads)
    column, handed_back = native.avro_decode(pa.array([frame(3, p) for p in payloads], pa.binary()), 3,
                                             codec.native_plan(writer, writer), SLOTS)
    assert handed_back == [1] and reference.errors[0] is None and reference.errors[1] is not None
    assert column.type == codec.arrow_type(writer) and column.take([0]).equals(reference.values.take([0]))


def test_nulls_of_a_wide_record_in_an_array_are_the_same_bad_record_in_both() -> None:
    """1 byte per null fills a slot in each of the record's fields: charged by slots, not bytes (avrobound)."""
    wide = {"type": "record", "name": "W", "fields": [{"name": f"f{i}", "type": "int"} for i in range(100)]}
    doc = {"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"}, {"name": "items", "type": {"type": "array", "items": ["null", wide]}}]}
    hostile = zigzag(1) + zigzag(2_000) + b"\x00" * 2_000 + zigzag(0)  # 202,000 slots in 2,006 bytes
    fine = encode(doc, {"id": 2, "items": [None] * 10 + [{f"f{i}": i for i in range(100)}]})
    batch, decoded_here = both(doc, {1: doc}, [frame(1, hostile), frame(1, fine)])
    assert decoded_here == 1 and batch.column("value").to_pylist()[0] is None
    assert "Arrow slots" in (errors_of(batch)[0] or "") and ".items" in (errors_of(batch)[0] or "")
    assert errors_of(batch)[1] is None
