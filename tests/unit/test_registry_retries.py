"""The registry client retries what may pass (unreachable, HTTP 429 and 5xx, no answer in time) within
the lookup's one deadline, and nothing else (a redirect, a refusal, an unknown id, an oversized answer).

A real HTTP server in a thread on 127.0.0.1 counts the requests; no patching of the transport.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator, List

import pytest

from kafka_group.config.registry_options import parse_registry_options
from kafka_group.errors import AuthenticationError, ConfigError, SchemaRegistryError
from kafka_group.registry import client

SCHEMA = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}})


class Registry:
    """Answers each request with the next status of ``statuses`` (200 with the schema when they run out; 0: no
    answer, the connection closed)."""

    def __init__(self) -> None:
        self.statuses: List[int] = []
        self.requests = 0
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                registry.requests += 1
                status = registry.statuses.pop(0) if registry.statuses else 200
                if status == 0:  # the connection closed with no answer (a registry restarting or overloaded)
                    self.close_connection = True
                    return
                body = (json.dumps({"schema": SCHEMA, "schemaType": "JSON"}) if status == 200
                        else json.dumps({"error_code": status * 100 + 3 if status == 404 else status,
                                         "message": "no"})).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture()
def registry() -> Iterator[Registry]:
    client.clear_cache()
    served = Registry()
    try:
        yield served
    finally:
        served.server.shutdown()
        served.server.server_close()
        client.clear_cache()


def _options(url: str, **extra: str):  # type: ignore[no-untyped-def]
    opts = {"valueformat": "json", "schemaregistryaddress": url, "valuesubject": "s",
            "schemaregistry.retries.wait.ms": "1"}
    opts.update({k.lower(): v for k, v in extra.items()})
    return parse_registry_options(opts, ["t"])


def test_a_registry_that_fails_twice_is_asked_again(registry: Registry) -> None:
    registry.statuses = [503, 429]
    assert client.schema_by_id(_options(registry.url), 1).text == SCHEMA
    assert registry.requests == 3


def test_retries_stop_at_the_configured_count(registry: Registry) -> None:
    registry.statuses = [500, 500, 500]
    with pytest.raises(SchemaRegistryError, match=r"HTTP 500.*schemaRegistry\.max\.retries"):
        client.schema_by_id(_options(registry.url, **{"schemaRegistry.max.retries": "1"}), 1)
    assert registry.requests == 2


@pytest.mark.parametrize("status, error", [(401, AuthenticationError), (400, SchemaRegistryError)])
def test_a_refusal_is_not_retried(registry: Registry, status: int, error: type) -> None:
    registry.statuses = [status]
    with pytest.raises(error):
        client.schema_by_id(_options(registry.url), 1)
    assert registry.requests == 1


def test_retry_options_are_checked() -> None:
    with pytest.raises(ConfigError, match="schemaRegistry.max.retries"):
        _options("http://r:1", **{"schemaRegistry.max.retries": "-1"})


def test_a_connection_closed_with_no_answer_is_asked_again(registry: Registry) -> None:
    """Seen from Apicurio under CI's load: 'Remote end closed connection without response' on a GET."""
    registry.statuses = [0]
    assert client.schema_by_id(_options(registry.url), 1).text == SCHEMA
    assert registry.requests == 2
