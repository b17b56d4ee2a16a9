"""OAUTHBEARER tokens from code on a real secured broker (issue 28 item 2), and the clients that had no error callback.

The ``secured_kafka`` fixture's SASL_PLAINTEXT listener validates OAUTHBEARER tokens with
Kafka's unsecured validator (any ``sub``), and, for tokens that are AWS MSK IAM signed URLs,
with the development broker's MSK IAM validator (its form only: the AWS signature itself
cannot be verified here).
"""

from __future__ import annotations

import os
import pathlib

import pytest
from pyspark.sql import SparkSession

from confluent_kafka import TopicPartition as KafkaTopicPartition

from kafka_group.auth.clients import new_consumer
from kafka_group.config.client_config import reader_config
from kafka_group.config.options import parse_source_options
from kafka_group.errors import AuthenticationError
from kafka_group.group.cluster_metadata import ClusterView
from kafka_group.flow.event_time import EventTimeAlignment
from kafka_group.group.offset_commits import GroupOffsetCommitter
from kafka_group.offsets import TopicPartition
from kafka_group_devbroker.secured_kafka import SecuredKafka
from pyspark_kafka_group import DeltaSink
from tests.support import (
    BROKER_ENGINE,
    create_topic,
    expected,
    keep_columns,
    land_available_now,
    produce,
    table_records,
    unique_name,
)
from tests.integration.test_secured_kafka import _stream

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(BROKER_ENGINE != "kafka", reason="a secured broker is Apache Kafka: the mock has no SASL"),
]


def test_the_committer_and_event_time_alignment_tell_a_refused_login(secured_kafka: SecuredKafka) -> None:
    """The offset committer of ``assign`` and the alignment's peeking reader raise AuthenticationError for a
    wrong password (they had no error callback: a refused commit was logged as any failure, alignment held
    the partitions as if their records were slow)."""
    topic = create_topic(secured_kafka, 1)
    produce(secured_kafka.bootstrap_servers, topic, {0: 3})
    config = secured_kafka.client_config("plain", password="wrong-password")
    tp = TopicPartition(topic, 0)
    committer = GroupOffsetCommitter(config, unique_name("group"))
    try:
        with pytest.raises(AuthenticationError, match="refused the login of User:alice over SASL_PLAINTEXT/PLAIN"):
            committer.commit_and_wait({tp: 1}, None, 10.0)
    finally:
        committer.close()
    alignment = EventTimeAlignment(config, None, 60_000, 5_000)
    try:
        with pytest.raises(AuthenticationError, match="refused the login of User:alice"):
            alignment.view({tp: 0}, {tp: 3})
    finally:
        alignment.close()


def test_a_token_provider_hook_lands_every_record_once_and_runs_on_executors(
    spark: SparkSession, secured_kafka: SecuredKafka, tmp_path: pathlib.Path
) -> None:
    """A stream into Delta whose OAUTHBEARER token comes from ``tokenProvider`` (Kafka's unsecured JWS):
    every record once, and the hook ran in the driver's processes and in executor workers."""
    topic, group, table = create_topic(secured_kafka, 2), unique_name("group"), tmp_path / "table"
    counts = {0: 30, 1: 20}
    produce(secured_kafka.bootstrap_servers, topic, counts)
    calls = tmp_path / "calls"
    options = {"kafka.bootstrap.servers": secured_kafka.listener_servers("SASL_PLAINTEXT"),
               "kafka.security.protocol": "SASL_PLAINTEXT",
               "kafka.sasl.oauthbearer.config": f"principal=alice calls={calls}",
               "tokenProvider": "tests.token_hooks:recording_token"}
    land_available_now(_stream(spark, options, topic, group, table, maxOffsetsPerTrigger=30),
                       DeltaSink(str(table), transform=keep_columns), tmp_path / "chk")
    assert table_records(table) == expected(topic, counts)
    callers = set(calls.read_text(encoding="utf-8").split())
    # The runner (group member, metadata) and the executors' readers are different Python processes.
    assert len(callers) >= 2 and str(os.getpid()) not in callers, callers


def test_msk_iam_options_log_in_through_the_built_in_provider(secured_kafka: SecuredKafka,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The options MSK users give Spark, with fake AWS credentials: AWS's signer makes the token, the hook hands
    it to the clients (metadata and a reader), the broker's MSK IAM validator maps the access key id to the
    principal (the AWS signature itself cannot be verified here: only the token's form is)."""
    access_key = "AKIAFAKEKAFKAGROUP01"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake-secret-access-key-for-tests")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    topic, group = create_topic(secured_kafka, 1), unique_name("group")
    produce(secured_kafka.bootstrap_servers, topic, {0: 5})
    secured_kafka.grant(access_key, topic=topic, group=group)
    parsed = parse_source_options({
        "kafka.bootstrap.servers": secured_kafka.listener_servers("SASL_PLAINTEXT"),
        "kafka.security.protocol": "SASL_PLAINTEXT", "subscribe": topic, "kafka.group.id": group,
        "kafka.sasl.mechanism": "AWS_MSK_IAM",
        "kafka.sasl.jaas.config": "software.amazon.msk.auth.iam.IAMLoginModule required;",
        "kafka.sasl.client.callback.handler.class": "software.amazon.msk.auth.iam.IAMClientCallbackHandler"})
    assert ClusterView(parsed.client_config, 30_000).partitions_of([topic]) == [TopicPartition(topic, 0)]
    reader = new_consumer(reader_config(parsed.client_config, group), client="reader")
    try:
        reader.assign([KafkaTopicPartition(topic, 0, 0)])
        offsets = [m.offset() for m in reader.consume(num_messages=5, timeout=30) if m.error() is None]
    finally:
        reader.close()
    assert offsets == [0, 1, 2, 3, 4]
