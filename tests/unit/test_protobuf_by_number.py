"""Protobuf identifies fields by number (issue 33, finding 2).

The oracle is the protobuf runtime itself: the writer's bytes parsed with the READER's compiled
message class (``FromString``, which matches fields by number). Every decoded value must equal what
that parse holds; where protobuf cannot read the writer's type as the reader's, the record is an
error naming the field, never a value.
"""

from __future__ import annotations

import pathlib
from typing import Any, Dict, List

import pytest

pytest.importorskip("google.protobuf")
pytest.importorskip("grpc_tools")

from kafka_group.registry.codec import RegisteredSchema  # noqa: E402
from kafka_group.registry.protobuf_codec import ProtobufCodec  # noqa: E402

from tests.unit.test_protobuf_codec import _compile, _message_class, frame  # noqa: E402

WRITER = """
syntax = "proto3";
package shop;
message Order {
  enum Kind { KIND_UNKNOWN = 0; BUY = 1; SELL = 2; }
  int64 id = 1;
  int64 amount_cents = 2;
  string note = 3;
  Line line = 4;
  map<string, Line> lines = 5;
  Kind kind = 6;
  oneof payment { string card = 7; int32 voucher = 8; }
  int64 amount = 9;
}
message Line { string name = 1; int32 count = 2; }
"""

# Every field renamed (same numbers); 'amount' reused with a new number; nested and enum names changed.
READER = """
syntax = "proto3";
package shop;
message Order {
  enum Kind { NONE = 0; PURCHASE = 1; SALE = 2; }
  int64 order_id = 1;
  int64 total_cents = 2;
  string remark = 3;
  Item item = 4;
  map<string, Item> items = 5;
  Kind kind = 6;
  oneof pay { string card_number = 7; int32 coupon = 8; }
  int64 amount = 10;
}
message Item { string label = 1; int32 qty = 2; }
"""


def _as_dict(message: Any) -> Dict[str, Any]:
    """The oracle's parse as the codec's rows: enum names, maps as pairs, unset messages/oneofs null."""
    out: Dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            out[field.name] = [(k, _as_dict(v)) for k, v in value.items()]
        elif field.message_type is not None:
            out[field.name] = _as_dict(value) if message.HasField(field.name) else None
        elif field.has_presence and not message.HasField(field.name):
            out[field.name] = None
        elif field.enum_type is not None:
            out[field.name] = field.enum_type.values_by_number[value].name
        else:
            out[field.name] = value
    return out


@pytest.fixture(scope="module")
def pools(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Any]:
    tmp = tmp_path_factory.mktemp("by-number")
    return {"writer": _compile(tmp, {"o.proto": WRITER}, "o.proto"), "reader": _compile(tmp, {"o.proto": READER}, "o.proto")}


def _records(pools: Dict[str, Any]) -> List[bytes]:
    Order = _message_class(pools["writer"], "shop.Order")
    full = Order(id=7, amount_cents=1250, note="n", kind=2, voucher=3, amount=99)
    full.line.name, full.line.count = "a", 2
    full.lines["x"].name = "b"
    return [full.SerializeToString(), Order(card="4111").SerializeToString(), Order().SerializeToString()]


def test_fields_renamed_in_the_reader_keep_their_values_as_protobuf_reads_them(pools: Dict[str, Any]) -> None:
    bodies = _records(pools)
    ReaderOrder = _message_class(pools["reader"], "shop.Order")
    expected = [_as_dict(ReaderOrder.FromString(body)) for body in bodies]  # the oracle
    column = ProtobufCodec().decode(RegisteredSchema("PROTOBUF", WRITER, 1), RegisteredSchema("PROTOBUF", READER, 2),
                                    [frame([0], body) for body in bodies])
    assert column.errors == (None, None, None)
    assert column.values.to_pylist() == expected
    first = column.values.to_pylist()[0]
    assert (first["total_cents"], first["remark"], first["kind"], first["coupon"]) == (1250, "n", "SALE", 3)
    assert first["amount"] == 0  # the name is reused with another number: not the writer's 'amount' (99)
    assert first["item"] == {"label": "a", "qty": 2} and first["items"] == [("x", {"label": "b", "qty": 0})]


@pytest.mark.parametrize("writer_type, reader_type, value", [
    ("string", "int64", '"12"'), ("sint32", "int32", "-1"), ("fixed32", "uint32", "5"), ("int64", "int32", "5"),
    ("float", "double", "0.5"), ("bytes", "Line", '"x"'), ("repeated int32", "int32", "[1, 2]"),
])
def test_a_writer_type_protobuf_cannot_read_as_the_readers_is_each_records_error(
        tmp_path: pathlib.Path, writer_type: str, reader_type: str, value: str) -> None:
    """Where protobuf would put the value among unknown fields, reinterpret or truncate it, or keep only
    the last of several, every record of that writer is an error naming the field (by the reader's name)."""
    writer = f'syntax = "proto3"; package w; message M {{ {writer_type} v = 4; }} message Line {{ string s = 1; }}'
    reader = f'syntax = "proto3"; package w; message M {{ {reader_type} renamed = 4; }} message Line {{ string s = 1; }}'
    M = _message_class(_compile(tmp_path, {"m.proto": writer}, "m.proto"), "w.M")
    from google.protobuf import text_format

    body = text_format.Parse(f"v: {value}", M()).SerializeToString()
    column = ProtobufCodec().decode(RegisteredSchema("PROTOBUF", writer, 3), RegisteredSchema("PROTOBUF", reader, 4),
                                    [frame([0], body)])
    assert column.values.to_pylist() == [None]
    assert str(column.errors[0]).startswith("field 'renamed' (number 4) is ")


def test_value_preserving_changes_protobuf_reads_are_read(tmp_path: pathlib.Path) -> None:
    writer = ('syntax = "proto3"; package w; enum E { A = 0; B = 1; } message M { int32 a = 1; uint32 b = 2; '
              'sint32 c = 3; string d = 4; int32 e = 5; E f = 6; }')
    reader = ('syntax = "proto3"; package w; enum E { A = 0; B = 1; } message M { int64 a = 1; uint64 b = 2; '
              'sint64 c = 3; bytes d = 4; repeated int64 e = 5; int32 f = 6; }')
    M = _message_class(_compile(tmp_path, {"m.proto": writer}, "m.proto"), "w.M")
    body = M(a=-5, b=2**32 - 1, c=-7, d="é", e=-1, f=1).SerializeToString()
    column = ProtobufCodec().decode(RegisteredSchema("PROTOBUF", writer, 5), RegisteredSchema("PROTOBUF", reader, 6),
                                    [frame([0], body)])
    assert column.errors == (None,)
    assert column.values.to_pylist() == [{"a": -5, "b": 2**32 - 1, "c": -7, "d": "é".encode(), "e": [-1], "f": 1}]


def test_a_closed_proto2_reader_enum_lacking_a_writer_number_is_each_records_error(tmp_path: pathlib.Path) -> None:
    """protobuf drops a number a closed (proto2) enum lacks into the unknown fields: the reader would
    see the field unset (or a shorter list), so every record of that writer is an error instead."""
    writer = 'syntax = "proto2"; package w; enum E { A = 0; B = 1; C = 2; } message M { repeated E e = 1; }'
    reader = 'syntax = "proto2"; package w; enum E { A = 0; B = 1; } message M { repeated E kinds = 1; }'
    M = _message_class(_compile(tmp_path, {"m.proto": writer}, "m.proto"), "w.M")
    ReaderM = _message_class(_compile(tmp_path, {"m.proto": reader}, "m.proto"), "w.M")
    body = M(e=[1, 2]).SerializeToString()
    assert list(ReaderM.FromString(body).kinds) == [1]  # what protobuf would land: C silently gone
    column = ProtobufCodec().decode(RegisteredSchema("PROTOBUF", writer, 7), RegisteredSchema("PROTOBUF", reader, 8),
                                    [frame([0], body)])
    assert column.values.to_pylist() == [None]
    assert str(column.errors[0]).startswith("field 'kinds[]' (number 1) is enum w.E in the writer's schema and the "
                                            "closed (proto2) enum w.E in the reader's")


def test_a_writer_enum_name_survives_a_bad_record_after_it_in_the_batch(tmp_path: pathlib.Path) -> None:
    """The names of enum values only the writer has came from the batch's last message index seen: a
    record of another message after a good one left the good one's value unnamed (an error)."""
    writer = 'syntax = "proto3"; package w; enum E { A = 0; B = 1; C = 2; } message M { E e = 1; } message O {}'
    reader = 'syntax = "proto3"; package w; enum E { A = 0; B = 1; } message M { E e = 1; } message O {}'
    M = _message_class(_compile(tmp_path, {"m.proto": writer}, "m.proto"), "w.M")
    body = M(e=2).SerializeToString()
    column = ProtobufCodec().decode(RegisteredSchema("PROTOBUF", writer, 9), RegisteredSchema("PROTOBUF", reader, 10),
                                    [frame([0], body), frame([1], b"")])
    assert column.errors[0] is None and column.values.to_pylist()[0] == {"e": "C"}
    assert column.errors[1] == "the record is a w.O message, the reader schema's message is w.M"
