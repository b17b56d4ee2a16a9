"""Every SCD1 batch as Spark tasks: copy-on-write by the executors, ``ignore_null_updates``, truncates.

Real Kafka, real Spark, delta-spark and delta-rs. The same change batches (upserts with NULL columns,
``op = 'd'`` deletes, tombstones, keys whose row is newer than every event, a truncate) land, through
one ``DeltaSink`` each with ``ignore_null_updates=True`` and ``apply_as_truncates``, into four tables
delta-spark created: one with the change data feed enabled (delta-rs's MERGE on the driver, the path
these batches took before), a plain one (copy-on-write by the executors), one with deletion vectors
(new deletion vectors), and one whose deletion vectors delta-spark wrote and then disabled
(copy-on-write of files with a deletion vector). delta-spark deletes rows of each between the rounds.
All four must hold the same rows after each round, read by delta-spark (and by delta-rs), with every
offset once; the copy-on-write tables get no deletion vector from the sink.
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import signal
import subprocess
from typing import Any, Dict, List, Optional

import pytest
from pyspark.sql import SparkSession

from pyspark_kafka_group import DeltaSink
from tests.cdc_support import Event, produce_events, spark_rows, table_rows
from tests.support import REPO, Cluster, MakeTopic, delta_query_command, delta_source, land_available_now
from tests.support import table_positions, unique_name

pytestmark = pytest.mark.integration

COLUMNS = ["id", "v", "w", "__SEQUENCE"]
TABLES = {
    "driver": "'delta.enableChangeDataFeed' = 'true'",
    "cow": "'delta.enableDeletionVectors' = 'false'",
    "dvs": "'delta.enableDeletionVectors' = 'true'",
    "dv_off": "'delta.enableDeletionVectors' = 'true'",
}


def _parse(df: Any) -> Any:
    """id from the Kafka key; v, w and op from the JSON value (NULL for a tombstone)."""
    from pyspark.sql import functions as F

    value = F.from_json(F.col("value").cast("string"), "v LONG, w STRING, op STRING")
    return df.select("__kafka", F.col("key").cast("string").alias("id"), value.alias("j")).select(
        "__kafka", "id", "j.v", "j.w", "j.op")


def _events(rng: random.Random, keys: List[str], count: int) -> List[Event]:
    events: List[Event] = []
    for _ in range(count):
        roll = rng.random()
        value: Optional[Dict[str, Any]] = None if roll < 0.08 else {
            "v": None if rng.random() < 0.3 else rng.randrange(1000),
            "w": None if rng.random() < 0.3 else f"w{rng.randrange(1000)}", "op": "d" if roll < 0.18 else "u"}
        events.append((0, rng.choice(keys), value))
    return events


def _sink_commits(table: pathlib.Path) -> List[List[Dict[str, Any]]]:
    """The actions of each commit the connector wrote itself."""
    out = []
    for commit in sorted((table / "_delta_log").glob("[0-9]" * 20 + ".json")):
        actions = [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]
        info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
        if info.get("engineInfo") == "pyspark-kafka-group" and info.get("operation") == "MERGE":
            out.append(actions)
    return out


def test_scd1_as_tasks_with_and_without_deletion_vectors_equals_the_driver_merge(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    rng = random.Random(5151)
    topic = make_topic(1)
    groups = {name: unique_name("group") for name in TABLES}
    paths = {name: tmp_path / name for name in TABLES}
    seeded = ", ".join(f"('id{i}', {i}, 'seed', {-1 if i < 15 else 10 ** 12})" for i in range(20))
    for name, properties in TABLES.items():
        spark.sql(f"CREATE TABLE delta.`{paths[name]}` (id STRING, v BIGINT, w STRING, __SEQUENCE BIGINT) "
                  f"USING DELTA TBLPROPERTIES ({properties})")
        spark.sql(f"INSERT INTO delta.`{paths[name]}` VALUES {seeded}").collect()

    def land_all() -> None:
        for name, path in paths.items():
            sink = DeltaSink(str(path), keys=["id"], transform=_parse, column_list=["id", "v", "w"],
                             ignore_null_updates=True, apply_as_deletes="op = 'd'", apply_as_truncates="op = 't'")
            land_available_now(delta_source(spark, kafka, topic, groups[name], path, maxOffsetsPerTrigger=50), sink,
                               tmp_path / f"chk-{name}")

    def all_equal() -> List[Any]:
        rows = {name: spark_rows(spark, path, COLUMNS) for name, path in paths.items()}
        assert all(r == rows["driver"] for r in rows.values()), rows
        assert table_rows(paths["cow"], COLUMNS) == rows["driver"]
        return rows["driver"]

    old = [f"id{i}" for i in range(40)]
    produced = _events(rng, old, 150)
    produce_events(kafka.bootstrap_servers, topic, produced)
    land_all()
    first = all_equal()
    assert ("id16", 16, "seed", 10 ** 12) in first  # newer than every event: left as it was

    # delta-spark deletes some keys from each (deletion vectors where enabled); then disables them on dv_off
    for path in paths.values():
        spark.sql(f"DELETE FROM delta.`{path}` WHERE id IN ('id1', 'id5', 'id9', 'id13', 'id22')").collect()
    spark.sql(f"ALTER TABLE delta.`{paths['dv_off']}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')")
    before = {"cow": 0, "dv_off": len(_sink_commits(paths["dv_off"]))}
    new = [f"new{i}" for i in range(50, 80)]  # after the truncate: keys the table never held before it
    second = _events(rng, old, 60) + [(0, "_", {"op": "t"})] + _events(rng, new, 60)
    produce_events(kafka.bootstrap_servers, topic, second)
    land_all()
    assert all(not r[0].startswith("id") for r in all_equal())  # the truncate emptied the table first

    third = _events(rng, new + [f"new{i}" for i in range(80, 90)], 120)
    produce_events(kafka.bootstrap_servers, topic, third)
    land_all()
    assert all_equal()

    for name in ("cow", "dv_off"):  # copy-on-write: the sink removed and rewrote files, never added a DV
        commits = _sink_commits(paths[name])[before[name]:]
        assert commits and all(not a["add"].get("deletionVector") for c in commits for a in c if "add" in a)
        assert any("remove" in a for c in commits for a in c)
    assert any(a["add"].get("deletionVector") for c in _sink_commits(paths["dvs"]) for a in c if "add" in a)
    assert _sink_commits(paths["driver"]) == []  # the change data feed: delta-rs's MERGE on the driver
    events = len(produced) + len(second) + len(third)
    for name, path in paths.items():
        assert table_positions(path, groups[name], topic, 1) == {0: events}


def test_killed_before_a_copy_on_write_commit_lands_each_change_once(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    """On a table without deletion vectors: SIGKILL the query after the executors rewrote the touched
    files and wrote the new rows, before the commit (the second batch, so files of the first are
    rewritten); the rerun lands each change once, read by delta-spark."""
    from tests.cdc_support import random_events, scd1_oracle

    rng = random.Random(2727)
    topic, group, table, checkpoint = make_topic(2), unique_name("group"), tmp_path / "table", tmp_path / "chk"
    spark.sql(f"CREATE TABLE delta.`{table}` (id STRING, v BIGINT, __SEQUENCE BIGINT) USING DELTA "
              "TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')")
    events = [e for e in random_events(rng, 60, 80, 2) if e[2] is not None]  # the child orders by 'seq'
    produce_events(kafka.bootstrap_servers, topic, events)
    command = delta_query_command(kafka.bootstrap_servers, topic, group, table, checkpoint, "--available-now",
                                  "--max-offsets", "40", "--keyed", "1")
    env = {**os.environ, "KAFKA_GROUP_FAULT_POINT": "delta.own_merge_written", "KAFKA_GROUP_FAULT_HIT": "2"}
    killed = subprocess.run(command, cwd=REPO, env=env, start_new_session=True, capture_output=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-3000:]
    result = subprocess.run(command, cwd=REPO, start_new_session=True, capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    want = sorted(((k, v) for k, (v, _) in scd1_oracle([events], by_offset=False).items()), key=repr)
    assert [r[:2] for r in spark_rows(spark, table, ["id", "v", "__SEQUENCE"])] == want
    assert _sink_commits(table) and not any(a["add"].get("deletionVector") for c in _sink_commits(table)
                                            for a in c if "add" in a)
    assert table_positions(table, group, topic, 2) == {p: sum(1 for e in events if e[0] == p) for p in range(2)}
