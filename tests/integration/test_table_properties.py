"""What a delta-spark table asks of its writer, honoured by DeltaSink; and Delta streaming readers downstream.

Tables created by delta-spark with ``delta.targetFileSize``, ``delta.dataSkippingStatsColumns``,
``delta.checkpointInterval``, ``delta.logRetentionDuration``, ``delta.enableExpiredLogCleanup`` and
``delta.checkpointPolicy`` (on both commit paths: delta-rs's, and the connector's own for tables with
row tracking or in-commit timestamps), written by the sink from real Kafka; a
``spark.readStream.format("delta")`` query downstream of the sink's table.
"""

from __future__ import annotations

import json
import os
import pathlib
from collections import Counter
from typing import Any, Dict, List, Tuple

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from pyspark_kafka_group import DeltaSink
from tests.support import Cluster, MakeTopic, delta_source, keep_columns, land_available_now, produce, unique_name

pytestmark = pytest.mark.integration

SINK_COLUMNS = "value STRING, topic STRING, partition INT, offset BIGINT"


def create(spark: SparkSession, table: pathlib.Path, properties: Dict[str, str]) -> None:
    props = ", ".join(f"'{k}' = '{v}'" for k, v in properties.items())
    # delta-spark 4.4 does not know delta.targetFileSize (Databricks' runtime sets it) unless told to keep any property.
    arbitrary = "spark.databricks.delta.allowArbitraryProperties.enabled"
    spark.conf.set(arbitrary, "true")
    try:
        spark.sql(f"CREATE TABLE delta.`{table}` ({SINK_COLUMNS}) USING delta TBLPROPERTIES ({props})")
    finally:
        spark.conf.unset(arbitrary)


def land(spark: SparkSession, kafka: Cluster, topic: str, group: str, table: pathlib.Path,
         checkpoint: pathlib.Path) -> None:
    land_available_now(delta_source(spark, kafka, topic, group, table, startingOffsets="earliest"),
                       DeltaSink(str(table), transform=keep_columns), checkpoint)


def rows(spark: SparkSession, table: pathlib.Path) -> Counter[Tuple[int, int]]:
    return Counter((r.partition, r.offset) for r in spark.read.format("delta").load(str(table)).collect())


def adds(table: pathlib.Path) -> List[Dict[str, Any]]:
    """The latest version's add actions: path, size, stats."""
    actions = pa.table(DeltaTable(str(table)).get_add_actions(flatten=False)).to_pylist()
    return [{"path": a["path"], "size": a["size_bytes"], "stats": a.get("stats")} for a in actions]


def test_files_are_rolled_at_the_tables_target_file_size(
        spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path) -> None:
    table, topic = tmp_path / "t", make_topic(1)
    create(spark, table, {"delta.targetFileSize": "16kb"})
    produce(kafka.bootstrap_servers, topic, {0: 3000})
    land(spark, kafka, topic, unique_name("size"), table, tmp_path / "c")
    sizes = [a["size"] for a in adds(table)]
    assert len(sizes) > 1 and max(sizes) <= 2 * 16 * 1024, sizes
    assert rows(spark, table) == Counter((0, o) for o in range(3000))


def test_statistics_cover_the_tables_stats_columns(
        spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path) -> None:
    table, topic = tmp_path / "t", make_topic(1)
    create(spark, table, {"delta.dataSkippingStatsColumns": "offset,`partition`"})
    produce(kafka.bootstrap_servers, topic, {0: 10})
    land(spark, kafka, topic, unique_name("stats"), table, tmp_path / "c")
    # The stats the sink wrote, from the log itself (delta-rs's get_add_actions shows only the columns the table names).
    written = [json.loads(json.loads(line)["add"]["stats"]) for commit in sorted((table / "_delta_log").glob("*.json"))
               for line in commit.read_text().splitlines() if '"add"' in line]
    assert written and all(set(s["minValues"]) == {"offset", "partition"} for s in written), written
    # delta-spark skips files by them: a filter on offset reads the right rows.
    assert spark.read.format("delta").load(str(table)).where("offset >= 7").count() == 3


def test_checkpoints_and_log_cleanup_follow_the_tables_properties(
        spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path) -> None:
    table, topic, group = tmp_path / "t", make_topic(1), unique_name("ckpt")
    create(spark, table, {"delta.checkpointInterval": "2", "delta.logRetentionDuration": "interval 0 seconds",
                          "delta.deletedFileRetentionDuration": "interval 0 seconds"})
    for run in range(3):
        produce(kafka.bootstrap_servers, topic, {0: 5}, start=5 * run)
        land(spark, kafka, topic, group, table, tmp_path / "c")
    log = table / "_delta_log"
    version = DeltaTable(str(table)).version()
    checkpoint = json.loads((log / "_last_checkpoint").read_text())["version"]
    assert version >= 3 and checkpoint >= 2, (version, checkpoint)
    assert not (log / "00000000000000000000.json").exists(), sorted(os.listdir(log))
    assert rows(spark, table) == Counter((0, o) for o in range(15))


def _log_versions(table: pathlib.Path, suffix: str) -> List[int]:
    """The versions of the table's commit (``.json``) or classic checkpoint (``.checkpoint.parquet``) files."""
    return sorted(int(p.name[:20]) for p in (table / "_delta_log").glob("[0-9]" * 20 + suffix))


def _commit_engine(table: pathlib.Path, version: int) -> str:
    for line in (table / "_delta_log" / f"{version:020d}.json").read_text().splitlines():
        if '"commitInfo"' in line:
            return str(json.loads(line)["commitInfo"].get("engineInfo"))
    return ""


def test_the_own_commit_checkpoints_and_removes_expired_log_files_as_the_tables_properties_say(
        spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path) -> None:
    """Tables whose appends the connector commits itself (row tracking, in-commit timestamps): a checkpoint
    every ``delta.checkpointInterval`` versions (V2 spec under ``delta.checkpointPolicy = v2``), then the
    log files older than ``delta.logRetentionDuration`` that it covers removed, unless
    ``delta.enableExpiredLogCleanup`` is false; delta-spark reads the table, its row ids and its history."""
    topic = make_topic(1)
    produce(kafka.bootstrap_servers, topic, {0: 6})
    expiring = {"delta.checkpointInterval": "2", "delta.logRetentionDuration": "interval 0 seconds",
                "delta.deletedFileRetentionDuration": "interval 0 seconds"}
    cleaned, kept = tmp_path / "cleaned", tmp_path / "kept"
    create(spark, cleaned, {**expiring, "delta.enableRowTracking": "true", "delta.checkpointPolicy": "v2"})
    create(spark, kept, {**expiring, "delta.enableInCommitTimestamps": "true", "delta.enableExpiredLogCleanup": "false"})
    for table in (cleaned, kept):  # three batches of two records each: versions 1-3 at least
        land_available_now(delta_source(spark, kafka, topic, unique_name("log"), table, startingOffsets="earliest",
                                        maxOffsetsPerTrigger=2),
                           DeltaSink(str(table), transform=keep_columns), tmp_path / f"c-{table.name}")
        assert rows(spark, table) == Counter((0, o) for o in range(6))

    version = DeltaTable(str(cleaned)).version()
    newest = version - version % 2
    assert version >= 3 and _commit_engine(cleaned, version) == "pyspark-kafka-group", version
    # Everything before the newest checkpoint expired at once; its commit file and the later ones stay.
    listed = sorted(os.listdir(cleaned / "_delta_log"))
    assert _log_versions(cleaned, ".json") == list(range(newest, version + 1)), listed
    assert _log_versions(cleaned, ".checkpoint.parquet") == [newest], listed
    checkpoint = pq.read_table(cleaned / "_delta_log" / f"{newest:020d}.checkpoint.parquet")
    assert [m for m in checkpoint.column("checkpointMetadata").to_pylist() if m] == [{"version": newest}]
    history = [r.version for r in spark.sql(f"DESCRIBE HISTORY delta.`{cleaned}`").collect()]
    assert history == list(range(version, newest - 1, -1))
    row_ids = [r.row_id for r in spark.read.format("delta").load(str(cleaned)).select("_metadata.row_id").collect()]
    assert sorted(row_ids) == list(range(6))

    version = DeltaTable(str(kept)).version()
    assert version >= 3 and _commit_engine(kept, version) == "pyspark-kafka-group", version
    assert _log_versions(kept, ".json") == list(range(version + 1))
    assert _log_versions(kept, ".checkpoint.parquet") == list(range(2, version + 1, 2))


def test_a_delta_stream_downstream_sees_every_batch_once(
        spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path) -> None:
    table, silver, topic, group = tmp_path / "bronze", tmp_path / "silver", make_topic(2), unique_name("down")
    for run in range(3):
        produce(kafka.bootstrap_servers, topic, {0: 4, 1: 3}, start=4 * run)
        land(spark, kafka, topic, group, table, tmp_path / "c")
        (spark.readStream.format("delta").load(str(table)).writeStream.format("delta")
         .option("checkpointLocation", str(tmp_path / "c-silver")).trigger(availableNow=True)
         .start(str(silver)).awaitTermination())
    assert rows(spark, silver) == Counter([(0, o) for o in range(12)] + [(1, o) for o in range(9)])
