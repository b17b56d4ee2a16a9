"""Client side of the embedded Kafka cluster: :class:`EmbeddedKafka`.

The cluster runs in a child process (:mod:`kafka_group_devbroker.broker_host`)
because a librdkafka mock cluster lives in the process that creates it; this
module launches that process, reads its ready line and drives it over its
JSON-lines control channel.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import IO, Any, Callable, Mapping, Optional, Sequence

from kafka_group.errors import EmbeddedBrokerError
from kafka_group_devbroker.lifecycle import ClusterLifecycle, wait_or_signal

__all__ = ["EmbeddedKafka"]

logger = logging.getLogger(__name__)
_child_logger = logging.getLogger(__name__ + ".host")

_HOST_MODULE = "kafka_group_devbroker.broker_host"
_STDERR_TAIL_LINES = 60


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class EmbeddedKafka(ClusterLifecycle):
    """A librdkafka mock Kafka cluster in a child process, for development and tests.

    Parameters
    ----------
    brokers : int, default 1
        Number of brokers (ids ``1..brokers``).
    topics : dict of str to int, optional
        Topics to create at start, name to partition count. Create topics
        explicitly: a topic first produced to is auto-created with 4 partitions.
    group_initial_rebalance_delay_ms : int, default 0
        Broker ``group.initial.rebalance.delay.ms``. The default 0 lets a group
        member join in about 0.15 s; Kafka's own default of 3000 makes the
        first join wait about 3 s.
    start_timeout : float, default 30.0
        Seconds :meth:`start` waits for the host's ready line.
    request_timeout : float, default 30.0
        Seconds a control request may take.

    Examples
    --------
    >>> with EmbeddedKafka(brokers=3, topics={"orders": 8}) as kafka:  # doctest: +SKIP
    ...     producer = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap_servers})

    Notes
    -----
    The child is started with ``--exit-on-stdin-eof`` and a pipe on its stdin
    that only this process holds: if this process dies, even by SIGKILL, the
    broker exits too. :meth:`stop` is also registered with :mod:`atexit`.
    Clients should set ``fetch.queue.backoff.ms`` to about 20; the admin
    CreateTopics request is not supported by the mock, use :meth:`create_topic`.

    Each mock partition keeps at most 5 MiB of record batches (or 100,000
    batches): older batches are dropped as new ones arrive and the low
    watermark moves, like retention. 200,000 records of 100 bytes in one
    partition keep only the last ~45,600. Spread large benchmark data over
    enough partitions.
    """

    engine = "mock"

    def __init__(
        self,
        brokers: int = 1,
        topics: Optional[Mapping[str, int]] = None,
        *,
        group_initial_rebalance_delay_ms: int = 0,
        start_timeout: float = 30.0,
        request_timeout: float = 30.0,
    ) -> None:
        super().__init__(brokers, topics)
        self._rebalance_delay_ms = group_initial_rebalance_delay_ms
        self._start_timeout = start_timeout
        self._request_timeout = request_timeout
        self._process: Optional[subprocess.Popen[bytes]] = None
        self._owned = True
        self._bootstrap_servers: Optional[str] = None
        self._control_port: Optional[int] = None
        self._pid: Optional[int] = None
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=_STDERR_TAIL_LINES)
        self._lock = threading.RLock()
        self._drain_threads: list[threading.Thread] = []

    # -- construction from a running host -------------------------------------

    @classmethod
    def attach(cls, control_port: int, *, request_timeout: float = 30.0) -> "EmbeddedKafka":
        """Connect to a host that is already running (e.g. started by the CLI).

        Parameters
        ----------
        control_port : int
            The host's control port on ``127.0.0.1``.
        request_timeout : float, default 30.0
            Seconds a control request may take.

        Returns
        -------
        EmbeddedKafka
            A handle that controls the host but does not own it: leaving a
            ``with`` block or exiting the interpreter leaves the host running;
            :meth:`stop` still shuts it down on request.

        Raises
        ------
        EmbeddedBrokerError
            When no host answers on that port.
        """
        kafka = cls(request_timeout=request_timeout)
        kafka._owned = False
        kafka._control_port = control_port
        info = kafka.ping()
        kafka._bootstrap_servers = str(info["bootstrap_servers"])
        kafka._pid = int(info["pid"])
        kafka._brokers = int(info.get("brokers", 1))
        return kafka

    # -- properties ---------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """str : ``bootstrap.servers`` for Kafka clients."""
        if self._bootstrap_servers is None:
            raise EmbeddedBrokerError("the embedded Kafka cluster is not started: call start() first")
        return self._bootstrap_servers

    @property
    def control_port(self) -> int:
        """int : The host's control port on ``127.0.0.1``."""
        if self._control_port is None:
            raise EmbeddedBrokerError("the embedded Kafka cluster is not started: call start() first")
        return self._control_port

    @property
    def pid(self) -> int:
        """int : Process id of the host process."""
        if self._pid is None:
            raise EmbeddedBrokerError("the embedded Kafka cluster is not started: call start() first")
        return self._pid

    @property
    def brokers(self) -> int:
        """int : Number of brokers."""
        return self._brokers

    @property
    def running(self) -> bool:
        """bool : Whether the host process is alive."""
        if self._process is not None:
            return self._process.poll() is None
        if self._owned:
            return False
        return self._pid is not None and _pid_alive(self._pid)

    # -- lifecycle --------------------------------------------------------------

    def start(self) -> "EmbeddedKafka":
        """Launch the host process and wait for it to be ready.

        Returns
        -------
        EmbeddedKafka
            ``self``, for chaining.

        Raises
        ------
        EmbeddedBrokerError
            When the host exits, prints something unexpected or is not ready
            within ``start_timeout``; the message ends with its stderr tail.
        """
        with self._lock:
            if not self._owned:
                raise EmbeddedBrokerError("an attached cluster is already running; start() is for owned clusters")
            if self._process is not None:
                raise EmbeddedBrokerError(f"already started (pid {self._pid})")
            cmd = [sys.executable, "-m", _HOST_MODULE, "--exit-on-stdin-eof", "--brokers", str(self._brokers),
                   "--group-initial-rebalance-delay-ms", str(self._rebalance_delay_ms)]
            for name, partitions in self._initial_topics.items():
                cmd += ["--topic", f"{name}:{int(partitions)}"]
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
            logger.debug("launching %s", " ".join(cmd))
            try:
                process = subprocess.Popen(
                    cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    env=env, start_new_session=True,
                )
            except OSError as exc:
                raise EmbeddedBrokerError(f"could not launch {' '.join(cmd)}: {exc}") from exc
            self._process = process
            self._pid = process.pid
            self._bootstrap_servers = None
            self._stderr_tail.clear()
            self._register_atexit()
            assert process.stdout is not None and process.stderr is not None
            self._drain(process.stderr, self._on_stderr_line, "stderr")
            ready: queue.Queue[Optional[str]] = queue.Queue()
            self._drain(process.stdout, self._stdout_sink(ready), "stdout", eof_to=ready)
            try:
                info = self._await_ready(ready)
            except EmbeddedBrokerError:
                self._signal(process, signal.SIGTERM)
                self._terminate(grace=5.0)
                self._process = None
                self._unregister_atexit()
                raise
            self._bootstrap_servers = str(info["bootstrap_servers"])
            self._control_port = int(info["control_port"])
            logger.info(
                "embedded Kafka with %d broker(s) at %s (control port %d, pid %d)",
                self._brokers, self._bootstrap_servers, self._control_port, self._pid,
            )
            return self

    def _await_ready(self, ready: "queue.Queue[Optional[str]]") -> dict[str, Any]:
        deadline = time.monotonic() + self._start_timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._start_error(f"the host was not ready within {self._start_timeout:g} s")
            try:
                line = ready.get(timeout=min(remaining, 0.5))
            except queue.Empty:
                continue
            if line is None:
                assert self._process is not None
                try:
                    code = self._process.wait(timeout=5.0)
                except subprocess.TimeoutExpired:
                    code = None
                for thread in self._drain_threads:  # collect the last stderr lines
                    thread.join(timeout=2.0)
                raise self._start_error(f"the host closed stdout before it was ready (exit status {code})")
            try:
                info = json.loads(line)
            except json.JSONDecodeError:
                # The message shows the line itself; the decoder's position in it adds nothing.
                raise self._start_error(f"unexpected output from the host: {line!r}") from None
            if not isinstance(info, dict) or "bootstrap_servers" not in info or "control_port" not in info:
                raise self._start_error(f"unexpected ready line from the host: {line!r}")
            return info

    def _start_error(self, what: str) -> EmbeddedBrokerError:
        tail = "\n".join(self._stderr_tail) or "(nothing on stderr)"
        return EmbeddedBrokerError(
            f"embedded Kafka failed to start: {what}. Host stderr (last lines):\n{tail}"
        )

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the host: ``shutdown`` op, wait, then SIGTERM, then SIGKILL.

        Idempotent, bounded by about ``timeout`` plus 10 s, and never raises for
        a host that is already gone.

        Parameters
        ----------
        timeout : float, default 10.0
            Seconds to wait after the ``shutdown`` op before sending signals.
        """
        with self._lock:
            if self._process is None and self._control_port is None:
                return
            if self._control_port is not None and self.running:
                try:
                    self._request({"op": "shutdown"}, timeout=min(5.0, self._request_timeout))
                except EmbeddedBrokerError as exc:
                    logger.debug("shutdown op failed (%s); falling back to signals", exc)
            if self._process is not None:
                self._terminate(grace=timeout)
                self._process = None
            elif self._pid is not None:
                self._wait_pid_gone(self._pid, timeout)
            self._control_port = None
            self._unregister_atexit()
            logger.info("embedded Kafka (pid %s) stopped", self._pid)

    def _terminate(self, grace: float) -> None:
        process = self._process
        if process is None:
            return
        if not (
            wait_or_signal(process, grace, signal.SIGTERM, logger,
                           "host pid %d did not exit in %.0f s; sending SIGTERM", process.pid, grace)
            or wait_or_signal(process, 5.0, signal.SIGKILL, logger, "host pid %d ignored SIGTERM; sending SIGKILL", process.pid)
        ):
            try:
                process.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                logger.error("host pid %d survived SIGKILL", process.pid)
        if process.stdin is not None:
            try:
                process.stdin.close()
            except OSError:
                pass
        for thread in self._drain_threads:  # they close stdout/stderr at EOF
            thread.join(timeout=2.0)
        self._drain_threads.clear()

    @staticmethod
    def _signal(process: "subprocess.Popen[bytes]", signum: int) -> None:
        if process.poll() is None:
            try:
                os.kill(process.pid, signum)
            except ProcessLookupError:
                pass

    @staticmethod
    def _wait_pid_gone(pid: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while _pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)

    def _stop_at_exit(self) -> None:
        if self._process is not None:
            logger.info("stopping embedded Kafka (pid %s) at interpreter exit", self._pid)
        self.stop(timeout=5.0)

    def _needs_start(self) -> bool:
        return self._owned and self._process is None

    def _stops_on_exit(self) -> bool:
        return self._owned  # an attached host outlives the block

    def __repr__(self) -> str:
        return (
            f"EmbeddedKafka(brokers={self._brokers}, bootstrap_servers={self._bootstrap_servers!r}, "
            f"control_port={self._control_port}, pid={self._pid}, owned={self._owned})"
        )

    # -- child output -------------------------------------------------------------

    def _drain(
        self,
        stream: IO[bytes],
        sink: Callable[[str], None],
        name: str,
        eof_to: "Optional[queue.Queue[Optional[str]]]" = None,
    ) -> None:
        def run() -> None:
            try:
                for raw in stream:
                    sink(raw.decode(errors="replace").rstrip("\n"))
            except (OSError, ValueError):
                pass
            finally:
                stream.close()
                if eof_to is not None:
                    eof_to.put(None)

        thread = threading.Thread(target=run, name=f"embedded-kafka-{name}", daemon=True)
        thread.start()
        self._drain_threads.append(thread)

    def _on_stderr_line(self, line: str) -> None:
        self._stderr_tail.append(line)
        _child_logger.debug("%s", line)

    @staticmethod
    def _stdout_sink(ready: "queue.Queue[Optional[str]]") -> Callable[[str], None]:
        first = [True]

        def sink(line: str) -> None:
            if first[0]:  # the ready line; the host prints nothing else
                first[0] = False
                ready.put(line)
            else:
                _child_logger.info("stdout: %s", line)

        return sink

    # -- control channel ----------------------------------------------------------

    def _request(self, request: Mapping[str, Any], timeout: Optional[float] = None) -> dict[str, Any]:
        port = self._control_port
        if port is None:
            raise EmbeddedBrokerError("the embedded Kafka cluster is not started: call start() first")
        wait = self._request_timeout if timeout is None else timeout
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
                sock.sendall(json.dumps(request).encode() + b"\n")
                with sock.makefile("rb") as reader:
                    line = reader.readline()
        except OSError as exc:
            raise EmbeddedBrokerError(
                f"control request {request.get('op')!r} to 127.0.0.1:{port} failed: {exc}; "
                "is the embedded Kafka host still running?"
            ) from exc
        if not line:
            raise EmbeddedBrokerError(f"control request {request.get('op')!r}: the host closed the connection")
        try:
            reply = json.loads(line)
        except json.JSONDecodeError:
            reply = None
        if not isinstance(reply, dict):
            raise EmbeddedBrokerError(f"control request {request.get('op')!r}: malformed reply {line!r}")
        if not reply.get("ok"):
            code = reply.get("kafka_error_code")
            raise EmbeddedBrokerError(
                f"embedded Kafka refused {request.get('op')!r}: {reply.get('error', 'unknown error')}",
                kafka_error_code=int(code) if code is not None else None,
            )
        return reply

    def ping(self) -> dict[str, Any]:
        """Ask the host for its state.

        Returns
        -------
        dict
            ``bootstrap_servers``, ``pid``, ``brokers``, ``topics`` (name to
            partitions, those created through the host) and
            ``supports_delete_records``.
        """
        return self._request({"op": "ping"})

    def create_topic(self, name: str, partitions: int = 1, replication_factor: Optional[int] = None) -> None:
        """Create a topic.

        Parameters
        ----------
        name : str
            Topic name.
        partitions : int, default 1
            Partition count.
        replication_factor : int, optional
            Replicas per partition; default ``min(3, brokers)``.

        Raises
        ------
        EmbeddedBrokerError
            When the topic exists (``kafka_error_code`` 36) or the counts are invalid.
        """
        request: dict[str, Any] = {"op": "create_topic", "topic": name, "partitions": partitions}
        if replication_factor is not None:
            request["replication_factor"] = replication_factor
        self._request(request)

    def delete_topic(self, name: str) -> None:
        """Delete a topic and its records.

        Parameters
        ----------
        name : str
            Topic name.
        """
        self._request({"op": "delete_topic", "topic": name})

    def broker_down(self, broker_id: int) -> None:
        """Take a broker down: it drops connections and refuses new ones.

        Leadership does not move, so partitions it leads become unavailable.

        Parameters
        ----------
        broker_id : int
            Broker id ``1..brokers``, or -1 for all.
        """
        self._request({"op": "broker_down", "broker_id": broker_id})

    def broker_up(self, broker_id: int) -> None:
        """Bring a broker back up.

        Parameters
        ----------
        broker_id : int
            Broker id ``1..brokers``, or -1 for all.
        """
        self._request({"op": "broker_up", "broker_id": broker_id})

    def push_request_errors(self, api_key: int, codes: Sequence[int]) -> None:
        """Fail the next requests of one type with the given error codes, in order.

        Parameters
        ----------
        api_key : int
            Kafka protocol ApiKey (0 Produce, 1 Fetch, 2 ListOffsets, 3 Metadata,
            8 OffsetCommit, 9 OffsetFetch, 11 JoinGroup, 12 Heartbeat, ...).
        codes : sequence of int
            Kafka error codes, one per request; librdkafka's ``-195``
            (``_TRANSPORT``) makes the broker close the connection instead.
        """
        self._request({"op": "push_request_errors", "api_key": api_key, "error_codes": [int(c) for c in codes]})

    def clear_request_errors(self, api_key: int) -> None:
        """Drop pushed errors not used yet for ``api_key``.

        Parameters
        ----------
        api_key : int
            Kafka protocol ApiKey.
        """
        self._request({"op": "clear_request_errors", "api_key": api_key})

    def delete_records(self, topic: str, partition: int, before_offset: int) -> None:
        """Delete a partition's records below ``before_offset`` (simulates retention).

        Parameters
        ----------
        topic : str
            Topic name.
        partition : int
            Partition number.
        before_offset : int
            New low watermark, at most the high watermark.

        Raises
        ------
        EmbeddedBrokerError
            Unknown topic/partition (code 3) or offset beyond the end (code 1).
        """
        self._request({"op": "delete_records", "topic": topic, "partition": partition, "before_offset": before_offset})

    def set_coordinator(self, group_id: str, broker_id: int, key_type: str = "group") -> None:
        """Pin the coordinator of a consumer group (or transactional id).

        Parameters
        ----------
        group_id : str
            The ``group.id`` (or ``transactional.id`` with ``key_type="transaction"``).
        broker_id : int
            Coordinating broker.
        key_type : {"group", "transaction"}, default "group"
            Kind of coordinator.
        """
        self._request({"op": "set_coordinator", "key_type": key_type, "key": group_id, "broker_id": broker_id})

    def set_group_initial_rebalance_delay_ms(self, delay_ms: int) -> None:
        """Change the brokers' ``group.initial.rebalance.delay.ms``.

        Parameters
        ----------
        delay_ms : int
            Delay before a new group's first assignment.
        """
        self._request({"op": "set_group_initial_rebalance_delay_ms", "delay_ms": delay_ms})
