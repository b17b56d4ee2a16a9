"""One query, one consumer group, many Delta tables (RoutedDeltaSink), exactly once across the tables: Apache
Kafka, real Spark, delta-rs and delta-spark. Every expectation comes from the produced events alone
(``tests/routed_support.py``). docs/exactly-once.md ("Many tables") names these tests."""

from __future__ import annotations

import os
import pathlib
import random
import shutil
import signal
import subprocess
from typing import Any, Counter, List

import pytest
from pyspark.sql import SparkSession

from kafka_group.errors import ConfigError
from pyspark_kafka_group import RoutedDeltaSink
from tests.routed_support import (
    SourceTable,
    dead_letter_rows,
    make_tables,
    more_changes,
    produce_tables,
    routed_sink,
    table_rows,
)
from tests.support import REPO, Cluster, MakeTopic, group_stream, land_available_now, table_positions, unique_name

pytestmark = pytest.mark.integration


def routed_command(servers: str, prefix: str, group: str, lake: pathlib.Path, checkpoint: pathlib.Path,
                   dead_letters: pathlib.Path, max_offsets: int) -> List[str]:
    import sys

    return [sys.executable, "-m", "tests.integration.routed_query", servers, f"{prefix}[.].*", group, str(lake),
            str(checkpoint), "--dead-letters", str(dead_letters), "--max-offsets", str(max_offsets)]


def assert_landed(tables: List[SourceTable], lake: pathlib.Path, dlq: pathlib.Path, group: str) -> None:
    """Each topic's table equals its oracle and holds its partitions' ends; each dead letter is there once."""
    for t in tables:
        assert table_rows(lake / t.topic) == t.expected_rows(), t.topic
        assert table_positions(lake / t.topic, group, t.topic, t.partitions) == t.ends(), t.topic
        assert table_positions(dlq, group, t.topic, t.partitions) == t.ends(), t.topic
    assert dead_letter_rows(dlq) == sorted(d for t in tables for d in t.expected_dead())


def test_debezium_tables_land_each_in_its_own_table_exactly_once_through_kills_between_tables(
    spark: SparkSession, kafka: Cluster, tmp_path: pathlib.Path
) -> None:
    """20 source tables (creates, updates, deletes and their tombstones, records that are not change events),
    one topic each, one query with ``subscribePattern``: SIGKILLed between two tables' commits (and before and
    after one), once with its checkpoint deleted after the kill (the next plan starts at the table behind, the
    tables ahead land only what they lack). Every table equals its oracle, every dead letter is there once."""
    rng = random.Random(50)
    prefix = unique_name("db").replace("-", "_")
    topics = [f"{prefix}.public.t{i:02d}" for i in range(20)]
    for topic in topics:
        kafka.create_topic(topic, 2)
    tables = make_tables(rng, topics, 24)
    assert sum(len(t.dead) for t in tables) >= 10  # the run has dead letters to land
    produce_tables(kafka.bootstrap_servers, tables)
    group, lake, dlq, checkpoint = unique_name("group"), tmp_path / "lake", tmp_path / "dlq", tmp_path / "chk"
    command = routed_command(kafka.bootstrap_servers, prefix, group, lake, checkpoint, dlq, 150)
    # Each batch commits up to 21 tables (the dead letters' first, then the topics'): the n-th time a run reaches
    # 'sink.between_tables' it dies after n tables of a batch committed (the rest of it not).
    points = ["sink.between_tables", "sink.between_tables", "sink.before_commit", "sink.between_tables",
              "sink.after_commit", "sink.between_tables"]
    kills: Counter[str] = Counter()
    lost_checkpoint = False
    for point in points:
        env = {**os.environ, "KAFKA_GROUP_FAULT_POINT": point, "KAFKA_GROUP_FAULT_HIT": str(rng.randint(1, 12))}
        result = subprocess.run(command, cwd=REPO, start_new_session=True, capture_output=True, env=env,
                                timeout=600)
        assert result.returncode in (0, -signal.SIGKILL), result.stderr.decode()[-3000:]
        if result.returncode == -signal.SIGKILL:
            kills[point] += 1
            if point == "sink.between_tables" and not lost_checkpoint:
                shutil.rmtree(checkpoint)  # the next plan starts at the tables behind
                lost_checkpoint = True
    assert kills["sink.between_tables"] >= 2 and lost_checkpoint, kills
    result = subprocess.run(command, cwd=REPO, start_new_session=True, capture_output=True, timeout=600)
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    assert_landed(tables, lake, dlq, group)
    # delta-spark, the independent reader, agrees on one table and on the dead letters.
    first = tables[0]
    got = sorted(tuple(r) for r in spark.read.format("delta").load(str(lake / first.topic))
                 .select("id", "name", "v").collect())
    assert got == first.expected_rows()
    dead = spark.read.format("delta").load(str(dlq))
    assert dead.count() == sum(len(t.dead) for t in tables)
    assert set(dead.columns) >= {"topic", "partition", "offset", "timestamp", "key", "value", "headers",
                                 "error_class", "error_message", "batch_id"}
    assert {r[0] for r in dead.select("error_class").distinct().collect()} == {"rejected"}


def test_a_table_added_while_stopped_starts_where_the_others_are(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    """Round 1 without a dead-letter table; round 2 adds it: the table that never saw the partitions does not
    move the start back (nothing is landed twice), it takes the dead letters from then on."""
    rng = random.Random(51)
    topics = [make_topic(2) for _ in range(3)]
    group, lake, dlq = unique_name("group"), tmp_path / "lake", tmp_path / "dlq"
    tables = make_tables(rng, topics, 20, bad=0)  # without a dead-letter table a bad record fails the batch
    produce_tables(kafka.bootstrap_servers, tables)
    plain = routed_sink(str(lake), None, str(tmp_path / "chk1"))
    land_available_now(_stream(spark, kafka, topics, group, plain), plain, tmp_path / "chk1")
    assert not dlq.exists()
    since = {t.topic: len(t.records) for t in tables}
    more_changes(rng, tables, range(100, 120), bad=0.15)
    for t in tables:
        produce_tables(kafka.bootstrap_servers, [t], since[t.topic])
    assert sum(len(t.dead) for t in tables) > 0
    # The same query (its checkpoint) restarted with a dead-letter table added to its route.
    with_dlq = routed_sink(str(lake), str(dlq), str(tmp_path / "chk1"))
    land_available_now(_stream(spark, kafka, topics, group, with_dlq), with_dlq, tmp_path / "chk1")
    assert_landed(tables, lake, dlq, group)


def test_a_table_whose_commit_keeps_failing_fails_the_batch_and_skips_nothing(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    """Appended tables (every record once, so a double landing shows). After a first batch, the second table of
    the order gets a CHECK constraint that a record of the next batch breaks: that batch fails, twice, naming
    the constraint; the table before it keeps its commit, the one after it lands nothing. Once the constraint
    is dropped the same checkpoint lands the rest, and the first table does not land its share twice."""
    topics = sorted(make_topic(1) for _ in range(3))
    group, lake, chk = unique_name("group"), tmp_path / "lake", tmp_path / "chk"
    sink = RoutedDeltaSink(f"{lake}/{{topic}}", checkpoint_location=str(chk),
                           options={t: {"transform": _keep} for t in topics})
    _produce(kafka, topics, [f"v{n}" for n in range(10)])
    land_available_now(_stream(spark, kafka, topics, group, sink), sink, chk)
    blocked = lake / topics[1]
    spark.sql(f"ALTER TABLE delta.`{blocked}` ADD CONSTRAINT no_bad CHECK (value <> 'bad')")
    _produce(kafka, topics[:1] + topics[2:], [f"w{n}" for n in range(5)])
    _produce(kafka, topics[1:2], [f"w{n}" for n in range(4)] + ["bad"])
    for _ in range(2):  # it keeps failing: the query fails again, nothing moves
        with pytest.raises(Exception, match="no_bad"):
            land_available_now(_stream(spark, kafka, topics, group, sink), sink, chk)
        assert [_offsets(lake / t) for t in topics] == [list(range(15)), list(range(10)), list(range(10))]
    spark.sql(f"ALTER TABLE delta.`{blocked}` DROP CONSTRAINT no_bad")
    land_available_now(_stream(spark, kafka, topics, group, sink), sink, chk)
    for topic in topics:
        assert _offsets(lake / topic) == list(range(15)), topic


def test_bad_routes_are_refused_before_any_data_moves(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ConfigError, match=r"RoutedDeltaSink\(tables\).*without '\{topic\}'"):
        RoutedDeltaSink(str(tmp_path / "lake"))
    with pytest.raises(ConfigError, match="not a legal Kafka topic name"):
        RoutedDeltaSink({"../escape": str(tmp_path / "x")})
    with pytest.raises(ConfigError, match="which the tables mapping does not route"):
        RoutedDeltaSink({"a": str(tmp_path / "a")}, options={"b": {"keys": ["id"]}})
    with pytest.raises(ConfigError, match="sets path"):
        RoutedDeltaSink(f"{tmp_path}/{{topic}}", options={"a": {"path": "/elsewhere"}})
    with pytest.raises(ConfigError, match="needs dead_letters"):
        RoutedDeltaSink(f"{tmp_path}/{{topic}}", dead_letter_when="'x'")


def _stream(spark: SparkSession, kafka: Cluster, topics: List[str], group: str, sink: Any) -> Any:
    return group_stream(spark, kafka.bootstrap_servers, ",".join(topics), group, startingOffsets="earliest",
                        **sink.source_options()).load()


def _produce(kafka: Cluster, topics: List[str], values: List[str]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "enable.idempotence": True})
    for topic in topics:
        for value in values:
            producer.produce(topic, value=value.encode(), partition=0)
    assert producer.flush(30) == 0


def _keep(batch: Any) -> Any:
    return batch.selectExpr("CAST(value AS STRING) AS value", "topic", "partition", "offset")


def _offsets(table: pathlib.Path) -> List[int]:
    from deltalake import DeltaTable

    return sorted(DeltaTable(str(table)).to_pyarrow_table(columns=["offset"]).column("offset").to_pylist())

