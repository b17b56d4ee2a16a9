"""The registry client against a hostile Schema Registry over TCP (issue 33, findings 10, 12 and 13).

The server is ours (:mod:`tests.hostile_registry`), the client is the connector's, unpatched but for
its bounds (a 1 s deadline and small sizes, so that a test of them ends soon). Every hostile answer
ends in a :class:`~kafka_group.errors.SchemaRegistryError` that names the registry and what was
wrong, never in another exception, never in a hang, and never shows the credentials.
"""

from __future__ import annotations

import base64
import json
import logging
import ssl
import threading
import traceback
from typing import Any, Callable, Dict, Iterator, Sequence, TypeVar

import pyarrow as pa
import pytest

from kafka_group.config.options import parse_source_options
from kafka_group_devbroker.throwaway_ca import ThrowawayCA
from kafka_group.errors import AuthenticationError, RecordError, SchemaRegistryError, SchemaRegistryUnavailable
from kafka_group.registry import client
from kafka_group.registry.decoding import decode_batch, decoded_arrow_schema, plan_decoding
from kafka_group.registry.framing import frame
from kafka_group.registry.settings import RegistryOptions, SideDecoding
from tests.hostile_registry import (
    HostileRegistry,
    answer,
    chunked_trailers,
    echo_headers,
    raw,
    schema_doc,
    trickle_headers,
)

pytestmark = pytest.mark.integration

T = TypeVar("T")
USER, PASSWORD = "alice", "Hostile-Echo-Pa55word-19"
TOKEN = "Hostile-Echo-Bearer-Token-4242"
SCHEMA = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}})
#: The longest a call may take before the test calls it a hang (a guard; the client's deadline is 1 s).
GUARD_S = 30.0


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    client.clear_cache()
    monkeypatch.setattr(client, "TIMEOUT_S", 1.0)
    yield
    client.clear_cache()


def options(server: HostileRegistry, **auth: str) -> RegistryOptions:
    """The registry options as the connector parses them (its secrets registered for scrubbing). A retried request
    (a timed-out or 5xx answer) waits 10 ms before its next attempt, not 1 s doubled: the same attempts, 7 s of
    waiting less per test that is refused to the end."""
    opts = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t", "kafka.group.id": "g", "valueformat": "json",
            "schemaregistryaddress": server.url, "schemaRegistry.retries.wait.ms": "10", **auth}
    parsed = parse_source_options(opts)
    assert parsed.registry is not None
    return parsed.registry


def ended(call: Callable[[], T]) -> T:
    """``call()`` in a thread: its result or error, or a failure when it is still running after :data:`GUARD_S`."""
    box: Dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test as it is
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(GUARD_S)
    assert not thread.is_alive(), f"the client was still reading the registry's answer after {GUARD_S:g} s"
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


# Finding 10: one deadline for the whole exchange, every byte counted.

def test_trickled_response_headers_end_at_the_deadline(hostile_registry: HostileRegistry) -> None:
    hostile_registry.on("/schemas/ids/1", trickle_headers(0.05))
    with pytest.raises(SchemaRegistryError, match=r"did not answer .*/schemas/ids/1 within 1 s") as excinfo:
        ended(lambda: client.schema_by_id(options(hostile_registry), 1))
    assert hostile_registry.url in str(excinfo.value)


def test_endless_chunked_trailers_are_counted_against_the_size_limit(hostile_registry: HostileRegistry,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client, "TIMEOUT_S", 600.0)  # the size, not the deadline, must end it
    monkeypatch.setattr(client, "MAX_RESPONSE_BYTES", 100_000)
    hostile_registry.on("/schemas/ids/1", chunked_trailers(schema_doc(SCHEMA, "JSON")))
    with pytest.raises(SchemaRegistryError, match="more than 100000 bytes"):
        ended(lambda: client.schema_by_id(options(hostile_registry), 1))


def test_slow_chunked_trailers_end_at_the_deadline(hostile_registry: HostileRegistry) -> None:
    hostile_registry.on("/schemas/ids/1", chunked_trailers(schema_doc(SCHEMA, "JSON"), line_bytes=16,
                                                           lines=10**9, interval_s=0.05))
    with pytest.raises(SchemaRegistryError, match="within 1 s"):
        ended(lambda: client.schema_by_id(options(hostile_registry), 1))


def test_a_lookup_stuck_on_a_trickling_registry_releases_the_ids_lock(hostile_registry: HostileRegistry) -> None:
    hostile_registry.on("/schemas/ids/7", trickle_headers(0.05))
    # One attempt per lookup (the client retries a timed-out answer within its deadline; not what this checks)
    opts = options(hostile_registry, **{"schemaRegistry.max.retries": "0"})
    errors: Dict[int, BaseException] = {}

    def look(n: int) -> None:
        try:
            client.schema_by_id(opts, 7)
        except BaseException as exc:  # noqa: BLE001
            errors[n] = exc
    def all_three() -> None:
        threads = [threading.Thread(target=look, args=(n,)) for n in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    ended(all_three)
    assert len(errors) == 3 and all(isinstance(e, SchemaRegistryError) for e in errors.values()), errors
    # the threads that waited for the failed lookup share its failure instead of each paying the deadline again
    assert len(hostile_registry.requests) == 1, [r.path for r in hostile_registry.requests]


@pytest.mark.parametrize("url", ["file:///etc", "ftp://127.0.0.1", "data:,{}"])
def test_only_http_and_https_are_asked(url: str) -> None:
    with pytest.raises(SchemaRegistryError, match="http:// or https://"):
        client.schema_by_id(RegistryOptions(url=url, key=None, value=None), 1)


# Finding 12: what leaves the process is scrubbed in every form.

@pytest.mark.parametrize("status", [500, 404, 401, 400])
@pytest.mark.parametrize("auth", ["basic", "bearer"])
def test_an_echoed_authorization_header_never_shows(hostile_registry: HostileRegistry, status: int, auth: str,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    creds = ({"schemaregistry.basic.auth.user.info": f"{USER}:{PASSWORD}"} if auth == "basic"
             else {"schemaregistry.bearer.auth.token": TOKEN})
    opts = options(hostile_registry, **creds)
    hostile_registry.on("*", echo_headers(status))
    caplog.set_level(logging.DEBUG)
    # each status is the connector's own error for it, not just any exception (a crash would not do)
    expected_error = {500: SchemaRegistryUnavailable, 404: SchemaRegistryError, 401: AuthenticationError,
                      400: SchemaRegistryError}[status]
    with pytest.raises(expected_error) as excinfo:
        ended(lambda: client.schema_by_subject(opts, "t-value", "latest"))
    sent = hostile_registry.requests[0].header("Authorization")
    assert sent is not None and sent.split(" ", 1)[1] in hostile_registry.requests[0].head.decode()
    shown = "\n".join([str(excinfo.value), repr(excinfo.value), caplog.text,
                       "".join(traceback.format_exception(excinfo.value))])
    encoded = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    # a prefix past 'alice:' (8 characters) is part of the password: shortening before scrubbing showed one
    secret_forms = [PASSWORD, TOKEN, encoded, encoded[:12], TOKEN[:12], sent]
    for form in secret_forms:
        assert form not in shown, f"{form!r} shows in:\n{shown}"
    assert "***" in shown or status in (401, 404)  # 401 shows no body, 404 only its first 120 characters


def test_a_json_escaped_echo_of_the_basic_header_never_shows(hostile_registry: HostileRegistry) -> None:
    user_info = f"{USER}:{PASSWORD}?>>"  # base64 with '/' and '+': JSON writers may escape the '/'
    encoded = base64.b64encode(user_info.encode()).decode()
    assert "/" in encoded or "+" in encoded
    opts = options(hostile_registry, **{"schemaregistry.basic.auth.user.info": user_info})
    hostile_registry.on("*", answer(500, '{"message": "you sent Basic ' + encoded.replace("/", "\\/") + '"}'))
    with pytest.raises(SchemaRegistryError) as excinfo:
        ended(lambda: client.schema_by_id(opts, 1))
    assert encoded not in str(excinfo.value) and encoded.replace("/", "\\/") not in str(excinfo.value)


# Finding 13: every hostile answer is a SchemaRegistryError naming the registry and what was wrong.

def _ref(**fields: Any) -> Dict[str, Any]:
    return schema_doc(SCHEMA, "JSON", references=[{"name": "a.json", "subject": "a", "version": 1, **fields}])


HOSTILE_ANSWERS = {
    "garbage status line": raw(b"garbage\r\n\r\n"),
    "empty answer": raw(b""),
    "HTTP/0.9 status": raw(b"HTTP/0.9 200 OK\r\n\r\n{}"),
    "status out of range": raw(b"HTTP/1.1 9999 OK\r\n\r\n{}"),
    "header line over 64 KiB": raw(b"HTTP/1.1 200 OK\r\nX: " + b"x" * 70000 + b"\r\n\r\n"),
    "200 headers": raw(b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 200 + b"\r\n{}"),
    "cut body": raw(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{}"),
    "bad chunk size": raw(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"),
    "huge content length": raw(b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n{}"),
    "deeply nested JSON": answer(200, "[" * 100_000 + "]" * 100_000),
    "nested JSON error body": answer(500, "[" * 100_000),
    "not UTF-8": answer(200, b"\xff\xfe\xfa{"),
    "a number of 5000 digits": answer(200, '{"schema": "{}", "id": ' + "9" * 5000 + "}"),
    "JSON null": answer(200, "null"),
    "schema not a string": answer(200, {"schema": {"type": "object"}}),
    "references not a list": answer(200, {"schema": SCHEMA, "schemaType": "JSON", "references": 5}),
    "references an object": answer(200, {"schema": SCHEMA, "schemaType": "JSON", "references": {"a": 1}}),
    "schemaType not a string": answer(200, {"schema": SCHEMA, "schemaType": ["JSON"]}),
    "unknown schemaType": answer(200, {"schema": SCHEMA, "schemaType": "XML"}),
    "superscript version": answer(200, _ref(version="²")),
    "arabic-indic version": answer(200, _ref(version="٣")),
    "5000-digit version": answer(200, _ref(version="9" * 5000)),
    "negative version": answer(200, _ref(version=-1)),
    "zero version": answer(200, _ref(version=0)),
    "boolean version": answer(200, _ref(version=True)),
    "float version": answer(200, _ref(version=1.5)),
    "version latest": answer(200, _ref(version="latest")),
    "no subject": answer(200, schema_doc(SCHEMA, "JSON", references=[{"name": "a", "version": 1}])),
    "subject not a string": answer(200, _ref(subject=["a"])),
    "name not a string": answer(200, _ref(name={"x": 1})),
    "NUL in subject": answer(200, _ref(subject="a\x00b")),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_ANSWERS))
def test_a_hostile_answer_is_a_registry_error(hostile_registry: HostileRegistry, name: str) -> None:
    hostile_registry.on("/schemas/ids/1", HOSTILE_ANSWERS[name])
    with pytest.raises(SchemaRegistryError) as excinfo:
        ended(lambda: client.schema_by_id(options(hostile_registry, **{
            "schemaregistry.basic.auth.user.info": f"{USER}:{PASSWORD}"}), 1))
    message = str(excinfo.value)
    assert hostile_registry.url in message, message
    assert PASSWORD not in message


def test_a_hostile_answer_to_a_subject_is_a_registry_error(hostile_registry: HostileRegistry) -> None:
    hostile_registry.on("/subjects/*", answer(200, "[" * 100_000))
    with pytest.raises(SchemaRegistryError, match="nested more than"):
        ended(lambda: client.schema_by_subject(options(hostile_registry), "t-value", "latest"))


@pytest.mark.parametrize("subject", ["../../schemas/ids/1", "a/b", "a?b=c", "..", ".", "a#b", "a b%2F"])
def test_a_hostile_reference_subject_stays_one_path_segment(hostile_registry: HostileRegistry, subject: str) -> None:
    hostile_registry.add_schema(1, schema_doc(SCHEMA, "JSON", references=[
        {"name": "r.json", "subject": subject, "version": 1}]))
    hostile_registry.add_version(subject, 1, schema_doc(SCHEMA, "JSON"))
    found = ended(lambda: client.schema_by_id(options(hostile_registry), 1))
    assert [r.subject for r in found.references] == [subject]
    asked = hostile_registry.requests[1].path
    assert asked.startswith("/subjects/") and asked.endswith("/versions/1") and asked.count("/") == 4, asked
    assert "?" not in asked and "#" not in asked and "/../" not in asked + "/" and "/./" not in asked, asked


def test_a_subject_given_in_the_options_stays_one_path_segment(hostile_registry: HostileRegistry) -> None:
    hostile_registry.add_version("..", "latest", schema_doc(SCHEMA, "JSON", schema_id=3))
    found = ended(lambda: client.schema_by_subject(options(hostile_registry), "..", "latest"))
    assert found.schema_id == 3 and hostile_registry.requests[0].path == "/subjects/%2E%2E/versions/latest"


@pytest.mark.parametrize("schema_id", [-1, 2**31, 10**30, True, "7"])
def test_an_id_out_of_range_in_a_subjects_answer_is_a_registry_error(hostile_registry: HostileRegistry,
                                                                    schema_id: Any) -> None:
    hostile_registry.add_version("t-value", "latest", {"schema": SCHEMA, "schemaType": "JSON", "id": schema_id})
    with pytest.raises(SchemaRegistryError, match="id"):
        ended(lambda: client.schema_by_subject(options(hostile_registry), "t-value", "latest"))


def test_a_well_behaved_ladder_still_resolves(hostile_registry: HostileRegistry) -> None:
    hostile_registry.ladder(4, lambda name, refs: SCHEMA, schema_type="JSON")
    found = ended(lambda: client.schema_by_id(options(hostile_registry), 1))
    assert [r.subject for r in found.references] == ["L0a", "L0b"]
    assert len(hostile_registry.requests) == 1 + 2 * 4


# Over TLS: the same deadline covers the handshake and every read of the encrypted stream.

@pytest.fixture
def tls_registry(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[HostileRegistry]:
    """A :class:`HostileRegistry` over TLS, its certificate trusted through ``SSL_CERT_FILE``."""
    ca = ThrowawayCA()
    issued = ca.issue("registry", hosts=["127.0.0.1"])
    (tmp_path / "ca.pem").write_text(ca.certificate_pem)
    (tmp_path / "leaf.pem").write_text(issued.certificate_pem + issued.key_pem)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(tmp_path / "leaf.pem"))
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    server = HostileRegistry(tls=context)
    try:
        yield server
    finally:
        server.stop()


def test_an_https_registry_answers_and_its_trickled_headers_end_at_the_deadline(tls_registry: HostileRegistry) -> None:
    tls_registry.add_schema(1, schema_doc(SCHEMA, "JSON"))
    tls_registry.on("/schemas/ids/2", trickle_headers(0.05))
    assert ended(lambda: client.schema_by_id(options(tls_registry), 1)).text == SCHEMA
    with pytest.raises(SchemaRegistryError, match="within 1 s"):
        ended(lambda: client.schema_by_id(options(tls_registry), 2))


def test_a_tls_handshake_that_never_comes_ends_at_the_deadline(hostile_registry: HostileRegistry) -> None:
    # a plain server given as https://: it waits for a request, the client for its handshake
    opts = RegistryOptions(url=hostile_registry.url.replace("http://", "https://"), key=None, value=None,
                           retry_wait_ms=10)  # as options() does
    with pytest.raises(SchemaRegistryError, match="within 1 s"):
        ended(lambda: client.schema_by_id(opts, 1))


def test_a_chain_of_references_deeper_than_the_stack_is_a_registry_error(hostile_registry: HostileRegistry) -> None:
    depth = 990  # under MAX_REFERENCES, over Python's recursion limit with the test's own frames
    for k in range(depth):
        refs = [{"name": f"C{k + 1}", "subject": f"C{k + 1}", "version": 1}] if k + 1 < depth else []
        hostile_registry.add_version(f"C{k}", 1, schema_doc(SCHEMA, "JSON", schema_id=10 + k, references=refs))
    hostile_registry.add_schema(1, schema_doc(SCHEMA, "JSON", references=[{"name": "C0", "subject": "C0",
                                                                           "version": 1}]))
    with pytest.raises(SchemaRegistryError, match="references") as excinfo:
        ended(lambda: client.schema_by_id(options(hostile_registry), 1))
    assert hostile_registry.url in str(excinfo.value)
    assert len(hostile_registry.requests) <= client.MAX_REFERENCE_DEPTH + 2


def _batch(ids: Sequence[int]) -> pa.RecordBatch:
    n = len(ids)
    return pa.RecordBatch.from_pydict({
        "key": pa.array([None] * n, pa.binary()),
        "value": pa.array([frame(i, b'{"a": 1}') for i in ids], pa.binary()),
        "topic": ["t"] * n, "partition": pa.array([0] * n, pa.int32()), "offset": pa.array(range(n), pa.int64())})


@pytest.mark.parametrize("quarantine", [True, False])
def test_a_malformed_writer_schema_answer_makes_its_records_bad_records(hostile_registry: HostileRegistry,
                                                                        quarantine: bool) -> None:
    """A malformed answer about an id is that id's answer for good: its records are bad records (quarantine
    lands them), the other ids' records decode, and the id is not asked again for every batch."""
    hostile_registry.add_schema(1, schema_doc(SCHEMA, "JSON"))
    hostile_registry.add_schema(2, _ref(version="²"))
    opts = RegistryOptions(url=hostile_registry.url, key=None, value=SideDecoding("value", "JSON", None, "latest", SCHEMA),
                           quarantine=quarantine)
    plan = plan_decoding(opts)
    raw_batch = _batch([1, 2, 1])
    schema = decoded_arrow_schema(raw_batch.schema, plan)
    if not quarantine:
        with pytest.raises(RecordError, match=r"t-0 at offset 1 .*malformed reference"):
            ended(lambda: decode_batch(raw_batch, plan, schema))
        return
    for _ in range(2):
        out = ended(lambda: decode_batch(raw_batch, plan, schema))
        assert out.column("value").to_pylist() == [{"a": 1}, None, {"a": 1}]
        errors = out.column("value_error").to_pylist()
        assert errors[0] is None and errors[2] is None
        assert "malformed reference" in errors[1] and hostile_registry.url in errors[1], errors[1]
    assert [r.path for r in hostile_registry.requests] == ["/schemas/ids/1", "/schemas/ids/2"]
