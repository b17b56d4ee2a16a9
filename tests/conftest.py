"""Shared fixtures: Kafka clusters and a local SparkSession, always stopped.

Unit tests (``tests/unit``) start no process; integration tests
(``tests/integration``) use a real broker over TCP, real Spark and real Delta.

The broker is Apache Kafka (KRaft, jars fetched by Maven on first use) unless
``KAFKA_GROUP_TEST_BROKER=mock`` selects librdkafka's mock cluster:

- ``kafka``: one node, for tests where replication does not matter;
- ``kafka_cluster``: three nodes, for broker faults and replication;
- ``mock_kafka``: always the mock cluster, for what only it can do (pushed
  protocol errors); each such test says so.
"""

from __future__ import annotations

import contextlib
import itertools
import pathlib
import os
import sys
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import pytest

_counter = itertools.count()


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 120) -> None:
    """Wait until ``condition()`` holds; fail naming ``what`` after ``timeout_s`` (a bound, never asserted)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


@contextlib.contextmanager
def tmpfs(mount: "pathlib.Path", size: str) -> Iterator["pathlib.Path"]:
    """Mount a tmpfs of ``size`` (``1m``, ``64m``) at ``mount`` for the block; skip the test where
    mounting is not allowed (it needs root, as in CI)."""
    import subprocess

    mount.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode().strip()}): needs root")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def unique_name(prefix: str) -> str:
    """A topic or group name no other test of this run uses."""
    return f"{prefix}-{os.getpid()}-{next(_counter)}"


#: The broker engine of the integration tests: "kafka" (Apache Kafka, the default) or "mock".
BROKER_ENGINE = os.environ.get("KAFKA_GROUP_TEST_BROKER", "kafka")
if BROKER_ENGINE not in ("kafka", "mock"):
    raise RuntimeError(f"KAFKA_GROUP_TEST_BROKER={BROKER_ENGINE!r}: use 'kafka' (Apache Kafka) or 'mock'")

_clusters: Dict[Tuple[str, int], Any] = {}

#: The long tier: ``KAFKA_GROUP_SLOW_TESTS=1`` runs the tests marked ``slow`` too (CI's suite stays
#: well inside its time budget on 2 cores without them).
RUN_SLOW = os.environ.get("KAFKA_GROUP_SLOW_TESTS", "") not in ("", "0")


def pytest_collection_modifyitems(config: Any, items: List[Any]) -> None:
    """Skip the ``slow`` tier unless ``KAFKA_GROUP_SLOW_TESTS=1``."""
    if RUN_SLOW:
        return
    skip = pytest.mark.skip(reason="long tier: set KAFKA_GROUP_SLOW_TESTS=1 to run it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def _cluster(engine: str, brokers: int) -> Any:
    """A session-wide cluster of ``engine`` with ``brokers`` brokers, started on first use."""
    from kafka_group_devbroker import start_cluster

    key = (engine, brokers)
    if key not in _clusters:
        _clusters[key] = start_cluster(engine, brokers)
    return _clusters[key]


@pytest.fixture(scope="session", autouse=True)
def _stop_clusters() -> Iterator[None]:
    """Stop every cluster the run started, whatever happened."""
    try:
        yield
    finally:
        for cluster in _clusters.values():
            cluster.stop()
        _clusters.clear()


@pytest.fixture(scope="session")
def kafka() -> Any:
    """The run's Kafka: Apache Kafka with one node (or the 3-broker mock with ``KAFKA_GROUP_TEST_BROKER=mock``)."""
    return _cluster(BROKER_ENGINE, 1 if BROKER_ENGINE == "kafka" else 3)


@pytest.fixture(scope="session")
def kafka_cluster() -> Any:
    """Three brokers (Apache Kafka, or the mock with ``KAFKA_GROUP_TEST_BROKER=mock``): faults, replication."""
    return _cluster(BROKER_ENGINE, 3)


@pytest.fixture(scope="session")
def mock_kafka() -> Any:
    """librdkafka's 3-broker mock cluster, for what only it can do (pushed protocol errors)."""
    return _cluster("mock", 3)


@pytest.fixture(scope="session")
def spark() -> Iterator["SparkSession"]:  # type: ignore[name-defined]  # noqa: F821
    """A local[2] SparkSession whose Python workers use this interpreter.

    Spark's own Kafka source (``format("kafka")``, jars fetched by Maven on first
    use) is on its classpath, for the parity tests.
    """
    from kafka_group_devbroker.jars import classpath
    from pyspark_kafka_group.spark_session import local_session

    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = local_session("pyspark-kafka-group-tests", extra_jars=classpath("spark-kafka"))
    try:
        yield session
    finally:
        session.stop()


def group_stream(spark: Any, servers: str, topic: str, group: str, **options: Any) -> Any:
    """A ``kafka-group`` stream reader (not loaded) subscribed to ``topic`` from the earliest offsets."""
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


Produced = Dict[int, List[Tuple[Optional[bytes], Optional[bytes]]]]


@pytest.fixture()
def make_topic(kafka) -> Callable[[int], str]:  # type: ignore[no-untyped-def]
    """Create a fresh topic with the given partition count; returns its name."""

    def create(partitions: int) -> str:
        name = unique_name("topic")
        kafka.create_topic(name, partitions)
        return name

    return create


def produce(
    bootstrap_servers: str,
    topic: str,
    records_per_partition: Dict[int, int],
    *,
    start: int = 0,
    headers: Optional[Sequence[Tuple[str, Optional[bytes]]]] = None,
) -> Produced:
    """Produce numbered records to explicit partitions; return what each partition got."""
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
    remaining = producer.flush(30)
    assert remaining == 0, f"{remaining} records were not delivered"
    return sent
