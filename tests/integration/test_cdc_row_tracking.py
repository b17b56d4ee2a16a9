"""The keyed sink's MERGE as Spark tasks into a table with deletion vectors and row tracking.

Real Spark and delta-spark (the table created and first filled by delta-spark, every read by it), the
sink's landing called with batches built in Spark. PROTOCOL.md, "Row Tracking": an updated row keeps its
row id and gets the commit version of the commit that updated it; rows left alone keep both; inserted
rows get fresh ids. Read through delta-spark's ``_metadata.row_id`` and ``_metadata.row_commit_version``.
"""

from __future__ import annotations

import pathlib
from typing import Any, Dict, List, Optional, Tuple

import pytest
from pyspark.sql import SparkSession

from kafka_group.delta.keyed.change_rules import KeyedSpec
from kafka_group.delta.keyed.commit import KeyedOffsetStore
from kafka_group.delta.keyed.create import created_properties
from kafka_group.delta.keyed.tombstones import Tombstones
from pyspark_kafka_group.sink.landing import land_changes

pytestmark = pytest.mark.integration

Tracked = Dict[int, Tuple[str, int, int]]


def _tracked(spark: SparkSession, table: pathlib.Path) -> Tracked:
    """id -> (v, row id, row commit version), read by delta-spark."""
    rows = spark.read.format("delta").load(str(table)).select(
        "id", "v", "_metadata.row_id", "_metadata.row_commit_version").collect()
    return {r["id"]: (r["v"], r["row_id"], r["row_commit_version"]) for r in rows}


def _land(spark: SparkSession, table: pathlib.Path, batch_id: int, events: List[Tuple[int, str, str, int]],
          table_properties: Optional[Dict[str, str]] = None) -> int:
    """Land ``events`` (id, v, op, Kafka offset) as one keyed SCD1 batch; the table's version after it."""
    spec = KeyedSpec.build(["id"], None, "op = 'd'", None, ["op", "offset"], 1)
    store = KeyedOffsetStore(str(table), "row-tracking-group", {})
    tombstones = Tombstones(str(table), {}, spec, 3600.0)
    batch = spark.createDataFrame(events, "id long, v string, op string, offset long")
    land_changes(batch, batch_id, [], store, spec, transform=None, partition_by=None,
                 tombstones_of=lambda _path, _spec: tombstones,
                 table_properties=created_properties(table_properties, spec))
    return int(spark.sql(f"DESCRIBE HISTORY delta.`{table}` LIMIT 1").collect()[0]["version"])


def test_updated_rows_keep_their_row_ids_and_take_the_merge_commit_version(
    spark: SparkSession, tmp_path: pathlib.Path
) -> None:
    table = tmp_path / "tracked"
    spark.sql(f"CREATE TABLE delta.`{table}` (id BIGINT, v STRING, __SEQUENCE BIGINT) USING DELTA TBLPROPERTIES "
              "('delta.enableDeletionVectors' = 'true', 'delta.enableRowTracking' = 'true')")
    spark.range(0, 100, 1, 2).selectExpr("id", "concat('a', id) AS v", "0L AS __SEQUENCE").write.format(
        "delta").mode("append").save(str(table))
    before = _tracked(spark, table)
    assert len({r[1] for r in before.values()}) == 100

    first = _land(spark, table, 0, [(i, f"b{i}", "u", 1000 + i) for i in range(30)]
                  + [(i, "", "d", 1000 + i) for i in range(30, 40)]
                  + [(i, f"n{i}", "u", 1000 + i) for i in range(100, 110)])
    after = _tracked(spark, table)
    assert sorted(after) == list(range(30)) + list(range(40, 110))
    for i in range(30):  # updated: the same row id, the MERGE's commit version
        assert after[i] == (f"b{i}", before[i][1], first), i
    for i in range(40, 100):  # untouched: as they were
        assert after[i] == before[i], i
    old_ids = {r[1] for r in before.values()}
    for i in range(100, 110):  # inserted: fresh ids, the MERGE's commit version
        assert after[i][1] not in old_ids and after[i][2] == first, i
    assert len({r[1] for r in after.values()}) == len(after)

    # Again, over rows the sink itself rewrote (their ids now materialized in its files) and delta-spark's.
    second = _land(spark, table, 1, [(i, f"c{i}", "u", 2000 + i) for i in list(range(0, 10)) + [50, 105]])
    again = _tracked(spark, table)
    for i in list(range(0, 10)) + [50, 105]:
        assert again[i] == (f"c{i}", after[i][1], second), i
    for i in list(range(10, 30)) + list(range(40, 50)) + list(range(51, 100)) + [100, 101, 109]:
        assert again[i] == after[i], i
    assert len({r[1] for r in again.values()}) == len(again) == 100
    history: Any = spark.sql(f"DESCRIBE HISTORY delta.`{table}` LIMIT 1").collect()[0]
    assert history["operation"] == "MERGE"


def test_a_table_the_sink_creates_with_row_tracking_keeps_ids_across_updates(
    spark: SparkSession, tmp_path: pathlib.Path
) -> None:
    table = tmp_path / "created"
    tracking = {"delta.enableRowTracking": "true"}
    first = _land(spark, table, 0, [(i, f"a{i}", "u", 100 + i) for i in range(50)], tracking)
    before = _tracked(spark, table)
    assert sorted(r[1] for r in before.values()) == list(range(50))  # fresh ids from 0, in its first commit
    assert {r[2] for r in before.values()} == {first}
    second = _land(spark, table, 1, [(i, f"b{i}", "u", 1000 + i) for i in range(0, 50, 5)]
                   + [(1, "", "d", 1001), (60, "n60", "u", 1060)], tracking)
    after = _tracked(spark, table)
    for i in range(0, 50, 5):
        assert after[i] == (f"b{i}", before[i][1], second), i
    assert 1 not in after and after[60][1] >= 50 and after[60][2] == second
    assert all(after[i] == before[i] for i in range(50) if i % 5 and i != 1)
    features = spark.sql(f"DESCRIBE DETAIL delta.`{table}`").collect()[0]["tableFeatures"]
    assert {"deletionVectors", "rowTracking", "domainMetadata"} <= set(features)
