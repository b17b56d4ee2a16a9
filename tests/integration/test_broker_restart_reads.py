"""Issue 26 item 5 on Apache Kafka: a read across a broker restart skips nothing.

During a broker restart the client may be told, for a while, that the partition or topic is
unknown (``UNKNOWN_TOPIC_OR_PART``, ``_UNKNOWN_PARTITION``, ``_UNKNOWN_TOPIC``) or may get no
watermarks. With ``failOnDataLoss=false`` such answers were taken as data loss: the rest of the
range was skipped, and the offsets table moved past records that were still there. The pushed
protocol errors of the mock cluster show each answer (test_transient_metadata_errors.py); this
test restarts the only node of a real Apache Kafka (SIGKILL, then the same data) while a range is
read, and checks that every record of the range is read, once.
"""

from __future__ import annotations

import threading
from typing import List, Optional

import pytest

from kafka_group.config.client_config import reader_config
from kafka_group.offsets import OffsetRange, TopicPartition
from kafka_group.read.read_settings import ReadSettings
from tests.support import BROKER_ENGINE, Cluster, MakeTopic, apache, produce, read_planned

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(BROKER_ENGINE != "kafka", reason="restarts a real Apache Kafka node"),
]


def test_a_range_read_across_a_broker_restart_reads_every_record_once(kafka: Cluster, make_topic: MakeTopic) -> None:
    topic = make_topic(1)
    servers = kafka.bootstrap_servers
    produce(servers, topic, {0: 200})
    settings = ReadSettings(client_config=reader_config({"bootstrap.servers": servers}, None), include_headers=False,
                            fail_on_data_loss=False, poll_timeout_ms=120_000, max_records_per_batch=50)
    node = apache(kafka)
    node.broker_down(-1)
    got: List[int] = []
    failure: List[Optional[BaseException]] = []

    def read() -> None:
        try:
            for batch in read_planned([OffsetRange(TopicPartition(topic, 0), 0, 200)], settings):
                got.extend(batch.column("offset").to_pylist())
        except BaseException as exc:  # reported by the test thread
            failure.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    try:
        reader.start()  # while the node is down: the reader meets it as it comes back
    finally:
        node.broker_up(-1)
    reader.join(300)
    assert not reader.is_alive(), "the read did not end within 300 s of the restart"
    assert not failure, f"the read failed: {failure[0]!r}"
    assert got == list(range(200)), f"read {len(got)} of 200 records; missing {sorted(set(range(200)) - set(got))[:10]}"
