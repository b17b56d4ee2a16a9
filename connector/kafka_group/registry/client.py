"""The Schema Registry client: Confluent's REST API over plain HTTP, with a per-process cache.

Two requests are made: ``GET /schemas/ids/{id}`` (a record's writer schema, on executors) and
``GET /subjects/{subject}/versions/{version}`` (the reader schema, on the driver when the query is
loaded; and the schemas a schema references). Apicurio serves the same API under
``/apis/ccompat/v7``. Each request is one :func:`~kafka_group.registry.transport.get_json`: no
redirects, at most :data:`MAX_RESPONSE_BYTES`, within :data:`TIMEOUT_S` in all.

A schema id names one schema forever, so :func:`schema_by_id` keeps what it fetched for the life of
the process (an executor's Python worker): the registry is asked once per id per process, never
per record or per batch. Schema ids come from the records' bytes, which anyone who can produce to
the topic controls, so an id the registry does not know is remembered as unknown for
:data:`UNKNOWN_TTL_S` seconds (it may be registered later), and one batch asks about at most
:data:`MAX_UNKNOWN_LOOKUPS_PER_BATCH` unknown ids (:class:`LookupBudget`): the ids past it are taken
as unknown without asking (and remembered so). The caller makes their records bad records. No
request is made while holding the process-wide lock; concurrent lookups of one id make one request.

A schema's references are resolved once per (subject, version) within a resolution, and at most
:data:`MAX_REFERENCES` of them (counted through the references' references).
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.parse
from typing import Any, Dict, FrozenSet, Optional, Tuple

from kafka_group.errors import ConfigError, SchemaRegistryError
from kafka_group.redaction import scrub
from kafka_group.registry import transport
from kafka_group.registry.codec import RegisteredSchema, SchemaReference
from kafka_group.registry.protobuf_text import as_proto_text
from kafka_group.registry.settings import RegistryOptions
from kafka_group.registry.transport import UnknownSchemaId

__all__ = ["schema_by_id", "schema_by_subject", "UnknownSchemaId", "NotAsked", "LookupBudget", "clear_cache",
           "TIMEOUT_S", "MAX_RESPONSE_BYTES", "UNKNOWN_TTL_S", "MAX_UNKNOWN_LOOKUPS_PER_BATCH", "MAX_REFERENCES"]

logger = logging.getLogger(__name__)

#: Seconds a request to the registry may take in all (connection, answer and body).
TIMEOUT_S = 30.0
#: The most bytes read of one answer of the registry.
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
#: Seconds a schema id the registry does not know is taken as unknown without asking again.
UNKNOWN_TTL_S = 60.0
#: The most unknown schema ids one batch asks the registry about.
MAX_UNKNOWN_LOOKUPS_PER_BATCH = 100
#: The most references resolved for one schema, through its references' references.
MAX_REFERENCES = 1000
#: The most unknown ids remembered (beyond it the expired ones, then all, are forgotten).
_MAX_UNKNOWN_REMEMBERED = 10_000

_lock = threading.Lock()
_by_id: Dict[Tuple[str, int], RegisteredSchema] = {}
_unknown: Dict[Tuple[str, int], float] = {}  # (url, id) -> monotonic time until which it is unknown
_in_flight: Dict[Tuple[str, int], threading.Lock] = {}
#: How many times this process asked the registry for a schema id (tests read it).
fetch_count = 0


class NotAsked(UnknownSchemaId):
    """A schema id taken as unknown without asking: its batch had too many unknown ids already."""


class LookupBudget:
    """How many more unknown schema ids one batch may ask the registry about (one per batch, one thread).

    Parameters
    ----------
    limit : int, optional
        The most unknown ids; :data:`MAX_UNKNOWN_LOOKUPS_PER_BATCH` by default.
    """

    def __init__(self, limit: Optional[int] = None) -> None:
        self.limit = MAX_UNKNOWN_LOOKUPS_PER_BATCH if limit is None else limit
        self.left = self.limit


def clear_cache() -> None:
    """Forget the cached schemas and unknown ids (for tests)."""
    with _lock:
        _by_id.clear()
        _unknown.clear()


def schema_by_id(registry: RegistryOptions, schema_id: int, budget: Optional[LookupBudget] = None) -> RegisteredSchema:
    """The schema registered under ``schema_id`` (cached per process).

    Parameters
    ----------
    registry : RegistryOptions
        The registry.
    schema_id : int
        The id (from a record's frame).
    budget : LookupBudget, optional
        The batch's budget of unknown ids; None: no limit.

    Raises
    ------
    UnknownSchemaId
        The registry answers that no schema has this id, or did so less than :data:`UNKNOWN_TTL_S`
        seconds ago (:class:`NotAsked`: the batch's budget of unknown ids is spent).
    SchemaRegistryError
        The registry is unreachable or fails, naming its URL.
    """
    global fetch_count
    key = (registry.url, schema_id)
    found = _by_id.get(key)
    if found is not None:
        return found
    _raise_if_known_unknown(key)
    if budget is not None and budget.left <= 0:
        _remember_unknown(key)
        raise NotAsked(f"schema id {schema_id} was not looked up: more than {budget.limit} unknown schema ids in "
                       f"one batch; it is taken as unknown for {UNKNOWN_TTL_S:g} s")
    with _lock:
        gate = _in_flight.setdefault(key, threading.Lock())
    with gate:  # one request per id at a time; never the process-wide lock
        try:
            found = _by_id.get(key)
            if found is not None:
                return found
            _raise_if_known_unknown(key)
            with _lock:
                fetch_count += 1
            try:
                doc = _get(registry, f"/schemas/ids/{schema_id}", transport.SCHEMA_NOT_FOUND)
            except UnknownSchemaId:
                _remember_unknown(key)
                if budget is not None:
                    budget.left -= 1
                raise
            found = _schema(registry, doc, schema_id, frozenset(), _Resolution())
            with _lock:
                _by_id[key] = found
            return found
        finally:
            with _lock:
                if _in_flight.get(key) is gate:
                    del _in_flight[key]


def _raise_if_known_unknown(key: Tuple[str, int]) -> None:
    until = _unknown.get(key)
    if until is not None and until > time.monotonic():
        raise UnknownSchemaId(f"schema id {key[1]} is unknown (asked less than {UNKNOWN_TTL_S:g} s ago)")


def _remember_unknown(key: Tuple[str, int]) -> None:
    now = time.monotonic()
    with _lock:
        if len(_unknown) >= _MAX_UNKNOWN_REMEMBERED:
            for stale in [k for k, until in _unknown.items() if until <= now]:
                del _unknown[stale]
            if len(_unknown) >= _MAX_UNKNOWN_REMEMBERED:
                _unknown.clear()
        _unknown[key] = now + UNKNOWN_TTL_S


def schema_by_subject(registry: RegistryOptions, subject: str, version: str) -> RegisteredSchema:
    """Version ``version`` (a number or ``latest``) of ``subject``; not cached (``latest`` moves).

    Raises
    ------
    ConfigError
        The registry has no such subject or version (the options name a schema that is not there).
    SchemaRegistryError
        The registry is unreachable or fails.
    """
    path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/{version}"
    try:
        doc = _get(registry, path, transport.SUBJECT_OR_VERSION_NOT_FOUND)
    except UnknownSchemaId as exc:
        raise ConfigError(
            f"the Schema Registry at {scrub(registry.url)} has no version {version} of subject '{subject}': "
            "register the schema, or set 'valueSubject'/'keySubject' (or the version) to one that exists") from exc
    return _schema(registry, doc, _id_of(doc), frozenset({subject}), _Resolution())


class _Resolution:
    """The references resolved for one schema: each (subject, version) once, and how many were met."""

    def __init__(self) -> None:
        self.resolved: Dict[Tuple[str, str], RegisteredSchema] = {}
        self.references = 0


def _id_of(doc: Any) -> Optional[int]:
    schema_id = doc.get("id") if isinstance(doc, dict) else None
    return schema_id if isinstance(schema_id, int) else None


def _version_of(ref: Any) -> Optional[int]:
    version = ref.get("version") if isinstance(ref, dict) else None
    if isinstance(version, str) and version.isdigit():
        return int(version)
    return version if isinstance(version, int) and not isinstance(version, bool) else None


def _schema(registry: RegistryOptions, doc: Any, schema_id: Optional[int], seen: FrozenSet[str],
            resolution: _Resolution) -> RegisteredSchema:
    where = scrub(registry.url)
    if not isinstance(doc, dict) or not isinstance(doc.get("schema"), str):
        raise SchemaRegistryError(f"the Schema Registry at {where} answered without a schema: {str(doc)[:200]}")
    refs = []
    for ref in doc.get("references") or ():
        resolution.references += 1
        if resolution.references > MAX_REFERENCES:
            raise SchemaRegistryError(
                f"a schema at {where} has more than {MAX_REFERENCES} references (counted through its references' "
                "references), the most the connector resolves")
        version = _version_of(ref)
        if not isinstance(ref, dict) or version is None:
            raise SchemaRegistryError(f"the Schema Registry at {where} answered a malformed reference: {str(ref)[:200]}")
        subject = str(ref.get("subject"))
        if subject in seen:
            raise SchemaRegistryError(f"schema references at {where} form a cycle through subject '{subject}'")
        found = resolution.resolved.get((subject, str(version)))
        if found is None:
            path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/{version}"
            try:
                ref_doc = _get(registry, path, transport.SUBJECT_OR_VERSION_NOT_FOUND)
            except UnknownSchemaId:
                raise SchemaRegistryError(
                    f"the Schema Registry at {where} has no version {version} of subject '{subject}', which a "
                    "schema references") from None
            found = _schema(registry, ref_doc, _id_of(ref_doc), seen | {subject}, resolution)
            resolution.resolved[(subject, str(version))] = found
        refs.append(SchemaReference(str(ref.get("name")), subject, version, found))
    schema_type = str(doc.get("schemaType") or "AVRO")
    text = doc["schema"]
    if schema_type == "PROTOBUF":  # Apicurio serves what confluent-kafka's serializer registered: base64
        text = as_proto_text(text)
    return RegisteredSchema(schema_type, text, schema_id, tuple(refs))


def _get(registry: RegistryOptions, path: str, unknown_codes: FrozenSet[int]) -> Any:
    return transport.get_json(registry.url, path, registry.headers(), unknown_codes=unknown_codes,
                              timeout_s=TIMEOUT_S, max_bytes=MAX_RESPONSE_BYTES)
