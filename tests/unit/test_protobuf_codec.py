"""The Protobuf codec (issue 29): .proto text -> Arrow type, Confluent-framed payloads -> Arrow values.

Payloads are made the way a producer makes them: protoc (grpcio-tools) compiles the .proto text
into a descriptor set, the protobuf library builds the message class from it and serializes, and
the message-index array is written per Confluent's documented wire format (zigzag varints; a single
0 byte for the first message). The registry end to end (ProtobufSerializer) is the integration
tests'. No test here asserts how the codec parses: only types, values and error texts.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
from decimal import Decimal
from typing import Any, Dict, List

import pyarrow as pa
import pytest

pytest.importorskip("google.protobuf")
pytest.importorskip("grpc_tools")

from kafka_group.errors import ConfigError  # noqa: E402
from kafka_group.registry.codec import RegisteredSchema, SchemaReference  # noqa: E402
from tests.raw_kafka import zigzag_varint  # noqa: E402
from kafka_group.registry.protobuf_codec import ProtobufCodec  # noqa: E402

ORDER_V1 = """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";

message Order {
  enum Kind { KIND_UNKNOWN = 0; BUY = 1; SELL = 2; }
  int64 id = 1;
  string sku = 2;
  repeated int32 quantities = 3;
  map<string, double> prices = 4;
  Kind kind = 5;
  google.protobuf.Timestamp placed_at = 6;
  google.protobuf.Int32Value discount = 7;
  uint64 big = 8;
  oneof payment { string card = 9; int32 voucher = 10; }
  Line line = 11;
  bytes raw = 12;
  optional int32 priority = 13;
  repeated Line lines = 14;
  uint32 small = 15;
  float ratio = 16;
  bool gift = 17;
}

message Line { string name = 1; sint64 count = 2; }
"""

# v2: 'sku' removed (its number reserved), 'channel' added, a new enum value
ORDER_V2 = ORDER_V1.replace("string sku = 2;", "reserved 2; string channel = 18;").replace(
    "SELL = 2;", "SELL = 2; RETURN = 3;")


def _compile(tmp_path: pathlib.Path, files: Dict[str, str], root: str) -> Any:
    """A descriptor pool of ``files`` as protoc compiles them (the producer's side)."""
    from google.protobuf import descriptor_pb2, descriptor_pool
    import grpc_tools

    folder = tmp_path / f"protoc-{len(list(tmp_path.iterdir()))}"
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    out = folder / "set.pb"
    include = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{folder}", f"-I{include}", "--include_imports",
                    f"--descriptor_set_out={out}", root], check=True, cwd=folder)
    pool = descriptor_pool.DescriptorPool()
    for file_proto in descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file:
        pool.Add(file_proto)
    return pool


def _message_class(pool: Any, name: str) -> Any:
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


def frame(indexes: List[int], body: bytes) -> bytes:
    """What follows the magic byte and schema id in Confluent's Protobuf wire format."""
    if indexes == [0]:
        return b"\x00" + body
    return zigzag_varint(len(indexes)) + b"".join(zigzag_varint(i) for i in indexes) + body


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Any]:
    tmp = tmp_path_factory.mktemp("shop")
    return {"v1": _compile(tmp, {"order.proto": ORDER_V1}, "order.proto"),
            "v2": _compile(tmp, {"order.proto": ORDER_V2}, "order.proto"),
            "schema_v1": RegisteredSchema("PROTOBUF", ORDER_V1, 1),
            "schema_v2": RegisteredSchema("PROTOBUF", ORDER_V2, 2)}


def test_the_arrow_type_follows_the_mapping_table(shop: Dict[str, Any]) -> None:
    line = pa.struct([("name", pa.string()), ("count", pa.int64())])
    assert ProtobufCodec().arrow_type(shop["schema_v1"]) == pa.struct([
        ("id", pa.int64()), ("sku", pa.string()), ("quantities", pa.list_(pa.int32())),
        ("prices", pa.map_(pa.string(), pa.float64())), ("kind", pa.string()),
        ("placed_at", pa.timestamp("us", tz="UTC")), ("discount", pa.int32()), ("big", pa.decimal128(20, 0)),
        ("card", pa.string()), ("voucher", pa.int32()), ("line", line), ("raw", pa.binary()),
        ("priority", pa.int32()), ("lines", pa.list_(line)), ("small", pa.int64()), ("ratio", pa.float32()),
        ("gift", pa.bool_()),
    ])


def test_payloads_decode_into_typed_values_and_unset_fields_are_null(shop: Dict[str, Any]) -> None:
    Order = _message_class(shop["v1"], "shop.Order")
    full = Order(id=7, sku="A-1", quantities=[1, 2], kind=1, big=2**64 - 1, voucher=3, raw=b"\x00\xff",
                 priority=0, small=2**32 - 1, ratio=0.5, gift=True)
    full.prices["eur"] = 9.5
    full.placed_at.seconds, full.placed_at.nanos = 1_700_000_000, 123_456_789
    full.discount.value = 0
    full.line.name, full.line.count = "L", -3
    full.lines.add(name="a", count=1)
    empty = Order()
    column = ProtobufCodec().decode(shop["schema_v1"], shop["schema_v1"],
                                    [frame([0], full.SerializeToString()), frame([0], empty.SerializeToString())])
    assert column.errors == (None, None)
    first, second = column.values.to_pylist()
    assert first["placed_at"].isoformat() == "2023-11-14T22:13:20.123456+00:00"
    assert {k: v for k, v in first.items() if k != "placed_at"} == {
        "id": 7, "sku": "A-1", "quantities": [1, 2], "prices": [("eur", 9.5)], "kind": "BUY",
        "discount": 0, "big": Decimal(2**64 - 1), "card": None, "voucher": 3, "line": {"name": "L", "count": -3},
        "raw": b"\x00\xff", "priority": 0, "lines": [{"name": "a", "count": 1}], "small": 2**32 - 1,
        "ratio": 0.5, "gift": True}
    # proto3 scalars hold their defaults; messages, wrappers, oneof members and 'optional' fields are null
    assert second == {"id": 0, "sku": "", "quantities": [], "prices": [], "kind": "KIND_UNKNOWN",
                      "placed_at": None, "discount": None, "big": Decimal(0), "card": None, "voucher": None,
                      "line": None, "raw": b"", "priority": None, "lines": [], "small": 0, "ratio": 0.0,
                      "gift": False}


def test_wire_bytes_written_by_hand_decode(shop: Dict[str, Any]) -> None:
    """Protobuf's documented example (field 1 = 150 is 08 96 01) behind the one-byte message index."""
    column = ProtobufCodec().decode(shop["schema_v1"], shop["schema_v1"], [b"\x00\x08\x96\x01"])
    assert column.errors == (None,) and column.values.to_pylist()[0]["id"] == 150


def test_nested_message_indexes_select_the_message(shop: Dict[str, Any], tmp_path: pathlib.Path) -> None:
    text = 'syntax = "proto3"; package p; message Other { string x = 1; } ' \
           'message Outer { message Inner { int32 n = 1; } Inner inner = 1; }'
    schema = RegisteredSchema("PROTOBUF", text, 9)
    Inner = _message_class(_compile(tmp_path, {"m.proto": text}, "m.proto"), "p.Outer.Inner")
    codec = ProtobufCodec(message="Outer.Inner")
    assert codec.arrow_type(schema) == pa.struct([("n", pa.int32())])
    body = Inner(n=5).SerializeToString()
    column = codec.decode(schema, schema, [frame([1, 0], body), frame([0], body), frame([1], body)])
    assert column.values.to_pylist() == [{"n": 5}, None, None]
    assert column.errors[0] is None
    assert column.errors[1] == "the record is a p.Other message, the reader schema's message is p.Outer.Inner"
    assert column.errors[2] == "the record is a p.Outer message, the reader schema's message is p.Outer.Inner"


def test_evolution_reads_by_field_number_in_both_directions(shop: Dict[str, Any]) -> None:
    """A v2 record read with v1: 'channel' skipped, 'sku' (gone) its proto3 default, as protobuf reads
    it; a v1 record read with v2: 'channel' (not written) likewise. A v2 enum value is named by the
    writer's schema (issue 33: fields by number, not by name)."""
    new = _message_class(shop["v2"], "shop.Order")(id=2, channel="web", kind=3)
    old = _message_class(shop["v1"], "shop.Order")(id=1, sku="A")
    codec = ProtobufCodec()
    as_v1 = codec.decode(shop["schema_v2"], shop["schema_v1"], [frame([0], new.SerializeToString())])
    assert as_v1.errors == (None,)
    assert {k: as_v1.values.to_pylist()[0][k] for k in ("id", "sku", "kind")} == {"id": 2, "sku": "",
                                                                                  "kind": "RETURN"}
    as_v2 = codec.decode(shop["schema_v1"], shop["schema_v2"], [frame([0], old.SerializeToString())])
    assert as_v2.errors == (None,)
    assert {k: as_v2.values.to_pylist()[0][k] for k in ("id", "channel")} == {"id": 1, "channel": ""}


def test_an_incompatible_type_change_is_each_records_error_never_a_value(shop: Dict[str, Any],
                                                                         tmp_path: pathlib.Path) -> None:
    changed = ORDER_V1.replace("int64 id = 1;", "string id = 1;")
    writer = RegisteredSchema("PROTOBUF", changed, 3)
    record = _message_class(_compile(tmp_path, {"o.proto": changed}, "o.proto"), "shop.Order")(id="12")
    column = ProtobufCodec().decode(writer, shop["schema_v1"], [frame([0], record.SerializeToString())] * 2)
    assert column.values.to_pylist() == [None, None]
    assert column.errors == ("field 'id' (number 1) is string in the writer's schema and int64 in the reader's, "
                             "which protobuf does not read as the same value: the record cannot be read with "
                             "the reader schema",) * 2
    widened = ProtobufCodec().decode(shop["schema_v1"], RegisteredSchema("PROTOBUF", ORDER_V1.replace(
        "repeated int32 quantities", "repeated int64 quantities")), [frame([0], _message_class(
            shop["v1"], "shop.Order")(quantities=[2**31 - 1]).SerializeToString())])
    assert widened.errors == (None,) and widened.values.to_pylist()[0]["quantities"] == [2**31 - 1]


def test_bad_payloads_are_errors_with_reasons_and_the_good_ones_still_decode(shop: Dict[str, Any]) -> None:
    good = frame([0], _message_class(shop["v1"], "shop.Order")(id=1).SerializeToString())
    column = ProtobufCodec().decode(shop["schema_v1"], shop["schema_v1"], [
        b"", b"\x00\xff", frame([5], b""), b"\x00\x08\x96\x01\x7a", good, b"\x00\x28\x07"])
    assert column.values.to_pylist()[:4] == [None] * 4 and column.values.to_pylist()[4]["id"] == 1
    assert column.errors[0] == "not a Protobuf payload in Confluent's framing: the message-index array is truncated"
    assert str(column.errors[1]).startswith("the Protobuf message does not decode: ")
    assert column.errors[2] == ("not a Protobuf payload in Confluent's framing: message index path [5] names no "
                                "message of the schema")
    assert str(column.errors[3]).startswith("the Protobuf message does not decode: ")
    assert column.errors[4] is None
    # kind = 7 is in no version of the enum: an error, not a number shown as a name
    assert column.errors[5] == "field 'kind': 7 is not a value of enum shop.Order.Kind"
    assert column.values.to_pylist()[5] is None


def test_a_recursive_message_is_a_config_error_naming_the_field() -> None:
    text = 'syntax = "proto3"; message Tree { string name = 1; Node root = 2; } ' \
           'message Node { int32 v = 1; repeated Node children = 2; }'
    with pytest.raises(ConfigError, match=r"field 'root\.children' is recursive \(message Node contains itself\)"):
        ProtobufCodec().arrow_type(RegisteredSchema("PROTOBUF", text, 4))


def test_a_schema_protoc_refuses_is_a_config_error_with_protocs_message() -> None:
    with pytest.raises(ConfigError, match=r"the Protobuf schema \(id 5\) does not parse: .*Unknown|"
                                          r"the Protobuf schema \(id 5\) does not parse: .*not defined"):
        ProtobufCodec().arrow_type(RegisteredSchema("PROTOBUF", 'syntax = "proto3"; message A { Missing m = 1; }', 5))


def test_imports_come_from_the_schemas_references(tmp_path: pathlib.Path) -> None:
    common = 'syntax = "proto3"; package common; message Money { int64 cents = 1; string currency = 2; }'
    text = 'syntax = "proto3"; package pay; import "common/money.proto"; message Payment { common.Money amount = 1; }'
    reference = SchemaReference("common/money.proto", "money-value", 1, RegisteredSchema("PROTOBUF", common, 10))
    schema = RegisteredSchema("PROTOBUF", text, 11, (reference,))
    Payment = _message_class(_compile(tmp_path, {"common/money.proto": common, "pay.proto": text}, "pay.proto"),
                             "pay.Payment")
    record = Payment()
    record.amount.cents, record.amount.currency = 250, "EUR"
    column = ProtobufCodec().decode(schema, schema, [frame([0], record.SerializeToString())])
    assert column.values.to_pylist() == [{"amount": {"cents": 250, "currency": "EUR"}}]


def test_maps_of_messages_json_types_and_nulls_next_to_bad_records(tmp_path: pathlib.Path) -> None:
    """Map values that are messages, Struct as JSON text, and a bad record between good ones with unset
    nested messages: each value lands in its own row."""
    text = ('syntax = "proto3"; package m; import "google/protobuf/struct.proto"; '
            'message Bag { map<int32, Item> items = 1; google.protobuf.Struct attrs = 2; Item best = 3; } '
            'message Item { string name = 1; }')
    schema = RegisteredSchema("PROTOBUF", text, 12)
    Bag = _message_class(_compile(tmp_path, {"bag.proto": text}, "bag.proto"), "m.Bag")
    full = Bag()
    full.items[3].name = "three"
    full.attrs.update({"k": [1, "x"]})
    full.best.name = "b"
    codec = ProtobufCodec()
    assert codec.arrow_type(schema) == pa.struct([
        ("items", pa.map_(pa.int32(), pa.struct([("name", pa.string())]))), ("attrs", pa.string()),
        ("best", pa.struct([("name", pa.string())]))])
    column = codec.decode(schema, schema, [frame([0], Bag().SerializeToString()), b"\x00\x0a\x05",
                                           frame([0], full.SerializeToString())])
    assert column.values.to_pylist() == [
        {"items": [], "attrs": None, "best": None}, None,
        {"items": [(3, {"name": "three"})], "attrs": '{"k":[1.0,"x"]}', "best": {"name": "b"}}]
    assert column.errors[0] is None and column.errors[2] is None
    assert str(column.errors[1]).startswith("the Protobuf message does not decode: ")


def test_a_timestamp_beyond_arrows_range_is_that_records_error(shop: Dict[str, Any]) -> None:
    """Timestamp.seconds is any int64 on the wire; in microseconds 2**62 s does not fit Arrow's int64."""
    Order = _message_class(shop["v1"], "shop.Order")
    far = Order(id=1)
    far.placed_at.seconds = 2**62
    column = ProtobufCodec().decode(shop["schema_v1"], shop["schema_v1"],
                                    [frame([0], far.SerializeToString()), frame([0], Order(id=2).SerializeToString())])
    assert column.errors == (f"field 'placed_at': {2**62} seconds is beyond the timestamps Spark holds", None)
    assert [v and v["id"] for v in column.values.to_pylist()] == [None, 2]


def test_a_writer_schema_protoc_refuses_makes_each_of_its_records_an_error(shop: Dict[str, Any]) -> None:
    writer = RegisteredSchema("PROTOBUF", 'syntax = "proto3"; import "other/money.proto"; message Order {}', 6)
    column = ProtobufCodec().decode(writer, shop["schema_v1"], [b"\x00", b"\x00"])
    assert column.values.to_pylist() == [None, None]
    assert column.errors[0] == column.errors[1]
    assert str(column.errors[0]).startswith("the Protobuf schema (id 6) does not parse: other/money.proto")


def test_confluents_own_imports_need_no_reference(tmp_path: pathlib.Path) -> None:
    """Confluent's serializers import confluent/meta.proto (field metadata) and confluent/type/decimal.proto,
    which its registry knows without references."""
    text = ('syntax = "proto3"; package c; import "confluent/meta.proto"; import "confluent/type/decimal.proto"; '
            'message Price { confluent.type.Decimal amount = 1 [(confluent.field_meta).params = '
            '{key: "precision" value: "8"}]; string label = 2 [(confluent.field_meta).doc = "shown"]; }')
    schema = RegisteredSchema("PROTOBUF", text, 13)
    from kafka_group.registry.protobuf_schema import CONFLUENT_FILES

    Price = _message_class(_compile(tmp_path, {"price.proto": text, **CONFLUENT_FILES}, "price.proto"), "c.Price")
    record = Price(label="x")
    record.amount.value, record.amount.precision, record.amount.scale = b"\x04\xd2", 8, 2
    column = ProtobufCodec().decode(schema, schema, [frame([0], record.SerializeToString())])
    assert column.values.to_pylist() == [{"amount": {"value": b"\x04\xd2", "precision": 8, "scale": 2},
                                          "label": "x"}]


def test_a_used_codec_pickles_with_its_options_and_decodes_after(shop: Dict[str, Any]) -> None:
    """Spark ships the reader (and its codec) to executors by pickling; descriptor pools do not pickle."""
    import pickle

    codec = ProtobufCodec(message="Order")
    payload = frame([0], _message_class(shop["v1"], "shop.Order")(id=4).SerializeToString())
    codec.decode(shop["schema_v1"], shop["schema_v1"], [payload])
    copy = pickle.loads(pickle.dumps(codec))
    assert copy.decode(shop["schema_v1"], shop["schema_v1"], [payload]).values.to_pylist()[0]["id"] == 4
