"""Plain helpers shared by the tests (no fixtures: those live in ``tests/conftest.py``).

After confluent-kafka-python's ``tests/integration/cluster_fixture.py``: one helper
per thing the tests repeat.

- Names and waiting: :func:`unique_name`, :func:`wait_for` (a bound that fails naming
  what it waited for; never an asserted timing), :func:`tmpfs`.
- Kafka: :func:`create_topic`, :func:`produce` (``seed_topic``), :func:`new_consumer`
  (a fresh group id unless one is given), :func:`group_committed`, :func:`describe_group` (Kafka's own
  ``kafka-consumer-groups --describe``).
- Spark: :func:`group_stream` (a ``kafka-group`` reader), :func:`run_available_now`, :class:`OffsetCollector`,
  :func:`progress` (a query's progress as plain dicts).
- Delta: :func:`table_records`, :func:`table_offsets`, :func:`table_positions`, :func:`expected`,
  :func:`keep_columns`, :func:`delta_query_command` (a DeltaSink query as its own process).
- Several queries of one group as processes: :class:`BackgroundProducer`, :class:`GroupQueries`.
- The processes a child driver's JVM started: :func:`source_runners`, :func:`still_running`,
  :func:`kill_survivors`, :func:`wait_until_stopped_query_ended`; a cluster that stops answering:
  :func:`freeze`.
- A rebalance listener that records to a file: :func:`record_rebalance`, :func:`recorded`.

Third-party imports sit inside the helpers that need them: Spark's Python runner
imports this module (for :func:`record_rebalance`) and ``tests/chaos.py`` runs it
outside pytest.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from types import ModuleType, TracebackType
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Set,
    Tuple,
    Type,
)

from kafka_group_devbroker import ApacheKafka, DevelopmentCluster, EmbeddedKafka
from tests.support_child_jvm import child_env

if TYPE_CHECKING:
    from confluent_kafka import Consumer
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    from kafka_group.rebalance_event import RebalanceEvent

REPO = pathlib.Path(__file__).resolve().parents[1]

#: The broker engine of the integration tests: "kafka" (Apache Kafka, the default) or "mock".
BROKER_ENGINE = os.environ.get("KAFKA_GROUP_TEST_BROKER", "kafka")
if BROKER_ENGINE not in ("kafka", "mock"):
    raise RuntimeError(f"KAFKA_GROUP_TEST_BROKER={BROKER_ENGINE!r}: use 'kafka' (Apache Kafka) or 'mock'")


def load_build_native() -> ModuleType:
    """``native/build_native.py`` loaded by its path (it is not in a package: ``setup.py`` loads it the same way)."""
    spec = importlib.util.spec_from_file_location("_kafka_group_build_native", REPO / "native" / "build_native.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: The long tier: ``KAFKA_GROUP_SLOW_TESTS=1`` runs the tests marked ``slow`` too (CI's suite stays
#: well inside its time budget on 2 cores without them).
RUN_SLOW = os.environ.get("KAFKA_GROUP_SLOW_TESTS", "") not in ("", "0")

# delta-spark in the tests' local sessions (the suite's, ``catalog_query.py``'s), as users configure it, with two
# task counts cut to the tests' tables of a few files on local[2]: the same results, far fewer tasks.
DELTA_SPARK_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # A snapshot's state is rebuilt in 50 tasks by default.
    "spark.databricks.delta.snapshotPartitions": "2",
    # VACUUM lists the table's folder in this many tasks (10,000 by default, read from delta-spark's
    # VacuumCommand): one VACUUM took 80 to 131 s under CI's load, and 23 to 27 s with 2 (November 2026).
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
}
#: Whether the standalone-cluster tier runs (``tests/cluster``, marked ``cluster``; scripts/test-cluster.sh sets it).
RUN_CLUSTER = os.environ.get("KAFKA_GROUP_CLUSTER_TESTS", "") not in ("", "0")


def long_tier(*values: object, id: Optional[str] = None) -> Any:
    """A parametrization case in the long tier: another variant of a scenario whose first case runs by
    default (``pytest.param(*values, id=id, marks=pytest.mark.slow)``)."""
    import pytest

    return pytest.param(*values, id=id, marks=pytest.mark.slow)

#: A development cluster of either engine (what the ``kafka`` fixtures return).
Cluster = DevelopmentCluster

#: The ``make_topic`` fixture: creates a fresh topic with this many partitions, returns its name.
MakeTopic = Callable[[int], str]

#: What :func:`produce` sent: partition -> (key, value) of each record, in order.
Produced = Dict[int, List[Tuple[Optional[bytes], Optional[bytes]]]]

#: (topic, partition, offset) -> how often it is there.
Records = Counter[Tuple[str, int, int]]

_counter = itertools.count()


# -- names and waiting --------------------------------------------------------------------------------------------


def unique_name(prefix: str) -> str:
    """A topic or group name no other test of this run uses."""
    return f"{prefix}-{os.getpid()}-{next(_counter)}"


def wait_for(condition: Callable[[], object], what: str, timeout_s: float = 300, interval_s: float = 0.5) -> None:
    """Wait until ``condition()`` is true; fail naming ``what`` after ``timeout_s``.

    The timeout is a bound for a broken run, never an asserted timing: a passing run never waits for it,
    so it is generous. On a loaded 2-core CI machine a standalone cluster's first batch once took over
    120 s (the earlier default) where it takes 13 s alone.
    """
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout_s:g} s waiting for {what}"
        time.sleep(interval_s)


def skip_unless_ci(reason: str) -> None:
    """Skip the test for ``reason`` (a privilege it needs, as root's), but fail it in CI (``CI=true``), which
    runs as root so that such tests run: there a skip would quietly drop them."""
    import pytest

    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI (CI=true) must run the tests as root, this runs as uid {os.getuid()}")
    pytest.skip(reason)


def require_root(why: str) -> None:
    """Skip (outside CI) or fail (in CI) the test unless it runs as root: ``why`` needs root."""
    if os.getuid() != 0:
        skip_unless_ci(f"{why} needs root")


@contextlib.contextmanager
def tmpfs(mount: pathlib.Path, size: str) -> Iterator[pathlib.Path]:
    """Mount a tmpfs of ``size`` (``1m``, ``64m``) at ``mount`` for the block; skip the test where
    mounting is not allowed (it needs root), fail it in CI (:func:`skip_unless_ci`)."""
    mount.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        skip_unless_ci(f"cannot mount a tmpfs here ({done.stderr.decode().strip()}): needs root")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


# -- Kafka --------------------------------------------------------------------------------------------------------


def create_topic(kafka: Cluster, partitions: int, prefix: str = "topic", **options: Any) -> str:
    """Create a topic no other test uses, with ``partitions`` partitions; return its name.

    ``options`` go to the cluster's ``create_topic`` (``config=``, ``replication_factor=``).
    """
    name = unique_name(prefix)
    kafka.create_topic(name, partitions, **options)
    return name


#: The executor read path the tests read with (option ``read.path``'s default follows it too):
#: ``auto`` (native where built), ``native`` or ``python``. CI runs the suite on both.
READ_PATH = os.environ.get("KAFKA_GROUP_READ_PATH", "auto")


def read_planned(offset_ranges: Sequence[Any], settings: Any, read_path: Optional[str] = None) -> Iterator[Any]:
    """A task's batches, read by the path ``read_path`` (default :data:`READ_PATH`) chooses, as an executor reads."""
    from kafka_group.read.read_path import choose_native

    native = choose_native(read_path or READ_PATH, settings.client_config, explicit=read_path is not None)
    if native is None:
        from kafka_group.read.fetch import read_ranges

        return read_ranges(list(offset_ranges), settings)
    from kafka_group.read.native_fetch import read_ranges_native

    return read_ranges_native(list(offset_ranges), settings, native)


def apache(kafka: Cluster) -> ApacheKafka:
    """``kafka`` as Apache Kafka, for what only it does (topic configs, killing a node, adding partitions);
    the test must already be skipped on the mock cluster."""
    assert isinstance(kafka, ApacheKafka), f"this test needs Apache Kafka, not {type(kafka).__name__}"
    return kafka


def mock(kafka: Cluster) -> EmbeddedKafka:
    """``kafka`` as librdkafka's mock cluster, for what only it does (pushed protocol errors)."""
    assert isinstance(kafka, EmbeddedKafka), f"this test needs the mock cluster, not {type(kafka).__name__}"
    return kafka


def produce(
    bootstrap_servers: str,
    topic: str,
    records_per_partition: Mapping[int, int],
    *,
    start: int = 0,
    headers: Optional[Sequence[Tuple[str, Optional[bytes]]]] = None,
) -> Produced:
    """Seed ``topic``: numbered records to explicit partitions; return what each partition got.

    Record ``i`` of partition ``p`` has key ``k<p>-<i>`` and value ``{"n":i,"p":p}``.
    """
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap_servers, "linger.ms": 5})
    sent: Produced = {}
    for partition, count in records_per_partition.items():
        for i in range(start, start + count):
            key = f"k{partition}-{i}".encode()
            value = f'{{"n":{i},"p":{partition}}}'.encode()
            producer.produce(topic, key=key, value=value, partition=partition, headers=list(headers or []))
            sent.setdefault(partition, []).append((key, value))
        producer.poll(0)
    remaining = producer.flush(120)  # a bound for a broken broker: a loaded one answers within seconds
    assert remaining == 0, f"{remaining} records were not delivered"
    return sent


def new_consumer(bootstrap_servers: str, conf: Optional[Mapping[str, Any]] = None, *,
                 group: Optional[str] = None) -> "Consumer":
    """A confluent-kafka consumer of group ``group`` (a fresh group id when ``None``) with the further
    librdkafka settings ``conf``; close it after use."""
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": bootstrap_servers,
                     "group.id": group if group is not None else unique_name("group"), **(conf or {})})


def group_committed(servers: str, group: str, topic: str, partitions: int) -> Dict[int, Optional[int]]:
    """The offsets ``group`` has committed in Kafka for each partition of ``topic`` (``None``: none)."""
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    reader = new_consumer(servers, group=group)
    try:
        answer = reader.committed([KafkaTopicPartition(topic, p) for p in range(partitions)], timeout=60)
    finally:
        reader.close()
    return {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in answer}


def describe_group(servers: str, group: str,
                   command_config: Optional[pathlib.Path] = None) -> Dict[int, Dict[str, str]]:
    """Kafka's own lag tool (``kafka-consumer-groups --describe --group``, the class
    ``org.apache.kafka.tools.consumer.group.ConsumerGroupCommand`` in the broker's jars): per partition,
    its row by column name (``CURRENT-OFFSET``, ``LOG-END-OFFSET``, ``LAG``, ``CLIENT-ID``...; ``-`` where
    the tool shows none). ``command_config``: the client properties file of a secured cluster
    (``--command-config``). Apache Kafka only; the JVM needs ``/work/coord/heavy`` like the broker."""
    import shutil

    from kafka_group_devbroker.jars import classpath

    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else (shutil.which("java") or "java")
    done = subprocess.run(
        [java, "-Xmx256m", "-cp", os.pathsep.join(classpath("kafka")),
         "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "--bootstrap-server", servers,
         "--describe", "--group", group, *(["--command-config", str(command_config)] if command_config else [])],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"kafka-consumer-groups failed: {done.stdout}{done.stderr}"
    rows: Dict[int, Dict[str, str]] = {}
    header: List[str] = []
    for line in done.stdout.splitlines():
        cells = line.split()
        if cells[:1] == ["GROUP"]:
            header = cells
        elif header and len(cells) == len(header):
            row = dict(zip(header, cells))
            rows[int(row["PARTITION"])] = row
    return rows


# -- Spark --------------------------------------------------------------------------------------------------------


def group_stream(spark: "SparkSession", servers: str, topic: str, group: str, **options: Any) -> Any:
    """A ``kafka-group`` stream reader (not loaded) subscribed to ``topic`` from the earliest offsets.

    Typed ``Any``: the tests chain Spark's builder calls freely (``.load().writeStream...``).
    """
    reader = (
        spark.readStream.format("kafka-group")
        .option("kafka.bootstrap.servers", servers)
        .option("subscribe", topic)
        .option("kafka.group.id", group)
        .option("startingOffsets", "earliest")
        # The mock cluster keeps a member that left until its session times out.
        .option("kafka.session.timeout.ms", "6000")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader


class OffsetCollector:
    """A ``foreachBatch`` function that keeps the (partition, offset) of every row, per batch id.

    A batch Spark replays after a restart (same id, same data) replaces its first delivery.
    Caller: Spark's ``foreachBatch`` (its own thread) and the test's thread.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._batches: Dict[int, List[Tuple[int, int]]] = {}

    def __call__(self, batch: Any, batch_id: int) -> None:
        found = [(r.partition, r.offset) for r in batch.select("partition", "offset").collect()]
        with self._lock:
            self._batches[batch_id] = found

    def landed(self) -> Counter[Tuple[int, int]]:
        """How often each (partition, offset) was delivered (a replay counted once)."""
        with self._lock:
            return Counter(k for rows in self._batches.values() for k in rows)


def progress(query: "StreamingQuery") -> List[Dict[str, Any]]:
    """The query's recent progress, each as the plain dict of its JSON (oldest first)."""
    return [json.loads(p.json) if hasattr(p, "json") else dict(p) for p in query.recentProgress]


def delta_source(spark: "SparkSession", kafka: Cluster, topic: str, group: str, table: pathlib.Path,
                 **options: Any) -> "DataFrame":
    """A loaded ``kafka-group`` stream of ``topic`` whose offsets live in the Delta table ``table``."""
    loaded: DataFrame = group_stream(spark, kafka.bootstrap_servers, topic, group,
                                     **{"offsets.table": str(table), **options}).load()
    return loaded


def land_available_now(df: "DataFrame", sink: Callable[[Any, int], None], checkpoint: pathlib.Path) -> "StreamingQuery":
    """Run ``df`` into ``sink`` (a ``foreachBatch`` function, such as a DeltaSink) with
    ``Trigger.AvailableNow`` until it ends; return the query (a failure raises ``StreamingQueryException``)."""
    return run_available_now(df.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint)))


def run_available_now(writer: "DataStreamWriter") -> "StreamingQuery":
    """Start ``writer`` (a ``DataStreamWriter``) with ``Trigger.AvailableNow``, wait for it to end; return the query.

    A failed query raises ``StreamingQueryException`` here.
    """
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()
    return query


# -- Delta --------------------------------------------------------------------------------------------------------


def table_records(table: pathlib.Path) -> Records:
    """How often each (topic, partition, offset) is in the Delta table at ``table``."""
    from deltalake import DeltaTable

    data = DeltaTable(str(table)).to_pyarrow_dataset().to_table(columns=["topic", "partition", "offset"])
    return Counter(zip(data.column("topic").to_pylist(), data.column("partition").to_pylist(),
                       data.column("offset").to_pylist()))


def table_folder_files(table: pathlib.Path) -> Set[str]:
    """Every file under ``table`` outside ``_delta_log``, relative to it: what a refused batch must not add."""
    return {str(path.relative_to(table)) for path in table.rglob("*")
            if path.is_file() and "_delta_log" not in path.relative_to(table).parts}


def table_offsets(table: pathlib.Path) -> Counter[Tuple[int, int]]:
    """How often each (partition, offset) is in the Delta table at ``table`` (empty before its first commit)."""
    from deltalake import DeltaTable

    if not (table / "_delta_log").exists():
        return Counter()
    data = DeltaTable(str(table)).to_pyarrow_dataset().to_table(columns=["partition", "offset"])
    return Counter(zip(data.column("partition").to_pylist(), data.column("offset").to_pylist()))


def expected(topic: str, counts: Mapping[int, int], start: int = 0) -> Records:
    """Offsets ``[start, start + n)`` of each partition of ``topic``, once each."""
    return Counter((topic, p, o) for p, n in counts.items() for o in range(start, start + n))


def table_positions(table: pathlib.Path, group: str, topic: str, partitions: int) -> Dict[int, Optional[int]]:
    """The Kafka offset the table holds for ``group`` on each partition (its app transaction; ``None``: none)."""
    from deltalake import DeltaTable

    from kafka_group.delta.offsets.offsets_table import transaction_id
    from kafka_group.offsets import TopicPartition

    dt = DeltaTable(str(table))
    return {p: dt.transaction_version(transaction_id(group, TopicPartition(topic, p))) for p in range(partitions)}


def keep_columns(df: Any) -> Any:
    """A DeltaSink transform keeping the value (as a string), topic, partition and offset."""
    return df.selectExpr("CAST(value AS STRING) AS value", "topic", "partition", "offset")


def delta_query_command(servers: str, topic: str, group: str, table: "pathlib.Path | str", checkpoint: pathlib.Path,
                        *arguments: str) -> List[str]:
    """The command line of ``tests.integration.delta_query`` (a DeltaSink query as its own process; run it
    with ``cwd=REPO``); ``arguments`` are its further options (``--available-now``, ``--max-offsets N``...)."""
    return [sys.executable, "-m", "tests.integration.delta_query", servers, topic, group, str(table),
            str(checkpoint), *arguments]


# -- several queries of one group, as processes -------------------------------------------------------------------


class BackgroundProducer:
    """Produces ``per_tick`` records to each partition every half second (once :meth:`start` ran) with one
    idempotent producer (``acks=all``, no duplicates in Kafka when a send is retried), counting what
    Kafka acknowledged: :meth:`expected` is exactly the acknowledged records, never a record whose
    delivery failed or is still in flight. Broker faults do not stop the thread: a send retries until
    ``message.timeout.ms`` passes, and a record that fails is counted in :meth:`failed`. ``topic``: the
    topic it writes to."""

    def __init__(self, servers: str, topic: str, partitions: int, per_tick: int) -> None:
        from confluent_kafka import Producer

        self.topic, self._per_tick, self._partitions = topic, per_tick, partitions
        self._producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True, "acks": "all",
                                   "linger.ms": 5})
        self._sent = 0
        self._acked: Set[Tuple[int, int]] = set()
        self._failed: List[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._error: Optional[BaseException] = None

    def produce(self, per_partition: int) -> None:
        """Produce ``per_partition`` records to each partition now and wait (at most 30 s) until all are
        acknowledged (fails otherwise). Thread: the test's; the background thread sends with :meth:`_send`."""
        self._send(per_partition)
        deadline = time.monotonic() + 30
        while self.in_flight() and time.monotonic() < deadline:
            with self._lock:
                self._producer.poll(0.1)
        assert not self.in_flight(), f"{self.in_flight()} records were not acknowledged in 30 s"
        assert not self._failed, f"deliveries failed: {self._failed[:5]}"

    def start(self) -> None:
        """Start producing every half second."""
        self._thread.start()

    def stop(self) -> None:
        """Stop producing and wait (at most 5 min, librdkafka's delivery timeout) for the records in flight
        to be acknowledged or fail; fails if the thread died or records are still in flight."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(30)
        assert not self._thread.is_alive(), "the producer thread did not stop in 30 s"
        deadline = time.monotonic() + 310
        while self.in_flight() and time.monotonic() < deadline:
            with self._lock:
                self._producer.poll(0.5)
        assert not self.in_flight(), f"{self.in_flight()} records neither acknowledged nor failed"
        assert self._error is None, f"the producer thread failed: {self._error!r}"

    def sent(self) -> int:
        """How many records were handed to the producer so far."""
        with self._lock:
            return self._sent

    def in_flight(self) -> int:
        """Records sent but neither acknowledged nor failed yet."""
        with self._lock:
            return self._sent - len(self._acked) - len(self._failed)

    def failed(self) -> List[str]:
        """The errors of the records whose delivery failed (not expected anywhere; they may still be in Kafka
        if only the acknowledgement was lost)."""
        with self._lock:
            return list(self._failed)

    def expected(self) -> Counter[Tuple[int, int]]:
        """Every (partition, offset) Kafka acknowledged so far, once."""
        with self._lock:
            return Counter(self._acked)

    def _delivered(self, error: Any, message: Any) -> None:
        # Called by librdkafka inside poll()/produce(), which run under self._lock.
        if error is None:
            self._acked.add((message.partition(), message.offset()))
        else:
            self._failed.append(str(error))

    def _send(self, per_partition: int) -> None:
        with self._lock:
            for partition in range(self._partitions):
                for _ in range(per_partition):
                    i = self._sent
                    while True:
                        try:
                            self._producer.produce(self.topic, key=f"k{partition}-{i}".encode(),
                                                   value=f'{{"n":{i},"p":{partition}}}'.encode(),
                                                   partition=partition, on_delivery=self._delivered)
                            break
                        except BufferError:  # the local queue is full: serve delivery reports, then retry
                            self._producer.poll(0.1)
                    self._sent += 1
            self._producer.poll(0)

    def _run(self) -> None:
        try:
            while not self._stop.wait(0.5):
                self._send(self._per_tick)
        except BaseException as error:  # reported by stop(), never lost with the thread
            self._error = error


class GroupQueries:
    """Starts DeltaSink queries of one group into one table, each ``tests.integration.delta_query`` in a
    process group of its own; kills the survivors on exit, whatever happened. The table is read back with
    the writer (pid) of each row. ``trigger_seconds``: the queries' processing-time trigger interval
    (``delta_query``'s own 0.5 s when ``None``); a test whose queries keep landing while others start
    (Spark starts take tens of seconds on a loaded machine) spends most of its CPU on those batches."""

    def __init__(self, servers: str, topic: str, group: str, workdir: pathlib.Path, max_offsets: int,
                 trigger_seconds: Optional[float] = None) -> None:
        self.table = workdir / "table"
        self._servers, self._topic, self._group = servers, topic, group
        self._workdir, self._max_offsets = workdir, max_offsets
        self._trigger = [] if trigger_seconds is None else ["--trigger-seconds", str(trigger_seconds)]
        self._processes: List["subprocess.Popen[bytes]"] = []

    def start(self, name: str, run_seconds: int, options: Sequence[str] = (),
              extra: Sequence[str] = ()) -> "subprocess.Popen[bytes]":
        """Start query ``name`` (checkpoint ``chk-<name>``, log ``<name>.log``) for ``run_seconds``.

        ``options`` are extra source options, ``KEY=VALUE``; ``extra`` are further
        arguments of ``tests.integration.delta_query`` (``--batch-sleep``, ``--record-reads``). The query also stops
        (leaving the group) once :meth:`stop_file` of ``name`` exists.
        """
        command = delta_query_command(self._servers, self._topic, self._group, self.table, self.checkpoint(name),
                                      "--run-seconds", str(run_seconds), "--max-offsets", str(self._max_offsets),
                                      "--stop-file", str(self.stop_file(name)), *self._trigger)
        for option in options:
            command += ["--option", option]
        command += list(extra)
        env = child_env({"KAFKA_GROUP_LOG_LEVEL": "INFO"})
        process = subprocess.Popen(command, cwd=REPO, start_new_session=True, env=env, stdout=subprocess.DEVNULL,
                                   stderr=open(self._workdir / f"{name}.log", "ab"))
        self._processes.append(process)
        return process

    def stop_file(self, name: str) -> pathlib.Path:
        """Create this file to make query ``name`` stop (``query.stop()``: its member leaves the group)."""
        return self._workdir / f"stop-{name}"

    def reads(self) -> Counter[Tuple[int, int]]:
        """How often each (partition, offset) was read by the queries started with ``--record-reads``
        pointing into the work folder as ``reads-<name>.txt``."""
        counts: Counter[Tuple[int, int]] = Counter()
        for path in self._workdir.glob("reads-*.txt"):
            for line in path.read_text().splitlines():
                partition, offset = line.split()
                counts[(int(partition), int(offset))] += 1
        return counts

    def checkpoint(self, name: str) -> pathlib.Path:
        """Query ``name``'s checkpoint folder."""
        return self._workdir / f"chk-{name}"

    def log(self, name: str) -> str:
        """What query ``name`` wrote to stderr so far."""
        return (self._workdir / f"{name}.log").read_text()

    def rows(self) -> List[Tuple[int, int, int]]:
        """(partition, offset, writer pid) of every row in the table."""
        from deltalake import DeltaTable

        if not (self.table / "_delta_log").exists():
            return []
        data = DeltaTable(str(self.table)).to_pyarrow_dataset().to_table(
            columns=["partition", "offset", "writer_pid"])
        return list(zip(data.column("partition").to_pylist(), data.column("offset").to_pylist(),
                        data.column("writer_pid").to_pylist()))

    def landed(self) -> Counter[Tuple[int, int]]:
        """How often each (partition, offset) is in the table."""
        return Counter((p, o) for p, o, _ in self.rows())

    def wrote(self, process: "subprocess.Popen[bytes]") -> bool:
        """Whether ``process`` has landed any row."""
        return any(pid == process.pid for _, _, pid in self.rows())

    def __enter__(self) -> "GroupQueries":
        return self

    def __exit__(self, kind: Optional[Type[BaseException]], value: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> None:
        for process in self._processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)


# -- a rebalance listener that records to a file ------------------------------------------------------------------

#: The ``rebalanceListener`` option value of :func:`record_rebalance`.
RECORD_REBALANCE = "tests.support:record_rebalance"


def events_file(group_id: str) -> pathlib.Path:
    """Where :func:`record_rebalance` writes the events of ``group_id`` (one JSON line each)."""
    return pathlib.Path(tempfile.gettempdir()) / f"kafka-group-listener-{group_id}.jsonl"


def record_rebalance(event: "RebalanceEvent") -> None:
    """A ``rebalanceListener`` (:data:`RECORD_REBALANCE`): append ``event`` to :func:`events_file` of its group.

    Caller: the group member's poll thread, in Spark's Python runner process.
    """
    line = {
        "kind": event.kind, "generation": event.generation, "member_id": event.member_id,
        "partitions": sorted(tp.partition for tp in event.partitions),
        "owned": sorted(tp.partition for tp in event.owned), "at": event.at,
    }
    with open(events_file(event.group_id), "a") as out:
        out.write(json.dumps(line) + "\n")


def recorded(group_id: str) -> List[Dict[str, Any]]:
    """The events :func:`record_rebalance` has written for ``group_id``."""
    path = events_file(group_id)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# -- an S3-compatible server on loopback ----------------------------------------------------------------------------


class S3Server:
    """moto's S3 server (``moto[server]`` from PyPI) as its own process on a free loopback port.

    moto rather than S3Proxy: it is a Python package the test extra already installs (no Java
    download), and it honours ``If-None-Match: *`` on PutObject, the conditional put delta-rs
    commits with on S3. It runs as a separate process, never in the test process: delta-rs's
    Rust calls hold the GIL while they wait for the server's answer, so an in-process server
    thread deadlocks them.
    """

    ACCESS_KEY, SECRET_KEY, REGION = "testing-key", "Canary-S3-Secret-4412", "us-east-1"

    def __init__(self, log: pathlib.Path) -> None:
        import socket

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._log = open(log, "wb")
        self._process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                         stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(self._answers, f"moto's S3 server on {self.endpoint}", timeout_s=180, interval_s=0.2)

    def _answers(self) -> bool:
        import urllib.error
        import urllib.request

        if self._process.poll() is not None:
            raise RuntimeError(f"moto's S3 server exited with {self._process.returncode}; see {self._log.name}")
        try:
            urllib.request.urlopen(self.endpoint, timeout=2).close()
        except urllib.error.HTTPError:
            return True  # it answers
        except OSError:
            return False
        return True

    @property
    def storage_options(self) -> Dict[str, str]:
        """delta-rs storage options reaching this server."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ALLOW_HTTP": "true", "AWS_REGION": self.REGION,
                "AWS_ACCESS_KEY_ID": self.ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": self.SECRET_KEY}

    def create_bucket(self, prefix: str = "bucket") -> str:
        """A new bucket (names need 3 or more characters); returns its name."""
        import urllib.request

        name = unique_name(prefix).lower().replace("_", "-")
        urllib.request.urlopen(urllib.request.Request(f"{self.endpoint}/{name}", method="PUT"), timeout=10).close()
        return name

    def stop(self) -> None:
        """Stop the server process (by its pid) and close its log."""
        stop_process(self._process)
        self._log.close()


def stop_process(process: "subprocess.Popen[bytes]") -> None:
    """End ``process`` (one this test run started): SIGTERM, then SIGKILL after 10 s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


class S3WithoutConditionalPut:
    """An S3 endpoint that ignores conditional puts, in front of ``server``: the proxy
    ``tests/s3_no_conditional_put.py`` as its own process on a free loopback port, which drops
    ``If-None-Match`` (and ``If-Match``) from every request. A second create of an object then
    overwrites it, as on an S3-compatible store without conditional writes."""

    def __init__(self, server: S3Server, log: pathlib.Path) -> None:
        import socket

        self.server = server
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._log = open(log, "wb")
        self._process = subprocess.Popen(
            [sys.executable, str(REPO / "tests" / "s3_no_conditional_put.py"), str(self.port), server.endpoint],
            stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(self._answers, f"the S3 proxy without conditional puts on {self.endpoint}", timeout_s=180,
                 interval_s=0.2)

    def _answers(self) -> bool:
        import socket

        if self._process.poll() is not None:
            raise RuntimeError(f"the S3 proxy exited with {self._process.returncode}; see {self._log.name}")
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=2).close()
        except OSError:
            return False
        return True

    @property
    def storage_options(self) -> Dict[str, str]:
        """delta-rs storage options reaching the server through this proxy."""
        return {**self.server.storage_options, "AWS_ENDPOINT_URL": self.endpoint}

    def create_bucket(self, prefix: str = "bucket") -> str:
        """A new bucket on the server behind the proxy; returns its name."""
        return self.server.create_bucket(prefix)

    def stop(self) -> None:
        """Stop the proxy process (by its pid) and close its log."""
        stop_process(self._process)
        self._log.close()


def listening_addresses(port: int) -> Set[str]:
    """The local addresses of the sockets listening on TCP ``port`` on this machine (IPv4 dotted, IPv6
    compressed; an IPv4-mapped IPv6 address as its IPv4 address), as the kernel lists them in
    ``/proc/net/tcp`` and ``tcp6`` (Linux)."""
    import socket
    import struct

    found: Set[str] = set()
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        path = pathlib.Path(table)
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            address, _, hex_port = fields[1].partition(":")
            if int(hex_port, 16) != port or fields[3] != "0A":  # 0A: TCP_LISTEN
                continue
            raw = bytes.fromhex(address)
            # the kernel prints each 32-bit word in host order
            words = b"".join(struct.pack("=I", struct.unpack(">I", raw[i:i + 4])[0]) for i in range(0, len(raw), 4))
            text = socket.inet_ntop(family, words)
            found.add(text.removeprefix("::ffff:") if text.startswith("::ffff:") and "." in text else text)
    return found


def bin_without_javac(folder: pathlib.Path) -> pathlib.Path:
    """A folder of links to every command of ``/usr/bin`` and ``/bin`` but ``javac``: as ``PATH`` (with
    ``JAVA_HOME`` unset), a machine with a Java runtime and no JDK (``java`` stays, for Spark)."""
    folder.mkdir(parents=True, exist_ok=True)
    for directory in (pathlib.Path("/usr/bin"), pathlib.Path("/bin")):
        for command in directory.iterdir():
            link = folder / command.name
            if command.name != "javac" and not link.exists() and not link.is_symlink():
                link.symlink_to(command)
    assert (folder / "java").exists() and not (folder / "javac").exists()
    return folder


# -- processes a Spark driver started --------------------------------------------------------------------------------

#: How long a stopped query's processes may take to end once its driver has: the close's own bound
#: (``kafka_group.group.sigterm``) and a loaded machine's margin, well under the minutes a stuck one lives.
ENDED_WITHIN_S = 90

#: The module of the process in which Spark runs a Python streaming source's planning calls (one per query).
SOURCE_RUNNER_MODULE = "pyspark.sql.streaming.python_streaming_source_runner"


def _process_table() -> Dict[int, Tuple[int, str]]:
    """Every process's ``pid: (parent pid, command line)`` (Linux ``/proc``)."""
    table: Dict[int, Tuple[int, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = pathlib.Path(f"/proc/{entry}/stat").read_text(errors="replace")
            cmdline = pathlib.Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ')'
        fields = stat[stat.rfind(")") + 2:].split()
        if fields and fields[0] != "Z":
            table[int(entry)] = (int(fields[1]), cmdline.replace(b"\0", b" ").decode("utf-8", "replace"))
    return table


def source_runners(root: int) -> Dict[int, str]:
    """The streaming source runners (:data:`SOURCE_RUNNER_MODULE`) among the descendants of process ``root``
    (a test's child driver: its JVM starts them), ``pid: command line``."""
    table = _process_table()
    found: Dict[int, str] = {}
    for pid, (_, cmdline) in table.items():
        ancestor = pid
        while ancestor > 1 and ancestor in table:
            ancestor = table[ancestor][0]
            if ancestor == root:
                if SOURCE_RUNNER_MODULE in cmdline:
                    found[pid] = cmdline
                break
    return found


def still_running(processes: Mapping[int, str]) -> Dict[int, str]:
    """Those of ``processes`` (``pid: command line``) that still run: same pid, same command line, not a zombie
    (a pid the system gave to another process since is not theirs)."""
    table = _process_table()
    return {pid: cmdline for pid, cmdline in processes.items() if pid in table and table[pid][1] == cmdline}


def wait_until_stopped_query_ended(processes: Mapping[int, str], session: str, log: pathlib.Path) -> None:
    """Wait, at most :data:`ENDED_WITHIN_S`, until none of a stopped query's ``processes`` (``pid: command line``)
    runs; fail naming those left (``session``: classic or connect) with the end of the driver's ``log``."""
    ended = time.monotonic()
    try:
        wait_for(lambda: not still_running(processes), "the stopped query's source runner to end", ENDED_WITHIN_S)
    except AssertionError:
        left = still_running(processes)
        raise AssertionError(f"{len(left)} process(es) of the stopped query still run {ENDED_WITHIN_S} s after it "
                             f"ended ({session}): {sorted(left)}; driver log: {log.read_text()[-2000:]}") from None
    print(f"the stopped query's source runner ended {time.monotonic() - ended:.0f} s after its driver and cluster")


def freeze(cluster: ApacheKafka) -> None:
    """Freeze every node of ``cluster`` (SIGSTOP): its connections stay open and nothing answers, the outage
    that left a stopped query's process behind (a node killed outright refuses connections, and the client
    gives up by itself). Ending the cluster (``broker_down``, ``stop``: SIGKILL reaches a frozen process)
    ends them."""
    for pid in cluster.pids:
        os.kill(pid, signal.SIGSTOP)


def kill_survivors(processes: Mapping[int, str]) -> None:
    """SIGKILL those of ``processes`` (this test's, ``pid: command line``) that still run."""
    for pid in still_running(processes):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
