"""The sink's own compaction of small files (real Kafka, real Spark, real Delta; delta-spark reads the result).

A table written by many small batches is bin-packed by the sink right after its own commits
(``dataChange=false``, no ``txn``: no offset moves), its rows stay the records exactly once, and a
SIGKILL between writing a compacted file and committing it loses and duplicates nothing.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
from collections import Counter
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from pyspark_kafka_group import DeltaSink
from tests.support import (
    REPO,
    Cluster,
    MakeTopic,
    delta_query_command,
    delta_source,
    expected,
    keep_columns,
    land_available_now,
    produce,
    table_positions,
    table_records,
    unique_name,
)

pytestmark = pytest.mark.integration

MIN_FILES = "spark.databricks.delta.autoCompact.minNumFiles"


def log_commits(table: pathlib.Path) -> Iterator[Tuple[int, List[Dict[str, Any]]]]:
    """Every commit of the table's log: (version, actions)."""
    for path in sorted((table / "_delta_log").glob("*.json")):
        yield int(path.stem), [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def compaction_commits(table: pathlib.Path) -> List[Tuple[int, List[Dict[str, Any]]]]:
    return [(v, actions) for v, actions in log_commits(table)
            if any(a.get("commitInfo", {}).get("operation") == "OPTIMIZE" for a in actions)]


def assert_compactions_change_no_data_and_no_offsets(table: pathlib.Path) -> None:
    commits = compaction_commits(table)
    assert commits, "no compaction commit"
    rows_of = {a["add"]["path"]: json.loads(a["add"]["stats"])["numRecords"]
               for _, actions in log_commits(table) for a in actions if "add" in a}
    for version, actions in commits:
        files = [a["add"] if "add" in a else a["remove"] for a in actions if "add" in a or "remove" in a]
        assert files and all(f["dataChange"] is False for f in files), version
        assert not any("txn" in a for a in actions), f"version {version} moves offsets"
        removed = sum(rows_of[a["remove"]["path"]] - (a["remove"].get("deletionVector") or {}).get("cardinality", 0)
                      for a in actions if "remove" in a)
        added = sum(json.loads(a["add"]["stats"])["numRecords"] for a in actions if "add" in a)
        assert removed == added, f"version {version} removes {removed} rows and adds {added}"


def delta_spark_count_and_sum(spark: SparkSession, table: pathlib.Path) -> Tuple[int, int]:
    row = spark.read.format("delta").load(str(table)).selectExpr("count(*) AS n", "sum(offset) AS s").collect()[0]
    return int(row["n"]), int(row["s"] or 0)


def test_thirty_small_batches_are_compacted_and_land_exactly_once(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    topic, group, table = make_topic(2), unique_name("group"), tmp_path / "table"
    counts = {0: 150, 1: 150}
    produce(kafka.bootstrap_servers, topic, counts)
    spark.conf.set(MIN_FILES, "5")
    try:
        query = land_available_now(delta_source(spark, kafka, topic, group, table, maxOffsetsPerTrigger=10),
                                   DeltaSink(str(table), transform=keep_columns), tmp_path / "chk")
    finally:
        spark.conf.unset(MIN_FILES)
    assert len([p for p in query.recentProgress if p["numInputRows"]]) >= 30
    assert table_records(table) == expected(topic, counts)
    assert table_positions(table, group, topic, 2) == {0: 150, 1: 150}
    files = DeltaTable(str(table)).file_uris()
    assert len(files) < 10, f"{len(files)} files after 30 batches with a threshold of 5"
    assert_compactions_change_no_data_and_no_offsets(table)
    history = DeltaTable(str(table)).history()
    assert any(h.get("kafkaGroup.operation") == "autoCompact" for h in history)
    assert all(h.get("kafkaGroup.groupId") == group for h in history)
    expected_sum = sum(o for n in counts.values() for o in range(n))
    assert delta_spark_count_and_sum(spark, table) == (300, expected_sum)
    assert_data_skipping_keeps_every_row(spark, table, counts)


def assert_data_skipping_keeps_every_row(spark: SparkSession, table: pathlib.Path, counts: Dict[int, int]) -> None:
    """The compacted files carry min/max of ``offset``, and delta-spark, which skips files by them under a
    filter, still finds every row (a wrong bound would drop rows silently)."""
    for _, actions in compaction_commits(table):
        for a in actions:
            if "add" in a:
                stats = json.loads(a["add"]["stats"])
                assert "offset" in stats["minValues"] and "offset" in stats["maxValues"], a["add"]["path"]
    frame = spark.read.format("delta").load(str(table))
    for partition, n in counts.items():
        for low in (0, 1, n // 3, n - 1):
            found = frame.where(f"partition = {partition} AND offset >= {low} AND offset < {n}").count()
            assert found == n - low, (partition, low, found)


def test_a_table_that_turns_compaction_off_keeps_its_files(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    topic, group, table = make_topic(1), unique_name("group"), tmp_path / "table"
    produce(kafka.bootstrap_servers, topic, {0: 8})
    # The first batches create the table; then it says false, as Databricks' property does.
    spark.conf.set(MIN_FILES, "2")
    try:
        land_available_now(delta_source(spark, kafka, topic, group, table, maxOffsetsPerTrigger=4),
                           DeltaSink(str(table), transform=keep_columns), tmp_path / "chk")
        compacted = len(compaction_commits(table))
        assert compacted >= 1
        spark.sql(f"ALTER TABLE delta.`{table}` SET TBLPROPERTIES ('delta.autoOptimize.autoCompact' = 'false')")
        produce(kafka.bootstrap_servers, topic, {0: 12}, start=8)
        land_available_now(delta_source(spark, kafka, topic, group, table, maxOffsetsPerTrigger=4),
                           DeltaSink(str(table), transform=keep_columns), tmp_path / "chk")
    finally:
        spark.conf.unset(MIN_FILES)
    assert len(compaction_commits(table)) == compacted
    assert table_records(table) == Counter((topic, 0, o) for o in range(20))


@pytest.mark.crash
def test_killed_between_the_compacted_file_and_its_commit_loses_and_duplicates_nothing(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    """A column-mapped table with deletion vectors on (delta-spark's), which the connector compacts itself:
    SIGKILL at ``compaction.written`` (the bin's file written, its commit not), then a clean run."""
    topic, group, table, checkpoint = make_topic(2), unique_name("group"), tmp_path / "table", tmp_path / "chk"
    spark.sql(f"CREATE TABLE delta.`{table}` (value STRING, topic STRING, partition INT, offset BIGINT, "
              "writer_pid INT) USING delta TBLPROPERTIES ('delta.columnMapping.mode' = 'name', "
              "'delta.enableDeletionVectors' = 'true')")
    produce(kafka.bootstrap_servers, topic, {0: 40, 1: 40})
    query = (kafka.bootstrap_servers, topic, group, table, checkpoint, "--available-now",
             "--assign", f'{{"{topic}":[0,1]}}', "--conf", f"{MIN_FILES}=3")
    env = {**os.environ, "KAFKA_GROUP_FAULT_POINT": "compaction.written"}
    killed = subprocess.run(delta_query_command(*query, "--max-offsets", "10"), cwd=REPO, env=env,
                            start_new_session=True, capture_output=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-3000:]
    before = compaction_commits(table)
    assert before == [], "the kill came after a compaction commit"
    log_files = {a["add"]["path"] for _, actions in log_commits(table) for a in actions if "add" in a}
    on_disk = {str(p.relative_to(table)) for p in table.rglob("*.parquet")}
    assert on_disk - log_files, "the compacted file was not written before the kill"
    produce(kafka.bootstrap_servers, topic, {0: 20, 1: 20}, start=40)
    done = subprocess.run(delta_query_command(*query, "--max-offsets", "10"), cwd=REPO, start_new_session=True,
                          capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    assert_compactions_change_no_data_and_no_offsets(table)
    rows = spark.read.format("delta").load(str(table)).select("topic", "partition", "offset").collect()
    assert Counter((r[0], r[1], r[2]) for r in rows) == expected(topic, {0: 60, 1: 60})
    assert table_positions(table, group, topic, 2) == {0: 60, 1: 60}


def test_deleted_rows_stay_deleted_when_files_with_deletion_vectors_are_compacted(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    """delta-spark deletes rows of the sink's files with deletion vectors; the sink's compaction then rewrites
    those files without the deleted rows (the connector's rewrite: delta-rs cannot read such a table)."""
    topic, group, table = make_topic(1), unique_name("group"), tmp_path / "table"
    spark.sql(f"CREATE TABLE delta.`{table}` (value STRING, topic STRING, partition INT, offset BIGINT) USING delta "
              "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    produce(kafka.bootstrap_servers, topic, {0: 40})
    sink = DeltaSink(str(table), transform=keep_columns)
    land_available_now(delta_source(spark, kafka, topic, group, table, maxOffsetsPerTrigger=20), sink,
                       tmp_path / "chk")
    spark.sql(f"DELETE FROM delta.`{table}` WHERE offset % 3 = 0")
    assert any("deletionVector" in a.get("add", {}) for _, actions in log_commits(table) for a in actions)
    produce(kafka.bootstrap_servers, topic, {0: 40}, start=40)
    spark.conf.set(MIN_FILES, "3")
    try:
        land_available_now(delta_source(spark, kafka, topic, group, table, maxOffsetsPerTrigger=10), sink,
                           tmp_path / "chk")
    finally:
        spark.conf.unset(MIN_FILES)
    assert_compactions_change_no_data_and_no_offsets(table)
    compacted = {a["remove"]["path"] for _, actions in compaction_commits(table) for a in actions if "remove" in a}
    with_dv = {a["add"]["path"] for _, actions in log_commits(table) for a in actions
               if "deletionVector" in a.get("add", {})}
    assert compacted & with_dv, "no file with a deletion vector was compacted"
    rows = spark.read.format("delta").load(str(table)).select("offset").collect()
    assert sorted(r[0] for r in rows) == [o for o in range(80) if o >= 40 or o % 3]
    assert table_positions(table, group, topic, 1) == {0: 80}
