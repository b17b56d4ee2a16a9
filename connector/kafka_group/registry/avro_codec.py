"""The Avro codec: registry-framed Avro payloads into one Arrow column, through Avro schema resolution.

Each payload was written with its record's *writer* schema (the id in its frame) and is read
through the query's *reader* schema by fastavro's schema resolution (fields added with a default,
fields removed, int promoted to long, ...; Avro's rules). A writer schema the reader cannot read
(a reader field without a default that the writer lacks, a type that does not promote) makes each
of its records an error naming the conflict; nothing is filled in silently.

The batch path: a schema id's payloads are concatenated into one Avro block and read by fastavro's
block reader (the loop over records runs in fastavro's compiled code, not per record in Python),
then the records become the column in one :func:`pyarrow.array` call. A block that does not read
whole (a corrupt payload shifts every record after it) is read again record by record, which finds
the bad ones; a payload is also bad when it has bytes left after its record.

Types: :mod:`kafka_group.registry.avro_types`.
"""

from __future__ import annotations

import io
import json
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pyarrow as pa

from kafka_group.errors import ConfigError, DependencyError
from kafka_group.registry.avro_types import avro_arrow_type, strip_logical
from kafka_group.registry.codec import DecodedColumn, RegisteredSchema

__all__ = ["AvroCodec"]

_SYNC = b"\x17kafka-group-sync"  # 16 bytes: the block's sync marker


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

    Parameters
    ----------
    block : bool, default True
        Read a schema id's payloads as one Avro block (see the module's notes). False reads
        record by record (the same values, slower).
    """

    schema_type = "AVRO"

    def __init__(self, *, block: bool = True) -> None:
        self._block = block
        self._parsed: Dict[Tuple[str, Tuple[str, ...]], Any] = {}
        self._json: Dict[str, Any] = {}
        self._types: Dict[str, pa.DataType] = {}

    # -- the contract ------------------------------------------------------------------

    def arrow_type(self, reader: RegisteredSchema) -> pa.DataType:
        """The Arrow type of the column, from the reader schema (see :mod:`~kafka_group.registry.avro_types`).

        Raises
        ------
        ConfigError
            The schema is not Avro JSON, or has a construct without a Spark column.
        """
        cached = self._types.get(reader.text)
        if cached is None:
            named: Dict[str, Any] = {}
            for ref in _references(reader):
                avro_arrow_type(self._schema_json(ref), named, f"reference {ref.schema_id}")
            cached = avro_arrow_type(self._schema_json(reader), named, "the top level")
            self._parse(reader)  # refuses what fastavro refuses, at the same time
            self._types[reader.text] = cached
        return cached

    def decode(self, writer: RegisteredSchema, reader: RegisteredSchema,
               payloads: Sequence[bytes]) -> DecodedColumn:
        """Decode ``payloads`` written with ``writer`` through ``reader`` (see the module's notes)."""
        arrow_type = self.arrow_type(reader)
        try:
            parsed_writer = self._parse(writer)
        except ConfigError as exc:
            return _all_bad(arrow_type, len(payloads), f"writer schema {writer.schema_id} is not usable: {exc}")
        parsed_reader = self._parse(reader)
        same = writer.text == reader.text and not writer.references and not reader.references
        records: Optional[List[Any]] = None
        if self._block and payloads:
            records = self._read_block(parsed_writer, None if same else parsed_reader, payloads)
        errors: List[Optional[str]] = [None] * len(payloads)
        if records is None:
            records = self._read_each(parsed_writer, None if same else parsed_reader, payloads, errors)
        try:
            values = pa.array(records, arrow_type)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            values = self._to_arrow_each(records, arrow_type, errors)
        return DecodedColumn(values, tuple(errors))

    # -- schemas -------------------------------------------------------------------------

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
        refs = tuple(r.text for r in _references(schema))
        key = (schema.text, refs)
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

    # -- reading -------------------------------------------------------------------------

    def _read_block(self, writer: Any, reader: Optional[Any], payloads: Sequence[bytes]) -> Optional[List[Any]]:
        """All payloads read as one Avro block, or None when the block does not read whole."""
        fastavro = _fastavro()
        data = b"".join(payloads)
        buf = io.BytesIO()
        fastavro.write.write_header(buf, {"avro.schema": json.dumps(writer), "avro.codec": "null"}, _SYNC) \
            if hasattr(fastavro.write, "write_header") else None
        if buf.tell() == 0:
            return None
        buf.write(_long(len(payloads)))
        buf.write(_long(len(data)))
        buf.write(data)
        buf.write(_SYNC)
        buf.seek(0)
        try:
            it = fastavro.reader(buf, reader_schema=reader)
            records = list(it)
        except Exception:
            return None
        # Each record must end exactly where the next payload starts: check the payload lengths
        # add up by re-reading is costly; instead the per-record check runs when the block's
        # byte count and the records' disagree (fastavro fails or returns fewer records then).
        if len(records) != len(payloads) or buf.tell() != buf.getbuffer().nbytes:
            return None
        return records

    def _read_each(self, writer: Any, reader: Optional[Any], payloads: Sequence[bytes],
                   errors: List[Optional[str]]) -> List[Any]:
        fastavro = _fastavro()
        read = fastavro.schemaless_reader
        out: List[Any] = []
        for i, payload in enumerate(payloads):
            stream = io.BytesIO(payload)
            try:
                record = read(stream, writer, reader)
            except Exception as exc:  # fastavro raises many kinds (EOFError, SchemaResolutionError, ...)
                out.append(None)
                errors[i] = f"Avro payload does not decode: {type(exc).__name__}: {exc}"[:500]
                continue
            if stream.tell() != len(payload):
                out.append(None)
                errors[i] = (f"Avro payload has {len(payload) - stream.tell()} bytes after its record "
                             "(corrupt, or written with another schema than its id says)")
                continue
            out.append(record)
        return out

    @staticmethod
    def _to_arrow_each(records: List[Any], arrow_type: pa.DataType, errors: List[Optional[str]]) -> pa.Array:
        kept: List[Any] = []
        for i, record in enumerate(records):
            try:
                pa.array([record], arrow_type)
            except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
                kept.append(None)
                errors[i] = errors[i] or f"Avro value has no {arrow_type} value: {exc}"[:500]
                continue
            kept.append(record)
        return pa.array(kept, arrow_type)


def _references(schema: RegisteredSchema) -> List[RegisteredSchema]:
    """The schemas ``schema`` references, depth first (a reference's references before it)."""
    out: List[RegisteredSchema] = []
    for ref in schema.references:
        out.extend(_references(ref.schema))
        out.append(ref.schema)
    return out


def _name(schema: RegisteredSchema) -> str:
    return "(explicit)" if schema.schema_id is None else f"id {schema.schema_id}"


def _all_bad(arrow_type: pa.DataType, n: int, error: str) -> DecodedColumn:
    return DecodedColumn(pa.nulls(n, arrow_type), (error,) * n)


def _long(n: int) -> bytes:
    """Avro's zig-zag varint encoding of ``n``."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z & ~0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


_ = os  # reserved
