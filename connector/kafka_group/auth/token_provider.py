"""OAUTHBEARER tokens from the user's code: the option ``tokenProvider`` (``module:callable``).

A token provider is any callable named as ``"package.module:function"`` (or
``"package.module:Class"``, called with no arguments to make it), with the signature of
confluent-kafka's ``oauth_cb``: it is given the client's ``kafka.sasl.oauthbearer.config``
string (empty when not set) and returns ``(token, expiry)``, ``(token, expiry, principal)`` or
``(token, expiry, principal, extensions)``: the token (a JWS, or any string the brokers'
validator accepts), its expiry in seconds since the epoch, the principal name and SASL
extensions (a dict of str). librdkafka calls it before the token expires.

It is imported in every process that makes a Kafka client of the query: on the driver (the
group member, the metadata client, the offset committer, event-time alignment) and on the
executors (the readers), so its module must be installed on both. The selection travels inside
the client settings under :data:`TOKEN_PROVIDER_KEY`, a connector setting that
:mod:`kafka_group.auth.clients` removes before librdkafka sees the settings.

:class:`TokenCallback` wraps the provider: every token and extension it returns is registered
for scrubbing (:mod:`kafka_group.redaction`), and a provider that raises or returns something
else than the tuple above fails with an :class:`~kafka_group.errors.AuthenticationError` or
:class:`~kafka_group.errors.ConfigError` naming the option (kept in :attr:`TokenCallback.failure`,
raised by the client factory), never with librdkafka's "OAuth callback raised exception".
"""

from __future__ import annotations

import logging
import math
import threading
import time
from typing import Any, Callable, Dict, Optional, Tuple

from kafka_group.callable_spec import load_callable
from kafka_group.errors import AuthenticationError, ConfigError, KafkaGroupError
from kafka_group.redaction import register_rotating_secret, scrub

__all__ = ["TOKEN_PROVIDER_KEY", "TOKEN_PROVIDER_OPTION", "MSK_IAM_PROVIDER", "TokenCallback",
           "load_token_provider", "provider_origin"]

#: The connector option naming the provider.
TOKEN_PROVIDER_OPTION = "tokenProvider"

#: The client setting that carries the provider's spec to every client (removed before librdkafka sees it).
TOKEN_PROVIDER_KEY = "kafka_group.token.provider"

#: The built-in AWS MSK IAM provider, selected by the MSK options (:mod:`kafka_group.config.msk_iam`).
MSK_IAM_PROVIDER = "kafka_group.auth.msk_iam:msk_iam_token"

#: An expiry above this is in milliseconds, not seconds (the year 5138 in seconds).
_MILLISECONDS_FROM = 1e11

logger = logging.getLogger(__name__)

#: A token, its expiry (seconds since the epoch), principal and extensions: what ``oauth_cb`` returns.
Token = Tuple[str, float, str, Dict[str, str]]


def provider_origin(spec: str) -> str:
    """How an error names the provider: the option that selected it."""
    if spec == MSK_IAM_PROVIDER:
        return ("the AWS MSK IAM token provider (selected by 'kafka.sasl.mechanism=AWS_MSK_IAM' or "
                "MSK's IAM callback handler class)")
    return f"option '{TOKEN_PROVIDER_OPTION}' ({spec})"


def load_token_provider(spec: str) -> Callable[[str], Any]:
    """Import the provider named by ``spec`` (in the calling process).

    Raises
    ------
    ConfigError
        The module cannot be imported, or has no such callable.
    """
    return load_callable(spec, option=TOKEN_PROVIDER_OPTION, origin=provider_origin(spec), where="",
                         install="Install it in the Python environment of the driver and of the executors "
                                 "(both make Kafka clients)",
                         signature="__call__(config)")


class TokenCallback:
    """confluent-kafka's ``oauth_cb`` around a token provider.

    Caller: librdkafka's background thread (confluent-kafka >= 2.13 serves token refreshes
    there for every client kind), once at client creation and before each token expires.

    Parameters
    ----------
    spec : str
        ``package.module:callable``; imported here, on the calling thread, so a missing module
        fails the client's creation with a ConfigError.
    client : str
        The client's role (``driver``, ``reader``, ``admin``...), for the log.
    """

    def __init__(self, spec: str, *, client: str) -> None:
        self.spec = spec
        self.client = client
        self._provider = load_token_provider(spec)
        self._lock = threading.Lock()
        self._failure: Optional[KafkaGroupError] = None

    @property
    def failure(self) -> Optional[KafkaGroupError]:
        """The error of the provider's last call, None when it gave a token."""
        with self._lock:
            return self._failure

    def __call__(self, oauthbearer_config: str) -> Token:
        try:
            token = self._token(oauthbearer_config or "")
        except KafkaGroupError as error:
            with self._lock:
                self._failure = error
            logger.error("%s: no OAUTHBEARER token: %s", self.client, error)
            raise
        with self._lock:
            self._failure = None
        return token

    def _token(self, oauthbearer_config: str) -> Token:
        origin = provider_origin(self.spec)
        try:
            result = self._provider(oauthbearer_config)
        except KafkaGroupError:
            raise
        except Exception as exc:
            raise AuthenticationError(f"{origin} raised {type(exc).__name__}: {scrub(str(exc))}. The OAUTHBEARER "
                                      "login needs a token from it") from exc
        return _checked(result, origin)


def _checked(result: Any, origin: str) -> Token:
    """``result`` as ``(token, expiry, principal, extensions)``; a ConfigError naming ``origin`` when malformed."""
    form = "(token, expiry seconds since the epoch[, principal[, extensions dict]])"
    if not isinstance(result, (tuple, list)) or not 2 <= len(result) <= 4:
        raise ConfigError(f"{origin} returned a {type(result).__name__}: return a tuple {form}")
    token, expiry = result[0], result[1]
    principal = result[2] if len(result) > 2 else ""
    extensions = result[3] if len(result) > 3 else {}
    if not isinstance(token, str) or not token or any(c.isspace() for c in token):
        raise ConfigError(f"{origin} returned a token that is not a non-empty string without blanks: return {form}")
    register_rotating_secret(token)
    if isinstance(expiry, bool) or not isinstance(expiry, (int, float)) or not math.isfinite(expiry):
        raise ConfigError(f"{origin} returned an expiry of type {type(expiry).__name__}: return {form}")
    if expiry >= _MILLISECONDS_FROM:
        raise ConfigError(f"{origin} returned an expiry in milliseconds ({expiry:.0f}): return seconds since the "
                          "epoch (time.time() + lifetime)")
    if expiry <= time.time():
        raise AuthenticationError(f"{origin} returned a token that expired at {expiry:.0f} (seconds since the "
                                  "epoch): return a fresh token and its expiry in seconds since the epoch")
    if principal is None:
        principal = ""
    if not isinstance(principal, str):
        raise ConfigError(f"{origin} returned a principal of type {type(principal).__name__}: return {form}")
    if extensions is None:
        extensions = {}
    if not isinstance(extensions, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                   for k, v in extensions.items()):
        raise ConfigError(f"{origin} returned extensions that are not a dict of str to str: return {form}")
    for value in extensions.values():
        register_rotating_secret(value)
    return token, float(expiry), principal, dict(extensions)
