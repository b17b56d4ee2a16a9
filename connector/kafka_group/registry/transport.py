"""One ``GET`` to the Schema Registry: no redirects, a size limit, one deadline, Confluent's 404 codes.

* A redirect is refused, not followed: a registry's API answers directly, and following one would
  carry the ``Authorization`` header (basic auth or bearer token) to whatever address the answer
  names, https to http included, and take that address's body as a schema.
* A 404 means "unknown" only with Confluent's ``error_code`` for it (40403 schema, 40401 subject,
  40402 version); any other 404 (a wrong path, a proxy's page) is a :class:`SchemaRegistryError`
  naming the URL: records must not become bad records because the address is wrong.
* A response is read up to a size limit, and the whole request (reads included) within one deadline.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any, FrozenSet, List, NoReturn, Optional

from kafka_group.errors import AuthenticationError, SchemaRegistryError
from kafka_group.redaction import scrub

__all__ = ["UnknownSchemaId", "get_json", "SCHEMA_NOT_FOUND", "SUBJECT_OR_VERSION_NOT_FOUND"]

#: Confluent's ``error_code`` of a 404 for an unknown schema id.
SCHEMA_NOT_FOUND: FrozenSet[int] = frozenset({40403})
#: Confluent's ``error_code`` of a 404 for an unknown subject (40401) or version (40402).
SUBJECT_OR_VERSION_NOT_FOUND: FrozenSet[int] = frozenset({40401, 40402, 40403})

_CHUNK = 64 * 1024
_ERROR_BODY_BYTES = 4096


class UnknownSchemaId(LookupError):
    """The registry does not know a record's schema id (the record is a bad record)."""


class _Redirected(Exception):
    def __init__(self, code: int, target: str) -> None:
        super().__init__(code, target)
        self.code, self.target = code, target


class _Late(Exception):
    pass


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> Optional[urllib.request.Request]:
        fp.close()
        raise _Redirected(code, newurl)


_opener = urllib.request.build_opener(_RefuseRedirects())


def get_json(base: str, path: str, headers: dict, *, unknown_codes: FrozenSet[int],  # type: ignore[type-arg]
             timeout_s: float, max_bytes: int) -> Any:
    """``GET base + path`` as JSON.

    Raises
    ------
    UnknownSchemaId
        HTTP 404 with one of ``unknown_codes`` as Confluent's ``error_code``.
    AuthenticationError
        HTTP 401 or 403.
    SchemaRegistryError
        Unreachable, a redirect, another 404 or failure, a body over ``max_bytes``, no answer
        within ``timeout_s`` in all, or no JSON; naming the URL (scrubbed), never the credentials.
    """
    url = base + path
    where = scrub(url)
    request = urllib.request.Request(url, headers={"Accept": "application/vnd.schemaregistry.v1+json, application/json",
                                                   **headers})
    deadline = time.monotonic() + timeout_s
    try:
        with _opener.open(request, timeout=timeout_s) as response:
            body = _read(response, deadline, max_bytes, where)
    except _Redirected as exc:
        raise SchemaRegistryError(
            f"the Schema Registry at {scrub(base)} answered GET {path} with a redirect (HTTP {exc.code}) to "
            f"{scrub(exc.target)}; the connector does not follow redirects (the credentials would go to that "
            "address): give the final URL in 'schemaRegistryAddress'") from None
    except urllib.error.HTTPError as exc:
        _http_error(exc, base, path, where, unknown_codes)
    except (_Late, TimeoutError):
        _late(where, timeout_s)
    except (urllib.error.URLError, OSError) as exc:
        if isinstance(getattr(exc, "reason", None), TimeoutError):
            _late(where, timeout_s)
        reason = scrub(str(getattr(exc, "reason", exc)))
        raise SchemaRegistryError(
            f"the Schema Registry at {scrub(base)} is unreachable (GET {path}: {reason}); the task is retried "
            "as Spark retries tasks. Check that it runs and 'schemaRegistryAddress'") from None
    try:
        return json.loads(body)
    except ValueError:
        raise SchemaRegistryError(
            f"the Schema Registry at {scrub(base)} answered GET {path} with no JSON: {body[:200]!r}") from None


def _read(response: Any, deadline: float, max_bytes: int, where: str) -> bytes:
    """The body, read a chunk at a time: each read waits at most until ``deadline``."""
    chunks: List[bytes] = []
    size = 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _Late()
        sock = getattr(getattr(getattr(response, "fp", None), "raw", None), "_sock", None)
        if sock is not None:
            sock.settimeout(remaining)
        chunk = response.read1(_CHUNK)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > max_bytes:
            raise SchemaRegistryError(
                f"the answer of {where} is more than {max_bytes} bytes, the most the connector reads from the "
                "Schema Registry: is 'schemaRegistryAddress' a registry?")
        chunks.append(chunk)


def _late(where: str, timeout_s: float) -> NoReturn:
    raise SchemaRegistryError(
        f"the Schema Registry did not answer GET {where} within {timeout_s:g} s; the task is retried as "
        "Spark retries tasks. Check the registry's load and 'schemaRegistryAddress'") from None


def _http_error(exc: urllib.error.HTTPError, base: str, path: str, where: str,
                unknown_codes: FrozenSet[int]) -> NoReturn:
    try:
        raw = exc.read(_ERROR_BODY_BYTES)
    except OSError:
        raw = b""
    detail = scrub(raw[:300].decode("utf-8", "replace"))
    if exc.code == 404:
        if _error_code(raw) in unknown_codes:
            raise UnknownSchemaId(f"{where}: {detail}") from None
        raise SchemaRegistryError(
            f"GET {where} answered HTTP 404 without Confluent's error code for an unknown schema, subject or "
            f"version ({detail[:120]}): is 'schemaRegistryAddress' right? Apicurio serves Confluent's API at "
            "/apis/ccompat/v7") from None
    if exc.code in (401, 403):
        raise AuthenticationError(
            f"the Schema Registry at {scrub(base)} refused the request GET {path} (HTTP {exc.code}): check "
            "'schemaRegistry.basic.auth.user.info' or 'schemaRegistry.bearer.auth.token'") from None
    raise SchemaRegistryError(
        f"the Schema Registry at {scrub(base)} failed GET {path}: HTTP {exc.code} {detail}") from None


def _error_code(raw: bytes) -> Optional[int]:
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    code = doc.get("error_code") if isinstance(doc, dict) else None
    return code if isinstance(code, int) else None
