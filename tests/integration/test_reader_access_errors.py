"""Issue 28 item 3 on executors: a reader refused by an ACL fails its task with ``AuthorizationError``
naming the topic and the grant, at once, not "no planned record arrived" after the poll timeout.

The driver checks access before any batch (tests/integration/test_secured_kafka.py); an ACL removed
after planning reaches only the reader. Real Kafka's ACLs cannot be removed between a plan and a
fetch on cue, so the mock cluster answers the reader's Fetch with TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import pytest

from kafka_group.config.client_config import reader_config
from kafka_group.errors import AuthorizationError
from kafka_group.offsets import OffsetRange, TopicPartition
from kafka_group.read.read_settings import ReadSettings
from kafka_group_devbroker import EmbeddedKafka
from tests.support import create_topic, produce, read_planned

pytestmark = pytest.mark.integration

FETCH, TOPIC_AUTHORIZATION_FAILED = 1, 29


def test_a_reader_without_read_on_the_topic_fails_with_the_grant_to_give(mock_kafka: EmbeddedKafka) -> None:
    kafka = mock_kafka
    topic = create_topic(kafka, 1, "refused")
    produce(kafka.bootstrap_servers, topic, {0: 5})
    settings = ReadSettings(client_config=reader_config({"bootstrap.servers": kafka.bootstrap_servers}, None),
                            include_headers=False, fail_on_data_loss=True, poll_timeout_ms=60_000,
                            max_records_per_batch=1000)
    try:
        kafka.push_request_errors(FETCH, [TOPIC_AUTHORIZATION_FAILED] * 50)
        with pytest.raises(AuthorizationError) as raised:
            list(read_planned([OffsetRange(TopicPartition(topic, 0), 0, 5)], settings))
    finally:
        kafka.clear_request_errors(FETCH)
    assert (raised.value.resource_type, raised.value.resource_name) == ("topic", topic)
    assert f"--operation Read --topic {topic}" in str(raised.value) and not raised.value.retriable
