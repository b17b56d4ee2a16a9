"""The Schema Registry client: Confluent's REST API over plain HTTP, with a per-process cache.

Two requests are made: ``GET /schemas/ids/{id}`` (a record's writer schema, on executors) and
``GET /subjects/{subject}/versions/{version}`` (the reader schema, on the driver when the query is
loaded; and the schemas a schema references). Apicurio serves the same API under
``/apis/ccompat/v7``. Each request is one :func:`~kafka_group.registry.transport.get_json`: no
redirects, at most :data:`MAX_RESPONSE_BYTES` received, within :data:`TIMEOUT_S` in all.

A schema id names one schema forever, so :func:`schema_by_id` keeps what it fetched for the life of
the process (an executor's Python worker): the registry is asked once per id per process, never
per record or per batch. Schema ids come from the records' bytes, which anyone who can produce to
the topic controls, so an id the registry does not know is remembered as unknown for
:data:`UNKNOWN_TTL_S` seconds (it may be registered later), and one batch asks about at most
:data:`MAX_UNKNOWN_LOOKUPS_PER_BATCH` unknown ids (:class:`LookupBudget`): the ids past it are taken
as unknown without asking (and remembered so). The caller makes their records bad records. No
request is made while holding the process-wide lock; concurrent lookups of one id make one request.

A schema's references are resolved once per (subject, version) within a resolution, and at most
:data:`MAX_REFERENCES` of them (counted through the references' references) in chains at most
:data:`MAX_REFERENCE_DEPTH` long, all within
:data:`RESOLUTION_TIMEOUT_S`. What the registry answers is checked before it is used: a reference's
version is a whole number from 1 to 2^31-1 (or its ASCII digits), its subject and name are text
without control characters, ids are positive Java ints, ``schemaType`` is one of
:data:`~kafka_group.registry.codec.SCHEMA_TYPES`; anything else is a :class:`SchemaRegistryError`
naming the registry and what was wrong. A subject goes into a URL as one percent-encoded path
segment (``/``, ``?``, ``#``, ``.`` and ``..`` included).
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.parse
from typing import Any, Dict, FrozenSet, Optional, Tuple

from kafka_group.errors import (AuthenticationError, ConfigError, SchemaAnswerError, SchemaRegistryError,
                                SchemaRegistryUnavailable)
from kafka_group.json_text import INT32_MAX, in_range, show
from kafka_group.redaction import scrub
from kafka_group.registry import oauth, transport
from kafka_group.registry.codec import SCHEMA_TYPES, RegisteredSchema, SchemaReference
from kafka_group.registry.protobuf_text import as_proto_text
from kafka_group.registry.settings import RegistryOptions
from kafka_group.registry.transport import UnknownSchemaId

__all__ = ["schema_by_id", "schema_by_subject", "UnknownSchemaId", "NotAsked", "LookupBudget", "clear_cache",
           "TIMEOUT_S", "RESOLUTION_TIMEOUT_S", "MAX_RESPONSE_BYTES", "UNKNOWN_TTL_S", "MAX_UNKNOWN_LOOKUPS_PER_BATCH", "MAX_REFERENCES",
           "MAX_REFERENCE_DEPTH"]

logger = logging.getLogger(__name__)

#: Seconds a request to the registry may take in all (connection, answer and body).
TIMEOUT_S = 30.0
#: Seconds the requests of one schema and all its references may take together.
RESOLUTION_TIMEOUT_S = 120.0
#: The most bytes read of one answer of the registry (headers and trailers included).
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
#: Seconds a schema id the registry does not know is taken as unknown without asking again.
UNKNOWN_TTL_S = 60.0
#: The most unknown schema ids one batch asks the registry about.
MAX_UNKNOWN_LOOKUPS_PER_BATCH = 100
#: The most references resolved for one schema, through its references' references.
MAX_REFERENCES = 1000
#: The longest chain of references (a schema's reference's reference ...): resolving is recursive.
MAX_REFERENCE_DEPTH = 32
#: The longest subject or reference name taken from the registry.
_MAX_NAME = 1000
#: The most unknown ids remembered (beyond it the expired ones, then all, are forgotten).
_MAX_UNKNOWN_REMEMBERED = 10_000

class _Gate:
    """One lookup of a schema id in flight: the lock its concurrent lookups wait on, and its failure,
    which those that waited raise too (threads of one executor process)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.failure: Optional[SchemaRegistryError] = None


_lock = threading.Lock()
_by_id: Dict[Tuple[str, int], RegisteredSchema] = {}
#: (url, id) -> (monotonic time until which it is unknown, or unusable; why it is unusable, None: unknown)
_unknown: Dict[Tuple[str, int], Tuple[float, Optional[str]]] = {}
_in_flight: Dict[Tuple[str, int], _Gate] = {}
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
    """Forget the cached schemas, unknown ids and OAuth tokens (for tests)."""
    with _lock:
        _by_id.clear()
        _unknown.clear()
    oauth.clear()


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
    SchemaAnswerError
        The registry's answer about this id is not a usable schema (remembered, and counted in
        ``budget``, like an unknown id).
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
        gate = _in_flight.setdefault(key, _Gate())
    with gate.lock:  # one request per id at a time; never the process-wide lock
        try:
            found = _by_id.get(key)
            if found is not None:
                return found
            _raise_if_known_unknown(key)
            if gate.failure is not None:  # a waiter does not pay a failing registry's deadline again
                raise SchemaRegistryError(f"{gate.failure} (the lookup of schema id {schema_id} this one waited "
                                          "for failed so)")
            with _lock:
                fetch_count += 1
            path, resolution = f"/schemas/ids/{schema_id}", _Resolution()
            try:
                doc = _get(registry, path, transport.SCHEMA_NOT_FOUND, resolution)
                found = _schema(registry, doc, schema_id, frozenset(), resolution, path)
            except (UnknownSchemaId, SchemaAnswerError) as exc:  # the registry's answer about this id, for now
                _remember_unknown(key, str(exc) if isinstance(exc, SchemaAnswerError) else None)
                if budget is not None:
                    budget.left -= 1
                raise
            with _lock:
                _by_id[key] = found
            return found
        except SchemaRegistryError as exc:
            gate.failure = gate.failure or exc
            raise
        finally:
            with _lock:
                if _in_flight.get(key) is gate:
                    del _in_flight[key]


def _raise_if_known_unknown(key: Tuple[str, int]) -> None:
    until, why = _unknown.get(key, (0.0, None))
    if until > time.monotonic():
        if why is not None:
            raise SchemaAnswerError(f"{why} (asked less than {UNKNOWN_TTL_S:g} s ago)")
        raise UnknownSchemaId(f"schema id {key[1]} is unknown (asked less than {UNKNOWN_TTL_S:g} s ago)")


def _remember_unknown(key: Tuple[str, int], why: Optional[str] = None) -> None:
    """Take ``key`` as unknown (``why`` None) or unusable (``why``) for :data:`UNKNOWN_TTL_S` seconds."""
    now = time.monotonic()
    with _lock:
        if len(_unknown) >= _MAX_UNKNOWN_REMEMBERED:
            for stale in [k for k, (until, _) in _unknown.items() if until <= now]:
                del _unknown[stale]
            if len(_unknown) >= _MAX_UNKNOWN_REMEMBERED:
                _unknown.clear()
        _unknown[key] = (now + UNKNOWN_TTL_S, why)


def schema_by_subject(registry: RegistryOptions, subject: str, version: str) -> RegisteredSchema:
    """Version ``version`` (a number or ``latest``) of ``subject``; not cached (``latest`` moves).

    Raises
    ------
    ConfigError
        The registry has no such subject or version (the options name a schema that is not there).
    SchemaRegistryError
        The registry is unreachable, fails, or answers something else than a schema.
    """
    path = f"/subjects/{_segment(subject)}/versions/{_segment(version)}"
    resolution = _Resolution()
    try:
        doc = _get(registry, path, transport.SUBJECT_OR_VERSION_NOT_FOUND, resolution)
    except UnknownSchemaId as exc:
        raise ConfigError(
            f"the Schema Registry at {scrub(registry.url)} has no version {version} of subject {subject!r}: "
            "register the schema, or set 'valueSubject'/'keySubject' (or the version) to one that exists") from exc
    return _schema(registry, doc, _id_of(registry, doc, path), frozenset({subject}), resolution, path)


def _segment(text: str) -> str:
    """``text`` as one URL path segment: every reserved character percent-encoded, and ``.``/``..``
    too (a proxy or server would take them as "this" and "parent" folder)."""
    quoted = urllib.parse.quote(text, safe="")
    return quoted.replace(".", "%2E") if quoted.strip(".") == "" else quoted


class _Resolution:
    """One resolution (a schema and its references): each (subject, version) once, how many
    references were met, and the deadline of all its requests together."""

    def __init__(self) -> None:
        self.resolved: Dict[Tuple[str, int], RegisteredSchema] = {}
        self.references = 0
        self.deadline = time.monotonic() + RESOLUTION_TIMEOUT_S


def _malformed(registry: RegistryOptions, path: str, what: str) -> SchemaAnswerError:
    return SchemaAnswerError(f"the Schema Registry at {scrub(registry.url)} answered GET {path} with {what}: is "
                             "'schemaRegistryAddress' a Schema Registry?")


def _id_of(registry: RegistryOptions, doc: Any, path: str) -> Optional[int]:
    """The document's ``id`` (None when it has none); a schema id is a positive Java int."""
    if not isinstance(doc, dict) or doc.get("id") is None:
        return None
    schema_id = doc["id"]
    if not in_range(schema_id, 0, INT32_MAX):
        raise _malformed(registry, path, f"an id that is no schema id ({show(schema_id, 60)})")
    return int(schema_id)


def _version_of(ref: Dict[str, Any]) -> Optional[int]:
    """A reference's version: a whole number from 1 to 2^31-1, or its ASCII digits; None otherwise
    (``str.isdigit`` takes ``"²"`` and ``"٣"``, which :func:`int` refuses or reads as another number)."""
    version = ref.get("version")
    if isinstance(version, str) and 0 < len(version) <= 10 and all("0" <= c <= "9" for c in version):
        version = int(version)
    return version if in_range(version, 1, INT32_MAX) else None


def _text(value: Any) -> bool:
    """Whether ``value`` is a name the connector takes from the registry: text, at most 1000 characters, no
    control characters (a NUL or a line break in a file name or a log line)."""
    return (isinstance(value, str) and 0 < len(value) <= _MAX_NAME
            and not any(c < " " or "\x7f" <= c <= "\x9f" for c in value))


def _schema(registry: RegistryOptions, doc: Any, schema_id: Optional[int], seen: FrozenSet[str],
            resolution: _Resolution, path: str) -> RegisteredSchema:
    where = scrub(registry.url)
    if not isinstance(doc, dict) or not isinstance(doc.get("schema"), str):
        raise _malformed(registry, path, f"no schema ({transport.excerpt(show(doc, 4096), quote=False)})")
    schema_type = doc.get("schemaType") or "AVRO"
    if schema_type not in SCHEMA_TYPES:
        raise _malformed(registry, path, f"schemaType {show(schema_type, 60)}, not one of {', '.join(SCHEMA_TYPES)}")
    references = doc.get("references") or []
    if not isinstance(references, list):
        raise _malformed(registry, path, f"references that are no list ({show(references, 60)})")
    refs = []
    for ref in references:
        resolution.references += 1
        if resolution.references > MAX_REFERENCES:
            raise SchemaAnswerError(
                f"a schema at {where} has more than {MAX_REFERENCES} references (counted through its references' "
                "references), the most the connector resolves")
        version = _version_of(ref) if isinstance(ref, dict) else None
        if not isinstance(ref, dict) or version is None or not _text(ref.get("subject")) or not _text(ref.get("name")):
            raise _malformed(registry, path, f"a malformed reference (a name, a subject and a version from 1 to "
                                             f"{INT32_MAX} are needed): {transport.excerpt(show(ref, 4096), quote=False)}")
        subject, name = str(ref["subject"]), str(ref["name"])
        if subject in seen:
            raise SchemaAnswerError(f"schema references at {where} form a cycle through subject {subject!r}")
        if len(seen) >= MAX_REFERENCE_DEPTH:
            raise SchemaAnswerError(
                f"schema references at {where} nest more than {MAX_REFERENCE_DEPTH} deep (at subject {subject!r}), "
                "the most the connector resolves")
        found = resolution.resolved.get((subject, version))
        if found is None:
            ref_path = f"/subjects/{_segment(subject)}/versions/{version}"
            try:
                ref_doc = _get(registry, ref_path, transport.SUBJECT_OR_VERSION_NOT_FOUND, resolution)
            except UnknownSchemaId:
                raise SchemaAnswerError(
                    f"the Schema Registry at {where} has no version {version} of subject {subject!r}, which a "
                    "schema references") from None
            found = _schema(registry, ref_doc, _id_of(registry, ref_doc, ref_path), seen | {subject}, resolution,
                            ref_path)
            resolution.resolved[(subject, version)] = found
        refs.append(SchemaReference(name, subject, version, found))
    text = doc["schema"]
    if schema_type == "PROTOBUF":  # Apicurio serves what confluent-kafka's serializer registered: base64
        text = as_proto_text(text)
    return RegisteredSchema(schema_type, text, schema_id, tuple(refs))


def _get(registry: RegistryOptions, path: str, unknown_codes: FrozenSet[int], resolution: _Resolution) -> Any:
    left = resolution.deadline - time.monotonic()
    if left <= 0:
        raise SchemaRegistryError(
            f"the Schema Registry at {scrub(registry.url)} did not give a schema and its references within "
            f"{RESOLUTION_TIMEOUT_S:g} s (at GET {path}); the task is retried as Spark retries tasks. Check the "
            "registry's load")
    attempt, renewed = 0, False
    while True:
        headers = registry.headers()
        try:
            if registry.oauth is not None:
                headers["Authorization"] = oauth.authorization(registry.oauth, timeout_s=min(TIMEOUT_S, left))
            return transport.get_json(registry.url, path, headers, unknown_codes=unknown_codes,
                                      timeout_s=min(TIMEOUT_S, left), max_bytes=MAX_RESPONSE_BYTES,
                                      ssl_context=registry.ssl_context())
        except AuthenticationError as exc:
            if registry.oauth is None or "Authorization" not in headers:
                raise
            oauth.forget(registry.oauth, headers["Authorization"])
            if renewed:  # a fresh token refused too: the client lacks the registry's permission
                raise AuthenticationError(
                    f"{exc}; with OAuth, check that the client 'schemaRegistry.bearer.auth.client.id' may read the "
                    "registry ('schemaRegistry.bearer.auth.scope')") from None
            renewed = True  # the token was revoked or expired early: one more try with a new one
        except SchemaRegistryUnavailable as exc:
            # What may pass is asked again, waiting longer each time, all within the lookup's deadline.
            wait_s = min(registry.retry_max_wait_ms, registry.retry_wait_ms * 2 ** min(attempt, 30)) / 1000
            left = resolution.deadline - time.monotonic()
            if attempt >= registry.max_retries or left <= wait_s:
                raise SchemaRegistryUnavailable(
                    f"{exc} (after {attempt + 1} attempt(s): 'schemaRegistry.max.retries' is "
                    f"{registry.max_retries})") from None
            attempt += 1
            logger.info("the Schema Registry at %s failed GET %s (%s); retry %d of %d in %.1f s", scrub(registry.url),
                        path, type(exc).__name__, attempt, registry.max_retries, wait_s)
            time.sleep(wait_s)
            left = resolution.deadline - time.monotonic()
