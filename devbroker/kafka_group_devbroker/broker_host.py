"""Host process of an embedded Kafka cluster: ``python -m kafka_group_devbroker.broker_host``.

It creates a librdkafka mock cluster (see :mod:`.librdkafka_mock`) and serves a
control channel on ``127.0.0.1``: a TCP server speaking JSON lines, one request
``{"op": ..., <args>}`` answered by one reply ``{"ok": true, ...}`` or
``{"ok": false, "error": "..."}``. Ops: ``ping``, ``create_topic``,
``delete_topic``, ``broker_down``, ``broker_up``, ``push_request_errors``,
``clear_request_errors``, ``delete_records``, ``set_coordinator``,
``set_group_initial_rebalance_delay_ms``, ``shutdown``.

When ready it prints exactly one JSON line on stdout::

    {"bootstrap_servers": "127.0.0.1:...", "control_port": 40123, "pid": 4711}

and logs everything else on stderr. SIGTERM, SIGINT, the ``shutdown`` op and,
with ``--exit-on-stdin-eof``, the end of stdin (the launching parent died)
destroy the cluster and exit with status 0.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socketserver
import sys
import threading
from types import FrameType
from typing import Any, Callable, Optional, Sequence

from kafka_group_devbroker.librdkafka_mock import MockCluster
from kafka_group.errors import EmbeddedBrokerError, KafkaGroupError

# Run as ``-m`` this module is ``__main__``; log under its package name anyway.
logger = logging.getLogger(__name__ if __name__ != "__main__" else "kafka_group_devbroker.broker_host")

#: Seconds the process may spend tearing down before it exits regardless.
SHUTDOWN_GRACE_S = 10.0
#: Longest accepted control request line, in bytes.
MAX_REQUEST_BYTES = 1 << 20

Reply = dict[str, Any]


def parse_topic_spec(spec: str) -> tuple[str, int]:
    """Parse ``name:partitions`` (``name`` alone means one partition).

    Parameters
    ----------
    spec : str
        Topic specification as given on the command line.

    Returns
    -------
    tuple of (str, int)
        Topic name and partition count.

    Raises
    ------
    ValueError
        When the name is empty or the count is not a positive integer.
    """
    name, sep, count = spec.rpartition(":")
    if not sep:
        name, count = spec, "1"
    if not name:
        raise ValueError(f"topic spec {spec!r}: empty topic name, expected name:partitions")
    try:
        partitions = int(count)
    except ValueError:  # int()'s error repeats what the message says
        raise ValueError(f"topic spec {spec!r}: partitions {count!r} is not an integer") from None
    if partitions < 1:
        raise ValueError(f"topic spec {spec!r}: partitions must be at least 1")
    return name, partitions


class BrokerHost:
    """The mock cluster plus its control server and stop triggers.

    Parameters
    ----------
    brokers : int
        Number of mock brokers.
    group_initial_rebalance_delay_ms : int, optional
        Broker setting applied at start; ``None`` keeps librdkafka's default
        (3000 ms).
    """

    def __init__(self, brokers: int, group_initial_rebalance_delay_ms: Optional[int] = None) -> None:
        self.cluster = MockCluster(brokers, config={"log_level": "4"})
        if group_initial_rebalance_delay_ms is not None:
            self.cluster.set_group_initial_rebalance_delay_ms(group_initial_rebalance_delay_ms)
        self.stop_requested = threading.Event()
        self.topics: dict[str, int] = {}
        self._server: Optional[socketserver.ThreadingTCPServer] = None
        self._ops: dict[str, Callable[[dict[str, Any]], Reply]] = {
            "ping": self._op_ping,
            "create_topic": self._op_create_topic,
            "delete_topic": self._op_delete_topic,
            "broker_down": self._op_broker_down,
            "broker_up": self._op_broker_up,
            "push_request_errors": self._op_push_request_errors,
            "clear_request_errors": self._op_clear_request_errors,
            "delete_records": self._op_delete_records,
            "set_coordinator": self._op_set_coordinator,
            "set_group_initial_rebalance_delay_ms": self._op_set_rebalance_delay,
            "shutdown": self._op_shutdown,
        }

    # -- control server ------------------------------------------------------

    def start_control_server(self) -> int:
        """Listen on ``127.0.0.1`` (ephemeral port) in a daemon thread.

        Returns
        -------
        int
            The control port.
        """
        host = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                while not host.stop_requested.is_set():
                    line = self.rfile.readline(MAX_REQUEST_BYTES)
                    if not line:
                        return
                    if not line.strip():
                        continue
                    reply = host.handle_line(line)
                    self.wfile.write(json.dumps(reply).encode() + b"\n")
                    self.wfile.flush()

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        server = Server(("127.0.0.1", 0), Handler)
        self._server = server
        thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="control-server", daemon=True
        )
        thread.start()
        port = int(server.server_address[1])
        logger.info("control channel on 127.0.0.1:%d", port)
        return port

    def handle_line(self, line: bytes) -> Reply:
        """Answer one JSON request line.

        Parameters
        ----------
        line : bytes
            A JSON object with at least ``op``.

        Returns
        -------
        dict
            ``{"ok": True, ...}`` or ``{"ok": False, "error": "..."}``.
        """
        try:
            request = json.loads(line)
            if not isinstance(request, dict):
                raise ValueError("a request must be a JSON object")
            op = request.get("op")
            handler = self._ops.get(str(op))
            if handler is None:
                raise ValueError(f"unknown op {op!r}; known: {', '.join(sorted(self._ops))}")
            logger.debug("control request %s", request)
            reply = handler(request)
        except (KafkaGroupError, ValueError, KeyError, TypeError) as exc:
            logger.info("control request failed: %s", exc)
            reply = {"ok": False, "error": str(exc) if not isinstance(exc, KeyError) else f"missing argument {exc}"}
            code = getattr(exc, "kafka_error_code", None)
            if code is not None:
                reply["kafka_error_code"] = code
            return reply
        except Exception as exc:  # keep serving; report the failure
            logger.exception("control request crashed")
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        return {"ok": True, **reply}

    # -- ops -------------------------------------------------------------------

    def _op_ping(self, req: dict[str, Any]) -> Reply:
        return {
            "bootstrap_servers": self.cluster.bootstraps,
            "pid": os.getpid(),
            "brokers": self.cluster.broker_count,
            "topics": dict(self.topics),
            "supports_delete_records": self.cluster.supports_delete_records,
        }

    def _op_create_topic(self, req: dict[str, Any]) -> Reply:
        name, partitions = str(req["topic"]), int(req["partitions"])
        rf = req.get("replication_factor")
        replication = int(rf) if rf is not None else min(3, self.cluster.broker_count)
        self.create_topic(name, partitions, replication)
        return {}

    def create_topic(self, name: str, partitions: int, replication_factor: int) -> None:
        """Create a topic and remember its partition count (for ``ping``).

        Parameters
        ----------
        name : str
            Topic name.
        partitions : int
            Partition count.
        replication_factor : int
            Replicas per partition.
        """
        self.cluster.create_topic(name, partitions, replication_factor)
        self.topics[name] = partitions
        logger.info("created topic %s with %d partition(s)", name, partitions)

    def _op_delete_topic(self, req: dict[str, Any]) -> Reply:
        name = str(req["topic"])
        self.cluster.delete_topic(name)
        self.topics.pop(name, None)
        return {}

    def _op_broker_down(self, req: dict[str, Any]) -> Reply:
        self.cluster.broker_down(int(req["broker_id"]))
        return {}

    def _op_broker_up(self, req: dict[str, Any]) -> Reply:
        self.cluster.broker_up(int(req["broker_id"]))
        return {}

    def _op_push_request_errors(self, req: dict[str, Any]) -> Reply:
        codes = req["error_codes"]
        if not isinstance(codes, list):
            raise ValueError("error_codes must be a list of integers")
        self.cluster.push_request_errors(int(req["api_key"]), [int(c) for c in codes])
        return {}

    def _op_clear_request_errors(self, req: dict[str, Any]) -> Reply:
        self.cluster.clear_request_errors(int(req["api_key"]))
        return {}

    def _op_delete_records(self, req: dict[str, Any]) -> Reply:
        self.cluster.delete_records(str(req["topic"]), int(req["partition"]), int(req["before_offset"]))
        return {}

    def _op_set_coordinator(self, req: dict[str, Any]) -> Reply:
        self.cluster.set_coordinator(str(req["key_type"]), str(req["key"]), int(req["broker_id"]))
        return {}

    def _op_set_rebalance_delay(self, req: dict[str, Any]) -> Reply:
        self.cluster.set_group_initial_rebalance_delay_ms(int(req["delay_ms"]))
        return {}

    def _op_shutdown(self, req: dict[str, Any]) -> Reply:
        logger.info("shutdown requested over the control channel")
        self.stop_requested.set()
        return {}

    # -- lifecycle -------------------------------------------------------------

    def watch_stdin(self) -> None:
        """Request a stop when stdin reaches EOF (the parent closed it or died)."""

        def run() -> None:
            # os.read, not sys.stdin: a daemon thread blocked inside a buffered
            # reader makes interpreter shutdown abort ("could not acquire lock").
            try:
                fd = sys.stdin.fileno()
                while os.read(fd, 4096):
                    pass
            except (OSError, ValueError):
                pass
            logger.info("stdin closed: the launching process is gone, stopping")
            self.stop_requested.set()

        threading.Thread(target=run, name="stdin-watch", daemon=True).start()

    def close(self) -> None:
        """Stop the control server and destroy the cluster, bounded in time."""
        watchdog = threading.Timer(SHUTDOWN_GRACE_S, _hard_exit, args=("teardown took too long",))
        watchdog.daemon = True
        watchdog.start()
        try:
            if self._server is not None:
                self._server.shutdown()
                self._server.server_close()
            self.cluster.close()
        finally:
            watchdog.cancel()


def _hard_exit(reason: str) -> None:
    logger.error("exiting at once: %s", reason)
    logging.shutdown()
    os._exit(1)


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options that describe a cluster (brokers, topics, group delay, log level)."""
    parser.add_argument("--brokers", type=int, default=1, help="number of brokers (default 1)")
    parser.add_argument(
        "--topic", action="append", default=[], metavar="NAME:PARTITIONS",
        help="create a topic at start; repeatable",
    )
    parser.add_argument(
        "--group-initial-rebalance-delay-ms", type=int, default=0,
        help="broker group.initial.rebalance.delay.ms (default 0; Kafka's is 3000)",
    )
    parser.add_argument("--log-level", default="INFO", help="Python logging level (default INFO)")


def build_parser() -> argparse.ArgumentParser:
    """Command-line options of the host process.

    Returns
    -------
    argparse.ArgumentParser
        The parser.
    """
    parser = argparse.ArgumentParser(
        prog="python -m kafka_group_devbroker.broker_host",
        description="Host a librdkafka mock Kafka cluster with a JSON-lines control channel.",
    )
    add_cluster_arguments(parser)
    parser.add_argument(
        "--exit-on-stdin-eof", action="store_true",
        help="exit when stdin reaches EOF (set by a launching parent)",
    )
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the host until a stop is requested.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments; ``sys.argv[1:]`` when omitted.

    Returns
    -------
    int
        Exit status: 0 after a clean stop, 2 on bad arguments, 1 if the
        cluster could not be created.
    """
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), stream=sys.stderr,
        format="%(asctime)s %(levelname)s [broker_host %(process)d] %(name)s: %(message)s",
    )
    try:
        topics = [parse_topic_spec(spec) for spec in args.topic]
    except ValueError as exc:
        logger.error("%s", exc)
        return 2

    signalled: list[int] = []

    def on_signal(signum: int, frame: Optional[FrameType]) -> None:
        signalled.append(signum)  # the main loop notices; no locks in a handler

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    try:
        host = BrokerHost(args.brokers, args.group_initial_rebalance_delay_ms)
    except EmbeddedBrokerError as exc:
        logger.error("could not start the mock cluster: %s", exc)
        return 1
    try:
        for name, partitions in topics:
            host.create_topic(name, partitions, min(3, args.brokers))
        port = host.start_control_server()
        if args.exit_on_stdin_eof:
            host.watch_stdin()
        ready = {"bootstrap_servers": host.cluster.bootstraps, "control_port": port, "pid": os.getpid()}
        sys.stdout.write(json.dumps(ready) + "\n")
        sys.stdout.flush()
        while not signalled and not host.stop_requested.wait(0.2):
            pass
        if signalled:
            logger.info("received signal %d, stopping", signalled[0])
    except EmbeddedBrokerError as exc:
        logger.error("could not start: %s", exc)
        host.close()
        return 1
    host.close()
    logger.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
