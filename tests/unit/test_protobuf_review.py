"""Protobuf reader/writer pairs and Apicurio descriptors a review found read wrongly or crashing."""

from __future__ import annotations

import base64
from typing import Any, Callable

import pytest

pytest.importorskip("google.protobuf")
pytest.importorskip("grpc_tools")

from kafka_group.registry.codec import DecodedColumn, RegisteredSchema  # noqa: E402
from kafka_group.registry.protobuf_codec import ProtobufCodec  # noqa: E402
from kafka_group.registry.protobuf_schema import load_proto  # noqa: E402
from kafka_group.registry.protobuf_text import as_proto_text  # noqa: E402


def _read(writer_text: str, reader_text: str, build: Callable[[Any], None]) -> DecodedColumn:
    writer, reader = RegisteredSchema("PROTOBUF", writer_text, 1, ()), RegisteredSchema("PROTOBUF", reader_text, 2, ())
    _, message_class = load_proto(writer).message([0])
    message = message_class()
    build(message)
    return ProtobufCodec().decode(writer, reader, [b"\x00" + message.SerializeToString()])


def _set(**values: Any) -> Callable[[Any], None]:
    def build(message: Any) -> None:
        for name, value in values.items():
            setattr(message, name, value)
    return build


def test_two_writer_fields_in_one_reader_oneof_are_each_records_error_naming_them() -> None:
    """protobuf keeps only the last of a oneof's members: a=7 would be dropped without a word."""
    column = _read('syntax="proto3"; message M { int32 a = 1; string b = 2; }',
                   'syntax="proto3"; message M { oneof x { int32 a = 1; string b = 2; } }',
                   _set(a=7, b="hi"))
    assert column.values.to_pylist() == [None]
    assert column.errors[0] is not None and "'a'" in column.errors[0] and "'b'" in column.errors[0]
    assert "oneof" in column.errors[0]


def test_one_writer_oneof_into_the_same_reader_oneof_still_reads() -> None:
    column = _read('syntax="proto3"; message M { oneof x { int32 a = 1; string b = 2; } int32 c = 3; }',
                   'syntax="proto3"; message M { oneof y { int32 a = 1; string b = 2; } int32 c = 3; }',
                   _set(a=7, c=1))
    assert column.errors == (None,) and column.values.to_pylist() == [{"a": 7, "b": None, "c": 1}]


def test_an_implicit_zero_read_as_optional_is_null_as_protobuf_reads_it() -> None:
    """proto3 writes no implicit field holding 0; the reader's ``optional`` then has no value
    (``HasField`` is False in protobuf's runtime), so the codec reads null, as documented."""
    column = _read('syntax="proto3"; message M { int32 a = 1; }', 'syntax="proto3"; message M { optional int32 a = 1; }',
                   _set(a=0))
    assert column.errors == (None,) and column.values.to_pylist() == [{"a": None}]


def _encoded(file: Any) -> str:
    return base64.b64encode(file.SerializeToString()).decode()


def test_a_map_entry_without_fields_is_left_unprinted_not_a_crash() -> None:
    from google.protobuf import descriptor_pb2

    file = descriptor_pb2.FileDescriptorProto(name="x.proto", syntax="proto3")
    message = file.message_type.add(name="M")
    message.nested_type.add(name="XEntry").options.map_entry = True
    message.field.add(name="x", number=1, label=3, type=11, type_name=".M.XEntry")
    assert as_proto_text(_encoded(file)) == _encoded(file)


def test_a_repeated_top_level_message_named_like_a_nested_entry_is_not_a_map() -> None:
    from google.protobuf import descriptor_pb2

    file = descriptor_pb2.FileDescriptorProto(name="x.proto", syntax="proto3")
    message = file.message_type.add(name="M")
    entry = message.nested_type.add(name="XEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, label=1, type=9)
    entry.field.add(name="value", number=2, label=1, type=5)
    file.message_type.add(name="XEntry").field.add(name="z", number=1, label=1, type=9)
    message.field.add(name="x", number=1, label=3, type=11, type_name=".XEntry")
    text = as_proto_text(_encoded(file))
    assert "map<" not in text and "repeated .XEntry x = 1;" in text


def test_a_map_entry_whose_fields_are_not_key_1_and_value_2_is_left_unprinted() -> None:
    from google.protobuf import descriptor_pb2

    file = descriptor_pb2.FileDescriptorProto(name="x.proto", syntax="proto3")
    message = file.message_type.add(name="M")
    entry = message.nested_type.add(name="XEntry")
    entry.options.map_entry = True
    entry.field.add(name="value", number=2, label=1, type=5)
    entry.field.add(name="key", number=1, label=1, type=9)
    entry.field.add(name="extra", number=3, label=1, type=9)
    message.field.add(name="x", number=1, label=3, type=11, type_name=".M.XEntry")
    assert as_proto_text(_encoded(file)) == _encoded(file)
