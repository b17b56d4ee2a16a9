"""Avro names as the specification resolves them (issue 33, finding 1): full names, inherited
namespaces, names with dots, the null namespace, aliases, and names from referenced schemas.

Each payload is written by fastavro and the codec's column is compared with fastavro's own
decoding of the same bytes (the oracle), with the column's type checked where a wrong name
would give the wrong struct.
"""

from __future__ import annotations

import datetime
import io
import json
from typing import Any, Dict, List, Optional, Sequence

import pyarrow as pa
import pytest

fastavro = pytest.importorskip("fastavro")

from kafka_group.errors import ConfigError  # noqa: E402
from kafka_group.registry.avro_codec import AvroCodec  # noqa: E402
from kafka_group.registry.codec import RegisteredSchema, SchemaReference  # noqa: E402

UTC = datetime.timezone.utc


def registered(doc: Any, schema_id: Optional[int] = 1, references: Sequence[SchemaReference] = ()) -> RegisteredSchema:
    return RegisteredSchema("AVRO", json.dumps(doc), schema_id, tuple(references))


def ref(name: str, doc: Any, schema_id: int) -> SchemaReference:
    return SchemaReference(name, f"{name}-value", 1, registered(doc, schema_id))


def encode(doc: Any, record: Any, named: Sequence[Any] = ()) -> bytes:
    known: Dict[str, Any] = {}
    for other in named:
        fastavro.parse_schema(other, named_schemas=known)
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(doc, named_schemas=known), record)
    return out.getvalue()


def oracle(doc: Any, data: bytes, named: Sequence[Any] = ()) -> Any:
    known: Dict[str, Any] = {}
    for other in named:
        fastavro.parse_schema(other, named_schemas=known)
    return fastavro.schemaless_reader(io.BytesIO(data), fastavro.parse_schema(doc, named_schemas=known), None)


def as_rows(value: Any) -> Any:
    """fastavro's values in the shape Arrow gives back (maps as lists of pairs)."""
    if isinstance(value, dict):
        return {k: as_rows(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_rows(v) for v in value]
    return value


STREET = pa.struct([("street", pa.string())])
IBAN = pa.struct([("iban", pa.string())])

#: As Java's Schema.toString() writes it: the nested Address inherits com.acme and carries no
#: namespace; the billing Address has its own; a same-namespace reference is a bare name.
ORDER: Dict[str, Any] = {"type": "record", "name": "Order", "namespace": "com.acme", "fields": [
    {"name": "home", "type": {"type": "record", "name": "Address", "fields": [{"name": "street", "type": "string"}]}},
    {"name": "billing", "type": {"type": "record", "name": "Address", "namespace": "com.acme.billing",
                                 "fields": [{"name": "iban", "type": "string"}]}},
    {"name": "returns", "type": "Address"},
]}
ORDER_RECORD = {"home": {"street": "Main St 1"}, "billing": {"iban": "DE00"}, "returns": {"street": "Dock 9"}}


def test_a_bare_name_resolves_in_the_enclosing_namespace_as_java_writes_it() -> None:
    codec = AvroCodec()
    assert codec.arrow_type(registered(ORDER)) == pa.struct([("home", STREET), ("billing", IBAN), ("returns", STREET)])
    data = encode(ORDER, ORDER_RECORD)
    column = codec.decode(registered(ORDER), registered(ORDER), [data])
    assert column.errors == (None,)
    assert column.values.to_pylist() == [oracle(ORDER, data)] == [ORDER_RECORD]


def test_a_full_name_reaches_a_type_whose_namespace_is_inherited() -> None:
    doc = json.loads(json.dumps(ORDER))
    doc["fields"][2]["type"] = "com.acme.Address"
    doc["fields"].append({"name": "bill2", "type": "com.acme.billing.Address"})
    record = dict(ORDER_RECORD, bill2={"iban": "FR11"})
    codec = AvroCodec()
    assert codec.arrow_type(registered(doc)) == pa.struct(
        [("home", STREET), ("billing", IBAN), ("returns", STREET), ("bill2", IBAN)])
    data = encode(doc, record)
    column = codec.decode(registered(doc), registered(doc), [data])
    assert column.errors == (None,) and column.values.to_pylist() == [oracle(doc, data)] == [record]


def test_enums_and_fixed_inherit_the_enclosing_namespace() -> None:
    doc = {"type": "record", "name": "Order", "namespace": "com.acme", "fields": [
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        {"name": "other", "type": {"type": "enum", "name": "Kind", "namespace": "other", "symbols": ["X", "Y"]}},
        {"name": "kind2", "type": "com.acme.Kind"},
        {"name": "code", "type": {"type": "fixed", "name": "Code", "size": 2}},
        {"name": "code2", "type": "com.acme.Code"},
        {"name": "code3", "type": "Code"},
    ]}
    record = {"kind": "B", "other": "X", "kind2": "A", "code": b"ab", "code2": b"cd", "code3": b"ef"}
    data = encode(doc, record)
    column = AvroCodec().decode(registered(doc), registered(doc), [data])
    assert column.errors == (None,) and column.values.to_pylist() == [oracle(doc, data)] == [record]


def test_a_name_with_dots_carries_its_own_namespace_for_what_it_encloses() -> None:
    doc = {"type": "record", "name": "Top", "namespace": "com.acme", "fields": [
        {"name": "inner", "type": {"type": "record", "name": "x.y.Inner", "namespace": "ignored", "fields": [
            {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["P", "Q"]}},
            {"name": "again", "type": ["null", "E"], "default": None}]}},
        {"name": "e2", "type": "x.y.E"},
    ]}
    record = {"inner": {"e": "Q", "again": "P"}, "e2": "P"}
    data = encode(doc, record)
    column = AvroCodec().decode(registered(doc), registered(doc), [data])
    assert column.errors == (None,) and column.values.to_pylist() == [oracle(doc, data)] == [record]


def test_the_null_namespace_and_java_s_bare_reference_to_it() -> None:
    # A definition with "namespace": "" is in the null namespace even inside com.acme ...
    doc = {"type": "record", "name": "Order", "namespace": "com.acme", "fields": [
        {"name": "a", "type": {"type": "record", "name": "Foo", "namespace": "", "fields": [{"name": "x", "type": "int"}]}},
        {"name": "b", "type": {"type": "record", "name": "Foo", "fields": [{"name": "y", "type": "string"}]}},
        {"name": "c", "type": "Foo"},  # com.acme.Foo
    ]}
    record = {"a": {"x": 1}, "b": {"y": "why"}, "c": {"y": "see"}}
    data = encode(doc, record)
    codec = AvroCodec()
    assert codec.arrow_type(registered(doc)) == pa.struct([
        ("a", pa.struct([("x", pa.int32())])), ("b", pa.struct([("y", pa.string())])),
        ("c", pa.struct([("y", pa.string())]))])
    assert codec.decode(registered(doc), registered(doc), [data]).values.to_pylist() == [oracle(doc, data)]
    # ... and a referenced schema without a namespace is found from a namespaced one by its bare name,
    # as Java's parser does (it tries the null namespace when the enclosing one has no such name)
    address = {"type": "record", "name": "Address", "fields": [{"name": "street", "type": "string"}]}
    order = {"type": "record", "name": "Order", "namespace": "com.acme", "fields": [{"name": "home", "type": "Address"}]}
    writer = registered(order, 7, [ref("Address", address, 8)])
    plain = {"type": "record", "name": "Order", "fields": [{"name": "home", "type": "Address"}]}  # the same bytes
    data = encode(plain, {"home": {"street": "Elm 2"}}, [address])
    assert AvroCodec().arrow_type(writer) == pa.struct([("home", STREET)])
    column = AvroCodec().decode(writer, writer, [data])
    assert column.errors == (None,) and column.values.to_pylist() == [oracle(plain, data, [address])]


def test_referenced_schemas_are_known_by_their_full_names() -> None:
    home = {"type": "record", "name": "Address", "namespace": "com.acme", "fields": [{"name": "street", "type": "string"}]}
    bill = {"type": "record", "name": "Address", "namespace": "com.acme.billing", "fields": [{"name": "iban", "type": "string"}]}
    order = {"type": "record", "name": "Order", "namespace": "com.acme", "fields": [
        {"name": "returns", "type": "Address"}, {"name": "billing", "type": "com.acme.billing.Address"}]}
    writer = registered(order, 3, [ref("home", home, 4), ref("bill", bill, 5)])
    codec = AvroCodec()
    assert codec.arrow_type(writer) == pa.struct([("returns", STREET), ("billing", IBAN)])
    record = {"returns": {"street": "Dock 9"}, "billing": {"iban": "DE00"}}
    data = encode(order, record, [home, bill])
    column = codec.decode(writer, writer, [data])
    assert column.errors == (None,) and column.values.to_pylist() == [oracle(order, data, [home, bill])] == [record]


def _timestamps(unit_home: str, unit_bill: str) -> Dict[str, Any]:
    def address(name: str, namespace: Optional[str], unit: str) -> Dict[str, Any]:
        doc: Dict[str, Any] = {"type": "record", "name": name, "fields": [
            {"name": "at", "type": {"type": "long", "logicalType": f"timestamp-{unit}"}}]}
        if namespace:
            doc["namespace"] = namespace
        return doc
    return {"type": "record", "name": "Order", "namespace": "com.acme", "fields": [
        {"name": "home", "type": address("Address", None, unit_home)},
        {"name": "billing", "type": address("Address", "com.acme.billing", unit_bill)},
        {"name": "returns", "type": "Address"}]}


def test_writer_and_reader_resolution_pairs_types_by_their_full_names() -> None:
    writer, reader = _timestamps("millis", "micros"), _timestamps("micros", "micros")
    instant = datetime.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)
    record = {"home": {"at": instant}, "billing": {"at": instant}, "returns": {"at": instant}}
    data = encode(writer, record)
    column = AvroCodec().decode(registered(writer, 2), registered(reader, 1), [data])
    assert column.errors == (None,)
    assert column.values.to_pylist() == [oracle(writer, data)] == [record]


def test_a_reader_type_alias_pairs_a_renamed_writer_type_as_fastavro_does() -> None:
    writer = {"type": "record", "name": "R", "namespace": "com.old", "fields": [
        {"name": "addr", "type": {"type": "record", "name": "Addr", "fields": [
            {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}}]}
    reader = {"type": "record", "name": "R", "namespace": "com.acme", "fields": [
        {"name": "address", "aliases": ["addr"], "type": {"type": "record", "name": "Address", "aliases": ["Addr"],
                                                          "fields": [{"name": "at", "type": {
                                                              "type": "long", "logicalType": "timestamp-micros"}}]}}]}
    instant = datetime.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)
    data = encode(writer, {"addr": {"at": instant}})
    column = AvroCodec().decode(registered(writer, 2), registered(reader, 1), [data])
    assert column.errors == (None,) and column.values.to_pylist() == [{"address": {"at": instant}}]


@pytest.mark.parametrize("doc,match", [
    ({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": {"type": "enum", "name": "E", "symbols": ["A"]}},
        {"name": "b", "type": {"type": "enum", "name": "E", "symbols": ["B"]}}]}, "defined twice"),
    ({"type": "record", "name": "R", "namespace": "com.acme", "fields": [
        {"name": "a", "type": "com.Address"}]}, "not defined"),
])
def test_names_the_specification_refuses_are_config_errors(doc: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        AvroCodec().arrow_type(registered(doc))


def test_many_named_types_of_one_short_name_each_keep_their_own_struct() -> None:
    fields: List[Any] = []
    for i in range(5):
        fields.append({"name": f"f{i}", "type": {"type": "record", "name": "Same", "namespace": f"ns{i}",
                                                 "fields": [{"name": f"v{i}", "type": "int"}]}})
    fields += [{"name": f"g{i}", "type": f"ns{i}.Same"} for i in range(5)]
    doc = {"type": "record", "name": "Top", "fields": fields}
    record = {**{f"f{i}": {f"v{i}": i} for i in range(5)}, **{f"g{i}": {f"v{i}": 10 + i} for i in range(5)}}
    data = encode(doc, record)
    column = AvroCodec().decode(registered(doc), registered(doc), [data])
    assert column.errors == (None,) and column.values.to_pylist() == [as_rows(oracle(doc, data))] == [record]
