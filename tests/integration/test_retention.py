"""Retention on real Apache Kafka deleting offsets a query still needs (issue 13 finding 4).

A first AvailableNow run lands offsets [0, 50) of one partition. Then retention,
by size (``retention.bytes``) or by time (``retention.ms``), deletes segments
holding offsets the query has not read, and new records arrive. A second run from
the same checkpoint (and table) must, with ``failOnDataLoss=true``, fail naming
the topic, partition and missing offsets, and with ``false`` skip them, log what
it skipped and land everything still on the broker, exactly once.

With ``offsets.table`` the query runs as its own process (tests.integration.delta_query)
so that its log can be read.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import time
from collections import Counter
from typing import Any, Optional, Tuple

import pytest
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import ConfigResource, OffsetSpec, ResourceType  # type: ignore[attr-defined]  # re-exported without __all__
from deltalake import DeltaTable
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from kafka_group_devbroker import ApacheKafka
from tests.support import (
    Cluster,
    long_tier,
    OffsetCollector,
    REPO,
    apache,
    create_topic,
    delta_query_command,
    group_stream,
    produce,
    table_offsets,
    table_positions,
    unique_name,
    wait_for,
)
from tests.support_child_jvm import child_env

pytestmark = pytest.mark.integration

Key = Tuple[int, int]

#: How each kind of retention is switched on, and back off.
RETENTION = {
    "size": ({"retention.bytes": "1"}, {"retention.bytes": "-1"}),
    "time": ({"retention.ms": "1000"}, {"retention.ms": "604800000"}),
}


@pytest.fixture(autouse=True)
def _real_kafka(kafka: Cluster) -> None:
    if kafka.engine != "kafka":
        pytest.skip("needs Apache Kafka: retention by size and time of real log segments")


def earliest(kafka: ApacheKafka, topic: str) -> int:
    spec = OffsetSpec.earliest()  # type: ignore[no-untyped-call]  # confluent-kafka leaves it unannotated
    futures = kafka.admin().list_offsets({KafkaTopicPartition(topic, 0): spec}, request_timeout=10)
    return int(next(iter(futures.values())).result(15).offset)


def topic_config(kafka: ApacheKafka, topic: str, key: str) -> str:
    futures = kafka.admin().describe_configs([ConfigResource(ResourceType.TOPIC, topic)], request_timeout=10)
    return str(next(iter(futures.values())).result(15)[key].value)


def lose_offsets(kafka: ApacheKafka, topic: str, how: str) -> int:
    """Produce offsets [50, 110) in two segments, let retention delete past offset 50, switch it
    off again, then produce 20 more; return the partition's earliest offset afterwards."""
    servers = kafka.bootstrap_servers
    produce(servers, topic, {0: 50}, start=50)
    time.sleep(0.3)  # older than segment.ms (100 ms): the next record rolls a new segment
    produce(servers, topic, {0: 10}, start=100)
    on, off = RETENTION[how]
    kafka.alter_topic_config(topic, on)
    wait_for(lambda: earliest(kafka, topic) > 50, f"retention by {how} to delete offsets past 50", 120)
    kafka.alter_topic_config(topic, off)
    key, value = next(iter(off.items()))
    wait_for(lambda: topic_config(kafka, topic, key) == value, "retention switched off again", 180)
    produce(servers, topic, {0: 20}, start=110)
    first = earliest(kafka, topic)
    assert first > 50
    return first


def new_topic(kafka: Cluster) -> str:
    topic = create_topic(kafka, 1, "retained", config={"segment.ms": "100", "retention.ms": "604800000"})
    produce(kafka.bootstrap_servers, topic, {0: 50})
    return topic


def run_in_process(spark: SparkSession, kafka: Cluster, topic: str, group: str, checkpoint: pathlib.Path, sink: OffsetCollector,
                   fail_on_data_loss: str) -> Any:
    query = (group_stream(spark, kafka.bootstrap_servers, topic, group, failOnDataLoss=fail_on_data_loss,
                          maxOffsetsPerTrigger="40").load()
             .writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    try:
        try:
            query.awaitTermination(300)
        except StreamingQueryException:
            pass  # returned below
        assert not query.isActive, "the AvailableNow run did not end"
        return query.exception()
    finally:
        query.stop()


#: failOnDataLoss and how the records go: each test runs one case by default, the rest in the long tier.
RETENTION_CASES = [("true", "size"), ("false", "time"),
                   long_tier("true", "time", id="true-time"), long_tier("false", "size", id="false-size")]


@pytest.mark.parametrize("fail_on_data_loss, how", RETENTION_CASES)
def test_retention_without_offsets_table(
    spark: SparkSession, kafka: Cluster, tmp_path: pathlib.Path, how: str, fail_on_data_loss: str
) -> None:
    topic, group, checkpoint = new_topic(kafka), unique_name("group"), tmp_path / "chk"
    sink = OffsetCollector()
    assert run_in_process(spark, kafka, topic, group, checkpoint, sink, fail_on_data_loss) is None
    assert sink.landed() == Counter((0, o) for o in range(50))
    first = lose_offsets(apache(kafka), topic, how)
    error = run_in_process(spark, kafka, topic, group, checkpoint, sink, fail_on_data_loss)
    if fail_on_data_loss == "true":
        assert error is not None, "the run ended without failing"
        text = str(error)
        print(f"failed as expected: ...{text[text.find('data loss'):][:200]}")
        assert f"data loss in {topic}-0: offsets [50, {first}) were removed" in text
        assert "failOnDataLoss" in text
        assert sink.landed() == Counter((0, o) for o in range(50))
    else:
        assert error is None
        assert sink.landed() == Counter((0, o) for o in [*range(50), *range(first, 130)])
        print(f"skipped [50, {first}), landed {sum(sink.landed().values())} rows once")


def run_delta_query(kafka: Cluster, topic: str, group: str, workdir: pathlib.Path,
                    fail_on_data_loss: str) -> Tuple[int, str]:
    """One AvailableNow run of tests.integration.delta_query into ``workdir/table``; its exit code and log."""
    log = workdir / "query.log"
    command = delta_query_command(kafka.bootstrap_servers, topic, group, workdir / "table", workdir / "chk",
                                  "--available-now", "--max-offsets", "40",
                                  "--option", f"failOnDataLoss={fail_on_data_loss}")
    with open(log, "ab") as out:
        out.write(b"\n==== run ====\n")
        out.flush()
        process = subprocess.Popen(command, cwd=REPO, start_new_session=True, stdout=subprocess.DEVNULL,
                                   stderr=out, env=child_env({"KAFKA_GROUP_LOG_LEVEL": "INFO"}))
        try:
            code = process.wait(300)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, 9)
                process.wait(30)
    text = log.read_text(errors="replace")
    return code, text[text.rfind("==== run ===="):]


def table_position(table: pathlib.Path, group: str, topic: str) -> Optional[int]:
    """The offset the table holds for partition 0 of ``topic``."""
    return table_positions(table, group, topic, 1)[0]


@pytest.mark.parametrize("fail_on_data_loss, how", RETENTION_CASES)
def test_retention_with_offsets_table(kafka: Cluster, tmp_path: pathlib.Path, how: str, fail_on_data_loss: str) -> None:
    topic, group, table = new_topic(kafka), unique_name("group"), tmp_path / "table"
    code, log = run_delta_query(kafka, topic, group, tmp_path, fail_on_data_loss)
    assert code == 0, log[-3000:]
    assert table_offsets(table) == Counter((0, o) for o in range(50))
    first = lose_offsets(apache(kafka), topic, how)
    code, log = run_delta_query(kafka, topic, group, tmp_path, fail_on_data_loss)
    skipped = f"data loss in {topic}-0: offsets [50, {first}) were removed"
    if fail_on_data_loss == "true":
        assert code != 0, "the run ended without failing"
        assert skipped in log, log[-3000:]
        assert table_offsets(table) == Counter((0, o) for o in range(50))
        assert table_position(table, group, topic) == 50
        print(f"failed as expected: {skipped}")
    else:
        landed = table_offsets(table)
        print(f"exit {code}; table at {table_position(table, group, topic)}; {sum(landed.values())} rows; "
              f"skip logged: {skipped in log}")
        assert code == 0, log[-3000:]
        assert skipped in log, "the skipped offsets were not logged"
        assert landed == Counter((0, o) for o in [*range(50), *range(first, 130)])
        assert table_position(table, group, topic) == 130
        skips = [e for e in DeltaTable(str(table)).history() if e.get("kafkaGroup.operation") == "skip"]
        assert [e["kafkaGroup.reason"] for e in skips] == [
            f"failOnDataLoss=false: offsets [50, {first}) of {topic}-0 are no longer on the broker"]
