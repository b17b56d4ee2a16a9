"""What every registry codec (Avro, Protobuf, JSON Schema) provides: the contract the readers call.

A *codec* turns the payloads of registry-framed records, written with one writer schema, into
one Arrow column typed by the reader schema. The framing (magic byte 0, a 4-byte big-endian
schema id) is stripped before a codec sees a payload; what follows it is the codec's (for
Protobuf that includes the message-index array).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Protocol, Sequence, Tuple

import pyarrow as pa

#: The ``schemaType`` names the registry API uses (Avro when the registry leaves it out).
SCHEMA_TYPES = ("AVRO", "PROTOBUF", "JSON")


@dataclass(frozen=True)
class SchemaReference:
    """A schema another schema references (Avro named types, Protobuf imports, JSON ``$ref``)."""

    name: str
    subject: str
    version: int
    schema: "RegisteredSchema"


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as the registry serves it: its id, type, text and references.

    ``schema_id`` is None for a reader schema given explicitly (not registered).
    """

    schema_type: str
    text: str
    schema_id: Optional[int] = None
    references: Tuple[SchemaReference, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class DecodedColumn:
    """The decoded payloads of one batch: ``values[i]`` is null exactly where ``errors[i]`` says why."""

    values: pa.Array
    errors: Tuple[Optional[str], ...]


class Codec(Protocol):
    """Decodes payloads of one schema type into Arrow (pure: no network, no registry)."""

    schema_type: str

    def arrow_type(self, reader: RegisteredSchema) -> pa.DataType:
        """The Arrow type of the decoded column, fixed from the reader schema when the query starts.

        Raises :class:`kafka_group.errors.ConfigError` naming the schema's construct that has no
        Arrow/Spark type.
        """
        ...

    def decode(self, writer: RegisteredSchema, reader: RegisteredSchema,
               payloads: Sequence[bytes]) -> DecodedColumn:
        """Decode ``payloads`` (all written with ``writer``) through ``reader`` into ``arrow_type(reader)``.

        A payload that does not decode, or that the reader schema cannot read (an incompatible
        writer schema), gives a null value and an error text; it never raises for one bad record
        and never fills a value silently wrong.
        """
        ...
