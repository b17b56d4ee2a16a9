"""The kafka-group source end to end: embedded broker over TCP, real Spark, real files."""

from __future__ import annotations

import pathlib
from collections import Counter
from typing import Any, Dict, List, Tuple

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from tests import support
from tests.support import Cluster, MakeTopic, expected, group_stream, produce, progress, unique_name, wait_for

pytestmark = pytest.mark.integration


def reader(spark: SparkSession, kafka: Cluster, topic: str, **options: Any) -> Any:
    return group_stream(spark, kafka.bootstrap_servers, topic, options.pop("group", unique_name("group")), **options)


def run_available_now(df: Any, out: pathlib.Path, checkpoint: pathlib.Path) -> List[Dict[str, Any]]:
    """Run ``df`` into Parquet files at ``out`` until it ends; the progress of each batch that read rows."""
    query = support.run_available_now(df.writeStream.format("parquet").option("path", str(out))
                                      .option("checkpointLocation", str(checkpoint)))
    return [p for p in progress(query) if p["numInputRows"] > 0]


def landed(spark: SparkSession, out: pathlib.Path) -> Counter[Tuple[str, int, int]]:
    rows = spark.read.parquet(str(out)).select("topic", "partition", "offset").collect()
    return Counter((r.topic, r.partition, r.offset) for r in rows)


def test_available_now_lands_every_record_exactly_once(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    topic = make_topic(4)
    counts = {0: 120, 1: 80, 2: 0, 3: 55}
    produce(kafka.bootstrap_servers, topic, counts)
    run_available_now(reader(spark, kafka, topic).load(), tmp_path / "out", tmp_path / "chk")
    assert landed(spark, tmp_path / "out") == expected(topic, counts)


def test_restart_continues_from_the_checkpoint(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    topic = make_topic(3)
    group = unique_name("group")
    first = {0: 50, 1: 50, 2: 50}
    produce(kafka.bootstrap_servers, topic, first)
    run_available_now(reader(spark, kafka, topic, group=group).load(), tmp_path / "out", tmp_path / "chk")
    produce(kafka.bootstrap_servers, topic, {0: 30, 1: 0, 2: 7}, start=50)
    run_available_now(reader(spark, kafka, topic, group=group).load(), tmp_path / "out", tmp_path / "chk")
    want = expected(topic, first) + Counter((topic, 0, o) for o in range(50, 80)) + Counter(
        (topic, 2, o) for o in range(50, 57)
    )
    assert landed(spark, tmp_path / "out") == want


def test_max_offsets_per_trigger_splits_the_backlog(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    topic = make_topic(4)
    counts = {0: 400, 1: 100, 2: 250, 3: 250}
    produce(kafka.bootstrap_servers, topic, counts)
    df = reader(spark, kafka, topic, maxOffsetsPerTrigger=300).load()
    progress = run_available_now(df, tmp_path / "out", tmp_path / "chk")
    sizes = [p["numInputRows"] for p in progress]
    assert sum(sizes) == 1000
    assert len(sizes) >= 4
    assert max(sizes) <= 300
    assert landed(spark, tmp_path / "out") == expected(topic, counts)


def test_headers_round_trip(spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path) -> None:
    topic = make_topic(1)
    headers = [("trace-id", b"abc"), ("empty", None), ("trace-id", b"\x00\xff")]
    produce(kafka.bootstrap_servers, topic, {0: 3}, headers=headers)
    run_available_now(reader(spark, kafka, topic, includeHeaders="true").load(), tmp_path / "out", tmp_path / "chk")
    rows = spark.read.parquet(str(tmp_path / "out")).orderBy("offset").collect()
    assert len(rows) == 3
    for row in rows:
        assert [(h.key, None if h.value is None else bytes(h.value)) for h in row.headers] == headers
        assert row.timestampType == 0
        assert row.timestamp is not None


def test_schema_equals_sparks_kafka_source(spark: SparkSession, kafka: Cluster, make_topic: MakeTopic) -> None:
    topic = make_topic(1)
    base = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    headers = StructField(
        "headers", ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
    )
    assert reader(spark, kafka, topic).load().schema == StructType(base)
    assert reader(spark, kafka, topic, includeHeaders="true").load().schema == StructType(base + [headers])


def test_latest_starts_after_what_is_there(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    topic = make_topic(2)
    produce(kafka.bootstrap_servers, topic, {0: 10, 1: 10})
    df = reader(spark, kafka, topic, startingOffsets="latest").load()
    assert run_available_now(df, tmp_path / "out", tmp_path / "chk") == []


def test_assign_reads_only_the_named_partitions(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    topic = make_topic(3)
    produce(kafka.bootstrap_servers, topic, {0: 10, 1: 20, 2: 30})
    df = (
        spark.readStream.format("kafka-group")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("assign", f'{{"{topic}":[1,2]}}')
        .option("startingOffsets", f'{{"{topic}":{{"2":25}}}}')
        .load()
    )
    run_available_now(df, tmp_path / "out", tmp_path / "chk")
    want = Counter((topic, 1, o) for o in range(20)) + Counter((topic, 2, o) for o in range(25, 30))
    assert landed(spark, tmp_path / "out") == want


def test_data_loss_fails_with_topic_partition_and_offsets(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    topic = make_topic(1)
    produce(kafka.bootstrap_servers, topic, {0: 100})
    kafka.delete_records(topic, 0, 40)
    df = reader(spark, kafka, topic, startingOffsets=f'{{"{topic}":{{"0":10}}}}').load()
    with pytest.raises(StreamingQueryException, match=rf"data loss in {topic}-0: offsets \[10, 40\)"):
        run_available_now(df, tmp_path / "out", tmp_path / "chk")


def test_data_loss_is_skipped_when_allowed(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    topic = make_topic(1)
    produce(kafka.bootstrap_servers, topic, {0: 100})
    kafka.delete_records(topic, 0, 40)
    df = reader(spark, kafka, topic, failOnDataLoss="false", startingOffsets=f'{{"{topic}":{{"0":10}}}}').load()
    run_available_now(df, tmp_path / "out", tmp_path / "chk")
    assert landed(spark, tmp_path / "out") == Counter((topic, 0, o) for o in range(40, 100))


def test_pattern_picks_up_a_topic_created_while_running(
    spark: SparkSession, kafka: Cluster, tmp_path: pathlib.Path
) -> None:
    prefix = unique_name("pattern")
    first, later = f"{prefix}-a", f"{prefix}-b"
    kafka.create_topic(first, 2)
    produce(kafka.bootstrap_servers, first, {0: 10, 1: 10})
    df = (
        spark.readStream.format("kafka-group")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribePattern", f"{prefix}-.*")
        .option("kafka.group.id", unique_name("group"))
        .option("kafka.session.timeout.ms", "6000")
        .option("kafka.topic.metadata.refresh.interval.ms", "1000")
        .option("startingOffsets", "latest")
        .load()
    )
    query = (
        df.writeStream.format("parquet").option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "chk")).trigger(processingTime="500 milliseconds").start()
    )
    try:
        wait_for(lambda: query.recentProgress, "the query's first batch", 120)
        kafka.create_topic(later, 3)
        produce(kafka.bootstrap_servers, later, {0: 5, 1: 6, 2: 7})
        want = Counter((later, p, o) for p, n in {0: 5, 1: 6, 2: 7}.items() for o in range(n))
        wait_for(lambda: (tmp_path / "out").exists() and landed(spark, tmp_path / "out") == want,
                 "the new topic's records to land", 180)
    finally:
        query.stop()
