"""One ``GET`` to the Schema Registry: no redirects, one deadline and one byte count for it all, Confluent's 404 codes.

* A redirect is refused, not followed: a registry's API answers directly, and following one would
  carry the ``Authorization`` header (basic auth or bearer token) to whatever address the answer
  names, https to http included, and take that address's body as a schema.
* A 404 means "unknown" only with Confluent's ``error_code`` for it (40403 schema, 40401 subject,
  40402 version); any other 404 (a wrong path, a proxy's page) is a :class:`SchemaRegistryError`
  naming the URL: records must not become bad records because the address is wrong.
* The whole exchange (connection, TLS handshake, request, status line, headers, body, chunked
  trailers) ends by one deadline and reads at most ``max_bytes`` (:func:`kafka_group.bounded_http.fetch`),
  so a registry that trickles its headers a byte at a time, or sends trailer lines for ever, ends
  in a :class:`SchemaRegistryError`. Not bounded: the name lookup of the registry's host (the
  system resolver's own timeouts), and the answer of an HTTP proxy to ``CONNECT`` (each read of
  it waits at most the deadline).
* Whatever the answer holds (a broken status line, a body that is not JSON or nested without end,
  an error page echoing the request's headers) is a :class:`SchemaRegistryError` whose text is
  scrubbed of secrets before it is shortened (a secret cut in half would not be recognised).

Caller: any thread; each call has its own connection and meter.
"""

from __future__ import annotations

import http.client
import ssl
import urllib.error
import urllib.request
from typing import Any, FrozenSet, NoReturn, Optional

from kafka_group.bounded_http import Late, Redirected, TooBig, fetch
from kafka_group.errors import AuthenticationError, SchemaRegistryError, SchemaRegistryUnavailable
from kafka_group.json_text import NotJson, parse_json
from kafka_group.redaction import scrub

__all__ = ["UnknownSchemaId", "get_json", "excerpt", "SCHEMA_NOT_FOUND", "SUBJECT_OR_VERSION_NOT_FOUND"]

#: Confluent's ``error_code`` of a 404 for an unknown schema id.
SCHEMA_NOT_FOUND: FrozenSet[int] = frozenset({40403})
#: Confluent's ``error_code`` of a 404 for an unknown subject (40401) or version (40402).
SUBJECT_OR_VERSION_NOT_FOUND: FrozenSet[int] = frozenset({40401, 40402, 40403})

_ERROR_BODY_BYTES = 4096


class UnknownSchemaId(LookupError):
    """The registry does not know a record's schema id (the record is a bad record)."""


def excerpt(text: str, limit: int = 200, *, quote: bool = True) -> str:
    """``text`` from the network for a message: scrubbed of secrets first, then shortened, then quoted
    (control characters escaped, so an answer cannot forge log lines; ``quote=False`` for JSON text,
    which escapes them itself)."""
    shown = scrub(text)
    shown = shown if len(shown) <= limit else shown[:limit] + "..."
    return repr(shown) if quote else shown


def get_json(base: str, path: str, headers: dict, *, unknown_codes: FrozenSet[int],  # type: ignore[type-arg]
             timeout_s: float, max_bytes: int, ssl_context: Optional[ssl.SSLContext] = None,
             data: Optional[bytes] = None) -> Any:
    """``GET base + path`` as JSON (parsed by :func:`kafka_group.json_text.parse_json`).

    With ``data``, a ``POST`` of it instead (an OAuth token request, :mod:`kafka_group.registry.oauth`).
    ``ssl_context`` (an ``https://`` registry's private CA or client certificate) replaces the
    system's defaults; a refused handshake names the ``schemaRegistry.ssl.*`` option to fix.

    Raises
    ------
    UnknownSchemaId
        HTTP 404 with one of ``unknown_codes`` as Confluent's ``error_code``.
    AuthenticationError
        HTTP 401 or 403.
    SchemaRegistryError
        Unreachable, a redirect, another 404 or failure, an answer that is not HTTP, more than
        ``max_bytes`` received, no whole answer within ``timeout_s``, or no JSON; naming the URL
        (scrubbed), never the credentials.
    """
    url = base + path
    where = scrub(url)
    if not url.lower().startswith(("http://", "https://")):  # urllib would read files, FTP and data: URLs too
        raise SchemaRegistryError(f"the Schema Registry address {excerpt(base, 100)} is not an http:// or https:// "
                                  "URL: set 'schemaRegistryAddress' to the registry's")
    request = urllib.request.Request(url, data=data,
                                     headers={"Accept": "application/vnd.schemaregistry.v1+json, application/json",
                                              **headers})
    try:
        body = fetch(request, timeout_s=timeout_s, max_bytes=max_bytes, ssl_context=ssl_context)
    except Redirected as exc:
        raise SchemaRegistryError(
            f"the Schema Registry at {scrub(base)} answered GET {path} with a redirect (HTTP {exc.code}) to "
            f"{excerpt(exc.target)}; the connector does not follow redirects (the credentials would go to that "
            "address): give the final URL in 'schemaRegistryAddress'") from None
    except urllib.error.HTTPError as exc:
        _http_error(exc, base, path, where, unknown_codes)
    except TooBig:
        _too_big(where, max_bytes)
    except (Late, TimeoutError):
        _late(where, timeout_s)
    except http.client.RemoteDisconnected:  # closed with no answer at all: a registry restarting or overloaded
        raise SchemaRegistryUnavailable(
            f"the Schema Registry at {scrub(base)} closed the connection with no answer (GET {path}); the task is "
            "retried as Spark retries tasks. Check the registry's load and 'schemaRegistryAddress'") from None
    except (http.client.HTTPException, ValueError) as exc:  # ValueError: http.client's bad chunk size
        _not_http(base, path, exc)
    except (urllib.error.URLError, OSError) as exc:
        # An ssl.SSLError raised while reading (TLS 1.3: the server's certificate-required alert comes
        # after the handshake) is itself the reason; its own ``reason`` attribute is only the alert's name.
        reason = exc if isinstance(exc, ssl.SSLError) else getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError):
            _late(where, timeout_s)
        if isinstance(reason, ssl.SSLError):
            _tls_refused(base, path, reason)
        raise SchemaRegistryUnavailable(
            f"the Schema Registry at {scrub(base)} is unreachable (GET {path}: {excerpt(str(reason))}); the task "
            "is retried as Spark retries tasks. Check that it runs and 'schemaRegistryAddress'") from None
    try:
        return parse_json(body)
    except NotJson as exc:
        raise SchemaRegistryError(
            f"the Schema Registry at {scrub(base)} answered GET {path} with no JSON the connector reads ({exc}): "
            f"{excerpt(body[:4096].decode('utf-8', 'replace'))}") from None


def _tls_refused(base: str, path: str, reason: ssl.SSLError) -> NoReturn:
    if isinstance(reason, ssl.SSLCertVerificationError):
        fix = ("trust the CA that signed the registry's certificate with 'schemaRegistry.ssl.ca.location' (a PEM "
               "file), and check that the address's host name is in that certificate")
    else:
        fix = ("if the registry asks for a client certificate, give it with 'schemaRegistry.ssl.certificate.location' "
               "and 'schemaRegistry.ssl.key.location', one its CA trusts")
    raise SchemaRegistryError(
        f"the TLS handshake with the Schema Registry at {scrub(base)} failed (GET {path}: "
        f"{excerpt(str(reason), 160)}): {fix}") from None


def _late(where: str, timeout_s: float) -> NoReturn:
    raise SchemaRegistryUnavailable(
        f"the Schema Registry did not answer GET {where} within {timeout_s:g} s; the task is retried as "
        "Spark retries tasks. Check the registry's load and 'schemaRegistryAddress'") from None


def _too_big(where: str, max_bytes: int) -> NoReturn:
    raise SchemaRegistryError(
        f"the answer of {where} is more than {max_bytes} bytes (headers and trailers included), the most the "
        "connector reads from the Schema Registry: is 'schemaRegistryAddress' a registry?") from None


def _not_http(base: str, path: str, exc: Exception) -> NoReturn:
    raise SchemaRegistryError(
        f"the Schema Registry at {scrub(base)} answered GET {path} with no valid HTTP ({type(exc).__name__}: "
        f"{excerpt(str(exc), 120)}): is 'schemaRegistryAddress' a registry?") from None


def _http_error(exc: urllib.error.HTTPError, base: str, path: str, where: str,
                unknown_codes: FrozenSet[int]) -> NoReturn:
    try:
        raw = exc.read(_ERROR_BODY_BYTES)
    except (OSError, http.client.HTTPException, ValueError, TooBig):
        raw = b""
    finally:
        exc.close()
    detail = excerpt(raw.decode("utf-8", "replace"), 300)  # scrubbed whole, then shortened
    if exc.code == 404:
        if _error_code(raw) in unknown_codes:
            raise UnknownSchemaId(f"{where}: {detail}") from None
        raise SchemaRegistryError(
            f"GET {where} answered HTTP 404 without Confluent's error code for an unknown schema, subject or "
            f"version ({excerpt(raw.decode('utf-8', 'replace'), 120)}): is 'schemaRegistryAddress' right? "
            "Apicurio serves Confluent's API at /apis/ccompat/v7") from None
    if exc.code in (401, 403):
        raise AuthenticationError(
            f"the Schema Registry at {scrub(base)} refused the request GET {path} (HTTP {exc.code}): check "
            "'schemaRegistry.basic.auth.user.info' or 'schemaRegistry.bearer.auth.token'") from None
    failed = SchemaRegistryUnavailable if exc.code == 429 or exc.code >= 500 else SchemaRegistryError
    raise failed(f"the Schema Registry at {scrub(base)} failed GET {path}: HTTP {exc.code} {detail}") from None


def _error_code(raw: bytes) -> Optional[int]:
    try:
        doc = parse_json(raw)
    except NotJson:
        return None
    code = doc.get("error_code") if isinstance(doc, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None
