"""Secured Kafka: every mechanism of a real secured broker, with librdkafka's own option names (issue 28 item 5).

One :class:`~kafka_group_devbroker.secured_kafka.SecuredKafka` for the module (the
``secured_kafka`` fixture): SASL_PLAINTEXT and SASL_SSL with PLAIN, SCRAM-SHA-256/512
and unsecured OAUTHBEARER tokens, SSL with client certificates (mTLS), and
StandardAuthorizer ACLs. Records are produced through the super-user PLAINTEXT
listener; every query reads through a secured one, as ``User:alice`` (READ on every
topic and group) or ``User:bob`` (only what a test grants him).

Option translation (JAAS, JKS) is another item of issue 28: these tests use librdkafka's
names. A refused login or a missing ACL fails the query with nothing landed, with the
connector's own error (item 3): an ``AuthenticationError`` or ``AuthorizationError``
naming the mechanism, the resource and the fix, never "could not reach".
"""

from __future__ import annotations

import logging
import pathlib
from typing import Any, Dict, Mapping

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from kafka_group_devbroker.secured_kafka import SECURITY_MODES, USERS, SecuredKafka
from kafka_group_devbroker.throwaway_ca import ThrowawayCA
from pyspark_kafka_group import DeltaSink
from tests.support import (
    BROKER_ENGINE,
    create_topic,
    expected,
    group_stream,
    keep_columns,
    land_available_now,
    long_tier,
    produce,
    table_offsets,
    table_records,
    unique_name,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(BROKER_ENGINE != "kafka", reason="a secured broker is Apache Kafka: the mock has no SASL, TLS or ACLs"),
]

_log = logging.getLogger(__name__)

#: How long a refused query may take to fail before the test says it neither failed nor ended.
_FAIL_WITHIN_S = 90

#: Options of the refused queries: a refused login shows as an unreachable cluster after
#: ``kafkaConsumer.connectTimeoutMs`` (30 s by default); a group that assigns nothing is reported
#: after ``groupJoinTimeoutMs`` (60 s).
_REFUSED_OPTIONS = {"kafkaConsumer.connectTimeoutMs": "10000", "groupJoinTimeoutMs": "10000"}


def _stream(spark: SparkSession, options: Mapping[str, str], topic: str, group: str, table: pathlib.Path,
            **more: Any) -> Any:
    """A loaded ``kafka-group`` stream of ``topic`` with the secured ``options`` (bootstrap included),
    its offsets in the Delta table ``table``."""
    rest = {key: value for key, value in options.items() if key != "kafka.bootstrap.servers"}
    return group_stream(spark, options["kafka.bootstrap.servers"], topic, group,
                        **{"offsets.table": str(table), **rest, **more}).load()


def _refused(spark: SparkSession, options: Mapping[str, str], topic: str, group: str,
             tmp_path: pathlib.Path, bound_s: float = _FAIL_WITHIN_S) -> str:
    """Run an AvailableNow query into Delta that must fail; return its error text (the test fails if the
    query ends without error or neither fails nor ends within the bound)."""
    table = tmp_path / "table"
    writer = (_stream(spark, options, topic, group, table, **_REFUSED_OPTIONS).writeStream
              .foreachBatch(DeltaSink(str(table), transform=keep_columns))
              .option("checkpointLocation", str(tmp_path / "chk")))
    query = writer.trigger(availableNow=True).start()
    try:
        ended = query.awaitTermination(bound_s)
    except StreamingQueryException as exc:
        assert table_offsets(table) == {}, "a refused query landed records"
        return str(exc)
    finally:
        query.stop()
    pytest.fail("the query ended without error" if ended else
                f"the query neither failed nor ended within {bound_s:.0f} s")


def _kafka_error_lines(text: str) -> str:
    """The lines of a query's error that carry the Kafka error (the rest is Spark's and Python's traceback)."""
    lines = [line.strip() for line in text.splitlines() if "KafkaError" in line or "Error:" in line]
    return "\n".join(lines[:6]) or text[:2000]


#: Every mechanism runs by default; SCRAM over SASL_SSL (both halves covered on their own) in the long tier.
_MODES = [long_tier(mode, id=mode) if mode == "sasl_ssl-scram-sha-512" else mode for mode in SECURITY_MODES]


@pytest.mark.parametrize("mode", _MODES)
def test_each_mechanism_lands_every_record_once(
    spark: SparkSession, secured_kafka: SecuredKafka, tmp_path: pathlib.Path, mode: str
) -> None:
    """A stream into Delta (two batches: flow control) and a batch read, both through the mode's listener."""
    topic, group, table = create_topic(secured_kafka, 2), unique_name("group"), tmp_path / "table"
    counts = {0: 30, 1: 20}
    produce(secured_kafka.bootstrap_servers, topic, counts)
    options = secured_kafka.source_options(mode)
    land_available_now(_stream(spark, options, topic, group, table, maxOffsetsPerTrigger=30),
                       DeltaSink(str(table), transform=keep_columns), tmp_path / "chk")
    assert table_records(table) == expected(topic, counts)

    batch = spark.read.format("kafka-group").option("subscribe", topic).option("kafka.group.id", unique_name("batch"))
    for key, value in options.items():
        batch = batch.option(key, value)
    rows = batch.load().select("topic", "partition", "offset").collect()
    assert sorted((r.topic, r.partition, r.offset) for r in rows) == sorted(expected(topic, counts))


@pytest.mark.parametrize("mode", ["plain", long_tier("scram-sha-512", id="scram-sha-512")])
def test_a_wrong_password_fails_the_query_and_lands_nothing(
    spark: SparkSession, secured_kafka: SecuredKafka, tmp_path: pathlib.Path, mode: str
) -> None:
    topic, group = create_topic(secured_kafka, 1), unique_name("group")
    produce(secured_kafka.bootstrap_servers, topic, {0: 5})
    wrong = "not-" + USERS["alice"]
    error = _refused(spark, secured_kafka.source_options(mode, password=wrong), topic, group, tmp_path)
    assert wrong not in error
    _log.warning("wrong password, %s: the query failed with:\n%s", mode, _kafka_error_lines(error))
    assert "AuthenticationError" in error and "could not reach" not in error
    assert f"SASL_PLAINTEXT/{secured_kafka.client_config(mode)['sasl.mechanism']}" in error
    assert "User:alice" in error and "sasl.password" in error  # the principal and the option to fix


@pytest.mark.parametrize("missing", [
    long_tier("group", id="group"),  # the topic case runs by default
    "topic",
])
def test_a_missing_acl_fails_the_query_and_lands_nothing(
    spark: SparkSession, secured_kafka: SecuredKafka, tmp_path: pathlib.Path, missing: str
) -> None:
    """``User:bob`` gets READ on the topic or on the group, not both. (The bound is short: the query that
    does not fail today costs the suite the whole bound.)"""
    topic, group = create_topic(secured_kafka, 1), unique_name("group")
    produce(secured_kafka.bootstrap_servers, topic, {0: 5})
    secured_kafka.grant("bob", **({"group": group} if missing == "topic" else {"topic": topic}))
    error = _refused(spark, secured_kafka.source_options("plain", user="bob"), topic, group, tmp_path, bound_s=60)
    _log.warning("no %s READ ACL: the query failed with:\n%s", missing, _kafka_error_lines(error))
    resource = topic if missing == "topic" else group
    assert "AuthorizationError" in error and "could not reach" not in error
    assert f"{missing} '{resource}'" in error and "User:bob" in error  # the resource and the principal
    assert f"--operation Read --{missing} {resource}" in error  # the fix


def test_an_unknown_certificate_authority_fails_a_batch_read(
    spark: SparkSession, secured_kafka: SecuredKafka, tmp_path: pathlib.Path
) -> None:
    """A client that trusts another CA than the one that signed the broker's certificate: the TLS
    handshake fails, and the read says so (and which option to fix), not that the cluster is unreachable."""
    topic = create_topic(secured_kafka, 1)
    options = {**secured_kafka.source_options("ssl"), "kafka.ssl.ca.pem": ThrowawayCA("another CA").certificate_pem,
               "kafkaConsumer.connectTimeoutMs": _REFUSED_OPTIONS["kafkaConsumer.connectTimeoutMs"]}
    reader = spark.read.format("kafka-group").option("subscribe", topic).option("endingOffsets", "latest")
    for key, value in options.items():
        reader = reader.option(key, value)
    with pytest.raises(Exception) as raised:
        reader.load().collect()
    error = str(raised.value)
    _log.warning("unknown CA: the read failed with:\n%s", _kafka_error_lines(error))
    assert "AuthenticationError" in error and "could not reach" not in error
    assert "TLS handshake" in error and "'kafka.ssl.ca.pem'" in error


def test_the_granted_acls_are_enough(spark: SparkSession, secured_kafka: SecuredKafka, tmp_path: pathlib.Path) -> None:
    """The control of the test above: READ on the topic and on the group is all a reader needs (and a DENY
    on another topic does not get in the way)."""
    topic, group, table = create_topic(secured_kafka, 1), unique_name("group"), tmp_path / "table"
    produce(secured_kafka.bootstrap_servers, topic, {0: 5})
    secured_kafka.grant("bob", topic=topic, group=group)
    secured_kafka.deny("bob", topic=unique_name("other"))
    options: Dict[str, str] = secured_kafka.source_options("plain", user="bob")
    land_available_now(_stream(spark, options, topic, group, table),
                       DeltaSink(str(table), transform=keep_columns), tmp_path / "chk")
    assert table_records(table) == expected(topic, {0: 5})


def test_a_password_from_a_config_provider_reads_with_both_sources(
    spark: SparkSession, secured_kafka: SecuredKafka, tmp_path: pathlib.Path
) -> None:
    """Issue 28 item 6: the password is no option literal but a reference to a properties file (Kafka's
    FileConfigProvider, ``${file:path:key}``). The same option map reads the same rows through
    Spark's ``format("kafka")`` (a batch read; the Java client resolves it) and ``format("kafka-group")`` (a
    stream into Delta). The connector resolves it once, on the driver at ``load()``: the file is gone when the
    query runs, and neither the group member nor the executors' readers need it."""
    topic, group, table = create_topic(secured_kafka, 2), unique_name("group"), tmp_path / "table"
    counts = {0: 3, 1: 2}
    produce(secured_kafka.bootstrap_servers, topic, counts)
    secrets = tmp_path / "kafka-secrets.properties"
    secrets.write_text(f"password={USERS['alice']}\n", encoding="utf-8")
    options = {
        "kafka.bootstrap.servers": secured_kafka.listener_servers("SASL_PLAINTEXT"),
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.config.providers": "file",
        "kafka.config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
        "kafka.sasl.jaas.config": ("org.apache.kafka.common.security.plain.PlainLoginModule required "
                                   f'username="alice" password="${{file:{secrets}:password}}";'),
    }
    rows = (spark.read.format("kafka").options(**options).option("subscribe", topic).load()
            .select("topic", "partition", "offset").collect())
    assert sorted((r.topic, r.partition, r.offset) for r in rows) == sorted(expected(topic, counts))

    stream = _stream(spark, options, topic, group, table)
    secrets.unlink()
    land_available_now(stream, DeltaSink(str(table), transform=keep_columns), tmp_path / "chk")
    assert table_records(table) == expected(topic, counts)
