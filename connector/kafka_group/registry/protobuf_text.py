"""A Protobuf schema the registry serves as a base64 ``FileDescriptorProto``, written back as ``.proto`` text.

confluent-kafka-python's ``ProtobufSerializer`` registers its schema as a base64-encoded, serialized
``FileDescriptorProto``. Confluent's registry stores it as ``.proto`` text and serves text; Apicurio's
Confluent API (``/apis/ccompat/v7``) serves it back as registered, in base64. The Protobuf codec reads
``.proto`` text, so :func:`as_proto_text` prints the descriptor in ``.proto`` syntax: package, imports,
messages (nested), enums, maps, oneofs, ``optional``/``repeated``/``required`` labels, type names
fully qualified (a leading dot, valid ``.proto``). Field options other than the labels (defaults,
``packed``, custom options) are left out: they do not change how a payload decodes.

Every name printed is checked first (identifiers, dotted type names, import paths without quotes or
control characters; a ``oneof`` a field names must exist): a descriptor that fails is left as served,
so protoc refuses it and its records are bad records, instead of printing another schema than the
descriptor (a message named ``M { int32 x = 2; } message N``) or raising. A field is printed as a
``map`` only when its type is, by fully qualified name, its message's own nested map entry with
exactly ``key = 1`` and ``value = 2``; any other exception while printing also leaves the text as served.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any, List, Optional

__all__ = ["as_proto_text"]


def as_proto_text(text: str) -> str:
    """``text`` as ``.proto`` text: unchanged when it is not a base64 ``FileDescriptorProto``."""
    stripped = text.strip()
    if not stripped or any(c.isspace() for c in stripped) or "{" in stripped:
        return text
    try:
        raw = base64.b64decode(stripped, validate=True)
    except (binascii.Error, ValueError):
        return text
    try:
        from google.protobuf import descriptor_pb2
        from google.protobuf.message import DecodeError
    except ImportError:  # pragma: no cover - the codec reports the missing extra
        return text
    proto = descriptor_pb2.FileDescriptorProto()
    try:
        proto.ParseFromString(raw)
    except DecodeError:
        return text
    if not proto.message_type and not proto.enum_type:
        return text
    try:
        return _file(proto)
    except Exception:  # noqa: BLE001 - _Unprintable, or anything else a hostile descriptor causes
        return text


class _Unprintable(Exception):
    """The descriptor holds something its .proto text could not say."""


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DOTTED = re.compile(r"\.?[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_IMPORT = re.compile(r'[^"\\\x00-\x1f\x7f]+')


def _checked(value: str, pattern: "re.Pattern[str]") -> str:
    if not pattern.fullmatch(value):
        raise _Unprintable(value)
    return value


_SCALARS = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64", 7: "fixed32", 8: "bool",
            9: "string", 12: "bytes", 13: "uint32", 15: "sfixed32", 16: "sfixed64", 17: "sint32", 18: "sint64"}
_GROUP, _MESSAGE, _ENUM = 10, 11, 14
_OPTIONAL, _REQUIRED, _REPEATED = 1, 2, 3


def _file(proto: Any) -> str:
    syntax = proto.syntax or "proto2"
    if syntax not in ("proto2", "proto3"):
        raise _Unprintable(syntax)
    out: List[str] = [f'syntax = "{syntax}";']
    if proto.package:
        out.append(f"package {_checked(proto.package, _DOTTED)};")
    out += [f'import "{_checked(dep, _IMPORT)}";' for dep in proto.dependency]
    for enum in proto.enum_type:
        out += _enum(enum, "")
    scope = f".{proto.package}" if proto.package else ""
    for message in proto.message_type:
        out += _message(message, "", syntax, scope)
    return "\n".join(out) + "\n"


def _enum(enum: Any, indent: str) -> List[str]:
    lines = [f"{indent}enum {_checked(enum.name, _IDENTIFIER)} {{"]
    if enum.options.allow_alias:
        lines.append(f"{indent}  option allow_alias = true;")
    lines += [f"{indent}  {_checked(v.name, _IDENTIFIER)} = {v.number};" for v in enum.value]
    return lines + [f"{indent}}}"]


def _message(message: Any, indent: str, syntax: str, scope: str) -> List[str]:
    """``message`` (whose enclosing scope's full name, with a leading dot, is ``scope``) as .proto lines."""
    inner = indent + "  "
    lines = [f"{indent}message {_checked(message.name, _IDENTIFIER)} {{"]
    full_name = f"{scope}.{message.name}"
    # a map field's entry is this message's own nested type: matched by its fully qualified name
    entries = {f"{full_name}.{n.name}": n for n in message.nested_type if n.options.map_entry}
    for enum in message.enum_type:
        lines += _enum(enum, inner)
    for nested in message.nested_type:
        if not nested.options.map_entry:
            lines += _message(nested, inner, syntax, full_name)
    oneofs: List[List[Any]] = [[] for _ in message.oneof_decl]
    for field in message.field:
        if field.HasField("oneof_index") and not field.proto3_optional:
            if not 0 <= field.oneof_index < len(oneofs):
                raise _Unprintable(f"oneof {field.oneof_index}")
            oneofs[field.oneof_index].append(field)
    done = set()
    for field in message.field:  # in declaration order: a oneof where its first field is
        if field.HasField("oneof_index") and not field.proto3_optional:
            if field.oneof_index not in done:
                done.add(field.oneof_index)
                lines.append(f"{inner}oneof {_checked(message.oneof_decl[field.oneof_index].name, _IDENTIFIER)} {{")
                lines += [inner + "  " + _field(f, syntax, entries, in_oneof=True) for f in oneofs[field.oneof_index]]
                lines.append(f"{inner}}}")
            continue
        lines.append(inner + _field(field, syntax, entries, in_oneof=False))
    for start_end in message.reserved_range:
        lines.append(f"{inner}reserved {start_end.start} to {start_end.end - 1};")
    return lines + [f"{indent}}}"]


def _field(field: Any, syntax: str, entries: Any, *, in_oneof: bool) -> str:
    entry = _map_entry(field, entries)
    if entry is not None:
        key, value = _key_and_value(entry)
        return f"map<{_type(key)}, {_type(value)}> {_checked(field.name, _IDENTIFIER)} = {field.number};"
    label = ""
    if not in_oneof:
        if field.label == _REPEATED:
            label = "repeated "
        elif field.label == _REQUIRED:
            label = "required "
        elif field.proto3_optional or (syntax == "proto2" and field.label == _OPTIONAL):
            label = "optional "
    return f"{label}{_type(field)} {_checked(field.name, _IDENTIFIER)} = {field.number};"


def _map_entry(field: Any, entries: Any) -> Optional[Any]:
    if field.label != _REPEATED or field.type != _MESSAGE:
        return None
    return entries.get(field.type_name)


def _key_and_value(entry: Any) -> "tuple[Any, Any]":
    """A map entry's ``key = 1`` and ``value = 2`` fields: any other entry says no map .proto can say."""
    fields = sorted(entry.field, key=lambda f: f.number)
    if [(f.name, f.number) for f in fields] != [("key", 1), ("value", 2)] or any(f.label == _REPEATED for f in fields):
        raise _Unprintable(entry.name)
    return fields[0], fields[1]


def _type(field: Any) -> str:
    if field.type in (_MESSAGE, _ENUM, _GROUP):
        # fully qualified only: a relative name resolves by scope, maybe to a map entry the text does not print
        if not str(field.type_name).startswith("."):
            raise _Unprintable(field.type_name)
        return _checked(str(field.type_name), _DOTTED)
    return _SCALARS[field.type]
