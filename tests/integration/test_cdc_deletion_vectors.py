"""The keyed (CDC) sink into tables with deletion vectors: its own MERGE (kafka_group.delta.keyed.own_merge).

Real Kafka, real Spark, delta-spark and delta-rs. The same change batches land, through one
``foreachBatch``, into a plain table (delta-rs's MERGE) and into a table delta-spark created with
deletion vectors (the connector's own MERGE, writing deletion vectors); delta-spark deletes rows
of both between the rounds (so the second round merges into files with delta-spark's DVs). Both
tables must hold the same rows, equal to the oracle of the produced events (tests/cdc_support.py),
read by delta-spark, before and after delta-spark's OPTIMIZE and VACUUM.
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import signal
import subprocess
from typing import Any, Dict, List, Set

import pytest
from pyspark.sql import SparkSession

from pyspark_kafka_group import DeltaSink
from tests.cdc_support import parse, produce_events, random_events, scd1_oracle, spark_rows, table_rows
from tests.integration.test_delta_writer_features import vacuum_now
from tests.support import REPO, Cluster, MakeTopic, delta_query_command, delta_source, land_available_now
from tests.support import table_positions, unique_name

pytestmark = pytest.mark.integration

SCD1 = ["id", "v", "__SEQUENCE"]


def _deletion_vectors_added_by_the_sink(table: pathlib.Path) -> int:
    """The ``add`` actions with a deletion vector in the commits the connector wrote."""
    count = 0
    for commit in sorted((table / "_delta_log").glob("[0-9]" * 20 + ".json")):
        actions = [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]
        info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
        if info.get("engineInfo") == "pyspark-kafka-group":
            count += sum(1 for a in actions if "add" in a and a["add"].get("deletionVector"))
    return count


def test_scd1_into_a_deletion_vector_table_equals_delta_rs_and_the_oracle(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    rng = random.Random(3636)
    topic, groups = make_topic(2), {"plain": unique_name("group"), "dvs": unique_name("group")}
    plain, dvs = tmp_path / "plain", tmp_path / "dvs"
    spark.sql(f"CREATE TABLE delta.`{dvs}` (id STRING, v BIGINT, __SEQUENCE BIGINT) USING DELTA "
              "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")

    def land_both() -> None:  # the same events into each table (offsets live in the table: a query and group each)
        for t in (plain, dvs):
            sink = DeltaSink(str(t), keys=["id"], transform=parse, apply_as_deletes="op = 'd'", column_list=["id", "v"])
            land_available_now(delta_source(spark, kafka, topic, groups[t.name], t, maxOffsetsPerTrigger=60), sink,
                               tmp_path / f"chk-{t.name}")

    rounds = [random_events(rng, 30, 160, 2), random_events(rng, 30, 120, 2)]
    produce_events(kafka.bootstrap_servers, topic, rounds[0])
    land_both()
    first = sorted(((k, v, s) for k, (v, s) in scd1_oracle(rounds[:1], by_offset=True).items()), key=repr)
    assert [r[:2] for r in spark_rows(spark, dvs, SCD1)] == [r[:2] for r in first]

    # delta-spark deletes some keys from both (a deletion vector in the DV table's files).
    gone: Set[str] = {k for k, _, _ in first[::4]}
    listed = ", ".join(f"'{k}'" for k in sorted(gone))
    for t in (plain, dvs):
        spark.sql(f"DELETE FROM delta.`{t}` WHERE id IN ({listed})").collect()
    produce_events(kafka.bootstrap_servers, topic, rounds[1])
    land_both()

    later: Dict[str, Any] = {e[1]: True for e in rounds[1]}
    oracle = scd1_oracle(rounds, by_offset=True)
    want = sorted(((k, v) for k, (v, _) in oracle.items() if k not in gone or k in later), key=repr)
    assert [r[:2] for r in spark_rows(spark, dvs, SCD1)] == want
    assert spark_rows(spark, dvs, SCD1) == spark_rows(spark, plain, SCD1) == table_rows(plain, SCD1)
    assert _deletion_vectors_added_by_the_sink(dvs) > 0
    produced: List[int] = [sum(1 for r in rounds for e in r if e[0] == p) for p in range(2)]
    assert table_positions(dvs, groups["dvs"], topic, 2) == dict(enumerate(produced))

    spark.sql(f"OPTIMIZE delta.`{dvs}`").collect()
    vacuum_now(spark, dvs)
    assert [r[:2] for r in spark_rows(spark, dvs, SCD1)] == want



@pytest.mark.parametrize("properties", [
    "'delta.enableDeletionVectors' = 'true', 'delta.columnMapping.mode' = 'name'",
    "'delta.enableDeletionVectors' = 'false'",
], ids=["deletion-vectors-column-mapping", "copy-on-write"])
def test_killed_before_the_own_merge_commits_into_a_column_mapped_table_lands_each_change_once(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path, properties: str
) -> None:
    """On a table with deletion vectors and column mapping: SIGKILL the query after the own MERGE wrote
    its data and deletion vector files, before its commit (a second batch, so the MERGE marks rows of
    a committed file); the rerun lands each change once, read by delta-spark. And the same on a table
    without deletion vectors, whose touched files the executors rewrote before the kill."""
    rng = random.Random(1836)
    topic, group, table, checkpoint = make_topic(2), unique_name("group"), tmp_path / "table", tmp_path / "chk"
    spark.sql(f"CREATE TABLE delta.`{table}` (id STRING, v BIGINT, __SEQUENCE BIGINT) USING DELTA "
              f"TBLPROPERTIES ({properties})")
    # many keys: the second batch leaves rows of the first file. The child orders by the events' 'seq'
    # (sequence_by="seq"), which a Kafka tombstone lacks, so none is produced here (the first test has them)
    events = [e for e in random_events(rng, 60, 80, 2) if e[2] is not None]
    produce_events(kafka.bootstrap_servers, topic, events)
    command = delta_query_command(kafka.bootstrap_servers, topic, group, table, checkpoint, "--available-now",
                                  "--max-offsets", "40", "--keyed", "1")
    env = {**os.environ, "KAFKA_GROUP_FAULT_POINT": "delta.own_merge_written", "KAFKA_GROUP_FAULT_HIT": "2"}
    killed = subprocess.run(command, cwd=REPO, env=env, start_new_session=True, capture_output=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-3000:]
    result = subprocess.run(command, cwd=REPO, start_new_session=True, capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    want = sorted(((k, v) for k, (v, _) in scd1_oracle([events], by_offset=False).items()), key=repr)
    assert [r[:2] for r in spark_rows(spark, table, SCD1)] == want
    assert (_deletion_vectors_added_by_the_sink(table) > 0) == ("'true'" in properties)
    assert table_positions(table, group, topic, 2) == {p: sum(1 for e in events if e[0] == p) for p in range(2)}
