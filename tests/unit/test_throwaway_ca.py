"""The secured development cluster's pieces that need no broker: its CA and its command line."""

from __future__ import annotations

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from kafka_group_devbroker.__main__ import _security_modes, build_parser
from kafka_group_devbroker.secured_kafka import SECURITY_MODES, SecuredKafka
from kafka_group_devbroker.throwaway_ca import ThrowawayCA
from kafka_group.errors import EmbeddedBrokerError


def test_a_broker_certificate_names_loopback_and_is_signed_by_the_ca() -> None:
    ca = ThrowawayCA()
    issued = ca.issue("broker", hosts=["localhost", "127.0.0.1"])
    certificate = x509.load_pem_x509_certificate(issued.certificate_pem.encode())
    ca_certificate = x509.load_pem_x509_certificate(ca.certificate_pem.encode())
    certificate.verify_directly_issued_by(ca_certificate)
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(a) for a in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]


def test_a_client_certificate_carries_its_principal_as_cn() -> None:
    issued = ThrowawayCA().issue("alice")
    certificate = x509.load_pem_x509_certificate(issued.certificate_pem.encode())
    assert certificate.subject.rfc4514_string() == "CN=alice"
    assert issued.key_pem.startswith("-----BEGIN PRIVATE KEY-----")


def test_the_pkcs12_keystore_opens_with_its_password_only() -> None:
    ca = ThrowawayCA()
    issued = ca.issue("broker", hosts=["127.0.0.1"])
    store = issued.pkcs12("store-secret", ca.certificate_pem)
    key, certificate, chain = pkcs12.load_key_and_certificates(store, b"store-secret")
    assert certificate is not None and key is not None
    assert certificate.public_bytes(serialization.Encoding.PEM).decode() == issued.certificate_pem
    assert [c.public_bytes(serialization.Encoding.PEM).decode() for c in chain] == [ca.certificate_pem]
    with pytest.raises(ValueError):
        pkcs12.load_key_and_certificates(store, b"wrong")


def test_security_modes_of_the_command_line() -> None:
    assert _security_modes("all") == list(SECURITY_MODES)
    assert _security_modes("plain, ssl") == ["plain", "ssl"]
    with pytest.raises(ValueError, match="unknown mode"):
        _security_modes("plain,kerberos")
    assert "throwaway" in build_parser().format_help()


def test_client_settings_need_a_started_cluster() -> None:
    with pytest.raises(EmbeddedBrokerError, match="not started"):
        SecuredKafka().client_config("plain")
    with pytest.raises(EmbeddedBrokerError, match="unknown security mode"):
        SecuredKafka().client_config("kerberos")
