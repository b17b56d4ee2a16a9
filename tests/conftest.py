"""Shared fixtures: an embedded Kafka cluster and a local SparkSession, always stopped.

Unit tests (``tests/unit``) start no process; integration tests
(``tests/integration``) use the real broker over TCP, real Spark and real Delta.
"""

from __future__ import annotations

import itertools
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


def unique_name(prefix: str) -> str:
    """A topic or group name no other test of this run uses."""
    return f"{prefix}-{os.getpid()}-{next(_counter)}"


@pytest.fixture(scope="session")
def kafka() -> Iterator["EmbeddedKafka"]:  # type: ignore[name-defined]  # noqa: F821
    """One embedded Kafka cluster (3 brokers) for the whole run."""
    from kafka_group.embedded import EmbeddedKafka

    cluster = EmbeddedKafka(brokers=3)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def spark() -> Iterator["SparkSession"]:  # type: ignore[name-defined]  # noqa: F821
    """A local[2] SparkSession whose Python workers use this interpreter."""
    from pyspark_kafka_group.spark_session import local_session

    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = local_session("pyspark-kafka-group-tests")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def tansu() -> Iterator["TansuBroker"]:  # type: ignore[name-defined]  # noqa: F821
    """A started Tansu broker, stopped at teardown whatever the test did."""
    from kafka_group.embedded.tansu import TansuBroker

    broker = TansuBroker()
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


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
