"""protoc as the Protobuf schema parser: bounded in time, and the well-known types are always Google's."""

from __future__ import annotations

import pytest

pytest.importorskip("google.protobuf")
pytest.importorskip("grpc_tools")

from kafka_group.errors import ConfigError  # noqa: E402
from kafka_group.registry import protobuf_schema  # noqa: E402
from kafka_group.registry.codec import RegisteredSchema, SchemaReference  # noqa: E402
from kafka_group.registry.protobuf_codec import ProtobufCodec  # noqa: E402

EVENT = 'syntax = "proto3"; package ev; import "google/protobuf/timestamp.proto"; ' \
        'message Event { google.protobuf.Timestamp at = 1; }'
#: A registry reference of the well-known file's name whose text is something else.
IMPOSTOR = 'syntax = "proto3"; package google.protobuf; message Timestamp { string seconds = 1; string nanos = 2; }'


def test_a_reference_named_like_a_well_known_file_does_not_replace_it() -> None:
    from google.protobuf import timestamp_pb2

    reference = SchemaReference("google/protobuf/timestamp.proto", "ts", 1, RegisteredSchema("PROTOBUF", IMPOSTOR, 20))
    schema = RegisteredSchema("PROTOBUF", EVENT, 21, (reference,))
    stamp = timestamp_pb2.Timestamp(seconds=1_700_000_000, nanos=123_000).SerializeToString()
    payload = b"\x00" + b"\x0a" + bytes([len(stamp)]) + stamp  # message index [0], then field 1 (the Timestamp)
    loaded = protobuf_schema.load_proto(schema)
    fields = loaded.pool.FindMessageTypeByName("google.protobuf.Timestamp").fields
    assert [(f.name, f.type) for f in fields] == [("seconds", 3), ("nanos", 5)]  # int64, int32: Google's
    column = ProtobufCodec().decode(schema, schema, [payload])
    assert column.errors == (None,)
    assert str(column.values.to_pylist()[0]["at"]) == "2023-11-14 22:13:20.000123+00:00"


def test_protoc_that_does_not_finish_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(protobuf_schema, "PROTOC_TIMEOUT_S", 0.001)
    with pytest.raises(ConfigError, match=r"protoc did not finish parsing the Protobuf schema \(id 22\) in 0.001 s"):
        protobuf_schema.load_proto(RegisteredSchema("PROTOBUF", EVENT, 22))
