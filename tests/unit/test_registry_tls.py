"""The Schema Registry client over TLS: a private CA, and a client certificate (mutual TLS).

An HTTPS server in a thread on 127.0.0.1 with a throwaway CA's certificate, asking for a client
certificate (a real socket and handshake; no patching of the client's transport).
"""

from __future__ import annotations

import json
import pathlib
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator, Tuple

import pytest

from kafka_group.config.registry_options import parse_registry_options
from kafka_group.errors import ConfigError, SchemaRegistryError
from kafka_group.registry import client
from kafka_group_devbroker.throwaway_ca import ThrowawayCA

SCHEMA = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}})


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        body = json.dumps({"schema": SCHEMA, "schemaType": "JSON"}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def tls_registry(tmp_path: pathlib.Path) -> Iterator[Tuple[str, pathlib.Path]]:
    """``(https URL, folder holding ca.pem, client.pem, client.key)`` of a registry that requires a client certificate."""
    client.clear_cache()
    ca = ThrowawayCA()
    server_cert, alice = ca.issue("registry", hosts=["127.0.0.1", "localhost"]), ca.issue("alice")
    for name, text in (("ca.pem", ca.certificate_pem), ("server.pem", server_cert.certificate_pem),
                       ("server.key", server_cert.key_pem), ("client.pem", alice.certificate_pem),
                       ("client.key", alice.key_pem)):
        (tmp_path / name).write_text(text)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(tmp_path / "ca.pem"))
    context.load_cert_chain(str(tmp_path / "server.pem"), str(tmp_path / "server.key"))
    context.verify_mode = ssl.CERT_REQUIRED
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", tmp_path
    finally:
        server.shutdown()
        server.server_close()
        client.clear_cache()


def _options(url: str, **tls: str):  # type: ignore[no-untyped-def]
    opts = {"valueformat": "json", "schemaregistryaddress": url, "valuesubject": "s"}
    opts.update({f"schemaregistry.ssl.{k.replace('_', '.')}": v for k, v in tls.items()})
    return parse_registry_options(opts, ["t"])


def test_a_private_ca_and_a_client_certificate_reach_the_registry(tls_registry: Tuple[str, pathlib.Path]) -> None:
    url, folder = tls_registry
    registry = _options(url, ca_location=str(folder / "ca.pem"), certificate_location=str(folder / "client.pem"),
                        key_location=str(folder / "client.key"))
    assert client.schema_by_id(registry, 1).text == SCHEMA


def test_without_the_ca_the_error_names_the_option(tls_registry: Tuple[str, pathlib.Path]) -> None:
    url, folder = tls_registry
    registry = _options(url, certificate_location=str(folder / "client.pem"), key_location=str(folder / "client.key"))
    with pytest.raises(SchemaRegistryError, match="schemaRegistry.ssl.ca.location"):
        client.schema_by_id(registry, 1)


def test_without_a_client_certificate_the_error_names_the_option(tls_registry: Tuple[str, pathlib.Path]) -> None:
    url, folder = tls_registry
    registry = _options(url, ca_location=str(folder / "ca.pem"))
    with pytest.raises(SchemaRegistryError, match="schemaRegistry.ssl.certificate.location"):
        client.schema_by_id(registry, 1)


def test_a_key_without_its_certificate_is_refused(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ConfigError, match="schemaRegistry.ssl.certificate.location"):
        _options("https://r:1", key_location=str(tmp_path / "client.key"))
