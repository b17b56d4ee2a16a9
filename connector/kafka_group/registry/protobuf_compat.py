"""Whether protobuf reads a writer's message as the reader's: fields by number, as protobuf parses.

The Protobuf codec parses each payload with the *reader's* message class, so every value is what
the protobuf runtime itself reads (fields matched by number: a field renamed in the reader keeps its
values, a name reused with another number is another field). What protobuf does with a writer type
the reader declares differently is not always the writer's value, so :func:`compare` checks each
(writer message, reader message) pair once, field by field and by number, nested messages, map
entries and oneof members alike:

* the same type: read (messages and groups compared the same way, recursively);
* changes protobuf reads as the same value: int32 -> int64; uint32 -> int64 or uint64; sint32 ->
  sint64; enum -> int32 or int64 (its number); int32 -> an open enum; string -> bytes (its UTF-8);
  a message -> bytes (its encoding); a single field -> a repeated one (a list of that value);
* enum -> enum: by number; a number only the writer's enum has (a value added since the reader's
  schema) is named by the writer's schema. A closed (proto2) reader enum that lacks writer numbers
  is refused: protobuf would drop those values;
* two writer fields that are not members of one writer ``oneof`` but of one reader ``oneof``: refused
  (protobuf would keep only the last one set); a proto3 field without presence holding 0 read through a
  reader's ``optional`` is null, as protobuf's ``HasField`` says (proto3 does not write the 0);
* anything else makes every record of that writer message an error naming the field (the reader's
  name and number) and both types, never a value: protobuf would skip the value as an unknown field
  (another wire type: float -> double, fixed32 -> uint32, a message -> string), reinterpret it
  (sint32 <-> int32, int32 -> uint64, fixed32 <-> sfixed32, bytes -> string), truncate it
  (int64 -> int32) or keep the last of several values (repeated -> single, a list into a map).

A writer field the reader lacks is skipped (an unknown field); a reader field the writer lacks is
what protobuf reads for it: null where it has presence (a message, a oneof member, ``optional``),
else its default.

An incompatible writer is each of its records' error, not a load-time error: the writer schema is
the record's (its frame's id), so one producer's bad change must not stop a query whose other
records read well; with ``badRecords=quarantine`` they land with the reason.
"""

from __future__ import annotations

from typing import Any, Dict, FrozenSet, Optional, Tuple

from kafka_group.registry.protobuf_types import is_map, is_repeated

__all__ = ["compare", "EnumNames"]

_Seen = FrozenSet[Tuple[str, str]]
#: Per reader path (``a.b``, ``list[]``, ``map.value``): names of enum numbers only the writer has.
EnumNames = Dict[str, Dict[int, str]]

# FieldDescriptor.TYPE_* numbers
_DOUBLE, _FLOAT, _INT64, _UINT64, _INT32, _FIXED64, _FIXED32, _BOOL, _STRING, _GROUP, _MESSAGE, _BYTES, \
    _UINT32, _ENUM, _SFIXED32, _SFIXED64, _SINT32, _SINT64 = range(1, 19)
_NAMES = {_DOUBLE: "double", _FLOAT: "float", _INT64: "int64", _UINT64: "uint64", _INT32: "int32",
          _FIXED64: "fixed64", _FIXED32: "fixed32", _BOOL: "bool", _STRING: "string", _GROUP: "group",
          _MESSAGE: "message", _BYTES: "bytes", _UINT32: "uint32", _ENUM: "enum", _SFIXED32: "sfixed32",
          _SFIXED64: "sfixed64", _SINT32: "sint32", _SINT64: "sint64"}
#: (writer type, reader type) pairs protobuf reads as the same value.
_SAME_VALUE = {(_INT32, _INT64), (_UINT32, _INT64), (_UINT32, _UINT64), (_SINT32, _SINT64), (_ENUM, _INT32),
               (_ENUM, _INT64), (_INT32, _ENUM), (_STRING, _BYTES), (_MESSAGE, _BYTES)}


def compare(writer: Any, reader: Any) -> Tuple[Optional[str], EnumNames]:
    """Why protobuf cannot read ``writer`` (a message descriptor) as ``reader``, or None; and the
    writer's names of enum numbers the reader's enums lack, by the codec's field path."""
    names: EnumNames = {}
    return _message(writer, reader, "", names, frozenset()), names


def _message(writer: Any, reader: Any, path: str, names: EnumNames, seen: _Seen) -> Optional[str]:
    pair = (writer.full_name, reader.full_name)
    if pair in seen:  # a recursive pair (Struct and Value): its fields are being compared above
        return None
    by_number = writer.fields_by_number
    problem = _oneofs(writer, reader, path)
    if problem:
        return problem
    for field in reader.fields:
        written = by_number.get(field.number)
        if written is not None:
            problem = _field(written, field, f"{path}.{field.name}" if path else field.name, names, seen | {pair})
            if problem:
                return problem
    return None


def _oneofs(writer: Any, reader: Any, path: str) -> Optional[str]:
    """Why a reader ``oneof`` would drop writer values: it holds fields the writer may set together (not
    members of one writer oneof); protobuf keeps only the last of them. A proto3 ``optional`` field's
    synthetic oneof has one member, so it never holds two."""
    for oneof in reader.oneofs:
        written = [writer.fields_by_number[f.number] for f in oneof.fields if f.number in writer.fields_by_number]
        groups = {w.containing_oneof.full_name if w.containing_oneof is not None else f"#{w.number}" for w in written}
        if len(groups) > 1:
            fields = ", ".join(f"'{path + '.' if path else ''}{f.name}' (number {f.number})" for f in oneof.fields
                               if f.number in writer.fields_by_number)
            return (f"fields {fields} are members of the reader's oneof '{oneof.name}' but not of one oneof in the "
                    "writer's schema: a record may set several, and protobuf would keep only the last; the record "
                    "cannot be read with the reader schema")
    return None


def _field(writer: Any, reader: Any, path: str, names: EnumNames, seen: _Seen) -> Optional[str]:
    if is_repeated(writer) and not is_repeated(reader):
        return _refuse(path, reader, "repeated", "single", "protobuf keeps only the last value")
    if is_map(reader) and not is_map(writer):
        return _refuse(path, reader, _shape(writer), _shape(reader), "protobuf keeps one value per key")
    if is_map(reader):
        entry, written = reader.message_type.fields_by_name, writer.message_type.fields_by_name
        return (_element(written["key"], entry["key"], f"{path}.key", reader.number, names, seen)
                or _element(written["value"], entry["value"], f"{path}.value", reader.number, names, seen))
    return _element(writer, reader, f"{path}[]" if is_repeated(reader) else path, reader.number, names, seen)


def _element(writer: Any, reader: Any, path: str, number: int, names: EnumNames,
             seen: _Seen) -> Optional[str]:
    w, r = writer.type, reader.type
    if w == r and w in (_MESSAGE, _GROUP):
        return _message(writer.message_type, reader.message_type, path, names, seen)
    if r == _ENUM and (w == _ENUM or (w, r) in _SAME_VALUE):
        readable = reader.enum_type.values_by_number
        extra = {n: v.name for n, v in writer.enum_type.values_by_number.items()
                 if n not in readable} if w == _ENUM else {}
        if getattr(reader.enum_type, "is_closed", False) and (extra or w != _ENUM):
            return (f"field '{path}' (number {number}) is {_type(writer)} in the writer's schema and the closed "
                    f"(proto2) {_type(reader)} in the reader's, which lacks some of its numbers: protobuf would drop "
                    "those values; the record cannot be read with the reader schema")
        if extra:
            names[path] = extra
        return None
    if w == r or (w, r) in _SAME_VALUE:
        return None
    return (f"field '{path}' (number {number}) is {_type(writer)} in the writer's schema and {_type(reader)} in "
            "the reader's, which protobuf does not read as the same value: the record cannot be read with the "
            "reader schema")


def _refuse(path: str, reader: Any, written: str, read: str, why: str) -> str:
    return (f"field '{path}' (number {reader.number}) is {written} in the writer's schema and {read} in the "
            f"reader's: {why}; the record cannot be read with the reader schema")


def _shape(field: Any) -> str:
    return "a map" if is_map(field) else "repeated" if is_repeated(field) else "single"


def _type(field: Any) -> str:
    if field.type in (_MESSAGE, _GROUP):
        return f"{_NAMES[field.type]} {field.message_type.full_name}"
    if field.type == _ENUM:
        return f"enum {field.enum_type.full_name}"
    return _NAMES[field.type]
