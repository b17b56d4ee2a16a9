"""An S3 endpoint that ignores conditional puts: an HTTP proxy that drops ``If-None-Match`` and
``If-Match`` from every request and forwards it to a real S3 server (moto's, in the tests).

A store without conditional writes overwrites an existing object where S3 answers
``412 Precondition Failed``; this proxy turns moto into such a store. It runs as its own
process (``python tests/s3_no_conditional_put.py LISTEN_PORT UPSTREAM_URL``), never in the
test process: delta-rs's Rust calls hold the GIL while they wait for an answer, so a server
thread in the caller's process deadlocks them. moto does not check request signatures, so
dropping a signed header does not matter to it.
"""

from __future__ import annotations

import http.client
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: Headers dropped on the way to the server: the conditions of a conditional put.
DROPPED = frozenset({"if-none-match", "if-match"})
#: Hop-by-hop headers, not forwarded either way.
HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "upgrade"})


class _Forward(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    upstream: urllib.parse.SplitResult

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in DROPPED | HOP}
        connection = http.client.HTTPConnection(self.upstream.hostname or "127.0.0.1", self.upstream.port, timeout=60)
        try:
            connection.request(self.command, self.path, body=body, headers=headers)
            answer = connection.getresponse()
            data = answer.read()
        finally:
            connection.close()
        self.send_response(answer.status, answer.reason)
        for key, value in answer.getheaders():
            if key.lower() not in HOP and key.lower() != "content-length":
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        sys.stderr.write(f"{self.command} {self.path} {args[1] if len(args) > 1 else ''}\n")


def main(argv: list[str]) -> None:
    port, upstream = int(argv[0]), argv[1]
    _Forward.upstream = urllib.parse.urlsplit(upstream)
    server = ThreadingHTTPServer(("127.0.0.1", port), _Forward)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
