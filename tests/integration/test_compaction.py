"""Compacted topics on real Apache Kafka: offset gaps read cleanly, AvailableNow ends, and the rows
are exactly the records compaction kept.

The mock cluster does not compact, so this needs Apache Kafka.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, List, Optional, Tuple

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from pyspark.sql import SparkSession

from tests.support import Cluster, apache, group_stream, unique_name, wait_for

pytestmark = pytest.mark.integration

Record = Tuple[int, Optional[bytes], Optional[bytes]]  # (offset, key, value)


@pytest.fixture(autouse=True)
def _real_kafka(kafka: Cluster) -> None:
    if kafka.engine != "kafka":
        pytest.skip("needs Apache Kafka: the mock cluster does not compact")


def read_log(servers: str, topic: str) -> List[Record]:
    """Every record partition 0 holds now, read with a plain consumer."""
    consumer = Consumer({"bootstrap.servers": servers, "group.id": unique_name("peek"), "enable.partition.eof": True,
                         "enable.auto.commit": False})
    records: List[Record] = []
    try:
        consumer.assign([KafkaTopicPartition(topic, 0, OFFSET_BEGINNING)])
        while True:
            message = consumer.poll(60)
            assert message is not None, "no end of partition within 60 s"
            error = message.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                return records
            offset = message.offset()
            assert offset is not None, message
            records.append((offset, message.key(), message.value()))
    finally:
        consumer.close()


def test_compacted_gaps_read_cleanly_and_available_now_ends(spark: SparkSession, kafka: Cluster) -> None:
    servers, topic = kafka.bootstrap_servers, unique_name("compacted")
    apache(kafka).create_topic(topic, 1, config={"cleanup.policy": "compact", "segment.ms": "100",
                                         "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"})
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 5})
    for round_ in range(20):
        for k in range(5):
            producer.produce(topic, key=f"k{k}".encode(), value=f"v{round_}".encode(), partition=0)
    producer.produce(topic, key=b"k4", value=None, partition=0)  # a tombstone (kept for delete.retention.ms)
    producer.flush(30)
    written = read_log(servers, topic)
    assert len(written) == 101
    time.sleep(0.3)  # older than segment.ms (100 ms): the next record rolls a new segment
    producer.produce(topic, key=b"last", value=b"rolled", partition=0)
    producer.flush(30)
    written = read_log(servers, topic)
    last: Dict[Optional[bytes], Record] = {}
    for record in written:
        last[record[1]] = record
    survivors = sorted(last.values())
    wait_for(lambda: read_log(servers, topic) == survivors, "the log cleaner to compact the first segment", 180)
    print(f"compaction kept offsets {[r[0] for r in survivors]} of 0..{written[-1][0]}")

    rows: Dict[int, List[Record]] = {}
    lock = threading.Lock()

    def land(batch: Any, batch_id: int) -> None:
        found = [(r.offset, None if r.key is None else bytes(r.key), None if r.value is None else bytes(r.value))
                 for r in batch.select("offset", "key", "value").collect()]
        with lock:
            rows[batch_id] = found

    query = (group_stream(spark, servers, topic, unique_name("group"), maxOffsetsPerTrigger="3").load()
             .writeStream.foreachBatch(land).trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(300), "the AvailableNow run did not end"
        assert query.exception() is None
    finally:
        query.stop()
    landed = sorted(r for batch in rows.values() for r in batch)
    assert landed == survivors
    progress = query.recentProgress
    print(f"{len(rows)} batches, {len(landed)} rows = the survivors")
    from kafka_group.formats import read_progress
    from kafka_group.offsets import TopicPartition

    end = read_progress(progress[-1]).sources[0].end
    assert end is not None and end.positions[TopicPartition(topic, 0)] == written[-1][0] + 1
