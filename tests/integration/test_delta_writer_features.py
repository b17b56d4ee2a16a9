"""Tables delta-spark created with the writer features delta-rs cannot commit to, written by the sink.

Real Kafka, real Spark with delta-spark, real Delta: the sink appends through the connector's own
commit (kafka_group.delta.log.commit) to a table with row tracking, deletion vectors, in-commit
timestamps and liquid clustering all on, across a SIGKILL between its files and its commit, and
to a table with type widening and the vacuum protocol check; delta-spark then reads, optimizes
and vacuums them with the rows that landed, each once.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import urllib.parse
from collections import Counter
from typing import Any, Dict, List, Tuple

import pytest
from pyspark.sql import SparkSession

from pyspark_kafka_group import DeltaSink
from tests.integration.test_delta_spark import SINK_COLUMNS, land, once, spark_history, spark_offsets
from tests.support import REPO, Cluster, MakeTopic, delta_query_command, delta_source, land_available_now, produce
from tests.support import table_positions, unique_name

pytestmark = pytest.mark.integration

RowIds = Dict[Tuple[int, int], Tuple[int, int]]
#: The columns tests.integration.delta_query writes (the crash runs).
QUERY_COLUMNS = f"{SINK_COLUMNS}, writer_pid INT"


def land_here(spark: SparkSession, kafka: Cluster, topic: str, group: str, table: pathlib.Path,
              checkpoint: pathlib.Path, **options: Any) -> None:
    """Land what ``topic`` has with this session's DeltaSink, in delta_query's columns."""
    land_available_now(delta_source(spark, kafka, topic, group, table, **options),
                       DeltaSink(str(table), transform=lambda df: df.selectExpr(
                           "CAST(value AS STRING) AS value", "topic", "partition", "offset", "0 AS writer_pid")),
                       checkpoint)


def commits(table: pathlib.Path) -> Dict[int, List[Dict[str, Any]]]:
    """Every commit file of the table's log, by version."""
    log = table / "_delta_log"
    return {int(p.name[:20]): [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
            for p in sorted(log.glob("[0-9]" * 20 + ".json"))}


def row_ids(spark: SparkSession, table: pathlib.Path) -> Tuple[RowIds, Dict[Tuple[int, int], str]]:
    """delta-spark's row id and row commit version of each (partition, offset), and its file's name."""
    rows = (spark.read.format("delta").load(str(table))
            .select("partition", "offset", "_metadata.row_id", "_metadata.row_commit_version", "_metadata.file_name")
            .collect())
    return ({(r.partition, r.offset): (r.row_id, r.row_commit_version) for r in rows},
            {(r.partition, r.offset): r.file_name for r in rows})


def vacuum_now(spark: SparkSession, table: pathlib.Path) -> None:
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        spark.sql(f"VACUUM delta.`{table}` RETAIN 0 HOURS").collect()
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")


def test_column_mapping_row_tracking_deletion_vectors_in_commit_timestamps_and_clustering_across_a_crash(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    topic, group, table, chk = make_topic(2), unique_name("group"), tmp_path / "table", tmp_path / "chk"
    spark.sql(f"CREATE TABLE delta.`{table}` ({QUERY_COLUMNS}) USING DELTA CLUSTER BY (partition) TBLPROPERTIES ("
              "'delta.enableRowTracking' = 'true', 'delta.enableDeletionVectors' = 'true', "
              "'delta.enableInCommitTimestamps' = 'true', 'delta.columnMapping.mode' = 'name')")
    produce(kafka.bootstrap_servers, topic, {0: 30, 1: 20})
    land_here(spark, kafka, topic, group, table, chk, maxOffsetsPerTrigger=20)

    # SIGKILL between the batch's files and its commit; the next run lands it once.
    produce(kafka.bootstrap_servers, topic, {0: 10, 1: 10}, start=30)
    command = delta_query_command(kafka.bootstrap_servers, topic, group, table, tmp_path / "chk2", "--available-now")
    killed = subprocess.run(command, cwd=REPO, start_new_session=True, capture_output=True, timeout=300,
                            env={**os.environ, "KAFKA_GROUP_FAULT_POINT": "sink.before_commit"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-3000:]
    done = subprocess.run(command, cwd=REPO, start_new_session=True, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode()[-3000:]

    spark.sql(f"DELETE FROM delta.`{table}` WHERE offset % 7 = 0")  # deletion vectors, by delta-spark
    produce(kafka.bootstrap_servers, topic, {0: 5, 1: 5}, start=40)
    land_here(spark, kafka, topic, group, table, chk)

    wanted = once({0: 45, 1: 35}) - Counter({(p, o): 1 for p in (0, 1) for o in range(40) if o % 7 == 0})
    assert spark_offsets(spark, table) == wanted
    assert table_positions(table, group, topic, 2) == {0: 45, 1: 35}

    log = commits(table)
    added_in: Dict[str, int] = {}  # a file's first add (a DELETE re-adds it with its deletion vector)
    for v, actions in sorted(log.items()):
        for a in actions:
            if "add" in a:
                added_in.setdefault(urllib.parse.unquote(a["add"]["path"]).rsplit("/", 1)[-1], v)
    ours = [v for v, actions in log.items() if actions[0]["commitInfo"].get("engineInfo") == "pyspark-kafka-group"]
    assert len(ours) >= 4
    assert all(list(actions[0]) == ["commitInfo"] and "inCommitTimestamp" in actions[0]["commitInfo"]
               for actions in log.values())
    ids, files = row_ids(spark, table)
    assert len({row_id for row_id, _ in ids.values()}) == len(ids)  # distinct
    assert {key: version for key, (_, version) in ids.items()} == {key: added_in[files[key]] for key in ids}
    history = spark_history(spark, table)
    assert all(a.timestamp < b.timestamp for a, b in zip(history, history[1:])), [(h.version, h.timestamp)
                                                                                   for h in history]

    spark.sql(f"OPTIMIZE delta.`{table}`").collect()
    clustered = [a["add"] for a in commits(table)[max(commits(table))] if "add" in a]
    assert clustered and all(a.get("clusteringProvider") == "liquid" for a in clustered), clustered
    vacuum_now(spark, table)
    assert spark_offsets(spark, table) == wanted
    assert row_ids(spark, table)[0] == ids  # stable across OPTIMIZE: ids and commit versions kept

    produce(kafka.bootstrap_servers, topic, {0: 5}, start=45)
    land_here(spark, kafka, topic, group, table, chk)
    after, _ = row_ids(spark, table)
    assert len({row_id for row_id, _ in after.values()}) == len(after) == len(ids) + 5
    assert spark_offsets(spark, table) == wanted + once({0: 50}) - once({0: 45})


def test_type_widening_and_vacuum_protocol_check(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    topic, group, table, chk = make_topic(2), unique_name("group"), tmp_path / "table", tmp_path / "chk"
    spark.sql(f"CREATE TABLE delta.`{table}` (value STRING, topic STRING, partition SHORT, offset INT) USING DELTA "
              "TBLPROPERTIES ('delta.enableTypeWidening' = 'true', 'delta.feature.vacuumProtocolCheck' = 'supported')")
    spark.sql(f"INSERT INTO delta.`{table}` VALUES ('old', 'elsewhere', 9, 1)")  # a file of the narrow types
    spark.sql(f"ALTER TABLE delta.`{table}` ALTER COLUMN offset TYPE BIGINT")
    spark.sql(f"ALTER TABLE delta.`{table}` ALTER COLUMN partition TYPE INT")
    produce(kafka.bootstrap_servers, topic, {0: 12, 1: 8})
    land(spark, kafka, topic, group, table, chk, maxOffsetsPerTrigger=10)

    wanted = once({0: 12, 1: 8}) + Counter({(9, 1): 1})
    assert spark_offsets(spark, table) == wanted
    spark.sql(f"OPTIMIZE delta.`{table}`").collect()
    vacuum_now(spark, table)
    assert spark_offsets(spark, table) == wanted
    assert table_positions(table, group, topic, 2) == {0: 12, 1: 8}
    protocol = [a["protocol"] for actions in commits(table).values() for a in actions if "protocol" in a][-1]
    assert {"typeWidening", "vacuumProtocolCheck"} <= set(protocol["writerFeatures"])
