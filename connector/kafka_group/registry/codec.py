"""What every registry codec (Avro, Protobuf, JSON Schema) provides: the contract the readers call.

A *codec* turns the payloads of registry-framed records, written with one writer schema, into
one Arrow column typed by the reader schema. The framing (magic byte 0, a 4-byte big-endian
schema id) is stripped before a codec sees a payload; what follows it is the codec's (for
Protobuf that includes the message-index array).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, List, Optional, Protocol, Sequence, Set, Tuple

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


@dataclass(frozen=True, eq=False)
class RegisteredSchema:
    """A schema as the registry serves it: its id, type, text and references.

    ``schema_id`` is None for a reader schema given explicitly (not registered).

    Equality and hashing compare content (type, text, id and the references, recursively) through
    :attr:`digest`, computed once per object: the codecs key their caches by schema, and a
    dataclass's own hash walks shared references once per *path* (a registry's ladder of shared
    references has 2^levels of them), where this visits each distinct document once.
    """

    schema_type: str
    text: str
    schema_id: Optional[int] = None
    references: Tuple[SchemaReference, ...] = field(default_factory=tuple)

    @property
    def digest(self) -> str:
        """A SHA-256 of this schema's content and its references' (hex), computed once per object.

        Caller: any thread (a race computes the same value twice, never a different one).
        """
        known = self.__dict__.get("_digest")
        if known is None:
            known = _digest(self)
        return str(known)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, RegisteredSchema):
            return NotImplemented
        return self.digest == other.digest

    def __hash__(self) -> int:
        return hash(self.digest)


def _digest(schema: RegisteredSchema) -> str:
    """Digest ``schema`` and every reference below it not digested yet, each distinct object once
    (iteratively: a chain of references deeper than Python's recursion limit is still one walk)."""
    stack: List[Tuple[RegisteredSchema, bool]] = [(schema, False)]
    open_: Set[int] = set()
    while stack:
        node, children_done = stack.pop()
        if "_digest" in node.__dict__:
            continue
        references: Tuple[SchemaReference, ...] = node.references
        if not children_done:
            if id(node) in open_:  # only a schema built by hand can loop: frozen objects cannot
                raise ValueError("schema references loop back on themselves")
            open_.add(id(node))
            stack.append((node, True))
            stack.extend((r.schema, False) for r in references if "_digest" not in r.schema.__dict__)
            continue
        digest = hashlib.sha256(_text(node.schema_type, node.text, node.schema_id))
        for ref in references:
            digest.update(_text(ref.name, ref.subject, ref.version, ref.schema.__dict__["_digest"]))
        object.__setattr__(node, "_digest", digest.hexdigest())
    return str(schema.__dict__["_digest"])


def _text(*parts: Any) -> bytes:
    """An unambiguous encoding of ``parts`` (each part's repr, length-prefixed)."""
    return b"".join(b"%d:%s;" % (len(r), r) for r in (repr(p).encode("utf-8", "backslashreplace") for p in parts))


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
