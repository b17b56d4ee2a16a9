"""Registry-framed keys and values decoded into typed columns: the plan (driver) and the batch decode (executors).

The driver resolves each decoded side's reader schema once, when the query is loaded
(:func:`plan_decoding`), which fixes the Spark schema (:func:`decoded_arrow_schema`): the decoded
side replaces ``value`` (or ``key``) by the reader schema's type, followed by the rest of Spark's
Kafka columns and then, per decoded side:

* ``value_schema_id`` (int): the writer schema id of the record's frame (null for a null value
  or a record that is not framed);
* with ``badRecords=quarantine``: ``value_raw`` (binary: the bytes of a record that did not decode,
  as read; null when it decoded) and ``value_error`` (string, why it did not decode; null when it did).

On executors, :func:`decode_batch` turns each Arrow batch of the raw read into that schema: the
batch's records are grouped by schema id (:func:`~kafka_group.registry.framing.split_frames`),
each id's writer schema comes from the process's cache (:mod:`kafka_group.registry.client`) and
its codec decodes the id's payloads in one call. A record is bad when it is not framed, its id is
unknown, the registry's answer about its id is unusable (:class:`~kafka_group.errors.SchemaAnswerError`)
or it does not decode; a bad record fails the task with a
:class:`~kafka_group.errors.RecordError` naming its topic, partition and offset, unless
quarantined; nothing is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Dict, List, Optional, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kafka_group.errors import ConfigError, RecordError
from kafka_group.registry import client
from kafka_group.registry.codec import RegisteredSchema
from kafka_group.registry.codecs import codec_for, in_record_order, writer_of
from kafka_group.registry.framing import split_frames
from kafka_group.registry.native_decoding import decode_side_native
from kafka_group.registry.settings import KEY, VALUE, RegistryOptions, SideDecoding

__all__ = ["SidePlan", "DecodePlan", "plan_decoding", "decoded_arrow_schema", "decode_batch", "codec_for"]

@dataclass(frozen=True)
class SidePlan:
    """One decoded side: its options, its reader schema (resolved on the driver) and its column type."""

    decoding: SideDecoding
    reader: RegisteredSchema
    arrow_type: pa.DataType


@dataclass(frozen=True)
class DecodePlan:
    """What executors decode: the registry and each decoded side (None: raw)."""

    registry: RegistryOptions
    key: Optional[SidePlan]
    value: Optional[SidePlan]

    def sides(self) -> List[SidePlan]:
        """The decoded sides, key first."""
        return [s for s in (self.key, self.value) if s is not None]


def plan_decoding(registry: RegistryOptions) -> DecodePlan:
    """Resolve each decoded side's reader schema (asking the registry for a subject's) and its type.

    Caller: the driver, when the query is loaded (the Spark schema is fixed from it).

    Raises
    ------
    ConfigError
        The subject or version does not exist, the schema is of another type than the format
        option says, or it has a construct without a Spark column.
    SchemaRegistryError
        The registry is unreachable.
    """
    plans: Dict[str, Optional[SidePlan]] = {KEY: None, VALUE: None}
    for decoding in (registry.key, registry.value):
        if decoding is None:
            continue
        if decoding.schema_text is not None:
            reader = RegisteredSchema(decoding.schema_type, decoding.schema_text)
        else:
            assert decoding.subject is not None
            reader = client.schema_by_subject(registry, decoding.subject, decoding.version)
            if reader.schema_type != decoding.schema_type:
                raise ConfigError(
                    f"{decoding.describe()} is a {reader.schema_type} schema, but option '{decoding.side}Format' "
                    f"says {decoding.schema_type.lower()}: set it to {_FORMAT_OF.get(reader.schema_type, '?')}")
        arrow_type = codec_for(decoding.schema_type).arrow_type(reader)
        plans[decoding.side] = SidePlan(decoding, reader, arrow_type)
    return DecodePlan(registry, plans[KEY], plans[VALUE])


_FORMAT_OF = {"AVRO": "avro", "PROTOBUF": "protobuf", "JSON": "json"}


def decoded_arrow_schema(raw: pa.Schema, plan: DecodePlan) -> pa.Schema:
    """The Arrow schema of decoded batches, from that of the raw read (see the module's notes)."""
    fields = list(raw)
    for side in plan.sides():
        name = side.decoding.side
        fields[raw.get_field_index(name)] = pa.field(name, side.arrow_type)
    for side in plan.sides():
        name = side.decoding.side
        fields.append(pa.field(f"{name}_schema_id", pa.int32()))
        if plan.registry.quarantine:
            fields += [pa.field(f"{name}_raw", pa.binary()), pa.field(f"{name}_error", pa.string())]
    return pa.schema(fields)


def decode_batch(batch: pa.RecordBatch, plan: DecodePlan, schema: pa.Schema,
                 native: Optional[ModuleType] = None) -> pa.RecordBatch:
    """``batch`` of the raw read with its decoded sides (see the module's notes). Caller: an executor.

    With ``native`` (``kafka_group._native``, when the task reads by the compiled read path), Avro
    payloads the compiled decoder reads exactly are decoded there, the others by the codec
    (:mod:`kafka_group.registry.native_decoding`); the rows and errors are the same either way.

    Raises
    ------
    RecordError
        A record does not decode and ``badRecords`` is ``fail``: names its topic, partition, offset and why.
    SchemaRegistryError
        The registry is unreachable (the task is retried).
    """
    columns: Dict[str, pa.Array] = {name: batch.column(name) for name in batch.schema.names}
    budget = client.LookupBudget()  # ids come from the records' bytes: a batch asks about few unknown ones
    for side in plan.sides():
        name = side.decoding.side
        raw = columns[name]
        ids: pa.Array
        if native is not None and hasattr(native, "avro_decode") and raw.type == pa.binary():
            values, ids, errors = decode_side_native(plan.registry, side.reader, side.arrow_type, raw, budget, native)
        else:
            values, id_list, errors = _decode_side(plan.registry, side, raw.to_pylist(), budget)
            ids = pa.array(id_list, pa.int32())
        if errors and not plan.registry.quarantine:
            raise _record_error(batch, name, side, min(errors), errors[min(errors)])
        columns[name] = values
        columns[f"{name}_schema_id"] = ids
        if plan.registry.quarantine:
            error_column = pa.array([errors.get(i) for i in range(len(raw))], pa.string())
            # the bytes of the records that did not decode (null where the record did: they are in the struct)
            columns[f"{name}_raw"] = pc.if_else(pc.is_null(error_column), pa.scalar(None, pa.binary()), raw)
            columns[f"{name}_error"] = error_column
    return pa.RecordBatch.from_arrays([columns[f.name] for f in schema], schema=schema)


def _decode_side(registry: RegistryOptions, side: SidePlan, raw: List[Optional[bytes]],
                 budget: client.LookupBudget) -> Tuple[pa.Array, List[Optional[int]], Dict[int, str]]:
    frames = split_frames(raw)
    errors = dict(frames.errors)
    pieces: List[pa.Array] = []
    where = np.full(len(raw), -1, dtype=np.int64)  # each record's position in the concatenated pieces (-1: null)
    placed = 0
    for schema_id, indexes in frames.by_id.items():
        writer = writer_of(registry, side.reader, schema_id, budget)
        if isinstance(writer, str):
            for i in indexes:
                errors[i] = writer
            continue
        column = codec_for(writer.schema_type).decode(writer, side.reader, frames.payloads[schema_id])
        for k, (i, error) in enumerate(zip(indexes, column.errors)):
            where[i] = placed + k
            if error is not None:
                errors[i] = error
        pieces.append(column.values)
        placed += len(indexes)
    return in_record_order(pieces, where, side.arrow_type), frames.schema_ids, errors


def _record_error(batch: pa.RecordBatch, name: str, side: SidePlan, index: int, error: str) -> RecordError:
    topic = batch.column("topic")[index].as_py()
    partition = batch.column("partition")[index].as_py()
    offset = batch.column("offset")[index].as_py()
    return RecordError(
        f"the {name} of the record of {topic}-{partition} at offset {offset} does not decode through "
        f"{side.decoding.describe()}: {error}. Set option 'badRecords' to 'quarantine' to land such records "
        f"with their bytes in '{name}_raw' and the reason in '{name}_error', fix the producer, or start the "
        "query past this offset")

