"""Protobuf schemas from the registry's ``.proto`` text: descriptors at run time, and their Arrow types.

The registry serves a Protobuf schema as ``.proto`` source, with the files it imports as
:class:`~kafka_group.registry.codec.SchemaReference` (each named by its import path). This module
turns that text into message descriptors without generated code: the files are written to a
temporary folder and parsed by ``protoc`` from ``grpcio-tools`` (the reference parser; it reads
files only, not memory), which writes a ``FileDescriptorSet`` (``--include_imports``); the sets are
added to a fresh :class:`google.protobuf.descriptor_pool.DescriptorPool`. The well-known types
(``google/protobuf/*.proto``) come from grpcio-tools' bundled include folder, as Confluent's
serializers leave them out of the references; a reference of such a name is not used (the bundled
file comes first), so a registry's file cannot redefine a well-known type. protoc gets
:data:`PROTOC_TIMEOUT_S` seconds.

Arrow types (:func:`message_arrow_type`), as Spark's ``from_protobuf`` maps them where it can:
message -> struct; ``repeated`` -> list; ``map<k, v>`` -> map; enum -> string (the value's name);
int32, sint32, sfixed32 -> int32; uint32, fixed32 -> int64; int64, sint64, sfixed64 -> int64;
uint64, fixed64 -> decimal(20, 0) (Spark has no unsigned long: an int64 would show values above
2**63 as negative numbers); float -> float32; double -> float64; bytes -> binary;
``google.protobuf.Timestamp`` -> timestamp(us, UTC); the wrappers (``Int32Value`` ...) -> their
scalar, null when unset; ``Struct``, ``Value``, ``ListValue`` -> string (their JSON text: they
nest without bound). Every field is nullable: a message field, a ``oneof`` member or an
``optional`` scalar that is unset is null; a proto3 scalar without presence holds its default.
A message that contains itself has no finite Spark schema: :class:`~kafka_group.errors.ConfigError`
names the field.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Sequence, Tuple

import pyarrow as pa

from kafka_group.errors import ConfigError, DependencyError
from kafka_group.registry.codec import RegisteredSchema

__all__ = ["ProtoFile", "load_proto", "message_arrow_type", "field_arrow_type", "read_message_indexes",
           "SCALAR_TYPES", "WRAPPERS", "TIMESTAMP", "JSON_TYPES"]

#: The root file's name in the temporary folder (the registry gives the root schema no file name).
ROOT_FILE = "kafka_group_registry_schema.proto"
#: The files Confluent's registry knows without references (its serializers import them for field
#: metadata and decimals), as the descriptors confluent-kafka ships define them.
CONFLUENT_FILES = {
    "confluent/meta.proto": """syntax = "proto3";
package confluent;
import "google/protobuf/descriptor.proto";
option go_package = "../confluent";
message Meta { string doc = 1; map<string, string> params = 2; repeated string tags = 3; repeated Rule rules = 4; }
message Rule { string name = 1; string doc = 2; string expr = 3; string sql = 4; }
extend google.protobuf.FileOptions { Meta file_meta = 1088; }
extend google.protobuf.MessageOptions { Meta message_meta = 1088; }
extend google.protobuf.FieldOptions { Meta field_meta = 1088; }
extend google.protobuf.EnumOptions { Meta enum_meta = 1088; }
extend google.protobuf.EnumValueOptions { Meta enum_value_meta = 1088; }
""",
    "confluent/type/decimal.proto": """syntax = "proto3";
package confluent.type;
message Decimal { bytes value = 1; uint32 precision = 2; int32 scale = 3; }
""",
}
#: Seconds protoc may take to parse one schema with its references (it is killed after).
PROTOC_TIMEOUT_S = 60.0
#: The message type behind ``google.protobuf.Timestamp``.
TIMESTAMP = "google.protobuf.Timestamp"
#: The wrapper messages and the Arrow type of their ``value``.
WRAPPERS: Dict[str, pa.DataType] = {
    "google.protobuf.DoubleValue": pa.float64(), "google.protobuf.FloatValue": pa.float32(),
    "google.protobuf.Int64Value": pa.int64(), "google.protobuf.UInt64Value": pa.decimal128(20, 0),
    "google.protobuf.Int32Value": pa.int32(), "google.protobuf.UInt32Value": pa.int64(),
    "google.protobuf.BoolValue": pa.bool_(), "google.protobuf.StringValue": pa.string(),
    "google.protobuf.BytesValue": pa.binary(),
}
#: Messages kept as their JSON text (they nest without bound, so have no finite struct type).
JSON_TYPES = frozenset({"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"})

# FieldDescriptor.TYPE_* numbers (descriptor.proto) -> Arrow type; 11 (message) and 14 (enum) aside.
SCALAR_TYPES: Dict[int, pa.DataType] = {
    1: pa.float64(), 2: pa.float32(), 3: pa.int64(), 4: pa.decimal128(20, 0), 5: pa.int32(),
    6: pa.decimal128(20, 0), 7: pa.int64(), 8: pa.bool_(), 9: pa.string(), 12: pa.binary(),
    13: pa.int64(), 15: pa.int32(), 16: pa.int64(), 17: pa.int32(), 18: pa.int64(),
}
_TYPE_MESSAGE, _TYPE_ENUM, _TYPE_GROUP = 11, 14, 10
_LABEL_REPEATED = 3


class ProtoFile:
    """One registered Protobuf schema, parsed: its descriptor pool and its top-level messages.

    Parameters
    ----------
    pool : google.protobuf.descriptor_pool.DescriptorPool
        The pool holding the schema's file and every file it imports.
    file_proto : google.protobuf.descriptor_pb2.FileDescriptorProto
        The root file as protoc parsed it (its message order gives the message indexes).
    """

    def __init__(self, pool: Any, file_proto: Any) -> None:
        self.pool = pool
        self.file_proto = file_proto
        self._classes: Dict[Tuple[int, ...], Tuple[Any, Any]] = {}

    def message(self, indexes: Sequence[int]) -> Tuple[Any, Any]:
        """The descriptor and message class that a Confluent message-index path names.

        ``[0]`` is the file's first message, ``[1, 2]`` the third message nested in the second.
        Raises :class:`IndexError` when the path names no message.
        """
        key = tuple(indexes)
        if key not in self._classes:
            from google.protobuf import message_factory

            if not key:
                raise IndexError("an empty message-index path")
            protos = self.file_proto.message_type
            names = [self.file_proto.package] if self.file_proto.package else []
            for index in key:
                if index < 0 or index >= len(protos):
                    raise IndexError(f"message index path {list(key)} names no message of the schema")
                names.append(protos[index].name)
                protos = protos[index].nested_type
            descriptor = self.pool.FindMessageTypeByName(".".join(names))
            self._classes[key] = (descriptor, message_factory.GetMessageClass(descriptor))
        return self._classes[key]

    def message_named(self, name: str) -> Tuple[Any, Any]:
        """The descriptor and class of the message ``name`` (full name, or the name in the root file's package)."""
        from google.protobuf import message_factory

        package = self.file_proto.package
        for candidate in ([f"{package}.{name}"] if package else []) + [name]:
            try:
                descriptor = self.pool.FindMessageTypeByName(candidate)
            except KeyError:
                continue
            return descriptor, message_factory.GetMessageClass(descriptor)
        raise ConfigError(f"the Protobuf schema has no message named {name!r}")


def load_proto(schema: RegisteredSchema) -> ProtoFile:
    """Parse ``schema`` (``.proto`` text and its references) into a :class:`ProtoFile`.

    Raises
    ------
    ConfigError
        protoc refused the text (its message, which names the file and line, is included).
    DependencyError
        protobuf or grpcio-tools is not installed.
    """
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool
        import grpc_tools
    except ImportError:
        raise DependencyError("Protobuf schemas need the 'protobuf' and 'grpcio-tools' packages: "
                              "pip install 'pyspark-kafka-group[schema-registry]'") from None
    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    with tempfile.TemporaryDirectory(prefix="kafka-group-proto-") as folder:
        files, builtin = os.path.join(folder, "files"), os.path.join(folder, "builtin")
        _write_files(files, ROOT_FILE, schema, depth=0)
        for name, text in CONFLUENT_FILES.items():  # a reference of the same name comes first
            os.makedirs(os.path.dirname(os.path.join(builtin, name)), exist_ok=True)
            with open(os.path.join(builtin, name), "w", encoding="utf-8") as out_file:
                out_file.write(text)
        out = os.path.join(folder, "set.pb")
        # protoc takes a file from the first folder that has it: the well-known types (the only files
        # of `include`) first, so a reference named google/protobuf/timestamp.proto cannot replace them
        command = [sys.executable, "-m", "grpc_tools.protoc", f"--proto_path={include}", f"--proto_path={files}",
                   f"--proto_path={builtin}", "--include_imports", f"--descriptor_set_out={out}", ROOT_FILE]
        try:
            run = subprocess.run(command, capture_output=True, text=True, cwd=files, timeout=PROTOC_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise ConfigError(f"protoc did not finish parsing the Protobuf schema{_id_text(schema)} in "
                              f"{PROTOC_TIMEOUT_S} s: the schema and its references are too large, or the "
                              "machine is overloaded; retry, or read the key/value raw") from None
        if run.returncode != 0:
            said = (run.stderr or run.stdout).strip().replace(files + os.sep, "").replace(ROOT_FILE, "the schema")
            raise ConfigError(f"the Protobuf schema{_id_text(schema)} does not parse: {said}")
        files = descriptor_pb2.FileDescriptorSet.FromString(open(out, "rb").read())
    pool = descriptor_pool.DescriptorPool()
    root = None
    for file_proto in files.file:  # protoc writes them in dependency order
        pool.Add(file_proto)
        if file_proto.name == ROOT_FILE:
            root = file_proto
    assert root is not None, "protoc's descriptor set lacks the file it was given"
    return ProtoFile(pool, root)


def _write_files(folder: str, name: str, schema: RegisteredSchema, depth: int) -> None:
    if depth > 32:
        raise ConfigError(f"the Protobuf schema{_id_text(schema)} has references nested more than 32 deep")
    path = os.path.normpath(os.path.join(folder, name))
    if not path.startswith(os.path.normpath(folder) + os.sep):
        raise ConfigError(f"the Protobuf schema reference {name!r} is not a relative file path")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        out.write(schema.text)
    for reference in schema.references:
        _write_files(folder, reference.name, reference.schema, depth + 1)


def _id_text(schema: RegisteredSchema) -> str:
    return f" (id {schema.schema_id})" if schema.schema_id is not None else ""


def read_message_indexes(payload: bytes) -> Tuple[List[int], int]:
    """The message-index path at the start of ``payload`` and where the message itself starts.

    Confluent's framing: a zigzag varint count, then that many zigzag varint indexes; a count of 0
    (a single 0 byte) means ``[0]``, the first message. Raises :class:`ValueError` when truncated.
    """
    count, at = _zigzag(payload, 0)
    if count == 0:
        return [0], at
    if count < 0 or count > 64:
        raise ValueError(f"a message-index count of {count}")
    indexes = []
    for _ in range(count):
        index, at = _zigzag(payload, at)
        indexes.append(index)
    return indexes, at


def _zigzag(data: bytes, at: int) -> Tuple[int, int]:
    shift = value = 0
    while True:
        if at >= len(data):
            raise ValueError("the message-index array is truncated")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), at
        shift += 7
        if shift > 63:
            raise ValueError("a message-index varint is longer than 10 bytes")


def message_arrow_type(descriptor: Any, path: str = "", stack: Tuple[str, ...] = ()) -> pa.DataType:
    """The Arrow struct type of a message (see the module's table); ``path`` names fields in errors."""
    if descriptor.full_name in stack:
        raise ConfigError(
            f"the Protobuf field '{path}' is recursive (message {descriptor.full_name} contains itself): "
            "Spark needs a finite schema; read the value as binary or change the schema")
    inner = stack + (descriptor.full_name,)
    return pa.struct([pa.field(f.name, field_arrow_type(f, f"{path}.{f.name}" if path else f.name, inner))
                      for f in descriptor.fields])


def field_arrow_type(field: Any, path: str, stack: Tuple[str, ...] = ()) -> pa.DataType:
    """The Arrow type of one field of a message (a list when repeated, a map for ``map<k, v>``)."""
    if is_map(field):
        key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
        return pa.map_(element_arrow_type(key, path, stack), element_arrow_type(value, path, stack))
    element = element_arrow_type(field, path, stack)
    return pa.list_(element) if is_repeated(field) else element


def element_arrow_type(field: Any, path: str, stack: Tuple[str, ...]) -> pa.DataType:
    """The Arrow type of one value of a field (ignoring ``repeated``)."""
    if field.type == _TYPE_ENUM:
        return pa.string()
    if field.type in (_TYPE_MESSAGE, _TYPE_GROUP):
        name = field.message_type.full_name
        if name == TIMESTAMP:
            return pa.timestamp("us", tz="UTC")
        if name in WRAPPERS:
            return WRAPPERS[name]
        if name in JSON_TYPES:
            return pa.string()
        return message_arrow_type(field.message_type, path, stack)
    return SCALAR_TYPES[field.type]


def is_repeated(field: Any) -> bool:
    """Whether ``field`` is ``repeated`` (the descriptor API changed its name across protobuf versions)."""
    repeated = getattr(field, "is_repeated", None)
    return bool(repeated) if repeated is not None else bool(field.label == _LABEL_REPEATED)


def is_map(field: Any) -> bool:
    """Whether ``field`` is a ``map<k, v>`` (a repeated, synthesized ``MapEntry`` message)."""
    return (field.type == _TYPE_MESSAGE and is_repeated(field)
            and bool(field.message_type.GetOptions().map_entry))
