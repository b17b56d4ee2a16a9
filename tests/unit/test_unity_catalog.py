"""The Unity Catalog client (kafka_group.delta.storage.unity_catalog) against servers of the tests' own on 127.0.0.1.

One deadline bounds a whole ``resolve()``, however slowly the server answers; the token and the
credentials show in no ``repr``, ``str``, error or log line; a token never goes over plain
``http://`` to a host other than loopback unless the caller says so.
"""

from __future__ import annotations

import http.server
import json
import logging
import socket
import threading
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from kafka_group.delta.storage.unity_catalog import UnityCatalog
from kafka_group.errors import ConfigError, OffsetStoreError

TOKEN = "dapi-tok-secret-4711"
SECRET_KEY = "aws-secret-key-0815"


class _Trickle:
    """A server on 127.0.0.1 that answers every request a byte a second (at most ``limit`` bytes,
    then it closes): in its status line and headers (``where="headers"``) or in its body."""

    def __init__(self, where: str, limit: int = 20) -> None:
        self.where, self.limit = where, limit
        self.stop = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.listener.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(5)
                try:
                    request = b""
                    while b"\r\n\r\n" not in request:
                        chunk = conn.recv(4096)
                        if not chunk:
                            break
                        request += chunk
                    if self.where == "body":
                        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
                    else:
                        conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                    for _ in range(self.limit):
                        if self.stop.wait(1.0):
                            break
                        conn.sendall(b" ")
                except OSError:  # the client gave up and closed
                    pass

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        self.listener.close()


@pytest.mark.parametrize("where", ["headers", "body"])
def test_a_catalog_that_answers_a_byte_a_second_fails_at_the_deadline(where: str) -> None:
    server = _Trickle(where)
    try:
        catalog = UnityCatalog(f"http://127.0.0.1:{server.port}", token=TOKEN, timeout_s=2)
        with pytest.raises(OffsetStoreError) as err:
            catalog.resolve("main.sales.orders")
    finally:
        server.close()
    message = str(err.value)
    assert f"Unity Catalog at http://127.0.0.1:{server.port}" in message, message
    assert "within 2 s" in message and "timeout_s" in message, message
    assert TOKEN not in message


class _Catalog(http.server.BaseHTTPRequestHandler):
    """The two calls of the Unity Catalog API, answered as the open-source server answers them."""

    seen: List[Tuple[str, str, Optional[str]]] = []
    status = 200

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.seen.append(("GET", self.path, self.headers.get("Authorization")))
        self._answer({"table_id": "t-1", "storage_location": "s3://lake/orders", "data_source_format": "DELTA"})

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.seen.append(("POST", self.path, self.headers.get("Authorization")))
        self._answer({"aws_temp_credentials": {"access_key_id": "AKIA1", "secret_access_key": SECRET_KEY,
                                               "session_token": "session-tok-0042"}, "expiration_time": 1})

    def _answer(self, doc: Dict[str, Any]) -> None:
        body = json.dumps(doc if self.status == 200 else {"error_code": "PERMISSION_DENIED"}).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def catalog_server() -> Iterator[http.server.HTTPServer]:
    _Catalog.seen, _Catalog.status = [], 200
    server = http.server.HTTPServer(("127.0.0.1", 0), _Catalog)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(30)


def test_resolves_a_table_and_shows_no_secret_in_repr_errors_or_debug_logs(
        catalog_server: http.server.HTTPServer, caplog: pytest.LogCaptureFixture) -> None:
    uri = f"http://127.0.0.1:{catalog_server.server_port}"
    catalog = UnityCatalog(uri, token=TOKEN, timeout_s=10)
    assert TOKEN not in repr(catalog) and TOKEN not in str(catalog)
    with caplog.at_level(logging.DEBUG):
        resolved = catalog.resolve("main.sales.orders")
        _Catalog.status = 403
        with pytest.raises(OffsetStoreError, match="HTTP 403 .PERMISSION_DENIED.") as err:
            catalog.resolve("main.sales.orders")
    assert resolved.location == "s3://lake/orders" and resolved.storage_options["AWS_SECRET_ACCESS_KEY"] == SECRET_KEY
    assert _Catalog.seen[:2] == [("GET", "/api/2.1/unity-catalog/tables/main.sales.orders", f"Bearer {TOKEN}"),
                                 ("POST", "/api/2.1/unity-catalog/temporary-table-credentials", f"Bearer {TOKEN}")]
    shown = [repr(catalog), str(catalog), str(err.value), repr(err.value), repr(resolved), caplog.text]
    for secret in (TOKEN, SECRET_KEY, "session-tok-0042"):
        assert not any(secret in text for text in shown), secret


@pytest.mark.parametrize("uri", ["https://user:pass-secret-99@uc.example.com/", "http://user:pass-secret-99@127.0.0.1:1"])
def test_an_address_with_a_password_is_refused_without_showing_it(uri: str) -> None:
    with pytest.raises(ConfigError, match="user name or password.*token=") as err:
        UnityCatalog(uri)
    assert "pass-secret-99" not in str(err.value) and "pass-secret-99" not in repr(err.value)


@pytest.mark.parametrize("uri", ["http://catalog.example.com", "http://10.0.0.7:8080/", "http://127.0.0.1.nip.io"])
def test_a_token_over_plain_http_off_loopback_is_refused_before_any_connection(uri: str) -> None:
    # refused when it is made: nothing connects (no socket to these hosts can be opened here anyway)
    with pytest.raises(ConfigError, match="token.*plain http.*https://.*allow_plain_http=True") as err:
        UnityCatalog(uri, token=TOKEN)
    assert TOKEN not in str(err.value)
    assert UnityCatalog(uri, token=TOKEN, allow_plain_http=True).uri == uri.rstrip("/")  # the caller's choice


@pytest.mark.parametrize("uri", ["http://127.0.0.1:8080", "http://localhost:8080", "http://[::1]:8080",
                                 "http://127.0.0.2", "https://uc.example.com"])
def test_a_token_goes_over_https_or_to_loopback(uri: str) -> None:
    assert UnityCatalog(uri, token=TOKEN).uri == uri


def test_plain_http_off_loopback_without_a_token_is_taken_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kafka_group.delta.storage.unity_catalog"):
        UnityCatalog("http://catalog.example.com")
    assert "unencrypted" in caplog.text


@pytest.mark.parametrize("uri", [TOKEN, "ftp://uc.example.com", "https://uc.example.com/?token=" + TOKEN,
                                 "https://:99999999"])
def test_what_is_not_a_servers_address_is_refused_without_echoing_it(uri: str) -> None:
    with pytest.raises(ConfigError, match="UnityCatalog.uri=.... must be") as err:
        UnityCatalog(uri)
    assert TOKEN not in str(err.value)
