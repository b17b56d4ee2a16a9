"""The Protobuf codec: registry-framed Protobuf payloads into one Arrow struct column.

Protobuf has no schema resolution: each payload is parsed with the *writer's* message class
(built at run time from the registry's ``.proto`` text, :mod:`kafka_group.registry.protobuf_schema`;
fields the writer's schema lacks are skipped as unknown fields), then projected into the reader's
Arrow type by field name. A reader field the writer lacks is null. A field whose writer type cannot be
read as the reader's (say int64 became string) makes every record of that writer an error, naming
the field: a value is never converted into something it was not. Widening (int32 -> int64,
float -> double, uint32 -> uint64) is read.

The payload a codec sees starts with Confluent's message-index array (which message of the file the
record is); a record whose message is not the reader's (by its name within the package) is an error.

Decoding is columnar: the messages of a batch are parsed (protobuf's C implementation, upb), then
each reader field's values are taken from all messages at once into one Arrow array; no Python dict
is built per record.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pyarrow as pa

from kafka_group.registry.codec import DecodedColumn, RegisteredSchema
from kafka_group.registry.protobuf_schema import (
    JSON_TYPES, SCALAR_TYPES, TIMESTAMP, WRAPPERS, ProtoFile, field_arrow_type, is_map, is_repeated,
    load_proto, read_message_indexes,
)

__all__ = ["ProtobufCodec"]

#: Writer -> reader Arrow types read by widening (everything else must be equal).
_WIDENING = {(pa.int32(), pa.int64()), (pa.float32(), pa.float64()), (pa.int64(), pa.decimal128(20, 0)),
             (pa.int32(), pa.decimal128(20, 0))}
_TYPE_ENUM = 14
_Errors = List[Optional[str]]


class ProtobufCodec:
    """Decodes registry Protobuf payloads (schema type ``PROTOBUF``) into an Arrow struct column.

    Implements :class:`kafka_group.registry.codec.Codec`. Parsed schemas are cached per codec
    instance (by schema, so once per schema id and process when the instance is kept).

    Parameters
    ----------
    message : str, optional
        The reader schema's message: its full name, or its name within the file's package. By
        default the file's first message, as Confluent's serializers take it.

    Examples
    --------
    >>> codec = ProtobufCodec()
    >>> column = codec.decode(writer, reader, payloads)  # doctest: +SKIP
    """

    schema_type = "PROTOBUF"

    def __init__(self, *, message: Optional[str] = None) -> None:
        self._message = message
        self._files: Dict[RegisteredSchema, ProtoFile] = {}
        self._problems: Dict[Tuple[RegisteredSchema, RegisteredSchema, str], Optional[str]] = {}

    def _file(self, schema: RegisteredSchema) -> ProtoFile:
        if schema not in self._files:
            self._files[schema] = load_proto(schema)
        return self._files[schema]

    def _reader_message(self, reader: RegisteredSchema) -> Any:
        proto = self._file(reader)
        descriptor, _ = proto.message_named(self._message) if self._message else proto.message([0])
        return descriptor

    def arrow_type(self, reader: RegisteredSchema) -> pa.DataType:
        """The reader message's Arrow struct type (see :mod:`kafka_group.registry.protobuf_schema`).

        Raises :class:`~kafka_group.errors.ConfigError` for a recursive message (naming the field) or
        a schema protoc refuses.
        """
        from kafka_group.registry.protobuf_schema import message_arrow_type

        return message_arrow_type(self._reader_message(reader))

    def decode(self, writer: RegisteredSchema, reader: RegisteredSchema,
               payloads: Sequence[bytes]) -> DecodedColumn:
        """Decode ``payloads`` (message-index array, then the message) written with ``writer``."""
        from google.protobuf.message import DecodeError

        reader_type = self.arrow_type(reader)
        reader_descriptor = self._reader_message(reader)
        wanted = _relative_name(reader_descriptor)
        proto = self._file(writer)
        errors: _Errors = [None] * len(payloads)
        messages: List[Any] = [None] * len(payloads)
        descriptor = None
        for i, payload in enumerate(payloads):
            try:
                indexes, start = read_message_indexes(payload)
                found, cls = proto.message(indexes)
            except (ValueError, IndexError) as exc:
                errors[i] = f"not a Protobuf payload in Confluent's framing: {exc}"
                continue
            if descriptor is not found:
                if _relative_name(found) != wanted:
                    errors[i] = (f"the record is a {found.full_name} message, the reader schema's "
                                 f"message is {reader_descriptor.full_name}")
                    continue
                descriptor = found
                problem = self._problem(writer, reader, found, reader_type)
            if problem is not None:
                errors[i] = problem
                continue
            try:
                messages[i] = cls.FromString(payload[start:])
            except (DecodeError, ValueError) as exc:
                errors[i] = f"the Protobuf message does not decode: {exc}"
        if descriptor is None:
            return DecodedColumn(pa.nulls(len(payloads), reader_type), tuple(errors))
        # errors found while building the columns (an unknown enum number) are in the top mask: it is made last
        values = _struct(messages, list(range(len(messages))), descriptor, reader_type, errors, "")
        return DecodedColumn(values, tuple(errors))

    def _problem(self, writer: RegisteredSchema, reader: RegisteredSchema, descriptor: Any,
                 reader_type: pa.DataType) -> Optional[str]:
        key = (writer, reader, descriptor.full_name)
        if key not in self._problems:
            self._problems[key] = _incompatible(descriptor, reader_type)
        return self._problems[key]


def _relative_name(descriptor: Any) -> str:
    package = descriptor.file.package
    return str(descriptor.full_name)[len(package) + 1:] if package else str(descriptor.full_name)


def _incompatible(descriptor: Any, reader_type: pa.StructType) -> Optional[str]:
    """Why the writer's message cannot be read as ``reader_type``, or None."""
    from kafka_group.errors import ConfigError

    for reader_field in reader_type:
        field = descriptor.fields_by_name.get(reader_field.name)
        if field is None:
            continue
        try:
            writer_type = field_arrow_type(field, reader_field.name)
        except ConfigError as exc:
            return str(exc)
        problem = _compare(writer_type, reader_field.type, reader_field.name)
        if problem:
            return problem
    return None


def _compare(writer: pa.DataType, reader: pa.DataType, path: str) -> Optional[str]:
    if writer == reader or (writer, reader) in _WIDENING:
        return None
    if pa.types.is_struct(writer) and pa.types.is_struct(reader):
        names = {f.name: f.type for f in writer}
        for field in reader:
            if field.name in names:
                problem = _compare(names[field.name], field.type, f"{path}.{field.name}")
                if problem:
                    return problem
        return None
    if pa.types.is_map(writer) and pa.types.is_map(reader):
        return (_compare(writer.key_type, reader.key_type, f"{path}.key")
                or _compare(writer.item_type, reader.item_type, f"{path}.value"))
    if pa.types.is_list(writer) and pa.types.is_list(reader):
        return _compare(writer.value_type, reader.value_type, f"{path}[]")
    return (f"field '{path}' is {writer} in the writer's schema and {reader} in the reader's: "
            "the record cannot be read with the reader schema")


def _struct(messages: List[Any], rows: List[int], descriptor: Any, struct_type: pa.StructType,
            errors: _Errors, path: str) -> pa.Array:
    """The struct array of ``messages`` (None for null) projected on ``struct_type`` by field name."""
    children = []
    for reader_field in struct_type:
        name = reader_field.name
        field = descriptor.fields_by_name.get(name)
        if field is None:
            children.append(pa.nulls(len(messages), reader_field.type))
            continue
        if not is_repeated(field) and field.has_presence:
            values = [getattr(m, name) if m is not None and m.HasField(name) else None for m in messages]
        else:
            values = [getattr(m, name) if m is not None else None for m in messages]
        children.append(_column(values, rows, field, reader_field.type, errors, _join(path, name)))
    mask = pa.array([m is None or errors[r] is not None for m, r in zip(messages, rows)], pa.bool_())
    if not children:
        return pa.array([None if m else {} for m in mask.to_pylist()], struct_type)
    return pa.StructArray.from_arrays(children, fields=list(struct_type), mask=mask)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _column(values: List[Any], rows: List[int], field: Any, arrow_type: pa.DataType, errors: _Errors,
            path: str) -> pa.Array:
    """One field's values (repeated ones as containers) as an array of ``arrow_type``."""
    if not is_repeated(field):
        return _element(values, rows, field, arrow_type, errors, path)
    offsets, flat_rows = [0], []
    mask = [v is None for v in values]
    if is_map(field):
        keys: List[Any] = []
        items: List[Any] = []
        for value, row in zip(values, rows):
            if value is not None:
                for key in value:
                    keys.append(key)
                    items.append(value[key])
                flat_rows.extend([row] * len(value))
            offsets.append(len(keys))
        entry = field.message_type.fields_by_name
        key_array = _element(keys, flat_rows, entry["key"], arrow_type.key_type, errors, f"{path}.key")
        item_array = _element(items, flat_rows, entry["value"], arrow_type.item_type, errors, f"{path}.value")
        return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), key_array, item_array, type=arrow_type,
                                       mask=pa.array(mask, pa.bool_()))
    flat: List[Any] = []
    for value, row in zip(values, rows):
        if value is not None:
            flat.extend(value)
            flat_rows.extend([row] * len(value))
        offsets.append(len(flat))
    inner = _element(flat, flat_rows, field, arrow_type.value_type, errors, f"{path}[]")
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), inner, type=arrow_type,
                                    mask=pa.array(mask, pa.bool_()))


def _element(values: List[Any], rows: List[int], field: Any, arrow_type: pa.DataType, errors: _Errors,
             path: str) -> pa.Array:
    """Single values of ``field`` (None for null) as an array of ``arrow_type``."""
    if field.type == _TYPE_ENUM:
        by_number = field.enum_type.values_by_number
        names: List[Optional[str]] = []
        for value, row in zip(values, rows):
            if value is None:
                names.append(None)
            elif value in by_number:
                names.append(by_number[value].name)
            else:
                names.append(None)
                errors[row] = errors[row] or (f"field '{path}': {value} is not a value of enum "
                                              f"{field.enum_type.full_name}")
        return pa.array(names, pa.string())
    if field.message_type is not None:
        name = field.message_type.full_name
        if name == TIMESTAMP:
            micros = [None if v is None else v.seconds * 1_000_000 + v.nanos // 1000 for v in values]
            return _cast(pa.array(micros, pa.int64()).cast(pa.timestamp("us", tz="UTC")), arrow_type)
        if name in WRAPPERS:
            plain = [None if v is None else v.value for v in values]
            return _cast(_scalars(plain, WRAPPERS[name]), arrow_type)
        if name in JSON_TYPES:
            from google.protobuf import json_format

            texts = [None if v is None else json.dumps(json_format.MessageToDict(v), separators=(",", ":"))
                     for v in values]
            return pa.array(texts, pa.string())
        return _struct(values, rows, field.message_type, arrow_type, errors, path)
    return _cast(_scalars(values, SCALAR_TYPES[field.type]), arrow_type)


def _scalars(values: List[Any], arrow_type: pa.DataType) -> pa.Array:
    if pa.types.is_decimal(arrow_type):  # uint64: exact through Arrow's uint64
        return pa.array(values, pa.uint64()).cast(arrow_type)
    return pa.array(values, arrow_type)


def _cast(array: pa.Array, arrow_type: pa.DataType) -> pa.Array:
    return array if array.type == arrow_type else array.cast(arrow_type)
