"""One decoded side of a batch read by the compiled read path: registry Avro decoded in Rust where exact.

The same result as the Python path of :func:`kafka_group.registry.decoding.decode_batch` (the values, each record's
schema id and the per-record errors), with no Python object per record where the compiled decoder
(``kafka_group._native.avro_decode``) reads a schema id's payloads:

* the frames are read in Rust (``frame_ids``): a record that is not framed gets the reason
  :func:`~kafka_group.registry.framing.not_framed` gives;
* per schema id, the writer schema comes from the process's cache as before
  (:func:`~kafka_group.registry.codecs.writer_of`); when the codec has a plan for the writer and
  reader (:meth:`~kafka_group.registry.avro_codec.AvroCodec.native_plan`), the id's records are
  decoded in Rust, and the records the compiled decoder hands back are decoded by the codec, as
  are all records of ids without a plan (other Avro versions, Protobuf, JSON Schema).

A column of another type than the reader schema's (a bug: the plan must give the codec's type) is
logged and its records decoded by the codec.
"""

from __future__ import annotations

import logging
from types import ModuleType
from typing import Any, Dict, List, Optional, Set, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kafka_group.registry import client
from kafka_group.registry.avro_bounds import SLOTS_BASE, SLOTS_PER_BYTE
from kafka_group.registry.avro_codec import AvroCodec
from kafka_group.registry.codec import RegisteredSchema
from kafka_group.registry.codecs import codec_for, in_record_order, writer_of
from kafka_group.registry.framing import FRAME_HEADER, not_framed
from kafka_group.registry.settings import RegistryOptions

__all__ = ["decode_side_native"]

logger = logging.getLogger(__name__)


def decode_side_native(registry: RegistryOptions, reader: RegisteredSchema, arrow_type: pa.DataType, raw: pa.Array,
                       budget: client.LookupBudget, native: ModuleType) -> Tuple[pa.Array, pa.Array, Dict[int, str]]:
    """The decoded column of ``raw`` (a binary column) read through ``reader`` (whose column type is
    ``arrow_type``), its schema ids (int32) and the per-record errors. Caller: an executor's task thread.

    Raises
    ------
    SchemaRegistryError
        The registry is unreachable (the task is retried).
    """
    n = len(raw)
    ids: pa.Array = native.frame_ids(raw)
    errors: Dict[int, str] = {}
    unframed = pc.and_(pc.is_valid(raw), pc.is_null(ids))
    for i in pc.indices_nonzero(unframed).to_pylist():
        errors[i] = not_framed(raw[i].as_py())
    id_values = pc.fill_null(ids, 0).to_numpy(zero_copy_only=False)
    framed = pc.is_valid(ids).to_numpy(zero_copy_only=False)
    where = np.full(n, -1, dtype=np.int64)
    pieces: List[pa.Array] = []
    placed = 0
    for schema_id in pc.unique(ids.drop_null()).to_pylist():
        indexes = np.flatnonzero(framed & (id_values == schema_id))
        writer = writer_of(registry, reader, schema_id, budget)
        if isinstance(writer, str):
            for i in indexes.tolist():
                errors[i] = writer
            continue
        column = _decode_id(raw, indexes, schema_id, writer, reader, arrow_type, native)
        where[indexes] = placed + np.arange(len(indexes), dtype=np.int64)
        for k, error in column.errors:
            errors[int(indexes[k])] = error
        pieces.append(column.values)
        placed += len(indexes)
    return in_record_order(pieces, where, arrow_type), ids, errors


_warned: Set[str] = set()


def _warn_once(text: str) -> None:
    """A WARNING once per process and text (a bug of the compiled decoder, not of the records)."""
    if text not in _warned:
        _warned.add(text)
        logger.warning("%s", text)


class _Piece:
    """One schema id's values, and its errors as (position in the piece, reason)."""

    def __init__(self, values: pa.Array, errors: List[Tuple[int, str]]) -> None:
        self.values, self.errors = values, errors


def _payloads(raw: pa.Array, indexes: Any) -> List[bytes]:
    return [value[FRAME_HEADER:] for value in raw.take(pa.array(indexes, pa.int64())).to_pylist()]


def _decode_id(raw: pa.Array, indexes: Any, schema_id: int, writer: RegisteredSchema, reader: RegisteredSchema,
               arrow_type: pa.DataType, native: ModuleType) -> _Piece:
    codec = codec_for(writer.schema_type)
    plan = codec.native_plan(writer, reader) if isinstance(codec, AvroCodec) else None
    decoded: Optional[pa.Array] = None
    handed_back: List[int] = []
    if plan is not None:
        try:
            decoded, handed_back = native.avro_decode(raw, schema_id, plan, (SLOTS_BASE, SLOTS_PER_BYTE))
        # A plan it refuses, its bug (a panic: InternalProblem), a stale build: the codec decodes.
        except (ValueError, TypeError, getattr(native, "InternalProblem", ValueError)) as exc:
            _warn_once(f"the compiled Avro decoder failed on schema id {schema_id} ({exc}): decoded in Python")
            decoded = None
        if decoded is not None and (decoded.type != arrow_type or len(decoded) != len(indexes)):
            _warn_once(f"the compiled Avro decoder made a column of type {decoded.type} for schema id {schema_id}, "
                       f"not {arrow_type}: decoded in Python")
            decoded = None
    if decoded is None:
        column = codec.decode(writer, reader, _payloads(raw, indexes))
        return _Piece(column.values, [(k, e) for k, e in enumerate(column.errors) if e is not None])
    if not handed_back:
        return _Piece(decoded, [])
    column = codec.decode(writer, reader, _payloads(raw, indexes[handed_back]))
    positions = np.arange(len(decoded), dtype=np.int64)
    positions[handed_back] = len(decoded) + np.arange(len(handed_back), dtype=np.int64)
    values = pc.take(pa.concat_arrays([decoded, column.values]), pa.array(positions, pa.int64()))
    return _Piece(values, [(handed_back[k], e) for k, e in enumerate(column.errors) if e is not None])
