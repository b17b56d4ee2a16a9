"""A hostile Schema Registry for the tests: Confluent's API paths over real TCP, with misbehaviour on demand.

The server listens on a free port of 127.0.0.1 (raw sockets, one thread per connection, HTTP/1.0
style: one request per connection; TLS with ``HostileRegistry(tls=<server SSLContext>)``) and serves

* ``GET /schemas/ids/{id}``: what :meth:`HostileRegistry.add_schema` registered under ``id``;
* ``GET /subjects/{subject}/versions/{version}``: what :meth:`HostileRegistry.add_version`
  registered (``subject`` is matched percent-decoded, ``version`` as sent, ``latest`` included);
* anything else, or an unknown id / subject / version: HTTP 404 with Confluent's ``error_code``
  (40403, 40401).

A document is any JSON-able value (a dict like the registry's, or any hostile value: wrong types,
huge ids, references with hostile names and versions); :meth:`schema_doc` builds the usual one.
Misbehaviour is programmed per path with :meth:`HostileRegistry.on` (``path`` is the request path
as sent, or a prefix ending in ``*``), taking one of the behaviours below, each a function
``(Exchange) -> None`` that writes the raw answer:

* :func:`trickle_headers` (a byte of header every ``interval_s``, for ever);
* :func:`chunked_trailers` (a chunked body, then trailer lines, endless by default);
* :func:`echo_headers` (an error page echoing the request's headers, ``Authorization`` included);
* :func:`raw` (bytes as they are: garbage status lines, truncated answers, anything);
* :func:`answer` (a status and a body, e.g. ``"[" * 100000`` or bytes that are not UTF-8).

:meth:`HostileRegistry.ladder` registers a reference ladder (each level references the next level's
two subjects, so the paths double with each level while the documents grow linearly).

Every request is recorded in :attr:`HostileRegistry.requests` (path and headers). The fixture
:func:`hostile_registry` starts one server per test and always stops it (threads included, also
those still trickling): ``stop()`` wakes every behaviour and closes every connection.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import pytest

__all__ = ["HostileRegistry", "Exchange", "Request", "hostile_registry", "schema_doc",
           "trickle_headers", "chunked_trailers", "echo_headers", "raw", "answer"]


@dataclass
class Request:
    """One request as received: the path as sent and the headers (names as sent, in order)."""

    path: str
    headers: List[Tuple[str, str]] = field(default_factory=list)
    head: bytes = b""

    def header(self, name: str) -> Optional[str]:
        """The first header called ``name`` (case-insensitive), or None."""
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)


@dataclass
class Exchange:
    """What a behaviour gets: the request, the connection and the server's stop signal."""

    request: Request
    sock: socket.socket
    stopping: threading.Event

    def send(self, data: bytes) -> bool:
        """Write ``data``; False once the client has gone or the server stops."""
        if self.stopping.is_set():
            return False
        try:
            self.sock.sendall(data)
            return True
        except OSError:
            return False

    def wait(self, seconds: float) -> bool:
        """Sleep ``seconds``; False when the server stops meanwhile."""
        return not self.stopping.wait(seconds)


Behaviour = Callable[[Exchange], None]


def answer(status: int, body: Any, *, content_type: str = "application/vnd.schemaregistry.v1+json",
           headers: Sequence[Tuple[str, str]] = ()) -> Behaviour:
    """A plain answer: ``body`` as bytes, text, or any other value as JSON."""
    data = body if isinstance(body, bytes) else body.encode() if isinstance(body, str) else json.dumps(body).encode()

    def behave(ex: Exchange) -> None:
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers)
        ex.send(f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {len(data)}\r\n"
                f"Connection: close\r\n{extra}\r\n".encode() + data)
    return behave


def raw(data: bytes) -> Behaviour:
    """``data`` exactly as given (a garbage status line, a cut answer), then the connection closes."""
    return lambda ex: None if ex.send(data) else None


def trickle_headers(interval_s: float, *, status_line: bytes = b"HTTP/1.1 200 OK\r\n") -> Behaviour:
    """The status line, then one byte of a never-ending header every ``interval_s`` seconds."""
    def behave(ex: Exchange) -> None:
        if not ex.send(status_line + b"X-Slow: "):
            return
        while ex.wait(interval_s) and ex.send(b"a"):
            pass
    return behave


def chunked_trailers(body: Any = None, *, line_bytes: int = 1024, lines: Optional[int] = None,
                     interval_s: float = 0.0) -> Behaviour:
    """A chunked answer of ``body`` (JSON; a valid schema document by default), then ``lines`` trailer
    lines (None: for ever) of ``line_bytes`` bytes each, then the blank line that ends them."""
    data = json.dumps(schema_doc("{}", "JSON") if body is None else body).encode()

    def behave(ex: Exchange) -> None:
        head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n"
        if not ex.send(head + b"%x\r\n" % len(data) + data + b"\r\n0\r\n"):
            return
        line = b"X-T: " + b"t" * max(0, line_bytes - 7) + b"\r\n"
        sent = 0
        while lines is None or sent < lines:
            if not ex.send(line * 64 if lines is None else line):
                return
            sent += 64 if lines is None else 1
            if interval_s and not ex.wait(interval_s):
                return
        ex.send(b"\r\n")
    return behave


def echo_headers(status: int = 500) -> Behaviour:
    """An error page (text and JSON ``message``) that echoes the request line and every request header."""
    def behave(ex: Exchange) -> None:
        text = ex.request.head.decode("latin-1")
        answer(status, {"error_code": status * 100, "message": f"bad request, you sent:\n{text}"})(ex)
    return behave


def schema_doc(schema: str, schema_type: str = "AVRO", *, schema_id: Optional[int] = None,
               references: Sequence[Any] = (), subject: Optional[str] = None,
               version: Optional[int] = None) -> Dict[str, Any]:
    """A registry document as Confluent serves it (``schemaType`` left out for AVRO, as Confluent does)."""
    doc: Dict[str, Any] = {"schema": schema}
    if schema_type != "AVRO":
        doc["schemaType"] = schema_type
    if schema_id is not None:
        doc["id"] = schema_id
    if subject is not None:
        doc["subject"] = subject
    if version is not None:
        doc["version"] = version
    if references:
        doc["references"] = list(references)
    return doc


class HostileRegistry:
    """The server (see the module's notes). Build it with the :func:`hostile_registry` fixture.

    Attributes
    ----------
    url : str
        ``http://127.0.0.1:<port>``, the ``schemaRegistryAddress`` to give the client.
    requests : list of Request
        Every request received, in order.
    """

    def __init__(self, tls: Optional[ssl.SSLContext] = None) -> None:
        self._tls = tls
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self._listener.getsockname()[1]}"
        self.requests: List[Request] = []
        self._ids: Dict[int, Any] = {}
        self._versions: Dict[Tuple[str, str], Any] = {}
        self._rules: List[Tuple[str, Behaviour]] = []
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._threads: List[threading.Thread] = []
        self._connections: List[socket.socket] = []
        self._acceptor = threading.Thread(target=self._accept, name="hostile-registry", daemon=True)
        self._acceptor.start()

    # What it serves.

    def add_schema(self, schema_id: int, doc: Any) -> None:
        """Serve ``doc`` (any JSON value) at ``/schemas/ids/{schema_id}``."""
        self._ids[schema_id] = doc

    def add_version(self, subject: str, version: Any, doc: Any) -> None:
        """Serve ``doc`` at ``/subjects/{subject}/versions/{version}`` (``version`` as the client sends it)."""
        self._versions[(subject, str(version))] = doc

    def on(self, path: str, behaviour: Behaviour) -> None:
        """Answer ``path`` (exact, or a prefix ending in ``*``) with ``behaviour``; the latest rule wins."""
        self._rules.insert(0, (path, behaviour))

    def ladder(self, levels: int, make: Callable[[str, List[Dict[str, Any]]], Any], *, top_id: int = 1,
               schema_type: str = "AVRO") -> List[str]:
        """A reference ladder: schema id ``top_id`` references subjects ``L0a`` and ``L0b`` (version 1);
        each ``L{k}x`` references ``L{k+1}a`` and ``L{k+1}b``, down to level ``levels - 1``.

        ``make(name, references)`` gives each document's schema text (``name`` is ``top`` or the
        subject; the references are the Confluent reference dicts it carries). Returns the subjects.
        """
        def refs(level: int) -> List[Dict[str, Any]]:
            if level >= levels:
                return []
            return [{"name": f"L{level}{x}", "subject": f"L{level}{x}", "version": 1} for x in "ab"]

        subjects = []
        for level in range(levels):
            for x in "ab":
                name = f"L{level}{x}"
                subjects.append(name)
                self.add_version(name, 1, schema_doc(make(name, refs(level + 1)), schema_type, schema_id=1000 + len(
                    subjects), subject=name, version=1, references=refs(level + 1)))
        self.add_schema(top_id, schema_doc(make("top", refs(0)), schema_type, schema_id=top_id, references=refs(0)))
        return subjects

    # The server.

    def stop(self) -> None:
        """Stop: wake every behaviour, close every connection and the listener, join every thread."""
        self._stopping.set()
        try:
            self._listener.close()
        except OSError:
            pass
        with self._lock:
            connections, threads = list(self._connections), list(self._threads)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._acceptor.join(10)
        for thread in threads:
            thread.join(10)

    def _accept(self) -> None:
        self._listener.settimeout(0.2)
        while not self._stopping.is_set():
            try:
                conn, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(conn,), name="hostile-registry-conn", daemon=True)
            with self._lock:
                self._connections.append(conn)
                self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(10)
            if self._tls is not None:
                conn = self._tls.wrap_socket(conn, server_side=True)
                with self._lock:
                    self._connections.append(conn)
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 65536:
                data = conn.recv(4096)
                if not data:
                    return
                head += data
            head = head.split(b"\r\n\r\n", 1)[0] + b"\r\n\r\n"
            lines = head.decode("latin-1").split("\r\n")
            parts = lines[0].split(" ")
            request = Request(parts[1] if len(parts) > 1 else "", head=head)
            for line in lines[1:]:
                if ":" in line:
                    name, _, value = line.partition(":")
                    request.headers.append((name.strip(), value.strip()))
            with self._lock:
                self.requests.append(request)
            conn.settimeout(None)
            self._behaviour(request.path)(Exchange(request, conn, self._stopping))
        except OSError:
            pass
        finally:
            try:
                conn.close()
            except OSError:
                pass

    def _behaviour(self, path: str) -> Behaviour:
        for pattern, behaviour in self._rules:
            if path == pattern or (pattern.endswith("*") and path.startswith(pattern[:-1])):
                return behaviour
        parts = path.split("?", 1)[0].split("/")
        if len(parts) == 4 and parts[1:3] == ["schemas", "ids"] and parts[3].lstrip("-").isdigit():
            doc = self._ids.get(int(parts[3]))
            if doc is not None:
                return answer(200, doc)
            return answer(404, {"error_code": 40403, "message": "Schema not found"})
        if len(parts) == 5 and parts[1] == "subjects" and parts[3] == "versions":
            doc = self._versions.get((urllib.parse.unquote(parts[2]), parts[4]))
            if doc is not None:
                return answer(200, doc)
            return answer(404, {"error_code": 40401, "message": "Subject not found"})
        return answer(404, {"error_code": 404, "message": "HTTP 404 Not Found"})


@pytest.fixture
def hostile_registry() -> Iterator[HostileRegistry]:
    """A :class:`HostileRegistry` for one test, stopped when it ends (passed or failed)."""
    server = HostileRegistry()
    try:
        yield server
    finally:
        server.stop()
