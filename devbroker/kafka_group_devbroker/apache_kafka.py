"""Apache Kafka on loopback: N KRaft nodes (combined broker and controller), one JVM each.

The jars come from Maven Central on first use (:mod:`kafka_group_devbroker.jars`,
pinned to :data:`~kafka_group_devbroker.jars.KAFKA_VERSION`); nothing is committed
or downloaded by hand. Each node gets free ports on ``127.0.0.1`` and a log
folder under a temporary directory that :meth:`ApacheKafka.stop` removes.

Every JVM is started with ``PR_SET_PDEATHSIG`` (SIGKILL) from one long-lived
launcher thread, so the brokers die with the process that owns them, even when
it is killed; :meth:`ApacheKafka.stop` is also registered with :mod:`atexit`.

The class has the methods of :class:`~kafka_group_devbroker.cluster.EmbeddedKafka`
that real Kafka can honour (topics, partitions, records, broker down and up),
plus real faults: :meth:`ApacheKafka.kill_broker` (SIGKILL, the controller
included) and :meth:`ApacheKafka.start_broker`. Pushed protocol errors exist
only on the mock cluster.
"""

from __future__ import annotations

import base64
import ctypes
import logging
import os
import queue
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from kafka_group_devbroker.jars import KAFKA_VERSION, classpath
from kafka_group_devbroker.lifecycle import ClusterLifecycle, wait_or_signal
from kafka_group.errors import EmbeddedBrokerError

__all__ = ["ApacheKafka"]

logger = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1

#: Broker settings for a small, fast development cluster. Group and retention timers are
#: shortened so tests see rebalances and retention in seconds, not minutes.
_BASE_CONFIG: dict[str, str] = {
    "process.roles": "broker,controller",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "num.network.threads": "2",
    "num.io.threads": "4",
    "background.threads": "4",
    "num.replica.fetchers": "1",
    "num.partitions": "1",
    "auto.create.topics.enable": "true",
    "offsets.topic.num.partitions": "10",
    "transaction.state.log.num.partitions": "5",
    "min.insync.replicas": "1",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    # KIP-848 (group.protocol=consumer): heartbeats and session in seconds.
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.consumer.min.session.timeout.ms": "3000",
    "group.consumer.session.timeout.ms": "10000",
    # Retention and compaction act within about a second of being due.
    "log.retention.check.interval.ms": "1000",
    "log.cleaner.backoff.ms": "500",
    "log.cleaner.threads": "1",
    "log.cleaner.dedupe.buffer.size": "8388608",
    "log.initial.task.delay.ms": "500",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "10000",
    "share.coordinator.state.topic.num.partitions": "1",
}

#: A development node compiles with C1 only: its load is a test's or a demo's, far below what C2's
#: compiles pay back. Measured on 18 integration tests (November 2026): the node's JVM used 22.6
#: CPU-seconds instead of 36.6, for the same records served.
_COMPILER_OPTIONS = ("-XX:TieredStopAtLevel=1",)

_LOG4J2_PROPERTIES = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log_file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.file.ref = file
logger.controller.name = org.apache.kafka.controller
logger.controller.level = warn
logger.raft.name = org.apache.kafka.raft
logger.raft.level = warn
# "Kafka Server started" tells the launcher a node is up, whatever the level of the rest.
logger.started.name = kafka.server.KafkaRaftServer
logger.started.level = info
"""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cluster_id() -> str:
    """A random KRaft cluster id (base64 of a UUID), never starting with '-' (the format
    tool would read it as an option; Kafka's own ``Uuid.randomUuid`` avoids that too)."""
    while True:
        candidate = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not candidate.startswith("-"):
            return candidate


def _die_with_parent() -> None:
    """``preexec_fn``: SIGKILL this child when the thread that forked it ends."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.access(os.path.join(java_home, "bin", "java"), os.X_OK):
        return os.path.join(java_home, "bin", "java")
    java = shutil.which("java")
    if java is None:
        raise EmbeddedBrokerError("no 'java' on PATH (and JAVA_HOME unset): Apache Kafka needs Java 17 or newer")
    return java


class _Launcher:
    """One daemon thread that forks every JVM of a cluster.

    ``PR_SET_PDEATHSIG`` fires when the *thread* that forked a child ends, so
    brokers restarted from a short-lived test thread would die with it; forking
    from one thread that lives as long as the interpreter avoids that.
    """

    def __init__(self) -> None:
        self._requests: "queue.Queue[tuple[Callable[[], Any], queue.Queue[tuple[bool, Any]]]]" = queue.Queue()
        thread = threading.Thread(target=self._run, name="kafka-group-jvm-launcher", daemon=True)
        thread.start()

    def _run(self) -> None:
        while True:
            work, reply = self._requests.get()
            try:
                reply.put((True, work()))
            except BaseException as exc:  # handed back to the caller
                reply.put((False, exc))

    def call(self, work: Callable[[], Any]) -> Any:
        reply: "queue.Queue[tuple[bool, Any]]" = queue.Queue()
        self._requests.put((work, reply))
        ok, value = reply.get()
        if not ok:
            raise value
        return value


_launcher_lock = threading.Lock()
_launcher: Optional[_Launcher] = None


def _launch(command: Sequence[str], *, log_path: Path, cwd: Path,
            env: Optional[Mapping[str, str]] = None) -> "subprocess.Popen[bytes]":
    """Start ``command`` from the launcher thread (``PR_SET_PDEATHSIG``), output to ``log_path``;
    ``env`` replaces the inherited environment when given."""
    global _launcher
    with _launcher_lock:
        if _launcher is None:
            _launcher = _Launcher()
        launcher = _launcher

    def popen() -> "subprocess.Popen[bytes]":
        with open(log_path, "ab") as log:
            return subprocess.Popen(
                list(command), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=cwd, preexec_fn=_die_with_parent, env=None if env is None else dict(env),
            )

    process: "subprocess.Popen[bytes]" = launcher.call(popen)
    return process


class _Node:
    """One KRaft node: its id, ports, folder and JVM."""

    def __init__(self, node_id: int, root: Path) -> None:
        self.node_id = node_id
        self.port = _free_port()
        self.controller_port = _free_port()
        self.folder = root / f"node-{node_id}"
        self.log_dir = self.folder / "data"
        self.process: Optional["subprocess.Popen[bytes]"] = None
        #: "Kafka Server started" lines in server.log when the node was last seen up.
        self.starts_seen = 0

    def started_count(self) -> int:
        """How many times this node has logged that it started (its log is appended to)."""
        try:
            with open(self.folder / "server.log", "rb") as log:
                return log.read().count(b"] Kafka Server started")
        except FileNotFoundError:
            return 0

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def output_tail(self, lines: int = 40) -> str:
        parts = []
        for name in ("stdout.log", "server.log"):
            path = self.folder / name
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except FileNotFoundError:
                continue
            parts.append(f"--- node {self.node_id} {name} ---\n" + "\n".join(text.splitlines()[-lines:]))
        return "\n".join(parts) or f"(node {self.node_id} wrote nothing)"


class ApacheKafka(ClusterLifecycle):
    """Apache Kafka brokers (KRaft) on loopback, for development, tests and benchmarks.

    Parameters
    ----------
    brokers : int, default 1
        Number of nodes; each is a broker and a controller (node ids ``1..brokers``).
    topics : dict of str to int, optional
        Topics to create at start, name to partition count.
    broker_config : dict of str to str, optional
        Extra ``server.properties`` settings for every node, over the defaults.
    heap : str, default "512m"
        Maximum heap of each JVM (``-Xmx``).
    start_timeout : float, default 180.0
        Seconds :meth:`start` waits for every broker to register (includes the
        first-use jar download).
    log_level : str, default "INFO"
        Level of the brokers' own logs (``<folder>/node-N/server.log``).

    Examples
    --------
    >>> with ApacheKafka(brokers=3, topics={"orders": 8}) as kafka:  # doctest: +SKIP
    ...     producer = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap_servers})

    Notes
    -----
    Replicated topics default to ``min(3, brokers)`` replicas; internal topics
    too. The brokers' folders live under a fresh temporary directory
    (:attr:`folder`), removed by :meth:`stop`.
    """

    engine = "kafka"

    def __init__(
        self,
        brokers: int = 1,
        topics: Optional[Mapping[str, int]] = None,
        *,
        broker_config: Optional[Mapping[str, str]] = None,
        heap: str = "512m",
        start_timeout: float = 180.0,
        log_level: str = "INFO",
    ) -> None:
        super().__init__(brokers, topics)
        self._extra_config = dict(broker_config or {})
        self._heap = heap
        self._start_timeout = start_timeout
        # log4j2 spells Python's WARNING and CRITICAL as WARN and FATAL.
        self._log_level = {"WARNING": "WARN", "CRITICAL": "FATAL"}.get(log_level.upper(), log_level.upper())
        self._nodes: list[_Node] = []
        self._folder: Optional[Path] = None
        self._classpath: Optional[str] = None
        self._cluster_id = _cluster_id()
        self._lock = threading.RLock()
        self._admin_client: Optional[Any] = None

    # -- properties -------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """str : ``bootstrap.servers`` for Kafka clients (every node)."""
        if not self._nodes:
            raise EmbeddedBrokerError("the Apache Kafka cluster is not started: call start() first")
        return ",".join(f"127.0.0.1:{node.port}" for node in self._nodes)

    @property
    def brokers(self) -> int:
        """int : Number of nodes."""
        return self._brokers

    @property
    def running(self) -> bool:
        """bool : Whether any node's JVM is alive."""
        return any(node.alive for node in self._nodes)

    @property
    def pid(self) -> int:
        """int : Process id of node 1's JVM."""
        return self.pids[0]

    @property
    def pids(self) -> list[int]:
        """list of int : Process ids of the live JVMs, by node."""
        return [node.process.pid for node in self._nodes if node.process is not None and node.alive]

    @property
    def folder(self) -> Path:
        """pathlib.Path : The cluster's folder (one ``node-N`` folder per node)."""
        if self._folder is None:
            raise EmbeddedBrokerError("the Apache Kafka cluster is not started: call start() first")
        return self._folder

    def log_dir(self, broker_id: int) -> Path:
        """The data folder (``log.dirs``) of one node."""
        return self._node(broker_id).log_dir

    # -- lifecycle ----------------------------------------------------------------

    def start(self) -> "ApacheKafka":
        """Fetch the jars if needed, format the nodes' storage, start every JVM, wait for all brokers.

        Returns
        -------
        ApacheKafka
            ``self``, for chaining.

        Raises
        ------
        EmbeddedBrokerError
            When Java or Maven is missing, or a node does not come up within
            ``start_timeout``; the message ends with that node's log tail.
        """
        with self._lock:
            if self._nodes:
                raise EmbeddedBrokerError("already started")
            self._classpath = os.pathsep.join(classpath("kafka"))
            self._folder = Path(tempfile.mkdtemp(prefix="kafka-group-kafka-"))
            self._nodes = [_Node(node_id, self._folder) for node_id in range(1, self._brokers + 1)]
            self._register_atexit()
            try:
                for node in self._nodes:
                    node.folder.mkdir(parents=True)
                self._prepare()
                for node in self._nodes:
                    self._write_config(node)
                self._format_storage()
                deadline = time.monotonic() + self._start_timeout
                for node in self._nodes:
                    self._spawn(node)
                self._await_brokers(deadline)
                for name, partitions in self._initial_topics.items():
                    self.create_topic(name, partitions)
            except BaseException:
                self.stop()
                raise
            logger.info(
                "Apache Kafka %s with %d node(s) at %s (pids %s, folder %s)",
                KAFKA_VERSION, self._brokers, self.bootstrap_servers, self.pids, self._folder,
            )
            return self

    def stop(self, timeout: float = 8.0) -> None:
        """Stop every JVM (SIGTERM, then SIGKILL after ``timeout``) and remove the folder.

        Idempotent; never raises for nodes that are already gone.
        """
        with self._lock:
            for node in self._nodes:
                if node.alive:
                    assert node.process is not None
                    node.process.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + timeout
            for node in self._nodes:
                self._reap(node, max(0.1, deadline - time.monotonic()))
            if self._folder is not None:
                shutil.rmtree(self._folder, ignore_errors=True)
            if self._nodes:
                logger.info("Apache Kafka at %s stopped", self.bootstrap_servers)
            self._nodes = []
            self._folder = None
            self._admin_client = None
            self._unregister_atexit()

    def _needs_start(self) -> bool:
        return not self._nodes

    def __repr__(self) -> str:
        state = self.bootstrap_servers if self._nodes else "not started"
        return f"ApacheKafka(brokers={self._brokers}, {state})"

    # -- real faults ------------------------------------------------------------

    def kill_broker(self, broker_id: int, signum: int = signal.SIGKILL) -> None:
        """Kill one node's JVM (SIGKILL by default: no controlled shutdown).

        Parameters
        ----------
        broker_id : int
            Node id ``1..brokers``.
        signum : int, default SIGKILL
            The signal; SIGTERM makes a controlled shutdown (leadership moves first).
        """
        node = self._node(broker_id)
        with self._lock:
            if node.alive:
                assert node.process is not None
                node.process.send_signal(signum)
                self._reap(node, 60.0)
                logger.info("node %d killed with signal %d", broker_id, signum)

    def start_broker(self, broker_id: int, *, timeout: float = 120.0) -> None:
        """Start a stopped node again on its ports and data, and wait until it is registered."""
        node = self._node(broker_id)
        with self._lock:
            if node.alive:
                return
            self._spawn(node)
            self._await_brokers(time.monotonic() + timeout, nodes=[node])
            logger.info("node %d started again", broker_id)

    def broker_down(self, broker_id: int) -> None:
        """Take a broker down: SIGKILL its JVM (``-1``: every node)."""
        for node_id in self._ids(broker_id):
            self.kill_broker(node_id)

    def broker_up(self, broker_id: int) -> None:
        """Bring a broker back: start its JVM on the same ports and data (``-1``: every node)."""
        for node_id in self._ids(broker_id):
            self.start_broker(node_id)

    def push_request_errors(self, api_key: int, codes: Sequence[int]) -> None:
        """Not possible on real Kafka; the mock cluster (``engine="mock"``) injects protocol errors."""
        raise EmbeddedBrokerError("pushed request errors exist only on the mock cluster (engine 'mock')")

    # -- topics and records ---------------------------------------------------------

    def admin(self) -> Any:
        """The cluster's confluent-kafka ``AdminClient`` (one, kept while the cluster runs).

        Keep a reference while a request's future is pending: a collected client
        fails its futures with ``_DESTROY``.
        """
        from confluent_kafka.admin import AdminClient

        with self._lock:
            if self._admin_client is None:
                self._admin_client = AdminClient({"bootstrap.servers": self.bootstrap_servers})
            return self._admin_client

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: Optional[int] = None,
        config: Optional[Mapping[str, str]] = None,
    ) -> None:
        """Create a topic and wait until every partition has a leader.

        Parameters
        ----------
        name : str
            Topic name.
        partitions : int, default 1
            Partition count.
        replication_factor : int, optional
            Replicas per partition; default ``min(3, brokers)``.
        config : dict of str to str, optional
            Topic settings (``cleanup.policy``, ``retention.ms``, ``segment.ms``, ...).

        Raises
        ------
        EmbeddedBrokerError
            When the broker refuses (``kafka_error_code`` 36: the topic exists).
        """
        from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]  # re-exported without __all__

        replicas = replication_factor if replication_factor is not None else min(3, self._brokers)
        topic = NewTopic(name, num_partitions=partitions, replication_factor=replicas, config=dict(config or {}))
        self._admin_result(self.admin().create_topics([topic], request_timeout=30)[name], f"create topic {name!r}")
        self._await_leaders(name, partitions)

    def delete_topic(self, name: str) -> None:
        """Delete a topic and wait until the brokers no longer list it."""
        self._admin_result(self.admin().delete_topics([name], request_timeout=30)[name], f"delete topic {name!r}")
        admin = self.admin()
        deadline = time.monotonic() + 60
        while name in admin.list_topics(timeout=10).topics:
            if time.monotonic() > deadline:
                raise EmbeddedBrokerError(f"topic {name!r} still listed 60 s after its deletion")
            time.sleep(0.2)

    def create_partitions(self, name: str, total: int) -> None:
        """Grow a topic to ``total`` partitions (CreatePartitions) and wait for their leaders."""
        from confluent_kafka.admin import NewPartitions  # type: ignore[attr-defined]  # re-exported without __all__

        futures = self.admin().create_partitions([NewPartitions(name, total)], request_timeout=30)
        self._admin_result(futures[name], f"grow topic {name!r} to {total} partitions")
        self._await_leaders(name, total)

    def alter_topic_config(self, name: str, config: Mapping[str, str]) -> None:
        """Set topic settings (incremental: others keep their values)."""
        self._alter_config("TOPIC", name, config, f"topic {name!r}")

    def alter_group_config(self, group: str, config: Mapping[str, str]) -> None:
        """Set a consumer group's settings (KIP-848 group configs such as ``consumer.session.timeout.ms``,
        within the broker's bounds; incremental, and allowed before any member joins)."""
        self._alter_config("GROUP", group, config, f"group {group!r}")

    def _alter_config(self, kind: str, name: str, config: Mapping[str, str], what: str) -> None:
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType  # type: ignore[attr-defined]  # re-exported without __all__

        entries = [ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET) for key, value in config.items()]
        resource = ConfigResource(getattr(ResourceType, kind), name, incremental_configs=entries)
        for future in self.admin().incremental_alter_configs([resource]).values():
            self._admin_result(future, f"alter the config of {what}")

    def delete_records(self, topic: str, partition: int, before_offset: int) -> None:
        """Delete a partition's records below ``before_offset`` (DeleteRecords: the log start moves)."""
        from confluent_kafka import TopicPartition

        futures = self.admin().delete_records([TopicPartition(topic, partition, before_offset)], request_timeout=30)
        for future in futures.values():
            self._admin_result(future, f"delete records of {topic}[{partition}] below {before_offset}")

    # -- hooks of subclasses (kafka_group_devbroker.secured_kafka) ---------------------

    def _prepare(self) -> None:
        """Called by :meth:`start` once the node folders exist, before any configuration is written."""

    def _node_settings(self, node: _Node) -> dict[str, str]:
        """Further ``server.properties`` settings of ``node`` (over the defaults, under ``broker_config``)."""
        return {}

    def _format_arguments(self) -> list[str]:
        """Further arguments of ``kafka-storage format`` (``--add-scram ...``)."""
        return []

    # -- internals ----------------------------------------------------------------

    def _ids(self, broker_id: int) -> list[int]:
        return [node.node_id for node in self._nodes] if broker_id == -1 else [broker_id]

    def _node(self, broker_id: int) -> _Node:
        for node in self._nodes:
            if node.node_id == broker_id:
                return node
        raise EmbeddedBrokerError(f"no node {broker_id}: this cluster has nodes 1..{self._brokers}")

    def _write_config(self, node: _Node) -> None:
        replicas = str(min(3, self._brokers))
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self._nodes)
        config = dict(_BASE_CONFIG)
        config.update({
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
            "log.dirs": str(node.log_dir),
            "default.replication.factor": replicas,
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": str(min(2, self._brokers)),
            "share.coordinator.state.topic.replication.factor": replicas,
            "share.coordinator.state.topic.min.isr": "1",
        })
        config.update(self._node_settings(node))
        config.update(self._extra_config)
        text = "".join(f"{key}={value}\n" for key, value in config.items())
        (node.folder / "server.properties").write_text(text, encoding="utf-8")
        (node.folder / "log4j2.properties").write_text(
            _LOG4J2_PROPERTIES.format(log_file=node.folder / "server.log", level=self._log_level), encoding="utf-8"
        )

    def _jvm(self, node: _Node, main_class: str, *args: str) -> list[str]:
        assert self._classpath is not None
        return [
            _java(), f"-Xmx{self._heap}", "-Xms64m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", *_COMPILER_OPTIONS,
            "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={node.folder / 'log4j2.properties'}",
            "-cp", self._classpath, main_class, *args,
        ]

    def _format_storage(self) -> None:
        """``kafka-storage format`` for every node, in parallel."""
        processes = []
        for node in self._nodes:
            command = self._jvm(node, "kafka.tools.StorageTool", "format", "-t", self._cluster_id,
                                "-c", str(node.folder / "server.properties"), *self._format_arguments())
            processes.append((node, _launch(command, log_path=node.folder / "format.log", cwd=node.folder)))
        for node, process in processes:
            code = process.wait(timeout=120)
            if code != 0:
                log = (node.folder / "format.log").read_text(encoding="utf-8", errors="replace")
                raise EmbeddedBrokerError(f"formatting node {node.node_id}'s storage failed (exit {code}):\n{log[-3000:]}")

    def _spawn(self, node: _Node) -> None:
        command = self._jvm(node, "kafka.Kafka", str(node.folder / "server.properties"))
        node.process = _launch(command, log_path=node.folder / "stdout.log", cwd=node.folder)
        logger.debug("node %d: pid %d, port %d", node.node_id, node.process.pid, node.port)

    def _await_brokers(self, deadline: float, nodes: Optional[Sequence[_Node]] = None) -> None:
        """Wait until each wanted node has logged its start and the cluster lists them all as brokers.

        The node's own log matters after a restart: the other nodes still list a
        killed broker until its session times out.
        """
        from confluent_kafka.admin import AdminClient

        waiting = list(nodes or self._nodes)
        wanted = {node.node_id for node in waiting}
        admin: Optional[Any] = None
        while True:
            for node in waiting:
                if not node.alive:
                    raise EmbeddedBrokerError(
                        f"Kafka node {node.node_id} exited during start (status {node.process and node.process.poll()}):\n"
                        + node.output_tail()
                    )
            if all(node.started_count() > node.starts_seen for node in waiting):
                try:
                    if admin is None:
                        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
                    if wanted <= set(admin.list_topics(timeout=2).brokers):
                        for node in waiting:
                            node.starts_seen = node.started_count()
                        return
                except Exception as exc:  # KafkaException while the nodes are starting
                    logger.debug("waiting for nodes %s: %s", sorted(wanted), exc)
            if time.monotonic() > deadline:
                tails = "\n".join(n.output_tail() for n in waiting)
                raise EmbeddedBrokerError(f"Kafka nodes {sorted(wanted)} did not come up in time:\n{tails}")
            time.sleep(0.3)

    def _await_leaders(self, name: str, partitions: int, timeout: float = 60.0) -> None:
        admin = self.admin()
        deadline = time.monotonic() + timeout
        while True:
            topic = admin.list_topics(name, timeout=10).topics.get(name)
            if topic is not None and topic.error is None and len(topic.partitions) >= partitions:
                if all(p.leader >= 0 for p in topic.partitions.values()):
                    return
            if time.monotonic() > deadline:
                raise EmbeddedBrokerError(f"topic {name!r} has no leader for every partition after {timeout:.0f} s")
            time.sleep(0.1)

    @staticmethod
    def _admin_result(future: Any, what: str) -> None:
        from confluent_kafka import KafkaException

        try:
            future.result()
        except KafkaException as exc:
            error = exc.args[0]
            raise EmbeddedBrokerError(f"{what}: {error.str()}", kafka_error_code=error.code()) from exc

    def _reap(self, node: _Node, timeout: float) -> None:
        process = node.process
        if process is None:
            return
        if not wait_or_signal(process, timeout, signal.SIGKILL, logger,
                              "node %d (pid %d) did not stop in %.0f s; sending SIGKILL", node.node_id, process.pid, timeout):
            process.wait(timeout=30)
