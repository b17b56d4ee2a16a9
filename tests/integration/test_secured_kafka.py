"""Secured Kafka: every mechanism of a real secured broker, with librdkafka's own option names (issue 28 item 5).

One :class:`~kafka_group_devbroker.secured_kafka.SecuredKafka` for the module (the
``secured_kafka`` fixture): SASL_PLAINTEXT and SASL_SSL with PLAIN, SCRAM-SHA-256/512
and unsecured OAUTHBEARER tokens, SSL with client certificates (mTLS), and
StandardAuthorizer ACLs. Records are produced through the super-user PLAINTEXT
listener; every query reads through a secured one, as ``User:alice`` (READ on every
topic and group) or ``User:bob`` (only what a test grants him).

Option translation (JAAS, JKS) and the connector's own authentication and
authorization errors are other items of issue 28: these tests use librdkafka's
names and assert only that a refused login or a missing ACL fails the query with
nothing landed.
"""

from __future__ import annotations

import logging
import pathlib
from typing import Any, Dict, Mapping

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from kafka_group_devbroker.secured_kafka import SECURITY_MODES, USERS, SecuredKafka
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


@pytest.mark.parametrize("missing", [
    # Long tier: today this case waits out its whole bound (60 s of CI time); the topic case runs by default.
    pytest.param("group", marks=[pytest.mark.slow, pytest.mark.xfail(strict=True, reason=(
        "issue 28 item 3: GROUP_AUTHORIZATION_FAILED reaches the member as a non-fatal error event, logged at "
        "DEBUG; the driver warns \"group ... assigned no partitions within 10000 ms (option 'groupJoinTimeoutMs'); "
        "planning empty batches until it does\" and the AvailableNow query never ends"))]),
    pytest.param("topic", marks=pytest.mark.xfail(strict=True, reason=(
        "issue 28 item 3: an unauthorized topic looks missing: the driver warns \"subscribed topics ... do not "
        "exist yet ...; their partitions are planned once they are created\" and the AvailableNow query ends "
        "without error, having read nothing"))),
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
