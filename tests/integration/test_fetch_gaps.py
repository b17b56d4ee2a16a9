"""Executors reading ranges full of offset gaps (transaction markers) on real Apache Kafka.

Issue 13, smaller finding: each gap asked the broker for the partition's watermarks
(one ListOffsets round trip per gap), so a range of many small transactions cost a
request per record. A gap is data loss only when the broker's earliest offset is past
it, and one answer per fetched batch of records tells that for all its gaps.
"""

from __future__ import annotations

from typing import Any, List

import pytest
from confluent_kafka import Producer

from kafka_group.config.client_config import reader_config
from kafka_group.offsets import OffsetRange, TopicPartition
from kafka_group.read import gaps
from kafka_group.read.read_settings import ReadSettings
from tests.support import Cluster, create_topic, unique_name, read_planned

pytestmark = pytest.mark.integration


def test_a_range_of_small_transactions_reads_every_record_with_few_watermark_requests(
    kafka: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    if kafka.engine != "kafka":
        pytest.skip("needs Apache Kafka: the mock cluster writes no transaction markers")
    topic = create_topic(kafka, 1, "gaps")
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": unique_name("txn")})
    producer.init_transactions(60)
    for i in range(60):  # one record per transaction: a commit marker after each, a gap before the next
        producer.begin_transaction()
        producer.produce(topic, value=b"%d" % i, partition=0)
        producer.commit_transaction(60)
    asked: List[Any] = []
    real = gaps.watermarks

    def counted(consumer: Any, offset_range: OffsetRange, settings: ReadSettings) -> Any:
        asked.append(offset_range)
        return real(consumer, offset_range, settings)

    monkeypatch.setattr(gaps, "watermarks", counted)  # counts this module's own requests; the client is real
    settings = ReadSettings(client_config=reader_config({"bootstrap.servers": kafka.bootstrap_servers}, None),
                            include_headers=False, fail_on_data_loss=True, poll_timeout_ms=30_000,
                            max_records_per_batch=10_000)
    batches = list(read_planned([OffsetRange(TopicPartition(topic, 0), 0, 120)], settings))
    values = [v.as_py() for b in batches for v in b.column("value")]
    print(f"60 records in 120 offsets: {len(asked)} watermark requests")
    assert values == [b"%d" % i for i in range(60)]
    assert len(asked) <= 10  # one per fetched batch of records, not one per gap (59 gaps)
