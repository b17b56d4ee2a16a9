"""The Schema Registry client: Confluent's REST API over plain HTTP, with a per-process cache.

Two requests are made: ``GET /schemas/ids/{id}`` (a record's writer schema, on executors) and
``GET /subjects/{subject}/versions/{version}`` (the reader schema, on the driver when the query is
loaded; and the schemas a schema references). Apicurio serves the same API under
``/apis/ccompat/v7``.

A schema id names one schema forever, so :func:`schema_by_id` keeps what it fetched for the life of
the process (an executor's Python worker): the registry is asked once per id per process, never
per record or per batch. An id the registry does not know is not cached (it may be registered
later); the caller makes its records bad records.
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Optional, Tuple

from kafka_group.errors import AuthenticationError, ConfigError, SchemaRegistryError
from kafka_group.registry.codec import RegisteredSchema, SchemaReference
from kafka_group.registry.protobuf_text import as_proto_text
from kafka_group.registry.settings import RegistryOptions

__all__ = ["schema_by_id", "schema_by_subject", "UnknownSchemaId", "clear_cache"]

logger = logging.getLogger(__name__)

#: Seconds a request to the registry may take.
TIMEOUT_S = 30.0

_lock = threading.Lock()
_by_id: Dict[Tuple[str, int], RegisteredSchema] = {}
#: How many times this process asked the registry for a schema id (tests read it).
fetch_count = 0


class UnknownSchemaId(LookupError):
    """The registry does not know a record's schema id (the record is a bad record)."""


def clear_cache() -> None:
    """Forget the cached schemas (for tests)."""
    with _lock:
        _by_id.clear()


def schema_by_id(registry: RegistryOptions, schema_id: int) -> RegisteredSchema:
    """The schema registered under ``schema_id`` (cached per process).

    Raises
    ------
    UnknownSchemaId
        The registry answers that no schema has this id.
    SchemaRegistryError
        The registry is unreachable or fails, naming its URL.
    """
    global fetch_count
    key = (registry.url, schema_id)
    found = _by_id.get(key)
    if found is not None:
        return found
    with _lock:
        found = _by_id.get(key)
        if found is None:
            fetch_count += 1
            doc = _get(registry, f"/schemas/ids/{schema_id}", not_found=UnknownSchemaId)
            found = _schema(registry, doc, schema_id, set())
            _by_id[key] = found
    return found


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
        doc = _get(registry, path, not_found=UnknownSchemaId)
    except UnknownSchemaId as exc:
        raise ConfigError(
            f"the Schema Registry at {registry.url} has no version {version} of subject '{subject}': register "
            "the schema, or set 'valueSubject'/'keySubject' (or the version) to one that exists") from exc
    return _schema(registry, doc, doc.get("id"), {subject})


def _schema(registry: RegistryOptions, doc: Any, schema_id: Optional[int], seen: set) -> RegisteredSchema:  # type: ignore[type-arg]
    if not isinstance(doc, dict) or not isinstance(doc.get("schema"), str):
        raise SchemaRegistryError(f"the Schema Registry at {registry.url} answered without a schema: {str(doc)[:200]}")
    refs = []
    for ref in doc.get("references") or ():
        subject, version = ref.get("subject"), ref.get("version")
        if subject in seen:
            raise SchemaRegistryError(f"schema references at {registry.url} form a cycle through subject '{subject}'")
        path = f"/subjects/{urllib.parse.quote(str(subject), safe='')}/versions/{version}"
        ref_doc = _get(registry, path, not_found=UnknownSchemaId)
        refs.append(SchemaReference(str(ref.get("name")), str(subject), int(version),
                                    _schema(registry, ref_doc, ref_doc.get("id"), seen | {subject})))
    schema_type = str(doc.get("schemaType") or "AVRO")
    text = doc["schema"]
    if schema_type == "PROTOBUF":  # Apicurio serves what confluent-kafka's serializer registered: base64
        text = as_proto_text(text)
    return RegisteredSchema(schema_type, text, schema_id if isinstance(schema_id, int) else None, tuple(refs))


def _get(registry: RegistryOptions, path: str, *, not_found: type) -> Any:
    url = registry.url + path
    request = urllib.request.Request(url, headers={"Accept": "application/vnd.schemaregistry.v1+json, application/json",
                                                   **registry.headers()})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:300].decode("utf-8", "replace")
        if exc.code == 404:
            raise not_found(f"{url}: {detail}") from None
        if exc.code in (401, 403):
            raise AuthenticationError(
                f"the Schema Registry at {registry.url} refused the request GET {path} (HTTP {exc.code}): check "
                "'schemaRegistry.basic.auth.user.info' or 'schemaRegistry.bearer.auth.token'") from None
        raise SchemaRegistryError(
            f"the Schema Registry at {registry.url} failed GET {path}: HTTP {exc.code} {detail}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise SchemaRegistryError(
            f"the Schema Registry at {registry.url} is unreachable (GET {path}: {reason}); the task is retried "
            "as Spark retries tasks. Check that it runs and 'schemaRegistryAddress'") from None
    try:
        return json.loads(body)
    except ValueError:
        raise SchemaRegistryError(
            f"the Schema Registry at {registry.url} answered GET {path} with no JSON: {body[:200]!r}") from None
