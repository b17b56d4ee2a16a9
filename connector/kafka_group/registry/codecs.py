"""The process's registry codecs, the writer schema of a record's schema id, and the placing of each
schema id's decoded values back in record order (shared by both decode paths).

One codec per schema type and process (:func:`codec_for`), so parsed schemas are kept across
batches; :func:`writer_of` asks the process's cache (:mod:`kafka_group.registry.client`) for a
schema id's writer schema and says why its records are bad when there is none to decode with;
:func:`in_record_order` puts the values decoded per schema id back in the batch's record order.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Union

import pyarrow as pa
import pyarrow.compute as pc

from kafka_group.errors import ConfigError, SchemaAnswerError
from kafka_group.redaction import scrub
from kafka_group.registry import client
from kafka_group.registry.codec import Codec, RegisteredSchema
from kafka_group.registry.settings import RegistryOptions

__all__ = ["codec_for", "in_record_order", "writer_of"]

_codecs: Dict[str, Codec] = {}
_codecs_lock = threading.Lock()


def codec_for(schema_type: str) -> Codec:
    """The process's codec of ``schema_type`` (``AVRO``, ``PROTOBUF``, ``JSON``): one per process, so
    parsed schemas are kept across batches."""
    codec = _codecs.get(schema_type)
    if codec is None:
        with _codecs_lock:
            codec = _codecs.get(schema_type)
            if codec is None:
                codec = _new_codec(schema_type)
                _codecs[schema_type] = codec
    return codec


def _new_codec(schema_type: str) -> Codec:
    if schema_type == "AVRO":
        from kafka_group.registry.avro_codec import AvroCodec

        return AvroCodec()
    if schema_type == "PROTOBUF":
        from kafka_group.registry.protobuf_codec import ProtobufCodec

        return ProtobufCodec()
    if schema_type == "JSON":
        from kafka_group.registry.json_schema_codec import JsonSchemaCodec

        return JsonSchemaCodec()
    raise ConfigError(f"schema type {schema_type!r} is not one the connector decodes (AVRO, PROTOBUF, JSON)")



def writer_of(registry: RegistryOptions, reader: RegisteredSchema, schema_id: int,
              budget: client.LookupBudget) -> Union[RegisteredSchema, str]:
    """The writer schema of ``schema_id``, or why its records are bad (unknown id, an unusable answer,
    another schema type than ``reader``'s). Caller: an executor's task thread.

    Raises
    ------
    SchemaRegistryError
        The registry is unreachable (the task is retried).
    """
    try:
        writer = client.schema_by_id(registry, schema_id, budget)
    except client.UnknownSchemaId as exc:
        return (str(exc) if isinstance(exc, client.NotAsked)
                else f"schema id {schema_id} is unknown to the Schema Registry at {scrub(registry.url)}")
    except SchemaAnswerError as exc:  # the registry's unusable answer about this id: its records are bad
        return f"the writer schema of id {schema_id} is unusable: {exc}"
    if writer.schema_type != reader.schema_type:
        return (f"written with a {writer.schema_type} schema (id {schema_id}), read as "
                f"{reader.schema_type}")
    return writer


def in_record_order(pieces: List[pa.Array], where: Any, arrow_type: pa.DataType) -> pa.Array:
    """The values decoded per schema id (``pieces``, in the order they were decoded), placed at their
    records: ``where`` (a numpy int64 array, one entry per record of the batch) holds each record's
    position in the pieces laid end to end, -1 where the record has no value (null)."""
    placed = sum(len(p) for p in pieces)
    if len(pieces) == 1 and placed == len(where):  # one schema id, every record decoded: already in order
        return pieces[0]
    positions = where.copy()
    positions[positions < 0] = placed  # the null appended after the pieces
    return pc.take(pa.concat_arrays(pieces + [pa.nulls(1, arrow_type)]), pa.array(positions, pa.int64()))

