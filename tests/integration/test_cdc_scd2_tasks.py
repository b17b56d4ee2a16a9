"""SCD type 2 as Spark tasks into a table with deletion vectors and row tracking (Apache Kafka, real Spark,
delta-rs and delta-spark).

The table the sink creates for SCD2 has deletion vectors (and here row tracking, asked for); every batch is
MERGEd by the executors (pyspark_kafka_group.sink.keyed.scd2_tasks). Rounds of events bring late events
(below the key's latest version, across batches) and deletes, also of keys already closed (the tombstones);
the table must equal the oracle computed from the events alone (tests/cdc_support.py), read by delta-rs and
delta-spark. Row tracking (PROTOCOL.md, "Row Tracking"), read through delta-spark's ``_metadata.row_id`` and
``_metadata.row_commit_version``: a version no batch changed keeps both; a version a batch rewrote (closed
by a later event, split by a late one) keeps its row id and takes that batch's commit version; a new version
gets a fresh id. A second test SIGKILLs the query at the keyed commit's steps and checks the oracle again.
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import signal
import subprocess
from typing import Any, Dict, List, Tuple

import pytest
from pyspark.sql import SparkSession

from pyspark_kafka_group import DeltaSink
from tests.cdc_support import (
    Event,
    parse,
    produce_events,
    random_events,
    scd2_oracle,
    spark_rows,
    table_rows,
)
from tests.integration.test_cdc_deletion_vectors import _deletion_vectors_added_by_the_sink
from tests.support import (
    REPO,
    Cluster,
    MakeTopic,
    delta_query_command,
    delta_source,
    land_available_now,
    unique_name,
)

pytestmark = pytest.mark.integration

SCD2 = ["id", "v", "__START_AT", "__END_AT"]
ROW_TRACKING = {"delta.enableRowTracking": "true"}
Tracked = Dict[Tuple[str, int], Tuple[int, Any, int, int]]


def _round(rng: random.Random, number: int) -> List[Event]:
    """Upserts and deletes (sequence_by seq, no Kafka tombstones: SCD2 needs a sequence) over 15 keys, even
    sequences above the rounds before; from the second round on, mixed in, events with odd sequences among
    the previous round's (late events: below their key's latest version, landed in a later batch)."""
    def scaled(events: List[Event], odd: int) -> List[Event]:
        return [(p, k, {**v, "seq": 2 * v["seq"] + odd}) for p, k, v in events if v is not None]

    events = scaled(random_events(rng, 15, 50, 2, seq_from=1000 * number, shuffle_seq=True), 0)
    if number:
        events += scaled(random_events(rng, 15, 30, 2, seq_from=1000 * (number - 1), shuffle_seq=True), 1)
        rng.shuffle(events)
    return events


def _tracked(spark: SparkSession, table: pathlib.Path) -> Tracked:
    """(id, start) -> (v, end, row id, row commit version), read by delta-spark."""
    rows = spark.read.format("delta").load(str(table)).select(
        "id", "v", "__START_AT", "__END_AT", "_metadata.row_id", "_metadata.row_commit_version").collect()
    return {(r["id"], r["__START_AT"]): (r["v"], r["__END_AT"], r["row_id"], r["row_commit_version"]) for r in rows}


def test_scd2_with_late_events_and_deletes_keeps_row_ids_and_equals_the_oracle(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    rng = random.Random(5102)
    topic, group, table = make_topic(2), unique_name("group"), tmp_path / "table"
    sink = DeltaSink(str(table), keys=["id"], sequence_by="seq", apply_as_deletes="op = 'd'", transform=parse,
                     column_list=["id", "v"], stored_as_scd_type=2, table_properties=ROW_TRACKING)
    rounds: List[List[Event]] = []
    before: Tracked = {}
    unchanged = rewritten = 0
    for number in range(4):
        events = _round(rng, number)
        rounds.append(events)
        produce_events(kafka.bootstrap_servers, topic, events)
        land_available_now(delta_source(spark, kafka, topic, group, table, maxOffsetsPerTrigger=1000), sink,
                           tmp_path / "chk")
        # the round's MERGE commit (one batch of at most 1000 records; the source commits versions of its own)
        history = spark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect()
        version = max(int(h["version"]) for h in history if h["operation"] == "MERGE")
        after = _tracked(spark, table)
        assert len({r[2] for r in after.values()}) == len(after), "row ids are unique"
        old_ids = {r[2] for r in before.values()}
        for key, (v, end, row_id, committed) in after.items():
            if key in before and before[key][:2] == (v, end):  # untouched: as it was
                assert (row_id, committed) == before[key][2:], key
                unchanged += 1
            elif key in before:  # rewritten (closed, split, updated): its id, this batch's commit version
                assert (row_id, committed) == (before[key][2], version), key
                rewritten += 1
            else:  # new: a fresh id
                assert row_id not in old_ids and committed == version, key
        before = after
        want = scd2_oracle(rounds, by_offset=False)
        assert table_rows(table, SCD2) == want
        assert spark_rows(spark, table, SCD2) == want
    assert unchanged and rewritten
    assert any(r[3] is not None for r in scd2_oracle(rounds, by_offset=False))
    protocol = spark.sql(f"DESCRIBE DETAIL delta.`{table}`").collect()[0]["tableFeatures"]
    assert {"deletionVectors", "rowTracking"} <= set(protocol)
    assert _deletion_vectors_added_by_the_sink(table) > 0  # the batches marked rows deleted instead of rewriting files


@pytest.mark.crash
def test_scd2_tasks_killed_at_each_step_of_the_commit_land_each_event_once(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    """SIGKILL the query before the commit (deletes recorded as tombstones, nothing else), inside the MERGE
    (deletion vectors and files written, not committed) and after the commit (offsets not yet in the
    checkpoint), batches of 40 records with late events; the table then equals the oracle and every row id
    is unique."""
    rng = random.Random(5103)
    topic, group, table, checkpoint = make_topic(2), unique_name("group"), tmp_path / "table", tmp_path / "chk"
    command = delta_query_command(kafka.bootstrap_servers, topic, group, table, checkpoint, "--available-now",
                                  "--max-offsets", "40", "--keyed", "2",
                                  *[f"--table-property={k}={v}" for k, v in ROW_TRACKING.items()])
    points = ["sink.before_commit", "delta.before_merge", "sink.after_commit"]
    rounds: List[List[Event]] = []
    kills = runs = 0
    while kills < len(points):
        events = _round(rng, len(rounds))
        produce_events(kafka.bootstrap_servers, topic, events)
        rounds.append(events)
        env = {**os.environ, "KAFKA_GROUP_FAULT_POINT": points[kills], "KAFKA_GROUP_FAULT_HIT": str(rng.randint(1, 2))}
        result = subprocess.run(command, cwd=REPO, env=env, start_new_session=True, capture_output=True, timeout=300)
        runs += 1
        assert result.returncode in (0, -signal.SIGKILL), result.stderr.decode()[-3000:]
        kills += result.returncode == -signal.SIGKILL
        assert runs < len(points) * 3, "the fault points are not being reached"
    result = subprocess.run(command, cwd=REPO, start_new_session=True, capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    want = scd2_oracle(rounds, by_offset=False)
    assert table_rows(table, SCD2) == want
    assert spark_rows(spark, table, SCD2) == want
    ids = spark.read.format("delta").load(str(table)).select("_metadata.row_id").collect()
    assert len({r[0] for r in ids}) == len(ids) == len(want)


def test_scd2_tasks_with_ignore_null_updates_equal_the_drivers_merge(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    """``ignore_null_updates`` in SCD2 on the tasks path, with deletion vectors and without them
    (copy-on-write), gives the table the driver's MERGE gives (delta-rs's, on a table with the change data
    feed enabled, which the tasks do not take) for the same rounds: late events, deletes, upserts with NULL
    ``v`` (which take the open version's value)."""
    rng = random.Random(5104)
    topic = make_topic(2)
    rounds: List[List[Event]] = []
    for number in range(3):
        events = _round(rng, number)
        rounds.append([(p, k, {**v, "v": None} if v is not None and v["op"] == "u" and rng.random() < 0.3 else v)
                       for p, k, v in events])
    tables = {"tasks": None, "cow": {"delta.enableDeletionVectors": "false"}, "driver": None}
    spark.sql(f"CREATE TABLE delta.`{tmp_path / 'driver'}` (id STRING, v BIGINT, __START_AT BIGINT, __END_AT BIGINT) "
              "USING delta TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')")
    for events in rounds:
        produce_events(kafka.bootstrap_servers, topic, events)
        for name, properties in tables.items():
            sink = DeltaSink(str(tmp_path / name), keys=["id"], sequence_by="seq", apply_as_deletes="op = 'd'",
                             transform=parse, column_list=["id", "v"], stored_as_scd_type=2,
                             ignore_null_updates=True, table_properties=properties)
            land_available_now(delta_source(spark, kafka, topic, f"group-{name}-{topic}", tmp_path / name,
                                            maxOffsetsPerTrigger=1000), sink, tmp_path / f"chk-{name}")
    tasks, driver = spark_rows(spark, tmp_path / "tasks", SCD2), spark_rows(spark, tmp_path / "driver", SCD2)
    assert tasks == driver == spark_rows(spark, tmp_path / "cow", SCD2)
    # the NULLs were filled: an upsert's version holds a value wherever the key had one open before it
    assert sum(1 for r in tasks if r[1] is None) < sum(1 for e in rounds for _, _, v in e if v and v["v"] is None)
    assert _deletion_vectors_added_by_the_sink(tmp_path / "tasks") > 0
    assert _deletion_vectors_added_by_the_sink(tmp_path / "driver") == 0
    assert _deletion_vectors_added_by_the_sink(tmp_path / "cow") == 0
    # the copy-on-write table's batches were the tasks' own MERGE commits; the driver table's delta-rs's
    engines = {path: {json.loads(line)["commitInfo"].get("engineInfo") for c in (tmp_path / path / "_delta_log").glob(
        "*.json") for line in c.read_text().splitlines() if '"commitInfo"' in line and '"MERGE"' in line}
        for path in ("cow", "driver")}
    assert "pyspark-kafka-group" in engines["cow"] and "pyspark-kafka-group" not in engines["driver"], engines


def test_scd2_into_a_delta_spark_table_keeps_the_row_ids_of_the_versions_it_rewrites(
    spark: SparkSession, tmp_path: pathlib.Path
) -> None:
    """A table delta-spark created (deletion vectors, row tracking) and filled (no materialized row ids in
    its files), one of its keys deleted by delta-spark's DELETE (a deletion vector); one SCD2 batch landed
    by the sink: a later event closes a version, a late one splits one, a delete closes one, a key delta-spark
    deleted and a new key start again. Every version is as expected; rewritten versions keep their ids and
    take the batch's commit version, untouched ones keep both, new ones get fresh ids."""
    from kafka_group.delta.keyed.change_rules import KeyedSpec
    from kafka_group.delta.keyed.commit import KeyedOffsetStore
    from kafka_group.delta.keyed.create import created_properties
    from kafka_group.delta.keyed.tombstones import Tombstones
    from pyspark_kafka_group.sink.landing import land_changes

    table = tmp_path / "t"
    spark.sql(f"CREATE TABLE delta.`{table}` (id STRING, v BIGINT, __START_AT BIGINT, __END_AT BIGINT) USING DELTA "
              "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', 'delta.enableRowTracking' = 'true')")
    history = [(f"id{i}", i, 0, 10) for i in range(20)] + [(f"id{i}", 100 + i, 10, None) for i in range(20)]
    spark.createDataFrame(history, "id string, v long, __START_AT long, __END_AT long").coalesce(2).write.format(
        "delta").mode("append").save(str(table))
    spark.sql(f"DELETE FROM delta.`{table}` WHERE id = 'id19'")
    before = _tracked(spark, table)
    assert len(before) == 38

    spec = KeyedSpec.build(["id"], "seq", "op = 'd'", None, ["op", "offset", "seq"], 2)
    events = [("id0", 200, 20, "u"), ("id1", 105, 5, "u"), ("id2", None, 15, "d"), ("id19", 119, 30, "u"),
              ("id50", 50, 1, "u")]
    batch = spark.createDataFrame([(k, v, s, op, 1000 + n) for n, (k, v, s, op) in enumerate(events)],
                                  "id string, v long, seq long, op string, offset long")
    tombstones = Tombstones(str(table), {}, spec, 3600.0)
    land_changes(batch, 0, [], KeyedOffsetStore(str(table), "scd2-row-tracking", {}), spec, transform=None,
                 partition_by=None, tombstones_of=lambda _path, _spec: tombstones,
                 table_properties=created_properties(None, spec))
    merge = max(int(h["version"]) for h in spark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect()
                if h["operation"] == "MERGE")
    after = _tracked(spark, table)

    rewritten = {("id0", 10): (100, 20), ("id1", 0): (1, 5), ("id2", 10): (102, 15)}
    new = {("id0", 20): (200, None), ("id1", 5): (105, 10), ("id19", 30): (119, None), ("id50", 1): (50, None)}
    assert set(after) == set(before) | set(new)
    for key, (v, end, row_id, committed) in after.items():
        if key in rewritten:
            assert (v, end, row_id, committed) == (*rewritten[key], before[key][2], merge), key
        elif key in new:
            assert (v, end) == new[key] and row_id not in {r[2] for r in before.values()} and committed == merge, key
        else:
            assert (v, end, row_id, committed) == before[key], key
    assert len({r[2] for r in after.values()}) == len(after)
