"""Secured Kafka: every mechanism of a real secured broker, with librdkafka's own option names (issue 28 item 5).

One :class:`~kafka_group_devbroker.secured_kafka.SecuredKafka` for the module (the
``secured_kafka`` fixture): SASL_PLAINTEXT and SASL_SSL with PLAIN, SCRAM-SHA-256/512
and unsecured OAUTHBEARER tokens, SSL with client certificates (mTLS), and
StandardAuthorizer ACLs. Records are produced through the super-user PLAINTEXT
listener; every query reads through a secured one, as ``User:alice`` (READ on every
topic and group) or ``User:bob`` (only what a test grants him).

Most tests use librdkafka's names; the parity test gives the Java/Spark names (JAAS, JKS and
PKCS#12 stores) to ``format("kafka")`` and ``format("kafka-group")`` alike. A refused login or a missing ACL fails the query with nothing landed, with the
connector's own error (item 3): an ``AuthenticationError`` or ``AuthorizationError``
naming the mechanism, the resource and the fix, never "could not reach".
"""

from __future__ import annotations

import logging
import os
import pathlib
from collections import Counter
from typing import Any, Dict, List, Mapping, Tuple

import pytest
from confluent_kafka import TopicPartition as KafkaTopicPartition
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from kafka_group.auth.clients import new_consumer
from kafka_group.config.client_config import reader_config
from kafka_group.config.options import parse_source_options
from kafka_group.errors import AuthenticationError
from kafka_group.flow.event_time import EventTimeAlignment
from kafka_group.group.cluster_metadata import ClusterView
from kafka_group.group.offset_commits import GroupOffsetCommitter
from kafka_group.offsets import TopicPartition
from kafka_group.offsets_tool import main as offsets_tool
from kafka_group_devbroker.secured_kafka import SECURITY_MODES, STORE_PASSWORD, USERS, SecuredKafka
from kafka_group_devbroker.throwaway_ca import ThrowawayCA
from pyspark_kafka_group import DeltaSink, flow
from tests.support import (
    BROKER_ENGINE,
    create_topic,
    describe_group,
    expected,
    group_stream,
    keep_columns,
    land_available_now,
    produce,
    table_offsets,
    table_records,
    unique_name,
    wait_for,
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


@pytest.mark.parametrize("mode", SECURITY_MODES)  # every mechanism, SCRAM over SASL_SSL too (docs/security.md)
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


@pytest.mark.parametrize("mode", ["plain", "scram-sha-512"])
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
    "group",
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


#: The Java/Spark option maps of the parity test: every SASL mechanism with its JAAS login module,
#: mTLS with JKS and with PKCS#12 stores, and SASL_SSL (PLAIN) trusting the CA through a truststore.
_JAVA_CASES = [("plain", "JKS"), ("scram-sha-256", "JKS"), ("scram-sha-512", "JKS"), ("oauthbearer", "JKS"),
               ("ssl", "JKS"), ("ssl", "PKCS12"), ("sasl_ssl-plain", "PKCS12")]


@pytest.mark.parametrize("mode, store_type", _JAVA_CASES, ids=[f"{m}-{t}" for m, t in _JAVA_CASES])
def test_spark_kafka_and_kafka_group_read_the_same_rows_with_the_same_java_options(
    spark: SparkSession, secured_kafka: SecuredKafka, mode: str, store_type: str
) -> None:
    """Issue 28 items 1 and 5: the option map a ``format("kafka")`` user has (``kafka.sasl.jaas.config``,
    ``kafka.ssl.truststore.*``, ``kafka.ssl.keystore.*``, ``kafka.ssl.key.password``,
    ``kafka.ssl.endpoint.identification.algorithm=""``), given unchanged to Spark's source (the Java client)
    and to ``kafka-group``, reads the same rows: one batch read each."""
    topic = create_topic(secured_kafka, 2)
    counts = {0: 4, 1: 3}
    produce(secured_kafka.bootstrap_servers, topic, counts)
    options = secured_kafka.java_options(mode, store_type=store_type)
    assert not any(key.startswith(("kafka.sasl.username", "kafka.sasl.password", "kafka.ssl.ca."))
                   for key in options), "the Java form only"

    def rows(source: str, **more: str) -> List[Tuple[Any, ...]]:
        reader = spark.read.format(source).options(**options, **more).option("subscribe", topic)
        return sorted(tuple(row) for row in reader.load().select("topic", "partition", "offset", "key", "value")
                      .collect())

    theirs = rows("kafka")
    ours = rows("kafka-group", **{"kafka.group.id": unique_name("batch")})
    assert ours == theirs
    assert [row[:3] for row in ours] == sorted(expected(topic, counts))


def test_flow_control_and_both_offsets_tools_on_a_secured_cluster(
    spark: SparkSession, secured_kafka: SecuredKafka, tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 28 item 5, one stream over SASL_SSL (PLAIN, Java options with a PKCS#12 truststore):

    * flow control from the notebook API: a paused partition is held while the other moves on, and
      resumed, every record lands once;
    * the offsets tool reads the table's and the cluster's offsets with the security settings from a
      properties file in the Java form (``--command-config``) or from ``KAFKA_GROUP_KAFKA_*`` variables
      in librdkafka's names, never the command line; no password reaches its output, even when refused;
    * Kafka's own ``kafka-consumer-groups --describe --command-config`` with the same properties file
      describes the group the connector committed.
    """
    topic, group, table = create_topic(secured_kafka, 2), unique_name("group"), tmp_path / "table"
    produce(secured_kafka.bootstrap_servers, topic, {0: 10, 1: 10})
    options = secured_kafka.java_options("sasl_ssl-plain", store_type="PKCS12")
    query = (_stream(spark, options, topic, group, table).writeStream
             .foreachBatch(DeltaSink(str(table), transform=keep_columns))
             .option("checkpointLocation", str(tmp_path / "chk"))
             .trigger(processingTime="500 milliseconds").start())
    try:
        wait_for(lambda: sum(table_offsets(table).values()) == 20, "the first 20 records")
        assert flow.pause(query, topic, partitions=[0]) == [f"{topic}-0"]
        produce(secured_kafka.bootstrap_servers, topic, {0: 5, 1: 5}, start=10)
        wait_for(lambda: Counter(p for p, _ in table_offsets(table))[1] == 15, "the unpaused partition")
        wait_for(lambda: {r["partition"]: r["lag"] for r in flow.status(query) if r["paused"]} == {0: 5},
                 "the status to show the paused partition's lag")
        assert Counter(p for p, _ in table_offsets(table))[0] == 10, "the paused partition moved"
        assert flow.resume(query, topic) == [f"{topic}-0"]
        wait_for(lambda: sum(table_offsets(table).values()) == 30, "the resumed partition")
        assert table_records(table) == expected(topic, {0: 15, 1: 15})

        # The same settings as a Java client properties file (the Java tools' --command-config).
        properties = tmp_path / "client.properties"
        properties.write_text("".join(f"{key[len('kafka.'):]}={value}\n" for key, value in options.items()
                                      if key != "kafka.bootstrap.servers"), encoding="utf-8")
        servers = options["kafka.bootstrap.servers"]
        rows: Dict[int, Dict[str, str]] = {}

        def described() -> bool:
            rows.clear()
            rows.update(describe_group(servers, group, properties))
            return {p: row["CURRENT-OFFSET"] for p, row in rows.items()} == {0: "15", 1: "15"}

        wait_for(described, "kafka-consumer-groups --describe --command-config to show the landed offsets", 120)
    finally:
        query.stop()

    show = ["show", "--table", str(table), "--group", group, "--topic", topic, "--timeout-ms", "15000"]
    secrets = [USERS["alice"], STORE_PASSWORD]
    assert offsets_tool(show + ["--bootstrap-servers", servers, "--command-config", str(properties)]) == 0
    shown = capsys.readouterr()
    assert [line.split() for line in shown.out.splitlines() if line.startswith(topic)] == [
        [topic, "0", "15", "15", "0"], [topic, "1", "15", "15", "0"]], shown.out
    assert not any(secret in shown.out + shown.err for secret in secrets)

    # From the environment, in librdkafka's names (SCRAM over SASL_PLAINTEXT): a wrong password is refused.
    config = secured_kafka.client_config("scram-sha-512")
    for key, value in config.items():
        if key != "bootstrap.servers":
            monkeypatch.setenv("KAFKA_GROUP_KAFKA_" + key.upper().replace(".", "_"), value)
    scram = show + ["--bootstrap-servers", config["bootstrap.servers"]]
    assert offsets_tool(scram) == 0
    shown = capsys.readouterr()
    assert [line.split()[2] for line in shown.out.splitlines() if line.startswith(topic)] == ["15", "15"], shown.out
    wrong = "not-" + USERS["alice"]
    monkeypatch.setenv("KAFKA_GROUP_KAFKA_SASL_PASSWORD", wrong)
    assert offsets_tool(scram) == 2
    shown = capsys.readouterr()
    _log.warning("the offsets tool with a wrong password: %s", shown.err.strip())
    assert "AuthenticationError" in shown.err or "refused the login" in shown.err, shown.err
    assert not any(secret in shown.out + shown.err for secret in secrets + [wrong])


# -- token providers (issue 28 item 2) and the clients that had no error callback ------------------
# The SASL_PLAINTEXT listener validates OAUTHBEARER tokens with Kafka's unsecured validator (any 'sub')
# and, for AWS MSK IAM signed-URL tokens, with the development broker's MSK IAM validator (their form
# only: the AWS signature itself cannot be verified here).


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
        offsets = [m.offset() for m in reader.consume(num_messages=5, timeout=120) if m.error() is None]
    finally:
        reader.close()
    assert offsets == [0, 1, 2, 3, 4]
