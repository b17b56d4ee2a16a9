"""Kafka's authentication and authorization failures, told as the connector's own errors.

librdkafka reports a refused login (a wrong password, an expired token, a failed TLS
handshake) through its error callback, not as the error of the call that failed: a metadata
request then fails with "Broker transport failure", which reads as an unreachable cluster.
An ACL that refuses a topic or a group reaches the client as a protocol error (a metadata
topic error, a consumer error event) that the caller may take for a missing topic or an
empty assignment. :func:`access_error` turns either into an
:class:`~kafka_group.errors.AuthenticationError` or
:class:`~kafka_group.errors.AuthorizationError` whose message names the security protocol
and SASL mechanism, the principal (a user name, never a password or token), the resource and
the fix; :func:`raising_error_callback` is an ``error_cb`` that raises it from the client's
``poll()``/``consume()``.

The function is pure (error and settings in, error out), so its decisions are unit-tested
without a broker.
"""

from __future__ import annotations

import logging
import re
from typing import Callable, Mapping, Optional, Tuple, Union

from confluent_kafka import KafkaError, KafkaException

from kafka_group.errors import AuthenticationError, AuthorizationError, KafkaGroupError

__all__ = ["access_error", "access_error_of", "login_description", "raising_error_callback"]

logger = logging.getLogger(__name__)

#: Codes of a refused login: librdkafka's _AUTHENTICATION and _SSL, and the broker's own.
_AUTHENTICATION_CODES = frozenset({
    KafkaError._AUTHENTICATION,
    KafkaError._SSL,
    KafkaError.SASL_AUTHENTICATION_FAILED,
    KafkaError.ILLEGAL_SASL_STATE,
    KafkaError.UNSUPPORTED_SASL_MECHANISM,
})

#: The ACL resource each authorization code is about, and the operation a reader needs on it.
_AUTHORIZATION_CODES = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED: ("topic", "Read"),
    KafkaError.GROUP_AUTHORIZATION_FAILED: ("group", "Read"),
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: ("cluster", "Describe"),
}

#: librdkafka's texts of a refused login that may come with another code (a transport error).
_LOGIN_TEXT = re.compile(r"SASL authentication (error|failed)|certificate verify failed", re.IGNORECASE)

#: An _SSL error that is a connection lost during the handshake (a broker restarting), not a refusal.
_TLS_CONNECTION_LOST = re.compile(r"Disconnected|Connection reset|Broken pipe|timed out", re.IGNORECASE)

#: The topic of a consumer error such as "Subscribed topic not available: orders: Broker: Topic authorization failed".
_TOPIC_IN_TEXT = re.compile(r"topic not available: (?P<topic>[A-Za-z0-9._-]+):")


def login_description(config: Mapping[str, str]) -> Tuple[str, str]:
    """How ``config`` logs in: ``(protocol/mechanism, principal)``, such as
    ``("SASL_PLAINTEXT/PLAIN", "User:alice")``; no secret is part of either.

    Parameters
    ----------
    config : mapping of str to str
        librdkafka settings (translated from Spark's options where needed).
    """
    protocol = str(config.get("security.protocol", "PLAINTEXT")).upper()
    if protocol.startswith("SASL"):
        mechanism = str(config.get("sasl.mechanism") or config.get("sasl.mechanisms") or "GSSAPI").upper()
        described = f"{protocol}/{mechanism}"
        username = config.get("sasl.username")
        oauth_principal = re.search(r"(?:^|\s)principal=(\S+)", str(config.get("sasl.oauthbearer.config", "")))
        if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") and username:
            principal = f"User:{username}"
        elif mechanism == "OAUTHBEARER" and oauth_principal is not None:
            principal = f"User:{oauth_principal.group(1)}"
        elif mechanism == "OAUTHBEARER":
            principal = "the token's principal"
        else:
            principal = "the SASL principal"
    elif protocol == "SSL":
        described = "SSL"
        principal = ("the client certificate's principal (User:<its subject>)"
                     if config.get("ssl.certificate.pem") or config.get("ssl.certificate.location")
                     or config.get("ssl.keystore.location") else "User:ANONYMOUS")
    else:
        described, principal = protocol, "User:ANONYMOUS"
    return described, principal


def access_error(error: KafkaError, config: Mapping[str, str], *, topic: Optional[str] = None,
                 group: Optional[str] = None) -> Optional[KafkaGroupError]:
    """The connector's error for a refused login or a missing ACL, or None for any other error.

    Parameters
    ----------
    error : KafkaError
        What librdkafka reported (an error callback's argument, a message's or a future's error).
    config : mapping of str to str
        The client's settings: they say which mechanism and principal (secrets stay out).
    topic, group : str, optional
        The topic or group the failed call was about, named in an authorization error.

    Returns
    -------
    AuthenticationError or AuthorizationError or None
    """
    code, name, reason = int(error.code()), str(error.name()), str(error.str())
    servers = config.get("bootstrap.servers", "")
    described, principal = login_description(config)
    if code in _AUTHORIZATION_CODES:
        resource, operation = _AUTHORIZATION_CODES[code]
        found = _TOPIC_IN_TEXT.search(reason)
        name_of = {"topic": topic or (found.group("topic") if found else None), "group": group}.get(resource)
        what = f"{resource} '{name_of}'" if name_of else ("the cluster" if resource == "cluster" else f"a {resource}")
        acl_principal = principal if principal.startswith("User:") and " " not in principal else "User:<principal>"
        target = "--cluster" if resource == "cluster" else f"--{resource} {name_of or '<name>'}"
        authorization = AuthorizationError(
            f"{principal} ({described}) is not authorized to {operation.upper()} {what} on the Kafka cluster at "
            f"'{servers}' ({reason}). Grant it {operation.upper()} on {what}, e.g. kafka-acls.sh --bootstrap-server "
            f"{servers} --command-config <admin.properties> --add --allow-principal {acl_principal} "
            f"--operation {operation} {target}",
            kafka_error_code=code, kafka_error_name=name)
        authorization.resource_type, authorization.resource_name = resource, name_of
        return authorization
    if code not in _AUTHENTICATION_CODES and not _LOGIN_TEXT.search(reason):
        return None
    if code == KafkaError._SSL and _TLS_CONNECTION_LOST.search(reason) and not _LOGIN_TEXT.search(reason):
        return None
    if _is_tls_failure(code, reason):
        # The client may be the one refusing (a broker certificate it cannot verify), or the broker.
        what = f"the TLS handshake with the Kafka cluster at '{servers}' failed ({described}, as {principal})"
    else:
        what = f"the Kafka cluster at '{servers}' refused the login of {principal} over {described}"
    return AuthenticationError(f"{what}: {reason}. {_login_fix(code, reason, described)}",
                               kafka_error_code=code, kafka_error_name=name)


def _is_tls_failure(code: int, reason: str) -> bool:
    return code == KafkaError._SSL or re.search(r"SSL handshake|certificate", reason, re.IGNORECASE) is not None


def _login_fix(code: int, reason: str, described: str) -> str:
    """What to check, by what failed: the TLS handshake, or the SASL mechanism's credentials."""
    if _is_tls_failure(code, reason):
        return ("Make 'kafka.ssl.ca.pem' (or 'kafka.ssl.ca.location', or the "
                "'kafka.ssl.truststore.*' options) trust the authority that signed the brokers' certificates, check "
                "that the broker's host name matches its certificate ('kafka.ssl.endpoint.identification.algorithm'), "
                "and, for mutual TLS, that 'kafka.ssl.certificate.pem' and 'kafka.ssl.key.pem' (or the "
                "'kafka.ssl.keystore.*' options) hold a certificate the brokers trust and that has not expired")
    mechanism = described.partition("/")[2]
    if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        return (f"Check 'kafka.sasl.username' and 'kafka.sasl.password' (or 'kafka.sasl.jaas.config'), and that the "
                f"user exists for {mechanism} on the cluster ('kafka.sasl.mechanism')")
    if mechanism == "OAUTHBEARER":
        return ("Check the token: the 'kafka.sasl.oauthbearer.*' options (the token endpoint, client id and secret, "
                "scope) or the token callback; an expired or refused token fails the login")
    return "Check 'kafka.security.protocol', 'kafka.sasl.mechanism' and the credentials the mechanism takes"


def access_error_of(exc: Union[BaseException, KafkaError], config: Mapping[str, str], *,
                    topic: Optional[str] = None, group: Optional[str] = None) -> Optional[KafkaGroupError]:
    """:func:`access_error` of a ``KafkaException`` (or a ``KafkaError``); None for anything else."""
    error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else exc
    if not isinstance(error, KafkaError):
        return None
    return access_error(error, config, topic=topic, group=group)


def raising_error_callback(config: Mapping[str, str], *, group: Optional[str] = None,
                           client: str = "client") -> Callable[[KafkaError], None]:
    """An ``error_cb`` for a confluent-kafka client of ``config``: raises the connector's error for a
    refused login or a missing ACL (out of the ``poll()``/``consume()`` that served it) and logs any
    other error (librdkafka no longer prints them once a callback is set).

    Caller: whichever thread polls the client.
    """

    def on_error(error: KafkaError) -> None:
        found = access_error(error, config, group=group)
        if found is not None:
            raise found
        log = logger.warning if error.fatal() else logger.info
        log("%s: %s", client, error.str())

    return on_error
