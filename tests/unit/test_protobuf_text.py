"""A Protobuf schema served as a base64 FileDescriptorProto (Apicurio, for confluent-kafka's
ProtobufSerializer) reads like its .proto text (issue 29)."""

from __future__ import annotations

import base64
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("google.protobuf")
pytest.importorskip("grpc_tools")

from kafka_group.registry.codec import RegisteredSchema  # noqa: E402
from kafka_group.registry.protobuf_codec import ProtobufCodec  # noqa: E402
from kafka_group.registry.protobuf_text import as_proto_text  # noqa: E402
from tests.unit.test_protobuf_codec import ORDER_V1  # noqa: E402


def serialized_descriptor(tmp_path: pathlib.Path, text: str) -> str:
    """``text`` compiled by protoc, as confluent-kafka's ProtobufSerializer registers it (base64)."""
    from google.protobuf import descriptor_pb2
    import grpc_tools

    (tmp_path / "order.proto").write_text(text)
    out = tmp_path / "set.pb"
    include = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp_path}", f"-I{include}",
                    f"--descriptor_set_out={out}", "order.proto"], check=True, cwd=tmp_path)
    (file_proto,) = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    return base64.b64encode(file_proto.SerializeToString()).decode()


def test_a_serialized_descriptor_reads_as_its_proto_text(tmp_path: pathlib.Path) -> None:
    text = as_proto_text(serialized_descriptor(tmp_path, ORDER_V1))
    assert "message Order {" in text and "map<string, double> prices = 4;" in text and "oneof payment {" in text
    codec = ProtobufCodec()
    assert codec.arrow_type(RegisteredSchema("PROTOBUF", text, 1)) == \
        ProtobufCodec().arrow_type(RegisteredSchema("PROTOBUF", ORDER_V1, 1))


def test_proto_text_is_left_as_it_is() -> None:
    assert as_proto_text(ORDER_V1) == ORDER_V1
    assert as_proto_text("bm90IGEgZGVzY3JpcHRvcg==") == "bm90IGEgZGVzY3JpcHRvcg=="  # base64, not a descriptor


def _descriptor(**fields: object) -> "tuple[str, object]":
    from google.protobuf import descriptor_pb2

    proto = descriptor_pb2.FileDescriptorProto(name="x.proto", syntax="proto3", package="p")
    message = proto.message_type.add(name="M")
    message.field.add(name="a", number=1, type=5, label=1, **fields)  # type: ignore[arg-type]
    return base64.b64encode(proto.SerializeToString()).decode(), proto


@pytest.mark.parametrize("oneof_index, declared", [(3, 0), (-1, 1)])
def test_a_descriptor_naming_a_oneof_it_lacks_is_the_schemas_error_not_a_crash(oneof_index: int,
                                                                                 declared: int) -> None:
    """Issue 33, adversary: a served descriptor's field names a oneof the message does not declare
    (out of range, or -1, which Python would take as the last one)."""
    from kafka_group.errors import ConfigError

    encoded, proto = _descriptor(oneof_index=oneof_index)
    if declared:
        proto.message_type[0].oneof_decl.add(name="o")  # type: ignore[attr-defined]
        encoded = base64.b64encode(proto.SerializeToString()).decode()  # type: ignore[attr-defined]
    text = as_proto_text(encoded)
    assert "oneof" not in text
    with pytest.raises(ConfigError, match="does not parse"):
        ProtobufCodec().arrow_type(RegisteredSchema("PROTOBUF", text, 7))


@pytest.mark.parametrize("where, value", [("message", "M { int32 smuggled = 2; } message N"),
                                          ("type_name", ".p.M; int32 smuggled = 3"),
                                          ("dependency", 'a.proto"; import "b.proto'),
                                          ("package", "p; message Smuggled {}")])
def test_a_descriptor_whose_names_are_not_identifiers_is_not_printed_as_proto(where: str, value: str) -> None:
    """A name is printed into .proto text: one that is not an identifier (or an import path with a
    quote) would print another schema than the descriptor; the text is then left as served (protoc
    refuses it)."""
    encoded, proto = _descriptor()
    if where == "message":
        proto.message_type[0].name = value  # type: ignore[attr-defined]
    elif where == "type_name":
        field = proto.message_type[0].field.add(name="b", number=2, type=11, label=1)  # type: ignore[attr-defined]
        field.type_name = value
    elif where == "dependency":
        proto.dependency.append(value)  # type: ignore[attr-defined]
    else:
        proto.package = value  # type: ignore[attr-defined]
    encoded = base64.b64encode(proto.SerializeToString()).decode()  # type: ignore[attr-defined]
    assert as_proto_text(encoded) == encoded
