"""Every SCD1 batch as Spark tasks: copy-on-write by the executors, ``ignore_null_updates``, truncates.

Real Kafka, real Spark, delta-spark and delta-rs. The same change batches (upserts with NULL columns,
``op = 'd'`` deletes, tombstones, keys whose row is newer than every event, a truncate) land, through
one ``DeltaSink`` each with ``ignore_null_updates=True`` and ``apply_as_truncates``, into four tables
delta-spark created: one with the change data feed enabled (delta-rs's MERGE on the driver, the path
these batches took before), a plain one (copy-on-write by the executors), one with deletion vectors
(new deletion vectors), and one whose deletion vectors delta-spark wrote and then disabled
(copy-on-write of files with a deletion vector). delta-spark deletes rows of each between the rounds.
All four must hold the same rows after each round, read by delta-spark (and by delta-rs), with every
offset once; the copy-on-write tables get no deletion vector from the sink. (A SIGKILL before a
copy-on-write commit: tests/integration/test_cdc_deletion_vectors.py.)
"""

from __future__ import annotations

import json
import pathlib
import random
from typing import Any, Dict, List, Optional

import pytest
from pyspark.sql import SparkSession

from pyspark_kafka_group import DeltaSink
from tests.cdc_support import Event, produce_events, spark_rows, table_rows
from tests.support import Cluster, MakeTopic, delta_source, land_available_now
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

