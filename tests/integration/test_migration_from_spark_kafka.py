"""Moving a running ``format("kafka")`` query to ``kafka-group``, as docs/migration.md says: nothing lost, nothing twice.

Spark's own Kafka source (spark-sql-kafka-0-10, on the ``spark`` fixture's classpath, as in
``test_parity_spark_kafka.py``) lands a topic in a Delta table with delta-spark's streaming sink, and stops; the
``kafka-group-offsets from-spark-checkpoint`` command reads where it stopped from its checkpoint; a ``kafka-group``
query with those ``startingOffsets`` and a ``DeltaSink`` lands the rest, and more records produced in between, into
the same table. Every record is in the table exactly once.
"""

from __future__ import annotations

import pathlib
from collections import Counter

import pytest
from pyspark.sql import SparkSession

from kafka_group.offsets_tool import main as offsets_tool
from pyspark_kafka_group import DeltaSink
from tests.support import (
    BROKER_ENGINE,
    Cluster,
    MakeTopic,
    delta_source,
    expected,
    keep_columns,
    land_available_now,
    produce,
    table_positions,
    table_records,
    unique_name,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(BROKER_ENGINE != "kafka", reason="Spark's Kafka source is tested on Apache Kafka"),
]

PARTITIONS = 3


def spark_kafka_into_delta(spark: SparkSession, kafka: Cluster, topic: str, table: pathlib.Path,
                           checkpoint: pathlib.Path) -> None:
    """The old query: ``format("kafka")`` into ``format("delta")``, run with ``Trigger.AvailableNow`` to its end."""
    query = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 25)
        .load()
        .selectExpr("CAST(value AS STRING) AS value", "topic", "partition", "offset")
        .writeStream.format("delta")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start(str(table))
    )
    try:
        query.awaitTermination()
    finally:
        query.stop()


@pytest.mark.parametrize("killed_before_commit_marker", [False, True], ids=["stopped", "killed-after-delta-commit"])
def test_a_spark_kafka_query_moves_to_kafka_group_with_nothing_lost_or_twice(
        spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path,
        capsys: pytest.CaptureFixture[str], killed_before_commit_marker: bool) -> None:
    topic = make_topic(PARTITIONS)
    table, old_checkpoint = tmp_path / "orders", tmp_path / "old-chk"
    produce(kafka.bootstrap_servers, topic, {p: 30 for p in range(PARTITIONS)})
    spark_kafka_into_delta(spark, kafka, topic, table, old_checkpoint)
    assert table_records(table) == expected(topic, {p: 30 for p in range(PARTITIONS)})
    if killed_before_commit_marker:
        # A query killed after delta-spark committed its last batch and before Spark wrote the batch's commit
        # marker: the marker is missing, the batch is in the table.
        last = max(int(p.name) for p in (old_checkpoint / "commits").iterdir() if p.name.isdigit())
        (old_checkpoint / "commits" / str(last)).unlink()

    # Records produced while the move is under way.
    produce(kafka.bootstrap_servers, topic, {p: 20 for p in range(PARTITIONS)}, start=30)

    capsys.readouterr()
    assert offsets_tool(["from-spark-checkpoint", str(old_checkpoint), "--delta-table", str(table)]) == 0
    starting_offsets = capsys.readouterr().out.strip()
    assert starting_offsets == '{"%s":{"0":30,"1":30,"2":30}}' % topic

    group = unique_name("migrated")
    land_available_now(delta_source(spark, kafka, topic, group, table, startingOffsets=starting_offsets),
                       DeltaSink(str(table), transform=keep_columns), tmp_path / "new-chk")

    landed = table_records(table)
    assert landed == expected(topic, {p: 50 for p in range(PARTITIONS)}), \
        f"twice: {sorted(k for k, n in landed.items() if n > 1)[:10]}, " \
        f"missing: {sorted(set(expected(topic, {p: 50 for p in range(PARTITIONS)})) - set(landed))[:10]}"
    assert table_positions(table, group, topic, PARTITIONS) == {p: 50 for p in range(PARTITIONS)}
    # delta-spark reads the table the two queries wrote: the same rows.
    rows = spark.read.format("delta").load(str(table)).select("partition", "offset").collect()
    assert Counter((r.partition, r.offset) for r in rows) == Counter(
        (p, o) for p in range(PARTITIONS) for o in range(50))
