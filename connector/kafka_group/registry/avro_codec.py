"""The Avro codec: registry-framed Avro payloads into one Arrow column, through Avro schema resolution.

Each payload was written with its record's *writer* schema (the id in its frame) and is read
through the query's *reader* schema by fastavro's schema resolution (fields added with a default,
fields removed, int promoted to long, ...; Avro's rules). A writer schema the reader cannot read
(a reader field without a default that the writer lacks, a type that does not promote) makes each
of its records an error naming the conflict; nothing is filled in silently. Logical types are
paired too (:mod:`kafka_group.registry.avro_resolve`): a writer's ``timestamp-millis`` read
through a reader's ``timestamp-micros`` keeps its instant, and a unit the reader cannot take
exactly (a ``date`` promoted to a timestamp's long, ...) makes each record of that writer an error.

The batch path: a schema id's payloads are read from one stream (their concatenation) by
fastavro's compiled reader, one call per record, each checked to end exactly where its payload
ends (a payload with bytes left over, or too short, is an error, and the next one is read from its
own start); logical types other than ``decimal`` are decoded as their underlying numbers (no Python
``datetime`` per value) and the column is built in one :func:`pyarrow.array` call, then cast
column-wise to its Spark type (see :mod:`kafka_group.registry.avro_types`). A value Arrow refuses
(a decimal wider than its precision) makes that record an error, found record by record.

Types: :mod:`kafka_group.registry.avro_types`.
"""

from __future__ import annotations

import io
import itertools
import json
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import pyarrow as pa

from kafka_group.errors import ConfigError, DependencyError
from kafka_group.registry.avro_resolve import writer_native_type
from kafka_group.registry.avro_types import FINAL, NATIVE, PLAIN, avro_arrow_type, strip_logical
from kafka_group.registry.codec import DecodedColumn, RegisteredSchema

__all__ = ["AvroCodec"]


def _fastavro() -> Any:
    try:
        import fastavro
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise DependencyError(
            "decoding registry Avro needs fastavro: pip install 'pyspark-kafka-group[schema-registry]'"
        ) from exc
    return fastavro


class AvroCodec:
    """Decodes registry Avro payloads (schema type ``AVRO``) into an Arrow column.

    Implements :class:`kafka_group.registry.codec.Codec`. Parsed schemas are kept per instance
    (one instance per executor process: see :mod:`kafka_group.registry.decoding`).
    """

    schema_type = "AVRO"

    def __init__(self) -> None:
        self._parsed: Dict[Tuple[str, Tuple[str, ...]], Any] = {}
        self._json: Dict[str, Any] = {}
        self._types: Dict[str, Tuple[pa.DataType, pa.DataType, pa.DataType]] = {}
        self._plans: Dict[Tuple[str, Tuple[str, ...], str, Tuple[str, ...]], Union[pa.DataType, str]] = {}

    # -- the contract ------------------------------------------------------------------

    def arrow_type(self, reader: RegisteredSchema) -> pa.DataType:
        """The Arrow type of the column, from the reader schema (see :mod:`~kafka_group.registry.avro_types`).

        Raises
        ------
        ConfigError
            The schema is not Avro JSON, or has a construct without a Spark column.
        """
        return self._stages(reader)[0]

    def decode(self, writer: RegisteredSchema, reader: RegisteredSchema,
               payloads: Sequence[bytes]) -> DecodedColumn:
        """Decode ``payloads`` written with ``writer`` through ``reader`` (see the module's notes)."""
        final, native, plain = self._stages(reader)
        try:
            parsed_writer = self._parse(writer)
        except ConfigError as exc:
            return _all_bad(final, len(payloads), f"writer schema {_name(writer)} is not usable: {exc}")
        same = writer.text == reader.text and _refs(writer) == _refs(reader)
        try:
            as_written = native if same else self._as_written(writer, reader)
        except ConfigError as exc:
            return _all_bad(final, len(payloads), str(exc))
        parsed_reader = None if same else self._parse(reader)
        errors: List[Optional[str]] = [None] * len(payloads)
        records = _read_all(parsed_writer, parsed_reader, payloads, errors)
        try:
            values = pa.array(records, plain)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            values = _to_arrow_each(records, plain, errors)
        steps = [t for t, before in zip((as_written, native, final), (plain, as_written, native)) if t != before]
        try:
            cast = values
            for step in steps:
                cast = cast.cast(step)
            values = cast
        except pa.ArrowException:
            values = _cast_each(values, steps, final, errors)
        return DecodedColumn(values, tuple(errors))

    # -- schemas -------------------------------------------------------------------------

    def _as_written(self, writer: RegisteredSchema, reader: RegisteredSchema) -> pa.DataType:
        """The reader's native type in the writer's time units (planned once per writer and reader)."""
        key = (writer.text, _refs(writer), reader.text, _refs(reader))
        planned = self._plans.get(key)
        if planned is None:
            try:
                planned = writer_native_type(
                    self._schema_json(writer), [self._schema_json(r) for r in _references(writer)],
                    self._schema_json(reader), [self._schema_json(r) for r in _references(reader)], _name(writer))
            except ConfigError as exc:
                planned = str(exc)
            except (KeyError, TypeError, AttributeError, IndexError) as exc:  # a schema fastavro took, we did not
                planned = (f"writer schema {_name(writer)} could not be paired with the reader schema: "
                           f"{type(exc).__name__}: {exc}")
            self._plans[key] = planned
        if isinstance(planned, str):
            raise ConfigError(planned)
        return planned

    def _stages(self, reader: RegisteredSchema) -> Tuple[pa.DataType, pa.DataType, pa.DataType]:
        """The reader's final, native and plain Arrow types (parsed once per schema text)."""
        cached = self._types.get(reader.text)
        if cached is None:
            stages = []
            for stage in (FINAL, NATIVE, PLAIN):
                named: Dict[str, Any] = {}
                for ref in _references(reader):
                    avro_arrow_type(self._schema_json(ref), named, f"reference {_name(ref)}", stage)
                stages.append(avro_arrow_type(self._schema_json(reader), named, "the top level", stage))
            self._parse(reader)  # refuses what fastavro refuses, when the query starts
            cached = (stages[0], stages[1], stages[2])
            self._types[reader.text] = cached
        return cached

    def _schema_json(self, schema: RegisteredSchema) -> Any:
        found = self._json.get(schema.text)
        if found is None:
            try:
                found = json.loads(schema.text)
            except ValueError as exc:
                raise ConfigError(f"Avro schema {_name(schema)} is not JSON: {exc}") from exc
            self._json[schema.text] = found
        return found

    def _parse(self, schema: RegisteredSchema) -> Any:
        key = (schema.text, _refs(schema))
        parsed = self._parsed.get(key)
        if parsed is None:
            fastavro = _fastavro()
            named: Dict[str, Any] = {}
            try:
                for ref in _references(schema):
                    fastavro.parse_schema(strip_logical(self._schema_json(ref)), named_schemas=named)
                parsed = fastavro.parse_schema(strip_logical(self._schema_json(schema)), named_schemas=named)
            except ConfigError:
                raise
            except Exception as exc:  # fastavro's SchemaParseException, UnknownType, ValueError
                raise ConfigError(f"Avro schema {_name(schema)} does not parse: {type(exc).__name__}: {exc}") from exc
            self._parsed[key] = parsed
        return parsed


def _read_all(writer: Any, reader: Optional[Any], payloads: Sequence[bytes],
              errors: List[Optional[str]]) -> List[Any]:
    """Each payload's record (None where ``errors`` says why), read from one stream."""
    read = _fastavro().schemaless_reader
    stream = io.BytesIO(b"".join(payloads))
    tell = stream.tell
    out: List[Any] = []
    append = out.append
    start = 0
    for i, end in enumerate(itertools.accumulate(map(len, payloads))):
        try:
            append(read(stream, writer, reader))
        except Exception as exc:  # fastavro raises many kinds (EOFError, SchemaResolutionError, ...)
            append(None)
            errors[i] = f"Avro payload does not decode: {type(exc).__name__}: {exc}"[:500]
        else:
            if tell() != end:
                out[i] = None
                errors[i] = (f"Avro payload of {end - start} bytes does not end where its record does (read "
                             f"{tell() - start} bytes): corrupt, or written with another schema than its id says")
        if tell() != end:
            stream.seek(end)
        start = end
    return out


def _to_arrow_each(records: List[Any], arrow_type: pa.DataType, errors: List[Optional[str]]) -> pa.Array:
    kept: List[Any] = []
    for i, record in enumerate(records):
        try:
            pa.array([record], arrow_type)
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            kept.append(None)
            errors[i] = errors[i] or f"Avro value has no Spark value of type {arrow_type}: {exc}"[:500]
            continue
        kept.append(record)
    return pa.array(kept, arrow_type)


def _cast_each(values: pa.Array, steps: Sequence[pa.DataType], final: pa.DataType,
               errors: List[Optional[str]]) -> pa.Array:
    out: List[pa.Array] = []
    for i in range(len(values)):
        one = values.take([i])  # a copy: a slice keeps its list children whole, and a cast checks all of them
        try:
            for step in steps:
                one = one.cast(step)
            out.append(one)
        except pa.ArrowException as exc:
            out.append(pa.nulls(1, final))
            errors[i] = errors[i] or f"Avro value has no exact Spark value of type {final}: {exc}"[:500]
    return pa.concat_arrays(out) if out else pa.array([], final)


def _references(schema: RegisteredSchema) -> List[RegisteredSchema]:
    """The schemas ``schema`` references, depth first (a reference's references before it)."""
    out: List[RegisteredSchema] = []
    for ref in schema.references:
        out.extend(_references(ref.schema))
        out.append(ref.schema)
    return out


def _refs(schema: RegisteredSchema) -> Tuple[str, ...]:
    return tuple(r.text for r in _references(schema))


def _name(schema: RegisteredSchema) -> str:
    return "(explicit)" if schema.schema_id is None else f"id {schema.schema_id}"


def _all_bad(arrow_type: pa.DataType, n: int, error: str) -> DecodedColumn:
    return DecodedColumn(pa.nulls(n, arrow_type), (error,) * n)
