"""Which Kafka errors are a refused login or a missing ACL, and what the connector's error says (issue 28 item 3).

Pure: KafkaError values in, the connector's error out; no broker.
"""

from __future__ import annotations

from typing import Dict, Optional

import pytest
from confluent_kafka import KafkaError, KafkaException

from kafka_group.auth.access_errors import access_error, access_error_of, login_description, raising_error_callback
from kafka_group.errors import AuthenticationError, AuthorizationError, KafkaGroupError
from kafka_group.redaction import register_client_secrets

_SERVERS = "broker-1:9093"
_PASSWORD = "alice-very-secret-password"


def _config(protocol: str, mechanism: Optional[str] = None, **more: str) -> Dict[str, str]:
    config = {"bootstrap.servers": _SERVERS, "security.protocol": protocol, **more}
    if mechanism is not None:
        config["sasl.mechanism"] = mechanism
    return config


_PLAIN = _config("SASL_SSL", "PLAIN", **{"sasl.username": "alice", "sasl.password": _PASSWORD})


@pytest.mark.parametrize("config, described, principal", [
    (_PLAIN, "SASL_SSL/PLAIN", "User:alice"),
    (_config("SASL_PLAINTEXT", "SCRAM-SHA-512", **{"sasl.username": "bob", "sasl.password": _PASSWORD}),
     "SASL_PLAINTEXT/SCRAM-SHA-512", "User:bob"),
    (_config("sasl_plaintext", None, **{"sasl.mechanisms": "oauthbearer", "sasl.oauthbearer.config": "principal=carol"}),
     "SASL_PLAINTEXT/OAUTHBEARER", "User:carol"),
    (_config("SASL_SSL", "OAUTHBEARER", **{"sasl.oauthbearer.method": "oidc"}), "SASL_SSL/OAUTHBEARER",
     "the token's principal"),
    (_config("SSL", None, **{"ssl.certificate.pem": "-----BEGIN CERTIFICATE-----"}), "SSL",
     "the client certificate's principal (User:<its subject>)"),
    ({"bootstrap.servers": _SERVERS}, "PLAINTEXT", "User:ANONYMOUS"),
])
def test_the_login_is_described_by_protocol_mechanism_and_principal(config: Dict[str, str], described: str,
                                                                    principal: str) -> None:
    assert login_description(config) == (described, principal)


@pytest.mark.parametrize("code, reason", [
    (KafkaError._AUTHENTICATION, "SASL authentication error: Authentication failed: Invalid username or password"),
    (KafkaError.SASL_AUTHENTICATION_FAILED, "Broker: SASL Authentication failed"),
    (KafkaError._TRANSPORT, "sasl_ssl://b:9093/1: SASL authentication error: Authentication failed"),
])
def test_a_refused_password_is_an_authentication_error_naming_the_user_and_the_options(code: int, reason: str) -> None:
    register_client_secrets(_PLAIN)
    error = access_error(KafkaError(code, reason), _PLAIN)
    assert isinstance(error, AuthenticationError) and not error.retriable
    text = str(error)
    assert "refused the login of User:alice over SASL_SSL/PLAIN" in text and _SERVERS in text
    assert "'kafka.sasl.username' and 'kafka.sasl.password'" in text
    assert "could not reach" not in text and _PASSWORD not in text
    assert error.kafka_error_code == code


def test_a_secret_echoed_by_the_client_is_scrubbed() -> None:
    register_client_secrets(_PLAIN)
    error = access_error(KafkaError(KafkaError._AUTHENTICATION, f"SASL authentication error: bad {_PASSWORD}"), _PLAIN)
    assert error is not None and _PASSWORD not in str(error)


def test_an_expired_token_points_at_the_token_options() -> None:
    config = _config("SASL_SSL", "OAUTHBEARER", **{"sasl.oauthbearer.method": "oidc"})
    error = access_error(KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error: token expired"), config)
    assert isinstance(error, AuthenticationError)
    assert "SASL_SSL/OAUTHBEARER" in str(error) and "'kafka.sasl.oauthbearer.*'" in str(error)


@pytest.mark.parametrize("code, reason", [
    (KafkaError._SSL, "ssl://b:9093/1: SSL handshake failed: error:0A000086:SSL routines::certificate verify failed: "
                      "broker certificate could not be verified, verify that ssl.ca.location is correctly configured"),
    (KafkaError._TRANSPORT, "SSL handshake failed: certificate verify failed"),
])
def test_an_unknown_certificate_authority_is_an_authentication_error_naming_the_tls_options(code: int,
                                                                                            reason: str) -> None:
    error = access_error(KafkaError(code, reason), _config("SSL"))
    assert isinstance(error, AuthenticationError)
    assert "the TLS handshake with the Kafka cluster at 'broker-1:9093' failed (SSL, as User:ANONYMOUS)" in str(error)
    assert "Make 'kafka.ssl.ca.pem'" in str(error)


@pytest.mark.parametrize("code, reason", [
    (KafkaError._SSL, "SSL handshake failed: Disconnected"),  # a broker restarting mid-handshake
    (KafkaError._TRANSPORT, "Failed to get metadata: Local: Broker transport failure"),
    (KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"),
    (KafkaError.UNKNOWN_TOPIC_OR_PART, "Broker: Unknown topic or partition"),
    (KafkaError.NOT_COORDINATOR, "Broker: Not coordinator"),
])
def test_other_errors_are_not_access_errors(code: int, reason: str) -> None:
    assert access_error(KafkaError(code, reason), _PLAIN) is None


@pytest.mark.parametrize("code, kwargs, resource, name, fix", [
    (KafkaError.TOPIC_AUTHORIZATION_FAILED, {"topic": "orders"}, "topic", "orders", "--operation Read --topic orders"),
    (KafkaError.GROUP_AUTHORIZATION_FAILED, {"group": "ingest"}, "group", "ingest", "--operation Read --group ingest"),
    (KafkaError.CLUSTER_AUTHORIZATION_FAILED, {}, "cluster", None, "--operation Describe --cluster"),
])
def test_a_missing_acl_is_an_authorization_error_naming_the_resource_and_the_grant(
        code: int, kwargs: Dict[str, str], resource: str, name: Optional[str], fix: str) -> None:
    error = access_error(KafkaError(code, "Broker: authorization failed"), _PLAIN, **kwargs)
    assert isinstance(error, AuthorizationError) and not error.retriable
    assert (error.resource_type, error.resource_name) == (resource, name)
    text = str(error)
    assert text.startswith("User:alice (SASL_SSL/PLAIN) is not authorized to")
    assert (f"{resource} '{name}'" if name else "the cluster") in text
    assert f"--add --allow-principal User:alice {fix}" in text


def test_the_topic_of_a_consumer_error_is_read_from_its_text() -> None:
    error = access_error(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                    "Subscribed topic not available: orders.v2: Broker: Topic authorization failed"),
                         _PLAIN)
    assert isinstance(error, AuthorizationError) and error.resource_name == "orders.v2"


def test_an_unnamed_principal_gets_a_placeholder_in_the_grant() -> None:
    error = access_error(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "denied"), _config("SSL", **{"ssl.certificate.location": "/c.pem"}),
                         topic="t")
    assert error is not None and "--allow-principal User:<principal> --operation Read --topic t" in str(error)


def test_an_exception_is_classified_by_its_kafka_error() -> None:
    exc = KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED, "denied"))
    assert isinstance(access_error_of(exc, _PLAIN, group="g"), AuthorizationError)
    assert access_error_of(ValueError("no"), _PLAIN) is None


def test_the_error_callback_raises_access_errors_and_passes_others() -> None:
    callback = raising_error_callback(_PLAIN, client="reader")
    callback(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    with pytest.raises(AuthenticationError):
        callback(KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error: nope"))


def test_both_are_connector_errors() -> None:
    assert issubclass(AuthenticationError, KafkaGroupError) and issubclass(AuthorizationError, KafkaGroupError)
    assert issubclass(AuthorizationError, PermissionError)
