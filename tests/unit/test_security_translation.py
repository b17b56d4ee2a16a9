"""The security options of Spark's format("kafka") are translated for librdkafka at load() (issue 28 item 1):
JAAS login modules, Java truststores and keystores (JKS via keytool, PKCS#12, PEM), TLS options; what cannot be
translated, and a Java form given with the librdkafka form of the same setting, fail with a ConfigError."""

from __future__ import annotations

import datetime as dt
import os
import pathlib
import shutil
import subprocess
from typing import Dict, Tuple

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

from kafka_group.config.options import parse_source_options
from kafka_group.errors import ConfigError

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "orders", "kafka.group.id": "g"}
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
STORE_PASSWORD = "Store-Pa55-0001"


def client(**extra: str) -> Dict[str, str]:
    return dict(parse_source_options({**BASE, **{k.lower(): v for k, v in extra.items()}}).client_config)


# JAAS.

@pytest.mark.parametrize("jaas", [
    f'{PLAIN} required username="alice" password="alice-secret";',
    f"{PLAIN} required username='alice' password='alice-secret';",
    f'kafkashaded.{PLAIN} required\n  username="alice"\n  password="alice-secret";',
    f'{PLAIN} required username=alice password="alice-secret" ;',
])
def test_plain_jaas_becomes_username_and_password(jaas: str) -> None:
    config = client(**{"kafka.security.protocol": "SASL_SSL", "kafka.sasl.jaas.config": jaas})
    assert "sasl.jaas.config" not in config
    assert config["sasl.username"] == "alice" and config["sasl.password"] == "alice-secret"
    assert config["sasl.mechanism"] == "PLAIN" and config["security.protocol"] == "SASL_SSL"


def test_a_quoted_value_keeps_escaped_quotes_and_semicolons() -> None:
    config = client(**{"kafka.sasl.jaas.config": f'{PLAIN} required username="a" password="p\\"w;d";'})
    assert config["sasl.password"] == 'p"w;d'


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_jaas_keeps_the_mechanism(mechanism: str) -> None:
    config = client(**{"kafka.sasl.mechanism": mechanism,
                       "kafka.sasl.jaas.config": f'{SCRAM} required username="bob" password="bob-secret";'})
    assert (config["sasl.mechanism"], config["sasl.username"], config["sasl.password"]) == (
        mechanism, "bob", "bob-secret")


def test_scram_jaas_without_a_mechanism_names_it() -> None:
    with pytest.raises(ConfigError, match="set 'kafka.sasl.mechanism' to SCRAM-SHA-256 or SCRAM-SHA-512"):
        client(**{"kafka.sasl.jaas.config": f'{SCRAM} required username="bob" password="bob-secret";'})


def test_a_mechanism_the_module_does_not_serve_is_refused() -> None:
    with pytest.raises(ConfigError, match="'kafka.sasl.mechanism' is SCRAM-SHA-256, but 'kafka.sasl.jaas.config' "
                                          "names PlainLoginModule"):
        client(**{"kafka.sasl.mechanism": "SCRAM-SHA-256",
                   "kafka.sasl.jaas.config": f'{PLAIN} required username="a" password="b";'})


def test_unsecured_oauthbearer_jaas_becomes_sasl_oauthbearer_config() -> None:
    config = client(**{"kafka.sasl.mechanism": "OAUTHBEARER", "kafka.sasl.jaas.config": (
        f'{OAUTH} required unsecuredLoginStringClaim_sub="alice" unsecuredLoginLifetimeSeconds="600" '
        'unsecuredLoginListClaim_scope=",read,write" unsecuredLoginExtension_traceId="t1";')})
    assert config["sasl.oauthbearer.config"] == "principal=alice scope=read,write lifeSeconds=600 extension_traceId=t1"
    assert config["enable.sasl.oauthbearer.unsecure.jwt"] == "true" and config["sasl.mechanism"] == "OAUTHBEARER"


def test_oidc_login_callback_handler_becomes_librdkafka_oidc() -> None:
    config = client(**{
        "kafka.sasl.mechanism": "OAUTHBEARER",
        "kafka.sasl.login.callback.handler.class":
            "kafkashaded.org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
        "kafka.sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
        "kafka.sasl.jaas.config": f'{OAUTH} required clientId="app" clientSecret="app-secret" scope="kafka";'})
    assert {k: config[k] for k in ("sasl.oauthbearer.method", "sasl.oauthbearer.client.id",
                                   "sasl.oauthbearer.client.secret", "sasl.oauthbearer.scope")} == {
        "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": "app",
        "sasl.oauthbearer.client.secret": "app-secret", "sasl.oauthbearer.scope": "kafka"}
    assert "sasl.login.callback.handler.class" not in config


@pytest.mark.parametrize("options, message", [
    ({"kafka.sasl.jaas.config": "com.example.MyLoginModule required key=\"v\";"},
     "option 'kafka.sasl.jaas.config' names the login module com.example.MyLoginModule, which librdkafka cannot run"),
    ({"kafka.sasl.jaas.config": "shadedmskiam.software.amazon.msk.auth.iam.IAMLoginModule required;"},
     "option 'kafka.sasl.mechanism' is not set, but the options name AWS MSK IAM's login module"),
    ({"kafka.sasl.mechanism": "PLAIN",
      "kafka.sasl.login.callback.handler.class": "software.amazon.msk.auth.iam.IAMClientCallbackHandler"},
     "option 'kafka.sasl.mechanism' is PLAIN, but the options name AWS MSK IAM's"),
    ({"kafka.sasl.mechanism": "AWS_MSK_IAM", "kafka.sasl.jaas.config": f'{PLAIN} required username="a" password="b";'},
     "option 'kafka.sasl.jaas.config' names org.apache.kafka.common.security.plain.PlainLoginModule with AWS MSK IAM"),
    ({"kafka.sasl.login.callback.handler.class": "com.example.TokenHandler"},
     "option 'kafka.sasl.login.callback.handler.class' names com.example.TokenHandler, which librdkafka cannot run"),
    ({"kafka.sasl.jaas.config": f'{PLAIN} required username="a" password="b"'}, "does not end with ';'"),
    ({"kafka.sasl.jaas.config": f'{PLAIN} required username="a" password="b'}, "without its closing \""),
    ({"kafka.sasl.jaas.config": f'{PLAIN} required username="a";'}, "PlainLoginModule needs 'password'"),
    ({"kafka.sasl.jaas.config": f'{PLAIN} required username="a" password="b"; {PLAIN} required;'},
     "exactly one login module"),
    ({"kafka.sasl.login.refresh.window.factor": "0.8"},
     "option 'kafka.sasl.login.refresh.window.factor' is a Java client setting with no librdkafka equivalent"),
    ({"kafka.ssl.protocol": "TLSv1.1"}, "option 'kafka.ssl.protocol' names TLSv1.1"),
    ({"kafka.ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}, "OpenSSL's names"),
    ({"kafka.ssl.engine.factory.class": "com.example.Engine"}, "no librdkafka equivalent"),
])
def test_what_cannot_be_translated_fails_at_load(options: Dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        client(**options)
    assert message in str(refused.value)


def test_a_jaas_error_never_shows_the_password() -> None:
    with pytest.raises(ConfigError) as refused:
        client(**{"kafka.sasl.jaas.config": f'{PLAIN} required username="a" password="Hidden-Pw-4242" x'})
    assert "Hidden-Pw-4242" not in str(refused.value)


def test_kerberos_without_gssapi_in_the_wheel_names_librdkafkas_settings() -> None:
    from kafka_group.config.security import _has_gssapi

    if _has_gssapi():
        config = client(**{"kafka.sasl.jaas.config": 'com.sun.security.auth.module.Krb5LoginModule required '
                           'useKeyTab=true keyTab="/etc/k.keytab" principal="app@EXAMPLE.COM";'})
        assert config["sasl.kerberos.keytab"] == "/etc/k.keytab" and config["sasl.mechanism"] == "GSSAPI"
        return
    with pytest.raises(ConfigError, match="librdkafka: 'kafka.sasl.mechanism=GSSAPI', 'kafka.sasl.kerberos.keytab'"):
        client(**{"kafka.sasl.mechanism": "GSSAPI"})


def test_librdkafka_names_keep_working() -> None:
    config = client(**{"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN",
                       "kafka.sasl.username": "alice", "kafka.sasl.password": "pw",
                       "kafka.ssl.ca.location": "/etc/ca.pem", "kafka.ssl.endpoint.identification.algorithm": "https"})
    assert config["sasl.username"] == "alice" and config["ssl.ca.location"] == "/etc/ca.pem"
    assert config["ssl.endpoint.identification.algorithm"] == "https"


def test_empty_endpoint_identification_means_none_and_tls_defaults_are_dropped() -> None:
    config = client(**{"kafka.ssl.endpoint.identification.algorithm": "", "kafka.ssl.protocol": "TLSv1.3",
                       "kafka.ssl.enabled.protocols": "TLSv1.2,TLSv1.3", "kafka.ssl.keymanager.algorithm": "SunX509"})
    assert config["ssl.endpoint.identification.algorithm"] == "none"
    assert not {"ssl.protocol", "ssl.enabled.protocols", "ssl.keymanager.algorithm"} & set(config)


@pytest.mark.parametrize("java, librdkafka", [
    ({"kafka.sasl.jaas.config": f'{PLAIN} required username="a" password="b";'}, {"kafka.sasl.password": "c"}),
    ({"kafka.sasl.jaas.config": f'{PLAIN} required username="a" password="b";'}, {"kafka.sasl.username": "c"}),
    ({"kafka.ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----x-----END CERTIFICATE-----"},
     {"kafka.ssl.ca.location": "/etc/ca.pem"}),
])
def test_a_java_form_and_the_librdkafka_form_of_one_setting_are_refused(
        java: Dict[str, str], librdkafka: Dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="both set"):
        client(**java, **librdkafka)


# Java stores.

def _cert(subject: str, key: ec.EllipticCurvePrivateKey, issuer: str, issuer_key: ec.EllipticCurvePrivateKey,
          ca: bool) -> x509.Certificate:
    now = dt.datetime.now(dt.timezone.utc)
    return (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
            .sign(issuer_key, hashes.SHA256()))


def _pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode().strip()


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Tuple[pathlib.Path, str, str, bytes]:
    """A folder with a CA and a client key in PKCS#12 and PEM (JKS too when keytool is here); the CA's and
    client certificate's PEM and the client key's DER."""
    folder = tmp_path_factory.mktemp("stores")
    ca_key, client_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = _cert("test-ca", ca_key, "test-ca", ca_key, True)
    leaf = _cert("client", client_key, "test-ca", ca_key, False)
    encryption = serialization.BestAvailableEncryption(STORE_PASSWORD.encode())
    (folder / "keystore.p12").write_bytes(
        pkcs12.serialize_key_and_certificates(b"client", client_key, leaf, [ca], encryption))
    (folder / "truststore.p12").write_bytes(pkcs12.serialize_key_and_certificates(b"ca", None, None, [ca], encryption))
    (folder / "ca.pem").write_text(_pem(ca) + "\n")
    key_pem = client_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()).decode()
    (folder / "keystore.pem").write_text(key_pem + _pem(leaf) + "\n")
    keytool = shutil.which("keytool")
    if keytool:
        env = {**os.environ, "PW": STORE_PASSWORD}
        subprocess.run([keytool, "-importkeystore", "-noprompt", "-srckeystore", str(folder / "keystore.p12"),
                        "-srcstoretype", "PKCS12", "-srcstorepass:env", "PW", "-destkeystore",
                        str(folder / "keystore.jks"), "-deststoretype", "JKS", "-deststorepass:env", "PW"],
                       env=env, check=True, capture_output=True)
        subprocess.run([keytool, "-importcert", "-noprompt", "-alias", "ca", "-file", str(folder / "ca.pem"),
                        "-keystore", str(folder / "truststore.jks"), "-storetype", "JKS", "-storepass:env", "PW"],
                       env=env, check=True, capture_output=True)
    der = client_key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption())
    return folder, _pem(ca), _pem(leaf), der


def _key_der(pem: str) -> bytes:
    return serialization.load_pem_private_key(pem.encode(), None).private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


@pytest.mark.parametrize("kind, declared", [("p12", "PKCS12"), ("p12", None), ("jks", "JKS"), ("jks", None),
                                            ("pem", "PEM")])
def test_a_truststore_becomes_inline_ca_pem(stores: Tuple[pathlib.Path, str, str, bytes], kind: str,
                                            declared: str | None) -> None:
    folder, ca, _, _ = stores
    path = folder / ("ca.pem" if kind == "pem" else f"truststore.{kind}")
    if not path.exists():
        pytest.skip("no keytool here to make a JKS store")
    options = {"kafka.security.protocol": "SSL", "kafka.ssl.truststore.location": str(path)}
    if kind != "pem":
        options["kafka.ssl.truststore.password"] = STORE_PASSWORD
    if declared:
        options["kafka.ssl.truststore.type"] = declared
    config = client(**options)
    assert config["ssl.ca.pem"].strip() == ca
    assert not any(k.startswith("ssl.truststore.") for k in config)


@pytest.mark.parametrize("kind, declared", [("p12", "PKCS12"), ("jks", None), ("jks", "JKS"), ("pem", "PEM")])
def test_a_keystore_becomes_inline_certificate_and_key_pem(stores: Tuple[pathlib.Path, str, str, bytes], kind: str,
                                                           declared: str | None) -> None:
    folder, ca, leaf, key_der = stores
    path = folder / f"keystore.{kind}"
    if not path.exists():
        pytest.skip("no keytool here to make a JKS store")
    options = {"kafka.security.protocol": "SSL", "kafka.ssl.keystore.location": str(path),
               "kafka.ssl.keystore.password": STORE_PASSWORD, "kafka.ssl.key.password": STORE_PASSWORD}
    if declared:
        options["kafka.ssl.keystore.type"] = declared
    config = client(**options)
    assert config["ssl.certificate.pem"].startswith(leaf)
    assert _key_der(config["ssl.key.pem"]) == key_der
    assert not any(k.startswith("ssl.keystore.") for k in config) and "ssl.key.password" not in config


def test_java_inline_pem_options_map(stores: Tuple[pathlib.Path, str, str, bytes]) -> None:
    folder, ca, leaf, _ = stores
    key_pem = (folder / "keystore.pem").read_text().split("-----BEGIN CERTIFICATE-----")[0]
    config = client(**{"kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.certificates": ca,
                       "kafka.ssl.keystore.type": "PEM", "kafka.ssl.keystore.certificate.chain": leaf,
                       "kafka.ssl.keystore.key": key_pem})
    assert (config["ssl.ca.pem"], config["ssl.certificate.pem"], config["ssl.key.pem"]) == (ca, leaf, key_pem)


def test_a_wrong_store_password_names_the_option_not_the_password(
        stores: Tuple[pathlib.Path, str, str, bytes]) -> None:
    folder = stores[0]
    for name in ("truststore.p12", "truststore.jks"):
        if not (folder / name).exists():
            continue
        with pytest.raises(ConfigError, match="'kafka.ssl.truststore.location' could not be read") as refused:
            client(**{"kafka.ssl.truststore.location": str(folder / name),
                       "kafka.ssl.truststore.password": "Wrong-Pw-123456"})
        assert "Wrong-Pw-123456" not in str(refused.value)


def test_a_store_is_read_again_only_once_it_changed(stores: Tuple[pathlib.Path, str, str, bytes],
                                                    tmp_path: pathlib.Path) -> None:
    folder, ca, _, _ = stores
    path = tmp_path / "ca.pem"
    path.write_text((folder / "ca.pem").read_text())
    assert client(**{"kafka.ssl.truststore.location": str(path)})["ssl.ca.pem"].strip() == ca
    path.write_text((folder / "keystore.pem").read_text())  # another certificate, another size
    assert client(**{"kafka.ssl.truststore.location": str(path)})["ssl.ca.pem"].strip() != ca


def test_a_missing_store_file_is_named() -> None:
    with pytest.raises(ConfigError, match="'kafka.ssl.keystore.location' names '/nowhere/k.jks', which cannot be read"):
        client(**{"kafka.ssl.keystore.location": "/nowhere/k.jks", "kafka.ssl.keystore.password": "x"})


def test_a_keystore_and_librdkafkas_key_are_refused_together(stores: Tuple[pathlib.Path, str, str, bytes]) -> None:
    with pytest.raises(ConfigError, match="both set 'ssl.key.location'"):
        client(**{"kafka.ssl.keystore.location": str(stores[0] / "keystore.p12"),
                   "kafka.ssl.keystore.password": STORE_PASSWORD, "kafka.ssl.key.location": "/etc/key.pem"})


def test_translated_settings_make_a_librdkafka_client(stores: Tuple[pathlib.Path, str, str, bytes]) -> None:
    """librdkafka accepts what the translation gives (a client without brokers connects nowhere)."""
    from confluent_kafka import Consumer

    folder = stores[0]
    config = client(**{"kafka.security.protocol": "SASL_SSL",
                       "kafka.sasl.jaas.config": f'{PLAIN} required username="a" password="b";',
                       "kafka.ssl.truststore.location": str(folder / "truststore.p12"),
                       "kafka.ssl.truststore.password": STORE_PASSWORD,
                       "kafka.ssl.keystore.location": str(folder / "keystore.p12"),
                       "kafka.ssl.keystore.password": STORE_PASSWORD,
                       "kafka.ssl.endpoint.identification.algorithm": ""})
    config.pop("bootstrap.servers")
    Consumer(config).close()


def test_the_docs_security_table_is_the_declared_one() -> None:
    from kafka_group.config.security import SECURITY_TABLE_BEGIN, SECURITY_TABLE_END, render_security_table

    page = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text(encoding="utf-8")
    block = page[page.index(SECURITY_TABLE_BEGIN) + len(SECURITY_TABLE_BEGIN):page.index(SECURITY_TABLE_END)]
    assert block.strip() == render_security_table(), "regenerate: python -m kafka_group.config.security"


def test_without_cryptography_a_pkcs12_store_names_the_extra(stores: Tuple[pathlib.Path, str, str, bytes],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka_group.config import keystores
    from kafka_group.errors import DependencyError

    keystores._read_truststore.cache_clear()  # a store read before is remembered
    for name in ("cryptography", "cryptography.hazmat.primitives", "cryptography.hazmat.primitives.serialization"):
        monkeypatch.setitem(__import__("sys").modules, name, None)
    with pytest.raises(DependencyError, match=r"pip install 'pyspark-kafka-group\[security\]'"):
        client(**{"kafka.ssl.truststore.location": str(stores[0] / "truststore.p12"),
                   "kafka.ssl.truststore.password": STORE_PASSWORD})
