"""Hostile Avro writer schemas and records (issue 33, findings 9 and 11, and an adversarial reading).

A record's bytes or a registered schema must never hang, crash or blow up an executor: each is a
record error (which ``badRecords=quarantine`` lands) or a ConfigError, and the work is bounded by
the record's bytes and the distinct documents of a schema. Decodes that used to spin or crash the
interpreter run in a subprocess with a generous limit: the behaviour asserted is a record error
instead of a hang or a crash, never a timing.
"""

from __future__ import annotations

import decimal
import io
import json
import os
import subprocess
import sys
from typing import Any, Dict, List, Optional, Sequence

import pyarrow as pa
import pytest

fastavro = pytest.importorskip("fastavro")

from kafka_group.errors import ConfigError  # noqa: E402
from kafka_group.registry.avro_codec import AvroCodec  # noqa: E402
from kafka_group.registry.codec import RegisteredSchema, SchemaReference  # noqa: E402
from tests.unit.counting_schema import CountingSchema  # noqa: E402

#: Seconds a subprocess decode may take before the test calls it a hang (it takes well under one).
LIMIT_S = 120


def registered(doc: Any, schema_id: Optional[int] = 1, references: Sequence[SchemaReference] = ()) -> RegisteredSchema:
    return RegisteredSchema("AVRO", json.dumps(doc), schema_id, tuple(references))


def encode(doc: Any, record: Any) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(doc), record)
    return out.getvalue()


def zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | 0x80 if n else low)
        if not n:
            return bytes(out)


def decode_in_subprocess(writer: Any, reader: Any, payloads: List[bytes]) -> Dict[str, Any]:
    """The codec's values and errors, decoded by another interpreter (a hang or a crash fails the test)."""
    script = (
        "import json, sys\n"
        "from kafka_group.registry.avro_codec import AvroCodec\n"
        "from kafka_group.registry.codec import RegisteredSchema\n"
        "job = json.load(sys.stdin)\n"
        "column = AvroCodec().decode(RegisteredSchema('AVRO', job['writer'], 2), RegisteredSchema('AVRO', job['reader'], 1),\n"
        "                            [bytes.fromhex(p) for p in job['payloads']])\n"
        "print(json.dumps({'values': column.values.to_pylist(), 'errors': column.errors}, default=repr))\n")
    job = json.dumps({"writer": json.dumps(writer), "reader": json.dumps(reader), "payloads": [p.hex() for p in payloads]})
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    try:
        done = subprocess.run([sys.executable, "-c", script], input=job, capture_output=True, text=True,
                              timeout=LIMIT_S, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the decode did not finish within {LIMIT_S} s (a hang)")
    assert done.returncode == 0, f"the decoding interpreter died with {done.returncode}: {done.stderr[-2000:]}"
    result: Dict[str, Any] = json.loads(done.stdout)
    return result


# -- finding 11: items that take no bytes --------------------------------------------------

NULLS = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"}, {"name": "marks", "type": {"type": "array", "items": "null"}}]}
ID = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}  # array<null> has no Spark column


def test_an_11_byte_record_claiming_2_to_the_40_nulls_is_a_record_error_not_a_spin() -> None:
    hostile = zigzag(1) + zigzag(2 ** 40) + zigzag(0)
    assert len(hostile) <= 11
    good = encode(NULLS, {"id": 2, "marks": [None, None]})
    result = decode_in_subprocess(NULLS, ID, [good, hostile, good])
    assert result["values"] == [{"id": 2}, None, {"id": 2}]
    assert result["errors"][0] is None and result["errors"][2] is None
    assert "marks" in result["errors"][1] and "take no bytes" in result["errors"][1]


@pytest.mark.parametrize("items", [
    {"type": "record", "name": "Empty", "fields": []},
    {"type": "record", "name": "Nothing", "fields": [{"name": "n", "type": "null"}]},
    {"type": "fixed", "name": "Zero", "size": 0},
])
def test_other_zero_byte_items_with_a_huge_count_are_record_errors(items: Any) -> None:
    writer = {"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"}, {"name": "inner", "type": {"type": "record", "name": "In", "fields": [
            {"name": "many", "type": {"type": "array", "items": items}}]}}]}
    hostile = zigzag(1) + zigzag(2 ** 40) + zigzag(0)
    result = decode_in_subprocess(writer, ID, [hostile])  # skipped, not read: still bounded
    assert result["values"] == [None]
    assert "inner.many" in result["errors"][0]


def test_valid_arrays_of_zero_byte_items_still_decode() -> None:
    writer = {"type": "record", "name": "R", "fields": [
        {"name": "marks", "type": {"type": "array", "items": "null"}},
        {"name": "blocks", "type": {"type": "array", "items": {"type": "array", "items": "null"}}},
        {"name": "zeros", "type": {"type": "array", "items": {"type": "fixed", "name": "Zero", "size": 0}}},
        {"name": "tail", "type": "string"}]}
    reader = {"type": "record", "name": "R", "fields": [
        {"name": "zeros", "type": {"type": "array", "items": {"type": "fixed", "name": "Zero", "size": 0}}},
        {"name": "tail", "type": "string"}]}
    record = {"marks": [None] * 1000, "blocks": [[None] * 3, [], [None]], "zeros": [b""] * 7, "tail": "end"}
    payloads = [encode(writer, record), encode(writer, {"marks": [], "blocks": [], "zeros": [], "tail": ""})]
    column = AvroCodec().decode(registered(writer, 2), registered(reader), payloads)
    assert column.errors == (None, None)
    assert column.values.to_pylist() == [{"zeros": [b""] * 7, "tail": "end"}, {"zeros": [], "tail": ""}]


# -- recursive writer schemas: the record's bytes set the depth of fastavro's recursion --------

LIST = {"type": "record", "name": "Node", "fields": [
    {"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"], "default": None}]}
HEAD = {"type": "record", "name": "Node", "fields": [{"name": "v", "type": "int"}]}


def test_a_record_nested_deeper_than_the_bound_is_a_record_error_not_a_crash() -> None:
    shallow = encode(LIST, {"v": 1, "next": {"v": 2, "next": None}})
    deep = zigzag(1) + (zigzag(1) + zigzag(1)) * 100_000 + zigzag(0)  # 100,000 nested nodes in 200 KB
    result = decode_in_subprocess(LIST, HEAD, [shallow, deep, shallow])
    assert result["values"] == [{"v": 1}, None, {"v": 1}]
    assert result["errors"][0] is None and "nested deeper" in result["errors"][1]


def test_a_writer_record_that_contains_itself_without_a_union_is_an_error_not_a_crash() -> None:
    forever = {"type": "record", "name": "R", "fields": [{"name": "v", "type": "int"}, {"name": "again", "type": "R"}]}
    result = decode_in_subprocess(forever, {"type": "record", "name": "R", "fields": [{"name": "v", "type": "int"}]},
                                  [zigzag(1)])
    assert result["values"] == [None] and result["errors"][0] is not None


# -- finding 9: shared references are walked once per document --------------------------------


def ladder(levels: int) -> RegisteredSchema:
    """Two schemas per level, each referencing both of the level below (2 * levels + 1 documents)."""
    below: List[SchemaReference] = []
    for level in range(levels):
        here = []
        for side in "ab":
            doc = {"type": "enum", "name": f"E{level}{side}", "namespace": "ladder", "symbols": ["X", "Y"]}
            here.append(SchemaReference(f"E{level}{side}", f"l{level}{side}", 1,
                                        CountingSchema("AVRO", json.dumps(doc), 100 + 2 * level, tuple(below))))
        below = here
    top = {"type": "record", "name": "Top", "namespace": "ladder", "fields": [
        {"name": "a", "type": f"E{levels - 1}a"}, {"name": "b", "type": f"ladder.E{levels - 1}b"}]}
    return CountingSchema("AVRO", json.dumps(top), 1, tuple(below))


@pytest.mark.parametrize("levels", [12, 40])
def test_a_ladder_of_shared_references_is_walked_once_per_document(levels: int) -> None:
    schema = ladder(levels)
    CountingSchema.reads = 0
    codec = AvroCodec()
    assert codec.arrow_type(schema) == pa.struct([("a", pa.string()), ("b", pa.string())])
    payload = encode({"type": "record", "name": "T", "fields": [
        {"name": "a", "type": {"type": "enum", "name": "A", "symbols": ["X", "Y"]}},
        {"name": "b", "type": {"type": "enum", "name": "B", "symbols": ["X", "Y"]}}]}, {"a": "Y", "b": "X"})
    column = codec.decode(schema, schema, [payload])
    assert column.errors == (None,) and column.values.to_pylist() == [{"a": "Y", "b": "X"}]
    documents = 2 * levels + 1
    assert CountingSchema.reads <= 20 * documents, f"{CountingSchema.reads} reads of references for {documents} documents"


# -- hostile schema texts ------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "[" * 100_000 + "]" * 100_000,  # json.loads raises RecursionError
    '{"type": "array", "items": ' * 500 + '"int"' + "}" * 500,  # parses, but nested 500 deep
])
def test_deeply_nested_schema_text_is_a_config_error_not_a_recursion_error(text: str) -> None:
    with pytest.raises(ConfigError):
        AvroCodec().arrow_type(RegisteredSchema("AVRO", text, 1))
    reader = registered({"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]})
    column = AvroCodec().decode(RegisteredSchema("AVRO", text, 2), reader, [b"\x02"])
    assert column.values.to_pylist() == [None] and column.errors[0] is not None


def test_a_type_that_doubles_at_each_level_is_refused_not_expanded() -> None:
    fields: List[Any] = [{"name": "x", "type": "int"}]
    doc: Any = {"type": "record", "name": "L0", "fields": fields}
    for level in range(1, 41):
        doc = {"type": "record", "name": f"L{level}", "fields": [
            {"name": "a", "type": doc}, {"name": "b", "type": f"L{level - 1}"}]}
    with pytest.raises(ConfigError, match="fields"):
        AvroCodec().arrow_type(registered(doc))


def test_the_payload_check_accepts_every_valid_record_fastavro_writes() -> None:
    """The check must never refuse what fastavro reads: random records of a writer that needs it."""
    from fastavro.utils import generate_many

    from kafka_group.registry.avro_bounds import bounds_for
    from kafka_group.registry.avro_names import canonical

    writer = {"type": "record", "name": "W", "namespace": "fuzz", "fields": [
        {"name": "marks", "type": {"type": "array", "items": "null"}},
        {"name": "b", "type": "boolean"}, {"name": "i", "type": "int"}, {"name": "l", "type": "long"},
        {"name": "f", "type": "float"}, {"name": "d", "type": "double"}, {"name": "s", "type": "string"},
        {"name": "y", "type": "bytes"}, {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}},
        {"name": "x", "type": {"type": "fixed", "name": "X", "size": 3}},
        {"name": "u", "type": ["null", "string", "E", {"type": "array", "items": "long"}]},
        {"name": "m", "type": {"type": "map", "values": {"type": "record", "name": "V", "fields": [
            {"name": "z", "type": {"type": "array", "items": {"type": "record", "name": "Z", "fields": []}}},
            {"name": "n", "type": ["null", "V"]}]}}},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}
    bounds = bounds_for(canonical(writer))
    assert bounds is not None
    parsed = fastavro.parse_schema(writer)
    for record in generate_many(parsed, 300):
        # fastavro's generator writes random bytes for a decimal, most wider than its 9 digits (which
        # fastavro would round and Arrow refuse): a valid record's decimal is within its precision
        unscaled = int.from_bytes(record["dec"], "big", signed=True) % 10 ** 9 * (-1) ** record["dec"][0]
        record["dec"] = decimal.Decimal(unscaled).scaleb(-2)
        data = encode(writer, record)
        assert bounds.check(data) is None, record


def test_long_names_nested_deep_give_short_messages() -> None:
    """A schema's names reach messages (and quarantined rows' reasons) cut short, however long and deep."""
    doc: Any = {"type": "null"}  # no Spark column: the message names its place
    for level in range(150):
        doc = {"type": "record", "name": f"R{level}", "fields": [{"name": "f" * 20_000, "type": doc}]}
    with pytest.raises(ConfigError) as refused:
        AvroCodec().arrow_type(registered(doc))
    assert len(str(refused.value)) < 2_000
    writer = {"type": "record", "name": "W", "fields": [{"name": "x", "type": "N" * 100_000}]}  # not defined
    reader = registered({"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]})
    column = AvroCodec().decode(registered(writer, 2), reader, [b"\x02"])
    assert column.values.to_pylist() == [None] and len(column.errors[0] or "") <= 1_000


@pytest.mark.parametrize("size", [-1, "3", 1.5, True])
def test_a_fixed_whose_size_is_not_a_count_is_refused(size: Any) -> None:
    """A negative size would walk the payload check backwards (for ever, in an array); fastavro reads
    ``read(-1)`` as the rest of the payload."""
    writer = {"type": "record", "name": "W", "fields": [
        {"name": "marks", "type": {"type": "array", "items": "null"}},
        {"name": "xs", "type": {"type": "array", "items": {"type": "fixed", "name": "F", "size": size}}}]}
    with pytest.raises(ConfigError, match="size"):
        AvroCodec().arrow_type(registered({"type": "record", "name": "W", "fields": [writer["fields"][1]]}))
    reader = {"type": "record", "name": "W", "fields": [{"name": "k", "type": "int", "default": 0}]}
    result = decode_in_subprocess(writer, reader, [zigzag(0) + zigzag(3) + b"\x02\x02\x02" + zigzag(0)])
    assert result["values"] == [None] and "size" in result["errors"][0]
