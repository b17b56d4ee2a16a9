"""The registry client against the development registry (Apicurio) over TLS, with a client certificate.

Apicurio (Quarkus) serves its API over HTTPS on a second port, with a throwaway CA's certificate,
and asks for a client certificate the CA signed (the refusal of a request without one is
tested against Python's TLS server in tests/unit/test_registry_tls.py: this Apicurio answered it
anyway, with quarkus.http.ssl.client-auth=required); its plain port stays for registering the schema
and for the launcher's readiness check. One registry for the module (a JVM start is the cost).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
from typing import Dict, Iterator, Tuple

import pytest

from kafka_group.config.registry_options import parse_registry_options
from kafka_group.errors import SchemaRegistryError
from kafka_group.registry import client
from kafka_group_devbroker.schema_registry import SchemaRegistry, find_java
from kafka_group_devbroker.throwaway_ca import ThrowawayCA
from tests.registry_support import registry_client
from tests.support import unique_name

pytestmark = pytest.mark.integration

SCHEMA = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}})


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def tls_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tuple[SchemaRegistry, str, pathlib.Path]]:
    """The registry, its https:// Confluent API URL, and a folder with ca.pem, client.pem and client.key."""
    folder = tmp_path_factory.mktemp("registry-tls")
    ca = ThrowawayCA()
    server, alice = ca.issue("registry", hosts=["127.0.0.1", "localhost"]), ca.issue("alice")
    files = {"ca.pem": ca.certificate_pem, "server.pem": server.certificate_pem, "server.key": server.key_pem,
             "client.pem": alice.certificate_pem, "client.key": alice.key_pem}
    for name, text in files.items():
        (folder / name).write_text(text)
    keytool = str(pathlib.Path(find_java()).parent / "keytool")
    subprocess.run([keytool, "-importcert", "-noprompt", "-alias", "ca", "-file", str(folder / "ca.pem"),
                    "-keystore", str(folder / "trust.p12"), "-storetype", "PKCS12", "-storepass", "changeit"],
                   check=True, capture_output=True, timeout=120)
    port = _free_port()
    settings: Dict[str, str] = {
        "quarkus.http.ssl-port": str(port),
        "quarkus.http.ssl.certificate.files": str(folder / "server.pem"),
        "quarkus.http.ssl.certificate.key-files": str(folder / "server.key"),
        "quarkus.http.ssl.certificate.trust-store-file": str(folder / "trust.p12"),
        "quarkus.http.ssl.certificate.trust-store-password": "changeit",
        "quarkus.http.ssl.client-auth": "required",
    }
    registry = SchemaRegistry(settings=settings)
    try:
        registry.start()
        yield registry, f"https://127.0.0.1:{port}/apis/ccompat/v7", folder
    finally:
        registry.stop()


def _options(url: str, subject: str, **tls: str):  # type: ignore[no-untyped-def]
    opts = {"valueformat": "json", "schemaregistryaddress": url, "valuesubject": subject,
            "schemaregistry.max.retries": "0"}
    opts.update({f"schemaregistry.ssl.{k.replace('_', '.')}": v for k, v in tls.items()})
    return parse_registry_options(opts, ["t"])


def test_schema_by_id_and_by_subject_over_mutual_tls(tls_registry: Tuple[SchemaRegistry, str, pathlib.Path]) -> None:
    from confluent_kafka.schema_registry import Schema

    registry, https_url, folder = tls_registry
    subject = unique_name("tls") + "-value"
    schema_id = registry_client(registry.url).register_schema(subject, Schema(SCHEMA, "JSON"))
    client.clear_cache()
    opts = _options(https_url, subject, ca_location=str(folder / "ca.pem"),
                    certificate_location=str(folder / "client.pem"), key_location=str(folder / "client.key"))
    assert json.loads(client.schema_by_id(opts, schema_id).text) == json.loads(SCHEMA)
    assert client.schema_by_subject(opts, subject, "latest").schema_id == schema_id
    client.clear_cache()
    without_ca = _options(https_url, subject)
    with pytest.raises(SchemaRegistryError, match="schemaRegistry.ssl.ca.location"):
        client.schema_by_id(without_ca, schema_id)
