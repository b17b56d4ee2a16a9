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
