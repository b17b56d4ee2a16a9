"""The Schema Registry client against a hostile or misconfigured registry (review of issue 29).

Each test runs a small HTTP server in a thread on 127.0.0.1 (a real socket, real urllib; no
patching of the client's transport). Adapted from an adversarial review's tests.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterator, List, Optional, Tuple

import pyarrow as pa
import pytest

from kafka_group.errors import SchemaRegistryError
from kafka_group.registry import client
from kafka_group.registry.decoding import decode_batch, decoded_arrow_schema, plan_decoding
from kafka_group.registry.framing import frame
from kafka_group.registry.settings import RegistryOptions, SideDecoding

SCHEMA = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}})
PASSWORD = "s3cr3t-password"
Seen = List[Tuple[int, str, Optional[str]]]


@pytest.fixture
def seen() -> Iterator[Seen]:
    client.clear_cache()
    requests: Seen = []
    yield requests
    client.clear_cache()


@pytest.fixture
def serve(seen: Seen) -> Iterator[Callable[[Callable[[BaseHTTPRequestHandler], None]], int]]:
    servers: List[ThreadingHTTPServer] = []

    def start(answer: Callable[[BaseHTTPRequestHandler], None]) -> int:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                seen.append((int(getattr(self.server, "server_port")), self.path, self.headers.get("Authorization")))
                answer(self)

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return int(server.server_address[1])

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def send(h: BaseHTTPRequestHandler, code: int, body: bytes) -> None:
    h.send_response(code)
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


def schema_doc(h: BaseHTTPRequestHandler) -> None:
    send(h, 200, json.dumps({"schema": SCHEMA, "schemaType": "JSON"}).encode())


def test_a_redirect_is_refused_and_sends_no_credentials_to_its_target(serve, seen: Seen) -> None:  # type: ignore[no-untyped-def]
    other = serve(schema_doc)
    port = serve(lambda h: (h.send_response(302), h.send_header("Location", f"http://localhost:{other}/steal"),
                            h.end_headers()))
    opts = RegistryOptions(url=f"http://127.0.0.1:{port}", key=None, value=None, user_info=f"alice:{PASSWORD}")
    with pytest.raises(SchemaRegistryError, match="redirect") as excinfo:
        client.schema_by_id(opts, 1)
    message = str(excinfo.value)
    assert f"http://localhost:{other}/steal" in message and "schemaRegistryAddress" in message
    assert PASSWORD not in message
    assert [p for p, _, _ in seen] == [port], "the redirect target was asked (with the credentials)"


def test_a_404_without_confluents_unknown_code_is_a_registry_error_not_an_unknown_id(serve, seen: Seen) -> None:  # type: ignore[no-untyped-def]
    def answer(h: BaseHTTPRequestHandler) -> None:
        if "/ids/5" in h.path:
            send(h, 404, json.dumps({"error_code": 40403, "message": "Schema 5 not found"}).encode())
        else:  # a wrong path: a proxy's or the server's own 404
            send(h, 404, b"<html>Not Found</html>")
    port = serve(answer)
    opts = RegistryOptions(url=f"http://127.0.0.1:{port}", key=None, value=None)
    with pytest.raises(client.UnknownSchemaId):
        client.schema_by_id(opts, 5)
    with pytest.raises(SchemaRegistryError, match=r"schemaRegistryAddress.*/apis/ccompat/v7") as excinfo:
        client.schema_by_id(opts, 6)
    assert excinfo.value.retriable and f"http://127.0.0.1:{port}/schemas/ids/6" in str(excinfo.value)


def test_unknown_ids_are_remembered_for_a_while_and_capped_per_batch(serve, seen: Seen) -> None:  # type: ignore[no-untyped-def]
    port = serve(lambda h: send(h, 404, json.dumps({"error_code": 40403, "message": "not found"}).encode()))
    opts = RegistryOptions(url=f"http://127.0.0.1:{port}", key=None,
                           value=SideDecoding("value", "JSON", None, "latest", SCHEMA), quarantine=True)
    plan = plan_decoding(opts)
    n = 200
    raw = pa.RecordBatch.from_pydict({
        "key": pa.array([None] * n, pa.binary()),
        "value": pa.array([frame(1000 + i, b'{"a":1}') for i in range(n)], pa.binary()),
        "topic": ["t"] * n, "partition": pa.array([0] * n, pa.int32()), "offset": pa.array(range(n), pa.int64())})
    schema = decoded_arrow_schema(raw.schema, plan)
    first = decode_batch(raw, plan, schema)
    asked = len(seen)
    second = decode_batch(raw, plan, schema)
    assert len(seen) == asked, f"the second batch asked the registry again: {len(seen) - asked} requests"
    assert asked <= client.MAX_UNKNOWN_LOOKUPS_PER_BATCH < n, f"{asked} requests for {n} hostile ids"
    for out in (first, second):
        assert out.column("value").null_count == n
        assert all("schema id" in e for e in out.column("value_error").to_pylist())


def test_shared_references_are_fetched_once_and_their_number_is_capped(serve, seen: Seen, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    depth = 8

    def answer(h: BaseHTTPRequestHandler) -> None:
        # /schemas/ids/1 -> references L0a, L0b; /subjects/L{k}{x}/versions/1 -> L{k+1}a, L{k+1}b
        level = 0 if h.path.startswith("/schemas/ids/") else int(h.path.split("/")[2][1:-1]) + 1
        refs = [] if level >= depth else [
            {"name": f"L{level}{x}.json", "subject": f"L{level}{x}", "version": 1} for x in "ab"]
        send(h, 200, json.dumps({"schema": SCHEMA, "schemaType": "JSON", "id": 1, "references": refs}).encode())
    port = serve(answer)
    opts = RegistryOptions(url=f"http://127.0.0.1:{port}", key=None, value=None)
    client.schema_by_id(opts, 1)
    assert len(seen) == 2 * depth + 1, f"{len(seen)} requests for {2 * depth} distinct references"
    client.clear_cache()
    monkeypatch.setattr(client, "MAX_REFERENCES", 10, raising=False)
    with pytest.raises(SchemaRegistryError, match="more than 10 references"):
        client.schema_by_id(opts, 2)


def test_a_response_is_read_up_to_a_limit_and_within_one_deadline(serve, seen: Seen, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    def answer(h: BaseHTTPRequestHandler) -> None:
        if "/ids/1" in h.path:  # a large answer
            send(h, 200, json.dumps({"schema": SCHEMA, "pad": "x" * 5000}).encode())
            return
        h.send_response(200)  # a slow one: a byte every 50 ms, each read well within the socket timeout
        h.send_header("Content-Length", "60")
        h.end_headers()
        try:
            for _ in range(60):
                h.wfile.write(b" ")
                h.wfile.flush()
                time.sleep(0.05)
        except OSError:
            pass
    port = serve(answer)
    opts = RegistryOptions(url=f"http://127.0.0.1:{port}", key=None, value=None)
    monkeypatch.setattr(client, "MAX_RESPONSE_BYTES", 1000, raising=False)
    with pytest.raises(SchemaRegistryError, match="more than 1000 bytes"):
        client.schema_by_id(opts, 1)
    monkeypatch.setattr(client, "TIMEOUT_S", 0.5)
    with pytest.raises(SchemaRegistryError, match=r"did not answer .* within 0\.5 s"):
        client.schema_by_id(opts, 2)
