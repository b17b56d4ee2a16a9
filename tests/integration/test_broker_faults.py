"""Broker faults while a query runs into Delta: brokers killed, the coordinator killed, pushed request errors.

The query either rides a fault out or fails with the connector's own error; after a
restart every record is in the table exactly once.

Broker faults are real on Apache Kafka (``kafka_cluster``): a node's JVM is
SIGKILLed and started again on its data, the KRaft controller included. Pushed
protocol errors run on the mock cluster (``mock_kafka``): real Kafka cannot be
told to answer a request with a chosen error.
"""

from __future__ import annotations

import contextlib
import pathlib
import time
from typing import Iterator, Tuple

import pytest

from kafka_group_devbroker import EmbeddedKafka
from tests.support import BackgroundProducer, Cluster, GroupQueries, create_topic, unique_name, wait_for

pytestmark = pytest.mark.integration

FETCH, LIST_OFFSETS, OFFSET_COMMIT, HEARTBEAT = 1, 2, 8, 12
NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, REBALANCE_IN_PROGRESS, TRANSPORT = 6, 7, 27, -195


class KeptRunning:
    """Query ``a`` of ``queries``, restarted whenever it fails, which it may only with the connector's own error."""

    def __init__(self, queries: GroupQueries) -> None:
        self._queries = queries
        self.restarts = 0
        self._query = queries.start("a", 600)

    def check(self) -> None:
        if self._query.poll() is not None:
            log = self._queries.log("a")
            assert "kafka_group.errors." in log, log[-3000:]
            self.restarts += 1
            self._query = self._queries.start("a", 600)

    def ride_out(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.check()
            time.sleep(1)

    def settle(self, producer: BackgroundProducer) -> None:
        def settled() -> bool:
            self.check()
            return self._queries.landed() == producer.expected()

        wait_for(settled, "every record exactly once after the faults", 300)
        assert all(n == 1 for n in self._queries.landed().values())
        print(f"faults survived with {self.restarts} restart(s)")


@contextlib.contextmanager
def query_at_work(kafka: Cluster, tmp_path: pathlib.Path, name: str) -> Iterator[Tuple[KeptRunning, BackgroundProducer]]:
    """Query ``a`` of a fresh group kept running on a new 6-partition topic, its first batch landed
    from 40 records per partition; the producer adds more."""
    topic = create_topic(kafka, 6, name)
    producer = BackgroundProducer(kafka.bootstrap_servers, topic, 6, per_tick=0)
    with GroupQueries(kafka.bootstrap_servers, topic, unique_name("group"), tmp_path, max_offsets=60) as queries:
        producer.produce(40)
        query = KeptRunning(queries)
        wait_for(lambda: len(queries.rows()) > 0, "the first batch", 180)
        yield query, producer


def test_query_survives_broker_faults_and_lands_everything_once(kafka_cluster: Cluster, tmp_path: pathlib.Path) -> None:
    kafka = kafka_cluster
    with query_at_work(kafka, tmp_path, "faults") as (query, producer):
        try:
            # A broker (leader of some partitions) killed for 30 s, records produced meanwhile to the others.
            kafka.broker_down(2)
            query.ride_out(30)
        finally:
            kafka.broker_up(2)
        producer.produce(20)
        # The group coordinator and the KRaft controller (whichever node they are on): every node in turn.
        for broker in (1, 3):
            try:
                kafka.broker_down(broker)
                query.ride_out(8)
            finally:
                kafka.broker_up(broker)
        producer.produce(20)
        query.settle(producer)


def test_query_survives_pushed_request_errors(mock_kafka: EmbeddedKafka, tmp_path: pathlib.Path) -> None:
    """Mock only: real Kafka cannot be made to answer requests with chosen errors."""
    kafka = mock_kafka
    with query_at_work(kafka, tmp_path, "pushed") as (query, producer):
        # Request errors pushed for a while: fetches, offset listing, heartbeats, commits, dropped connections.
        try:
            kafka.push_request_errors(FETCH, [NOT_LEADER_OR_FOLLOWER] * 10 + [TRANSPORT] * 3)
            kafka.push_request_errors(LIST_OFFSETS, [REQUEST_TIMED_OUT] * 5)
            kafka.push_request_errors(HEARTBEAT, [REBALANCE_IN_PROGRESS] * 5)
            kafka.push_request_errors(OFFSET_COMMIT, [REBALANCE_IN_PROGRESS] * 3)
            producer.produce(20)
            query.ride_out(20)
        finally:
            for api in (FETCH, LIST_OFFSETS, HEARTBEAT, OFFSET_COMMIT):
                kafka.clear_request_errors(api)
        query.settle(producer)
