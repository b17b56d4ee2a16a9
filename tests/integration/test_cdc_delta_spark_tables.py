"""The keyed (CDC) sink into tables delta-spark created, on delta-rs's MERGE (Apache Kafka, real Spark,
delta-rs and delta-spark).

delta-spark 4.4 creates a table with ``delta.enableChangeDataFeed = true`` under a table-features
protocol that lists ``appendOnly`` and ``invariants`` though neither is in use; the sink merges into
it, and delta-spark reads the change data feed of the sink's commits.
"""

from __future__ import annotations

import pathlib
from collections import Counter

import pytest
from pyspark.sql import SparkSession

from pyspark_kafka_group import DeltaSink
from tests.cdc_support import parse, produce_events, spark_rows
from tests.support import Cluster, MakeTopic, delta_source, land_available_now, table_positions, unique_name

pytestmark = pytest.mark.integration


def test_a_change_data_feed_table_delta_spark_created_is_merged_into_and_its_feed_read(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    topic, group, table = make_topic(1), unique_name("group"), tmp_path / "table"
    spark.sql(f"CREATE TABLE delta.`{table}` (id STRING, v BIGINT, __SEQUENCE BIGINT) USING DELTA "
              "TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')")
    features = spark.sql(f"DESCRIBE DETAIL delta.`{table}`").collect()[0].tableFeatures
    assert {"appendOnly", "invariants", "changeDataFeed"} <= set(features), features
    # Two batches (three events each): three inserts; then an update, a delete and an insert.
    produce_events(kafka.bootstrap_servers, topic, [
        (0, "id1", {"v": 1, "op": "u"}), (0, "id2", {"v": 2, "op": "u"}), (0, "id3", {"v": 3, "op": "u"}),
        (0, "id1", {"v": 10, "op": "u"}), (0, "id2", {"v": 20, "op": "d"}), (0, "id4", {"v": 4, "op": "u"}),
    ])
    sink = DeltaSink(str(table), keys=["id"], transform=parse, apply_as_deletes="op = 'd'", column_list=["id", "v"])
    land_available_now(delta_source(spark, kafka, topic, group, table, maxOffsetsPerTrigger=3), sink,
                       tmp_path / "chk")

    assert spark_rows(spark, table, ["id", "v", "__SEQUENCE"]) == [("id1", 10, 3), ("id3", 3, 2), ("id4", 4, 5)]
    assert table_positions(table, group, topic, 1) == {0: 6}
    feed = (spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 1)
            .load(str(table)).collect())
    assert Counter((r._change_type, r.id, r.v) for r in feed) == Counter([
        ("insert", "id1", 1), ("insert", "id2", 2), ("insert", "id3", 3),
        ("update_preimage", "id1", 1), ("update_postimage", "id1", 10), ("delete", "id2", 2), ("insert", "id4", 4),
    ])
    first = {r._commit_version for r in feed if r._change_type == "insert" and r.id != "id4"}
    second = {r._commit_version for r in feed if r._change_type != "insert" or r.id == "id4"}
    assert len(first) == len(second) == 1 and max(first) < min(second), (first, second)
