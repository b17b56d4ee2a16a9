"""Executors reading ranges full of offset gaps (transaction markers) on real Apache Kafka.

Issue 13, smaller finding: each gap asked the broker for the partition's watermarks
(one ListOffsets round trip per gap), so a range of many small transactions cost a
request per record. A gap is data loss only when the broker's earliest offset is past
it, and one answer per fetched batch of records tells that for all its gaps.

Both read paths are counted: the compiled one checks gaps in Rust, where no Python function can be
patched, so the requests are counted where both paths' clients report them, librdkafka's own
protocol log (``debug=protocol``: a "Sent ListOffsetsRequest" line per request).
"""

from __future__ import annotations

import logging
from typing import Any, List

import pytest
from confluent_kafka import Producer

from kafka_group.config.client_config import reader_config
from kafka_group.offsets import OffsetRange, TopicPartition
from kafka_group.read import gaps
from kafka_group.read.read_path import native_module
from kafka_group.read.read_settings import ReadSettings
from tests.support import Cluster, create_topic, unique_name, read_planned

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("read_path", ["python", "native"])
def test_a_range_of_small_transactions_reads_every_record_with_few_watermark_requests(
    kafka: Cluster, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, read_path: str
) -> None:
    if kafka.engine != "kafka":
        pytest.skip("needs Apache Kafka: the mock cluster writes no transaction markers")
    if read_path == "native" and native_module() is None:
        pytest.skip("the compiled read path is not built here (python native/build_native.py --inplace)")
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
    # A client of its own (its client.id): the pool's parked clients of other tests are not reused.
    config = reader_config({"bootstrap.servers": kafka.bootstrap_servers, "debug": "protocol",
                            "client.id": unique_name("gaps-reader")}, None)
    settings = ReadSettings(client_config=config, include_headers=False, fail_on_data_loss=True,
                            poll_timeout_ms=30_000, max_records_per_batch=10_000)
    with caplog.at_level(logging.DEBUG, logger="kafka_group.librdkafka"):
        batches = list(read_planned([OffsetRange(TopicPartition(topic, 0), 0, 120)], settings, read_path))
    sent = [r.getMessage() for r in caplog.records
            if r.name == "kafka_group.librdkafka" and "Sent ListOffsetsRequest" in r.getMessage()]
    values = [v.as_py() for b in batches for v in b.column("value")]
    print(f"{read_path}: 60 records in 120 offsets: {len(asked)} Python gap checks, {len(sent)} ListOffsets sent")
    assert values == [b"%d" % i for i in range(60)]
    assert len(asked) <= 10  # one per fetched batch of records, not one per gap (59 gaps)
    assert len(sent) <= 10, sent  # the requests the path actually made, the Rust gap check's included
