"""Arrow types of Protobuf messages, as Spark's ``from_protobuf`` maps them where it can.

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
A reader message nested deeper than :data:`MAX_NESTING` (protobuf's parser refuses deeper messages)
or with more than :data:`MAX_FIELDS` fields at all levels is a ConfigError too.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import pyarrow as pa

from kafka_group.errors import ConfigError

__all__ = ["message_arrow_type", "field_arrow_type", "element_arrow_type", "is_map", "is_repeated",
           "SCALAR_TYPES", "WRAPPERS", "TIMESTAMP", "JSON_TYPES", "MAX_NESTING", "MAX_FIELDS"]

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


#: The deepest reader message (protobuf's parser refuses messages nested deeper: no value could land).
MAX_NESTING = 100
#: The most fields (at every level) a reader message's Arrow type may have.
MAX_FIELDS = 10_000


def message_arrow_type(descriptor: Any, path: str = "", stack: Tuple[str, ...] = (),
                       budget: Optional[List[int]] = None) -> pa.DataType:
    """The Arrow struct type of a message (see the module's table); ``path`` names fields in errors.

    ``budget`` (one number: the fields still allowed) is shared by the whole type, :data:`MAX_FIELDS`
    when not given: a few lines of text can name 2**n columns (each message holding two of the next).
    """
    if descriptor.full_name in stack:
        raise ConfigError(
            f"the Protobuf field '{path}' is recursive (message {descriptor.full_name} contains itself): "
            "Spark needs a finite schema; read the value as binary or change the schema")
    if len(stack) >= MAX_NESTING:
        raise ConfigError(f"the Protobuf field '{path}' is nested more than {MAX_NESTING} levels deep, deeper "
                          "than protobuf parses: read the value as binary or change the schema")
    budget = [MAX_FIELDS] if budget is None else budget
    budget[0] -= len(descriptor.fields)
    if budget[0] < 0:
        raise ConfigError(f"the Protobuf message {descriptor.full_name} has more than {MAX_FIELDS} fields at "
                          f"all levels (at '{path or descriptor.full_name}'): read the value as binary or "
                          "change the schema")
    inner = stack + (descriptor.full_name,)
    return pa.struct([pa.field(f.name, field_arrow_type(f, f"{path}.{f.name}" if path else f.name, inner, budget))
                      for f in descriptor.fields])


def field_arrow_type(field: Any, path: str, stack: Tuple[str, ...] = (),
                     budget: Optional[List[int]] = None) -> pa.DataType:
    """The Arrow type of one field of a message (a list when repeated, a map for ``map<k, v>``)."""
    if is_map(field):
        key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
        return pa.map_(element_arrow_type(key, path, stack, budget), element_arrow_type(value, path, stack, budget))
    element = element_arrow_type(field, path, stack, budget)
    return pa.list_(element) if is_repeated(field) else element


def element_arrow_type(field: Any, path: str, stack: Tuple[str, ...],
                       budget: Optional[List[int]] = None) -> pa.DataType:
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
        return message_arrow_type(field.message_type, path, stack, budget)
    return SCALAR_TYPES[field.type]


def is_repeated(field: Any) -> bool:
    """Whether ``field`` is ``repeated`` (the descriptor API changed its name across protobuf versions)."""
    repeated = getattr(field, "is_repeated", None)
    return bool(repeated) if repeated is not None else bool(field.label == _LABEL_REPEATED)


def is_map(field: Any) -> bool:
    """Whether ``field`` is a ``map<k, v>`` (a repeated, synthesized ``MapEntry`` message)."""
    return (field.type == _TYPE_MESSAGE and is_repeated(field)
            and bool(field.message_type.GetOptions().map_entry))
