"""The Protobuf codec: registry-framed Protobuf payloads into one Arrow struct column.

Protobuf has no schema resolution: fields are identified by number. Each payload is parsed with the
*reader's* message class (built at run time from the registry's ``.proto`` text,
:mod:`kafka_group.registry.protobuf_schema`), exactly as the protobuf runtime reads it: a field
renamed in the reader keeps its values, a writer field the reader lacks is skipped (an unknown
field), a reader field the writer lacks is null (or its proto3 default). The writer's schema is
compared with the reader's once per writer message (:mod:`kafka_group.registry.protobuf_compat`):
where protobuf would not read the writer's value as the same value in the reader's type (another
wire type, a reinterpretation such as sint32 -> int32, a truncation, repeated -> single), every
record of that writer is an error naming the field; a value is never converted into something it
was not. An enum number only the writer's enum has is named by the writer's schema.

The payload a codec sees starts with Confluent's message-index array (which message of the file the
record is); a record whose message is not the reader's (by its name within the package) is an error.

Decoding is columnar: the messages of a batch are parsed (protobuf's C implementation, upb), then
each reader field's values are taken from all messages at once into one Arrow array; no Python dict
is built per record.
"""

from __future__ import annotations

import json
from itertools import accumulate, chain, repeat
from operator import attrgetter, methodcaller
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import pyarrow as pa

from kafka_group.errors import ConfigError
from kafka_group.registry.codec import DecodedColumn, RegisteredSchema
from kafka_group.registry.protobuf_compat import EnumNames, compare
from kafka_group.registry.protobuf_schema import ProtoFile, load_proto, read_message_indexes
from kafka_group.registry.protobuf_types import JSON_TYPES, SCALAR_TYPES, TIMESTAMP, WRAPPERS, is_map, is_repeated

__all__ = ["ProtobufCodec"]

_TYPE_ENUM = 14
_Errors = List[Optional[str]]
_Absent = Optional[List[bool]]
_INT64 = (-(2**63), 2**63 - 1)


class ProtobufCodec:
    """Decodes registry Protobuf payloads (schema type ``PROTOBUF``) into an Arrow struct column.

    Implements :class:`kafka_group.registry.codec.Codec`. Parsed schemas are cached per codec
    instance by the schema's content digest (:attr:`RegisteredSchema.digest`, computed once per schema
    object), holding no schema object; a schema that does not parse is parsed once.

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
        # RegisteredSchema.digest -> the parsed schema, or the ConfigError it raised (a hostile schema is parsed once)
        self._files: Dict[str, Union[ProtoFile, ConfigError]] = {}
        self._types: Dict[str, pa.DataType] = {}
        # (writer digest, reader digest, writer message) -> (why it cannot be read, or None; enum names)
        self._problems: Dict[Tuple[str, str, str], Tuple[Optional[str], EnumNames]] = {}

    def __getstate__(self) -> Dict[str, Any]:
        """The options only: the caches (descriptor pools, message classes) do not pickle, and are
        rebuilt where the codec is used (a Spark executor)."""
        return {"message": self._message}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__init__(message=state["message"])  # type: ignore[misc]

    def _file(self, schema: RegisteredSchema) -> ProtoFile:
        key = schema.digest
        if key not in self._files:
            try:
                self._files[key] = load_proto(schema)
            except ConfigError as exc:
                self._files[key] = exc
        found = self._files[key]
        if isinstance(found, ConfigError):
            raise found
        return found

    def _reader_message(self, reader: RegisteredSchema) -> Tuple[Any, Any]:
        """The reader message's descriptor and class."""
        proto = self._file(reader)
        return proto.message_named(self._message) if self._message else proto.message([0])

    def arrow_type(self, reader: RegisteredSchema) -> pa.DataType:
        """The reader message's Arrow struct type (see :mod:`kafka_group.registry.protobuf_schema`).

        Raises :class:`~kafka_group.errors.ConfigError` for a recursive message (naming the field) or
        a schema protoc refuses.
        """
        from kafka_group.registry.protobuf_types import message_arrow_type

        key = reader.digest
        if key not in self._types:
            self._types[key] = message_arrow_type(self._reader_message(reader)[0])
        return self._types[key]

    def decode(self, writer: RegisteredSchema, reader: RegisteredSchema,
               payloads: Sequence[bytes]) -> DecodedColumn:
        """Decode ``payloads`` (message-index array, then the message) written with ``writer``."""
        from google.protobuf.message import DecodeError

        reader_type = self.arrow_type(reader)
        reader_descriptor, reader_class = self._reader_message(reader)
        wanted = _relative_name(reader_descriptor)
        try:
            proto = self._file(writer)
        except ConfigError as exc:  # the writer's schema, not the reader's: each of its records
            return DecodedColumn(pa.nulls(len(payloads), reader_type), (str(exc),) * len(payloads))
        errors: _Errors = [None] * len(payloads)
        messages: List[Any] = [None] * len(payloads)
        # message-index path -> (why that message cannot be read, or None; its enum names)
        resolved: Dict[Tuple[int, ...], Tuple[Optional[str], EnumNames]] = {}
        enum_names: EnumNames = {}
        read_any = False
        for i, payload in enumerate(payloads):
            if payload[:1] == b"\x00":  # the common case: the file's first message
                key: Tuple[int, ...] = (0,)
                start = 1
            else:
                try:
                    indexes, start = read_message_indexes(payload)
                except ValueError as exc:
                    errors[i] = f"not a Protobuf payload in Confluent's framing: {exc}"
                    continue
                key = tuple(indexes)
            if key not in resolved:
                resolved[key] = self._resolve(proto, key, wanted, reader_descriptor, writer, reader)
            problem, names = resolved[key]
            if problem is not None:
                errors[i] = problem
                continue
            enum_names, read_any = names, True  # one writer message is the reader's (by its name)
            try:  # by field number, as protobuf reads the writer's bytes with the reader's schema
                messages[i] = reader_class.FromString(payload[start:])
            except (DecodeError, ValueError) as exc:
                errors[i] = f"the Protobuf message does not decode: {exc}"
        if not read_any:
            return DecodedColumn(pa.nulls(len(payloads), reader_type), tuple(errors))
        absent = None
        if any(m is None for m in messages):  # an empty message stands in; the mask nulls it
            absent = [m is None for m in messages]
            empty = reader_class()
            messages = [empty if m is None else m for m in messages]
        # errors found while building the columns (an unknown enum number) are in the top mask: it is made last
        values = _struct(messages, absent, list(range(len(messages))), reader_descriptor, reader_type,
                         _Sink(errors, enum_names))
        return DecodedColumn(values, tuple(errors))

    def _resolve(self, proto: ProtoFile, key: Tuple[int, ...], wanted: str, reader_descriptor: Any,
                 writer: RegisteredSchema, reader: RegisteredSchema) -> Tuple[Optional[str], EnumNames]:
        """Why the records of the message ``key`` names cannot be read (or None), and its enum names."""
        try:
            found, _ = proto.message(key)
        except IndexError as exc:
            return f"not a Protobuf payload in Confluent's framing: {exc}", {}
        if _relative_name(found) != wanted:
            return (f"the record is a {found.full_name} message, the reader schema's "
                    f"message is {reader_descriptor.full_name}"), {}
        cached = (writer.digest, reader.digest, str(found.full_name))
        if cached not in self._problems:
            self._problems[cached] = compare(found, reader_descriptor)
        return self._problems[cached]


def _id_text(schema: RegisteredSchema) -> str:
    return f" (id {schema.schema_id})" if schema.schema_id is not None else ""


def _relative_name(descriptor: Any) -> str:
    package = descriptor.file.package
    return str(descriptor.full_name)[len(package) + 1:] if package else str(descriptor.full_name)


class _Sink:
    """Where the column builders put what they find: each record's first error; and the writer's
    names of enum numbers the reader's enums lack (by field path, from :func:`compare`)."""

    def __init__(self, errors: _Errors, enum_names: EnumNames) -> None:
        self.errors = errors
        self.enum_names = enum_names


def _struct(messages: List[Any], absent: _Absent, rows: List[int], descriptor: Any,
            struct_type: pa.StructType, sink: "_Sink", path: str = "") -> pa.Array:
    """The struct array of ``messages`` (of the reader's message ``descriptor``) as ``struct_type``.

    ``absent[i]`` marks a null entry (its message is an empty stand-in); None means none is null.
    ``rows[i]`` is the batch record that entry belongs to (where its errors go, in ``sink``).
    """
    children = []
    for reader_field in struct_type:
        name = reader_field.name
        field = descriptor.fields_by_name.get(name)
        if field is None:
            children.append(pa.nulls(len(messages), reader_field.type))
            continue
        values = list(map(attrgetter(name), messages))
        child_absent = absent
        if not is_repeated(field) and field.has_presence:
            unset = [not has for has in map(methodcaller("HasField", name), messages)]
            if any(unset):
                child_absent = unset if absent is None else [a or u for a, u in zip(absent, unset)]
        children.append(_column(values, child_absent, rows, field, reader_field.type, sink, _join(path, name)))
    nulls = absent
    if any(sink.errors):
        nulls = [sink.errors[r] is not None or bool(absent and absent[i]) for i, r in enumerate(rows)]
    mask = None if nulls is None else pa.array(nulls, pa.bool_())
    if not children:
        return pa.array([None if null else {} for null in (nulls or [False] * len(messages))], struct_type)
    return pa.StructArray.from_arrays(children, fields=list(struct_type), mask=mask)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _mask(absent: _Absent) -> Optional[pa.Array]:
    return None if absent is None else pa.array(absent, pa.bool_())


def _column(values: List[Any], absent: _Absent, rows: List[int], field: Any, arrow_type: pa.DataType,
            sink: "_Sink", path: str) -> pa.Array:
    """One field's values (repeated ones as containers) as an array of ``arrow_type``."""
    if not is_repeated(field):
        return _element(values, absent, rows, field, arrow_type, sink, path)
    lengths = list(map(len, values))  # an absent entry's stand-in has empty containers
    offsets = pa.array([0, *accumulate(lengths)], pa.int32())
    flat_rows = list(chain.from_iterable(map(repeat, rows, lengths)))
    if is_map(field):
        pairs = list(chain.from_iterable(value.items() for value in values))
        entry = field.message_type.fields_by_name
        keys = _element([k for k, _ in pairs], None, flat_rows, entry["key"], arrow_type.key_type, sink,
                        f"{path}.key")
        items = _element([v for _, v in pairs], None, flat_rows, entry["value"], arrow_type.item_type, sink,
                         f"{path}.value")
        return pa.MapArray.from_arrays(offsets, keys, items, type=arrow_type, mask=_mask(absent))
    inner = _element(list(chain.from_iterable(values)), None, flat_rows, field, arrow_type.value_type, sink,
                     f"{path}[]")
    return pa.ListArray.from_arrays(offsets, inner, type=arrow_type, mask=_mask(absent))


def _element(values: List[Any], absent: _Absent, rows: List[int], field: Any, arrow_type: pa.DataType,
             sink: "_Sink", path: str) -> pa.Array:
    """Single values of ``field`` (``absent`` marks nulls) as an array of ``arrow_type``."""
    if field.type == _TYPE_ENUM:
        by_number = field.enum_type.values_by_number
        writer_names = sink.enum_names.get(path, {})
        names: List[Optional[str]] = []
        for i, value in enumerate(values):
            if absent is not None and absent[i]:
                names.append(None)
            elif value in by_number:
                names.append(by_number[value].name)
            elif value in writer_names:  # a value added to the writer's enum since the reader's
                names.append(writer_names[value])
            else:
                names.append(None)
                row = rows[i]
                sink.errors[row] = sink.errors[row] or (
                    f"field '{path}': {value} is not a value of enum {field.enum_type.full_name}")
        return pa.array(names, pa.string())
    if field.message_type is not None:
        name = field.message_type.full_name
        if name == TIMESTAMP:
            micros = [v.seconds * 1_000_000 + v.nanos // 1000 for v in values]
            if not _INT64[0] <= min(micros, default=0) <= max(micros, default=0) <= _INT64[1]:
                absent = list(absent or [False] * len(values))
                for i, value in enumerate(micros):
                    if not absent[i] and not _INT64[0] <= value <= _INT64[1]:
                        absent[i], micros[i] = True, 0
                        sink.errors[rows[i]] = sink.errors[rows[i]] or (
                            f"field '{path}': {values[i].seconds} seconds is beyond the timestamps Spark holds")
            return _cast(pa.array(micros, pa.int64(), mask=_mask(absent)).cast(pa.timestamp("us", tz="UTC")),
                         arrow_type)
        if name in WRAPPERS:
            return _cast(_scalars(list(map(attrgetter("value"), values)), absent, WRAPPERS[name]), arrow_type)
        if name in JSON_TYPES:
            from google.protobuf import json_format

            texts: List[Optional[str]] = []
            for i, value in enumerate(values):
                try:
                    texts.append(None if absent and absent[i] else
                                 json.dumps(json_format.MessageToDict(value), separators=(",", ":")))
                except ValueError:  # NaN or Infinity: JSON has no such number (json_format refuses it)
                    texts.append(None)
                    sink.errors[rows[i]] = sink.errors[rows[i]] or (
                        f"field '{path}': the {name.rsplit('.', 1)[-1]} holds a value JSON cannot hold (NaN or Infinity)")
            return pa.array(texts, pa.string())
        return _struct(values, absent, rows, field.message_type, arrow_type, sink, path)
    return _cast(_scalars(values, absent, SCALAR_TYPES[field.type]), arrow_type)


def _scalars(values: List[Any], absent: _Absent, arrow_type: pa.DataType) -> pa.Array:
    if pa.types.is_decimal(arrow_type):  # uint64: exact through Arrow's uint64
        return pa.array(values, pa.uint64(), mask=_mask(absent)).cast(arrow_type)
    return pa.array(values, arrow_type, mask=_mask(absent))


def _cast(array: pa.Array, arrow_type: pa.DataType) -> pa.Array:
    return array if array.type == arrow_type else array.cast(arrow_type)
