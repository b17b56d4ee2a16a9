"""OAuth 2.0 client credentials for the Schema Registry: a bearer token from the issuer, kept until it nears expiry.

The options (``schemaRegistry.bearer.auth.issuer.endpoint.url``, ``.client.id``,
``.client.secret``, ``.scope``; confluent-kafka's ``SchemaRegistryClient`` names) select it. A
token is asked for with ``grant_type=client_credentials`` and the client id and secret as HTTP
basic authentication (RFC 6749, 2.3.1), through the registry client's own transport: no
redirect, one deadline, at most :data:`MAX_TOKEN_BYTES` read. It is kept per process and
reused until :data:`REFRESH_MARGIN_S` before its ``expires_in``; a token the registry refuses is
forgotten, and the registry client asks once more with a new one. Tokens and the secret are
registered for scrubbing; neither appears in a message.

Caller: any thread (executor tasks decode in parallel); one lock serialises the fetches.
"""

from __future__ import annotations

import base64
import hashlib
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

from kafka_group.errors import AuthenticationError, SchemaRegistryError, SchemaRegistryUnavailable
from kafka_group.redaction import register_rotating_secret, register_secret, scrub
from kafka_group.registry import transport

__all__ = ["OAuthClient", "REFRESH_MARGIN_S", "MAX_TOKEN_BYTES", "authorization", "forget", "clear"]

#: A token is replaced this long before it expires.
REFRESH_MARGIN_S = 60.0
#: The most read of the issuer's answer.
MAX_TOKEN_BYTES = 1024 * 1024
#: ``expires_in`` assumed when the issuer gives none.
_DEFAULT_LIFETIME_S = 300.0

_OPTIONS = "'schemaRegistry.bearer.auth.client.id' and 'schemaRegistry.bearer.auth.client.secret'"


@dataclass(frozen=True)
class OAuthClient:
    """The client credentials of the registry's OAuth issuer.

    Attributes
    ----------
    endpoint : str
        The issuer's token endpoint (``http://`` or ``https://``).
    client_id : str
        The client id.
    client_secret : str
        The client secret. Secret: not in ``repr``.
    scope : str or None
        The scope asked for, if any.
    """

    endpoint: str
    client_id: str
    client_secret: str = field(repr=False)
    scope: Optional[str] = None


_Key = Tuple[str, str, Optional[str], str]
_lock = threading.Lock()
_tokens: Dict[_Key, Tuple[str, float]] = {}


def _key(oauth: OAuthClient) -> _Key:
    # The secret's digest too: a query with the same client id and another (wrong) secret must not be
    # handed the token that a query knowing the right one obtained in this process.
    return oauth.endpoint, oauth.client_id, oauth.scope, hashlib.sha256(oauth.client_secret.encode()).hexdigest()


def authorization(oauth: OAuthClient, *, timeout_s: float, ssl_context: Optional[ssl.SSLContext] = None) -> str:
    """The ``Authorization`` header's value: ``Bearer`` and a token that does not expire within the margin.

    Raises
    ------
    AuthenticationError
        The issuer refused the client credentials (naming the options, never the secret).
    SchemaRegistryUnavailable
        The issuer was unreachable or failed in a way that may pass.
    SchemaRegistryError
        The issuer's answer holds no usable token.
    """
    with _lock:
        held = _tokens.get(_key(oauth))
        if held is not None and held[1] - time.monotonic() > REFRESH_MARGIN_S:
            return "Bearer " + held[0]
        token, lifetime = _fetch(oauth, timeout_s, ssl_context)
        _tokens[_key(oauth)] = (token, time.monotonic() + lifetime)
        return "Bearer " + token


def forget(oauth: OAuthClient, header: str) -> None:
    """Drop the token of ``header`` (the registry refused it), unless another thread replaced it already."""
    with _lock:
        held = _tokens.get(_key(oauth))
        if held is not None and "Bearer " + held[0] == header:
            del _tokens[_key(oauth)]


def clear() -> None:
    """Forget every token (tests; a process that changes credentials)."""
    with _lock:
        _tokens.clear()


def _fetch(oauth: OAuthClient, timeout_s: float, ssl_context: Optional[ssl.SSLContext]) -> Tuple[str, float]:
    register_secret(oauth.client_secret)
    credentials = f"{urllib.parse.quote_plus(oauth.client_id)}:{urllib.parse.quote_plus(oauth.client_secret)}"
    for form in (credentials, base64.b64encode(credentials.encode()).decode("ascii")):
        register_secret(form)
    body = {"grant_type": "client_credentials"}
    if oauth.scope:
        body["scope"] = oauth.scope
    headers = {"Authorization": "Basic " + base64.b64encode(credentials.encode()).decode("ascii"),
               "Content-Type": "application/x-www-form-urlencoded"}
    where = scrub(oauth.endpoint)
    try:
        doc = transport.get_json(oauth.endpoint, "", headers, unknown_codes=frozenset(), timeout_s=timeout_s,
                                 max_bytes=MAX_TOKEN_BYTES, ssl_context=ssl_context,
                                 data=urllib.parse.urlencode(body).encode("ascii"))
    except AuthenticationError:
        raise AuthenticationError(f"the OAuth issuer at {where} refused the client credentials: check {_OPTIONS} "
                                  "(the values are not shown)") from None
    except SchemaRegistryUnavailable as exc:
        raise SchemaRegistryUnavailable(f"no token from the OAuth issuer at {where} "
                                        f"('schemaRegistry.bearer.auth.issuer.endpoint.url'): {exc}") from None
    except SchemaRegistryError as exc:
        if " HTTP 400 " in str(exc):  # RFC 6749 5.2: invalid_client, unauthorized_client, invalid_scope
            raise AuthenticationError(
                f"the OAuth issuer at {where} refused the request (HTTP 400): check {_OPTIONS} and "
                f"'schemaRegistry.bearer.auth.scope': {exc}") from None
        raise SchemaRegistryError(f"no token from the OAuth issuer at {where}: {exc}") from None
    token = doc.get("access_token") if isinstance(doc, dict) else None
    kind = doc.get("token_type", "Bearer") if isinstance(doc, dict) else None
    if not isinstance(token, str) or not token or not all(" " < c <= "~" for c in token) or \
            not isinstance(kind, str) or kind.lower() != "bearer":
        raise SchemaRegistryError(f"the OAuth issuer at {where} answered without a bearer access_token the "
                                  "connector can send: is 'schemaRegistry.bearer.auth.issuer.endpoint.url' its "
                                  "token endpoint?")
    register_rotating_secret(token)
    lifetime = doc.get("expires_in", _DEFAULT_LIFETIME_S)
    if isinstance(lifetime, bool) or not isinstance(lifetime, (int, float)) or not 0 < lifetime < 10 ** 9:
        lifetime = _DEFAULT_LIFETIME_S
    return token, float(lifetime)
