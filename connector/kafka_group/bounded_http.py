"""One HTTP exchange bounded as a whole: one deadline and one byte count for it all, no redirect.

The whole exchange (connection, TLS handshake, request, status line, headers, body, chunked
trailers) ends by one deadline and reads at most ``max_bytes``: the socket's every read waits only
until the deadline and is counted (:class:`_Meter`), so a server that trickles its headers or its
body a byte at a time, or sends trailer lines for ever, ends in :class:`Late` or :class:`TooBig`.
A per-operation socket timeout bounds none of that (each byte resets it). Not bounded: the name
lookup of the server's host (the system resolver's own timeouts), and the answer of an HTTP proxy
to ``CONNECT`` (each read of it waits at most the deadline). A redirect is refused, not followed
(:class:`Redirected`): following one would carry the request's ``Authorization`` header to
whatever address the answer names, https to http included.

Used by the Schema Registry client (:mod:`kafka_group.registry.transport`) and the Unity Catalog
client (:mod:`kafka_group.delta.storage.unity_catalog`), each of which turns these exceptions into its own
errors. Caller: any thread; each call has its own connection and meter.
"""

from __future__ import annotations

import functools
import http.client
import io
import ssl
import time
import urllib.request
from typing import Any, Optional

__all__ = ["Late", "Redirected", "TooBig", "fetch"]

_CHUNK = 64 * 1024


class Redirected(Exception):
    """The server answered with a redirect (``code``) to ``target``, which is not followed."""

    def __init__(self, code: int, target: str) -> None:
        super().__init__(code, target)
        self.code, self.target = code, target


class Late(TimeoutError):
    """The exchange's deadline passed."""


class TooBig(Exception):
    """The exchange received more than its byte budget (not an OSError: urllib must not wrap it)."""


def fetch(request: urllib.request.Request, *, timeout_s: float, max_bytes: int,
          ssl_context: Optional[ssl.SSLContext] = None) -> bytes:
    """The body of the answer to ``request``, the whole exchange within ``timeout_s`` and ``max_bytes``.

    ``ssl_context`` replaces the system's TLS defaults for an ``https://`` address. An answer cut
    short (fewer bytes than its ``Content-Length``) raises :class:`http.client.IncompleteRead`.

    Raises
    ------
    Redirected
        A redirect.
    urllib.error.HTTPError
        Any other status from 400 on; its body is read (within the same bounds) by the caller,
        who closes it.
    Late
        The deadline passed (a :class:`TimeoutError`; urllib may also raise the socket's own
        ``TimeoutError``, or a :class:`urllib.error.URLError` whose ``reason`` is one, while
        connecting).
    TooBig
        More than ``max_bytes`` received, headers and trailers included.
    http.client.HTTPException, ValueError, urllib.error.URLError, OSError
        No valid HTTP answer (``ValueError``: http.client's bad chunk size), or no connection.
    """
    meter = _Meter(timeout_s, max_bytes)
    opener = urllib.request.build_opener(_RefuseRedirects(), _HTTPHandler(meter), _HTTPSHandler(meter, ssl_context))
    with opener.open(request, timeout=timeout_s) as response:
        return _read(response)


class _Meter:
    """The bounds of one exchange: a deadline and a byte budget (one thread)."""

    def __init__(self, timeout_s: float, max_bytes: int) -> None:
        self.deadline = time.monotonic() + timeout_s
        self.left = max_bytes

    def remaining(self) -> float:
        """Seconds until the deadline; :class:`Late` when it has passed."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise Late()
        return left

    def count(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise TooBig()


class _MeteredReader(io.RawIOBase):
    """The socket's bytes, each read waiting at most until the deadline and counted."""

    def __init__(self, sock: Any, meter: _Meter) -> None:
        super().__init__()
        self._sock, self._meter = sock, meter
        self._raw = sock.makefile("rb", buffering=0)  # holds the socket open until this reader closes

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self._sock.settimeout(self._meter.remaining())
        n = self._raw.readinto(buffer)
        if n:
            self._meter.count(n)
        return int(n or 0)

    def close(self) -> None:
        self._raw.close()
        super().close()


class _MeteredSocket:
    """What :mod:`http.client` sees of the connection: sends and reads bounded by the meter."""

    def __init__(self, sock: Any, meter: _Meter) -> None:
        self._sock, self._meter = sock, meter

    def sendall(self, data: bytes) -> None:
        self._sock.settimeout(self._meter.remaining())  # sendall's timeout bounds the whole call
        self._sock.sendall(data)

    def makefile(self, mode: str = "rb", *args: Any, **kwargs: Any) -> io.BufferedReader:
        return io.BufferedReader(_MeteredReader(self._sock, self._meter))

    def close(self) -> None:
        self._sock.close()


class _Metered:
    """Connects within the deadline (connect and TLS handshake wait at most what is left), then meters."""

    _meter: _Meter
    timeout: Optional[float]
    sock: Any

    def connect(self) -> None:
        self.timeout = self._meter.remaining()
        super().connect()  # type: ignore[misc]
        self.sock = _MeteredSocket(self.sock, self._meter)


class _MeteredHTTP(_Metered, http.client.HTTPConnection):
    def __init__(self, *args: Any, meter: _Meter, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._meter = meter


class _MeteredHTTPS(_Metered, http.client.HTTPSConnection):
    def __init__(self, *args: Any, meter: _Meter, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._meter = meter


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, meter: _Meter) -> None:
        super().__init__()
        self._meter = meter

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_MeteredHTTP, meter=self._meter), req)  # type: ignore[arg-type]


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, meter: _Meter, context: Optional[ssl.SSLContext]) -> None:
        super().__init__(context=context)
        self._meter = meter
        self._tls = context

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_MeteredHTTPS, meter=self._meter), req,  # type: ignore[arg-type]
                            context=self._tls)


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> Optional[urllib.request.Request]:
        fp.close()
        raise Redirected(code, newurl)


def _read(response: Any) -> bytes:
    """The body, a chunk at a time (the meter bounds time and bytes); an answer cut short is refused."""
    chunks = []
    while True:
        chunk = response.read1(_CHUNK)
        if not chunk:
            break
        chunks.append(chunk)
    left = getattr(response, "length", None)
    if isinstance(left, int) and left > 0:
        raise http.client.IncompleteRead(b"", left)
    return b"".join(chunks)
