"""Confluent's wire format: a magic byte 0, a 4-byte big-endian schema id, then the payload.

Every registry serializer (Avro, Protobuf, JSON Schema; Confluent's, Apicurio's in its
``ccompat`` mode) writes this frame. :func:`split_frames` reads the frames of a batch's values
at once and groups the records by schema id, so a codec decodes each id's payloads in one call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

__all__ = ["MAGIC_BYTE", "FRAME_HEADER", "Frames", "split_frames", "frame", "not_framed"]

#: The first byte of every framed record.
MAGIC_BYTE = 0
#: The frame's length before the payload: the magic byte and the schema id.
FRAME_HEADER = 5


@dataclass
class Frames:
    """The frames of one batch's values (``n`` records).

    Attributes
    ----------
    schema_ids : list of int or None
        Each record's schema id; None for a null value and for a record that is not framed.
    by_id : dict of int to list of int
        The record indexes of each schema id, in record order.
    payloads : dict of int to list of bytes
        The payloads (frame stripped) of each schema id, in the order of ``by_id``.
    errors : dict of int to str
        Why a record is not framed (record index to reason); null values are not errors.
    """

    schema_ids: List[Optional[int]]
    by_id: Dict[int, List[int]] = field(default_factory=dict)
    payloads: Dict[int, List[bytes]] = field(default_factory=dict)
    errors: Dict[int, str] = field(default_factory=dict)


def split_frames(values: Sequence[Optional[bytes]]) -> Frames:
    """Read the frame of each value and group the records by schema id.

    Parameters
    ----------
    values : sequence of bytes or None
        The records' raw values (or keys).

    Returns
    -------
    Frames
        The ids, the grouped payloads and the records that are not framed (shorter than
        5 bytes, or a first byte other than 0).
    """
    ids: List[Optional[int]] = [None] * len(values)
    frames = Frames(ids)
    by_id, payloads, errors = frames.by_id, frames.payloads, frames.errors
    for i, value in enumerate(values):
        if value is None:
            continue
        if len(value) < FRAME_HEADER or value[0] != MAGIC_BYTE:
            errors[i] = not_framed(value)
            continue
        schema_id = int.from_bytes(value[1:5], "big", signed=True)
        ids[i] = schema_id
        group = by_id.get(schema_id)
        if group is None:
            by_id[schema_id] = [i]
            payloads[schema_id] = [value[5:]]
        else:
            group.append(i)
            payloads[schema_id].append(value[5:])
    return frames


def not_framed(value: bytes) -> str:
    """Why ``value`` (not null) is not registry-framed."""
    if len(value) < FRAME_HEADER:
        return (f"not registry-framed: {len(value)} bytes, shorter than the 5-byte frame "
                "(magic byte 0 and a 4-byte schema id)")
    return (f"not registry-framed: first byte is {value[0]}, not the magic byte 0 "
            "(was it written by a Schema Registry serializer?)")


def frame(schema_id: int, payload: bytes) -> bytes:
    """``payload`` framed with ``schema_id`` (what registry serializers write; for tests and tools)."""
    return bytes([MAGIC_BYTE]) + schema_id.to_bytes(4, "big", signed=True) + payload
