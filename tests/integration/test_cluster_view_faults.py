"""The driver's view of offsets across broker kills: leadership moves, the view follows it.

Real Apache Kafka (``kafka_cluster``): each node's JVM is SIGKILLed and started again,
which moves partition leadership and bumps leader epochs. After every move the
driver's ``ClusterView`` must answer offsets for every partition again; an answer
cached against an old leader epoch (FENCED_LEADER_EPOCH for ever) would leave a
query planning nothing.
"""

from __future__ import annotations

from typing import Dict

import pytest
from confluent_kafka import Producer

from kafka_group.group.cluster_metadata import ClusterView
from kafka_group.offsets import TopicPartition
from tests.support import Cluster, create_topic, wait_for

pytestmark = pytest.mark.integration


def _produce(servers: str, topic: str, partitions: int, per_partition: int) -> None:
    producer = Producer({"bootstrap.servers": servers, "acks": "all"})
    for p in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, value=b"%d" % i, partition=p)
    assert producer.flush(60) == 0


def test_offsets_answered_for_every_partition_after_each_node_kill(kafka_cluster: Cluster) -> None:
    kafka = kafka_cluster
    topic = create_topic(kafka, 6, "view-faults")
    partitions = [TopicPartition(topic, p) for p in range(6)]
    view = ClusterView({"bootstrap.servers": kafka.bootstrap_servers}, 10_000)
    produced = 0
    _produce(kafka.bootstrap_servers, topic, 6, 5)
    produced += 5
    assert view.latest_offsets(partitions) == {tp: produced for tp in partitions}

    def answers_all(expected: int) -> bool:
        latest: Dict[TopicPartition, int] = view.latest_offsets(partitions)
        return latest == {tp: expected for tp in partitions}

    for broker in (1, 2):
        kafka.broker_down(broker)
        try:
            _produce(kafka.bootstrap_servers, topic, 6, 5)
            produced += 5
            wait_for(lambda: answers_all(produced), f"offsets of every partition with node {broker} down", 90)
        finally:
            kafka.broker_up(broker)
        _produce(kafka.bootstrap_servers, topic, 6, 5)
        produced += 5
        wait_for(lambda: answers_all(produced), f"offsets of every partition after node {broker} came back", 90)
