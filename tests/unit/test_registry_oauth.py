"""OAuth client credentials for the Schema Registry: a token from the issuer's endpoint, reused until
it nears its expiry, fetched anew when it expires or the registry refuses it; the secret never shown.

Two real HTTP servers in threads on 127.0.0.1 (the issuer and the registry); no patching.
"""

from __future__ import annotations

import base64
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, Iterator, List

import pytest

from kafka_group.config.registry_options import parse_registry_options
from kafka_group.errors import AuthenticationError, ConfigError
from kafka_group.registry import client

SCHEMA = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}})
SECRET = "Client-Secret-Canary-31337"


class Servers:
    def __init__(self) -> None:
        self.token_requests: List[Dict[str, str]] = []
        self.expires_in = 3600
        self.token_status = 200
        self.seen_tokens: List[str] = []
        self.refuse_tokens: set[str] = set()
        self._servers: List[ThreadingHTTPServer] = []
        self.issuer = self._serve(self._token)
        self.registry = self._serve(self._schema)

    def _serve(self, answer: Callable[[BaseHTTPRequestHandler], None]) -> str:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                answer(self)

            def do_POST(self) -> None:  # noqa: N802
                answer(self)

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self._servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, doc: Any) -> None:
        body = json.dumps(doc).encode()
        h.send_response(status)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def _token(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        form = dict(urllib.parse.parse_qsl(h.rfile.read(length).decode()))
        form["authorization"] = h.headers.get("Authorization") or ""
        self.token_requests.append(form)
        if self.token_status != 200:
            self._send(h, self.token_status, {"error": "invalid_client"})
            return
        self._send(h, 200, {"access_token": f"tok-{len(self.token_requests)}", "token_type": "Bearer",
                            "expires_in": self.expires_in})

    def _schema(self, h: BaseHTTPRequestHandler) -> None:
        token = (h.headers.get("Authorization") or "").removeprefix("Bearer ")
        self.seen_tokens.append(token)
        if not token.startswith("tok-") or token in self.refuse_tokens:
            self._send(h, 401, {"error_code": 40101, "message": "unauthorized"})
            return
        self._send(h, 200, {"schema": SCHEMA, "schemaType": "JSON"})

    def close(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()


@pytest.fixture()
def servers() -> Iterator[Servers]:
    client.clear_cache()
    running = Servers()
    try:
        yield running
    finally:
        running.close()
        client.clear_cache()


def _options(servers: Servers, **extra: str):  # type: ignore[no-untyped-def]
    opts = {"valueformat": "json", "schemaregistryaddress": servers.registry, "valuesubject": "s",
            "schemaregistry.bearer.auth.issuer.endpoint.url": servers.issuer + "/token",
            "schemaregistry.bearer.auth.client.id": "spark-job", "schemaregistry.bearer.auth.client.secret": SECRET,
            "schemaregistry.bearer.auth.scope": "registry.read", "schemaregistry.max.retries": "0"}
    opts.update({k.lower(): v for k, v in extra.items()})
    return parse_registry_options(opts, ["t"])


def test_a_token_is_fetched_with_client_credentials_and_reused(servers: Servers) -> None:
    opts = _options(servers)
    assert client.schema_by_id(opts, 1).text == SCHEMA
    assert client.schema_by_id(opts, 2).text == SCHEMA
    assert len(servers.token_requests) == 1 and servers.seen_tokens == ["tok-1", "tok-1"]
    request = servers.token_requests[0]
    assert request["grant_type"] == "client_credentials" and request["scope"] == "registry.read"
    assert request["authorization"] == "Basic " + base64.b64encode(f"spark-job:{SECRET}".encode()).decode()


def test_a_token_near_its_expiry_is_refreshed(servers: Servers) -> None:
    servers.expires_in = 5  # less than the refresh margin: each request fetches a new one
    opts = _options(servers)
    client.schema_by_id(opts, 1)
    client.schema_by_id(opts, 2)
    assert servers.seen_tokens == ["tok-1", "tok-2"]


def test_a_refused_token_is_replaced_once(servers: Servers) -> None:
    servers.refuse_tokens = {"tok-1"}
    assert client.schema_by_id(_options(servers), 1).text == SCHEMA
    assert servers.seen_tokens == ["tok-1", "tok-2"]


def test_a_refused_client_names_the_options_and_hides_the_secret(servers: Servers) -> None:
    servers.token_status = 401
    with pytest.raises(AuthenticationError, match="schemaRegistry.bearer.auth.client.id") as excinfo:
        client.schema_by_id(_options(servers), 1)
    assert SECRET not in str(excinfo.value)


def test_oauth_options_are_checked_together(servers: Servers) -> None:
    with pytest.raises(ConfigError, match="schemaRegistry.bearer.auth.client.secret"):
        parse_registry_options({"valueformat": "json", "schemaregistryaddress": servers.registry, "valuesubject": "s",
                                "schemaregistry.bearer.auth.issuer.endpoint.url": servers.issuer,
                                "schemaregistry.bearer.auth.client.id": "spark-job"}, ["t"])
    with pytest.raises(ConfigError, match="schemaRegistry.bearer.auth.token"):
        _options(servers, **{"schemaRegistry.bearer.auth.token": "static"})


def test_a_wrong_secret_is_not_handed_the_token_of_the_right_one(servers: Servers) -> None:
    client.schema_by_id(_options(servers), 1)
    servers.token_status = 401
    with pytest.raises(AuthenticationError):
        client.schema_by_id(_options(servers, **{"schemaregistry.bearer.auth.client.secret": "Wrong-Secret-999"}), 2)
    assert len(servers.token_requests) == 2
