"""Broker faults while a query runs into Delta: brokers killed, the coordinator killed, pushed request errors.

The query must ride every fault out (docs/reliability.md): it dying fails the test, it is
never restarted. During the broker kills an idempotent producer (``acks=all``) keeps
producing; the table must end holding exactly what the topic holds, each record once,
and every record Kafka acknowledged must be among them.

Broker faults are real on Apache Kafka (``kafka_cluster``): a node's JVM is
SIGKILLed and started again on its data, the KRaft controller included. Pushed
protocol errors run on the mock cluster (``mock_kafka``): real Kafka cannot be
told to answer a request with a chosen error.
"""

from __future__ import annotations

import contextlib
import pathlib
import time
from collections import Counter
from typing import Iterator, Tuple

import pytest

from kafka_group_devbroker import EmbeddedKafka
from tests.support import (
    BackgroundProducer,
    Cluster,
    GroupQueries,
    create_topic,
    new_consumer,
    unique_name,
    wait_for,
)

pytestmark = pytest.mark.integration

FETCH, LIST_OFFSETS, OFFSET_COMMIT, HEARTBEAT = 1, 2, 8, 12
NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, REBALANCE_IN_PROGRESS, TRANSPORT = 6, 7, 27, -195


class RidingQuery:
    """Query ``a`` of ``queries``, which must ride every fault out: it dying is a failure (its log quoted),
    never restarted."""

    def __init__(self, queries: GroupQueries) -> None:
        self._queries = queries
        # Stopped by GroupQueries at the end of the test; the run time only bounds a lost process.
        self._query = queries.start("a", 3600)

    def alive(self) -> bool:
        """Fails if the query process ended; true otherwise."""
        assert self._query.poll() is None, f"the query died during a fault:\n{self._queries.log('a')[-4000:]}"
        return True

    def ride_out(self, seconds: float) -> None:
        """Check the query is alive every second for ``seconds``."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.alive()
            time.sleep(1)

    def settle(self, expected: Counter[Tuple[int, int]]) -> None:
        """Wait until the table holds ``expected``, each record once, the query alive throughout."""
        wait_for(lambda: self.alive() and self._queries.landed() == expected,
                 "every record exactly once in the table after the faults", 300)


@contextlib.contextmanager
def query_at_work(kafka: Cluster, tmp_path: pathlib.Path, name: str,
                  per_tick: int) -> Iterator[Tuple[RidingQuery, BackgroundProducer]]:
    """Query ``a`` of a fresh group on a new 6-partition topic, its first batch landed from 40 records per
    partition; the producer (not started, ``per_tick`` records per partition every half second once it is)
    adds more."""
    topic = create_topic(kafka, 6, name)
    producer = BackgroundProducer(kafka.bootstrap_servers, topic, 6, per_tick=per_tick)
    with GroupQueries(kafka.bootstrap_servers, topic, unique_name("group"), tmp_path, max_offsets=60) as queries:
        producer.produce(40)
        query = RidingQuery(queries)
        wait_for(lambda: query.alive() and len(queries.rows()) > 0, "the first batch", 180)
        yield query, producer


def topic_records(servers: str, topic: str, partitions: int) -> Counter[Tuple[int, int]]:
    """Every (partition, offset) ``topic`` holds, read to each partition's high watermark by a plain
    consumer (no group commits), independently of the connector."""
    from confluent_kafka import TopicPartition

    consumer = new_consumer(servers, {"enable.auto.commit": False, "enable.partition.eof": True})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        held: Counter[Tuple[int, int]] = Counter()
        next_offset = {p: 0 for p in range(partitions)}
        deadline = time.monotonic() + 120
        while any(next_offset[p] < end for p, end in ends.items()):
            assert time.monotonic() < deadline, f"reading {topic} back: {len(held)} of {sum(ends.values())} records"
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                partition, offset = message.partition(), message.offset()
                assert partition is not None and offset is not None, message
                held[(partition, offset)] += 1
                next_offset[partition] = offset + 1
        return held
    finally:
        consumer.close()


def test_query_rides_out_broker_faults_with_records_in_flight(kafka_cluster: Cluster, tmp_path: pathlib.Path) -> None:
    """The producer runs through every fault; the query must not die (docs/reliability.md: it rides broker
    kills out), and the table holds what the topic holds, each record once, every acknowledged one among them."""
    kafka = kafka_cluster
    with query_at_work(kafka, tmp_path, "faults", per_tick=2) as (query, producer):
        producer.start()
        try:
            # One node (leader of some partitions) for 30 s, then each of the others in turn for 8 s, so the
            # group coordinator and the KRaft controller go too, wherever they are. Each node restarts on its data.
            for broker, seconds in ((2, 30), (1, 8), (3, 8)):
                sent = producer.sent()
                try:
                    kafka.broker_down(broker)
                    query.ride_out(seconds)
                finally:
                    kafka.broker_up(broker)
                assert producer.sent() > sent, f"nothing was produced while node {broker} was down"
                query.alive()
        finally:
            producer.stop()
        acknowledged = producer.expected()
        held = topic_records(kafka.bootstrap_servers, producer.topic, 6)
        assert all(n == 1 for n in held.values()), "the idempotent producer wrote a record twice"
        assert not acknowledged - held, f"acknowledged records missing from the topic: {sorted(acknowledged - held)[:10]}"
        query.settle(held)
        print(f"{len(held)} records, {len(acknowledged)} acknowledged, {len(producer.failed())} failed deliveries")


def test_query_rides_out_pushed_request_errors(mock_kafka: EmbeddedKafka, tmp_path: pathlib.Path) -> None:
    """Mock only: real Kafka cannot be made to answer requests with chosen errors."""
    kafka = mock_kafka
    with query_at_work(kafka, tmp_path, "pushed", per_tick=0) as (query, producer):
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
        query.settle(producer.expected())
