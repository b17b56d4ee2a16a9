"""Transactional producers: with read_committed the source moves past transaction markers, gaps are not data loss.

The mock cluster does not filter aborted records for read_committed readers
(docs/brokers.md), so aborted and open transactions are tested on Apache Kafka
only, in test_real_kafka_transactions.py; this test runs on either broker.
"""

from __future__ import annotations

from typing import Any, List, Tuple

import pytest
from confluent_kafka import Producer
from pyspark.sql import SparkSession

from kafka_group.formats import read_progress
from kafka_group.offsets import TopicPartition
from tests.support import Cluster, MakeTopic, group_stream, unique_name

pytestmark = pytest.mark.integration


def test_read_committed_moves_past_transaction_markers(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic
) -> None:
    topic = make_topic(1)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": unique_name("txn")})
    producer.init_transactions(30)
    sent = []
    for batch in range(3):
        producer.begin_transaction()
        for i in range(4):
            value = f"t{batch}-{i}".encode()
            producer.produce(topic, value=value, partition=0)
            sent.append(value)
        producer.commit_transaction(30)
    rows: List[Tuple[int, bytes]] = []

    def land(batch: Any, batch_id: int) -> None:
        rows.extend((r.offset, bytes(r.value)) for r in batch.select("offset", "value").collect())

    query = (group_stream(spark, kafka.bootstrap_servers, topic, unique_name("group"),
                          **{"kafka.isolation.level": "read_committed", "maxOffsetsPerTrigger": "5"}).load()
             .writeStream.foreachBatch(land).trigger(availableNow=True).start())
    query.awaitTermination()
    assert [v for _, v in sorted(rows)] == sent
    offsets = [o for o, _ in sorted(rows)]
    assert offsets == [0, 1, 2, 3, 5, 6, 7, 8, 10, 11, 12, 13]  # a commit marker after each transaction
    end = read_progress(query.lastProgress).sources[0].end
    assert end is not None and end.positions[TopicPartition(topic, 0)] == 15  # past the last marker, no data loss raised
