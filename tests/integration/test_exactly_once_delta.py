"""Exactly-once into Delta: data and Kafka offsets in one Delta commit (real broker, Spark, Delta)."""

from __future__ import annotations

import logging
import os
import pathlib
import random
import shutil
import signal
import subprocess
from collections import Counter
from typing import Any, Dict, List, Optional, Tuple

import pytest
from deltalake import DeltaTable
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from kafka_group.delta.files.commit_files import DataFile
from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
from kafka_group.errors import OffsetConflictError, OffsetStoreError
from kafka_group.faults import POINTS
from kafka_group.offsets import OffsetRange, TopicPartition
from pyspark_kafka_group import DeltaSink
from tests.support import (
    BackgroundProducer,
    Cluster,
    MakeTopic,
    REPO,
    RUN_SLOW,
    delta_query_command,
    delta_source,
    expected,
    group_committed,
    keep_columns,
    land_available_now,
    produce,
    table_positions,
    table_records,
    unique_name,
    wait_for,
)

pytestmark = pytest.mark.integration


def test_batches_land_once_and_kafka_offsets_follow_the_table(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    topic, group, table = make_topic(4), unique_name("group"), tmp_path / "table"
    counts = {0: 300, 1: 120, 2: 0, 3: 77}
    produce(kafka.bootstrap_servers, topic, counts)
    sink = DeltaSink(str(table), transform=keep_columns)
    seen: List[Tuple[Dict[int, Optional[int]], Dict[int, Optional[int]]]] = []

    def land(batch: Any, batch_id: int) -> None:
        if table.exists():  # what the previous batch left: Kafka's offsets must equal the table's
            seen.append((group_committed(kafka.bootstrap_servers, group, topic, 4),
                         table_positions(table, group, topic, 4)))
        sink(batch, batch_id)

    land_available_now(delta_source(spark, kafka, topic, group, table, maxOffsetsPerTrigger=150), land,
                       tmp_path / "chk")
    assert table_records(table) == expected(topic, counts)
    final = table_positions(table, group, topic, 4)
    # t-2 has no record: its position is its start, recorded in the table when it was positioned
    # (0, earliest), so a lost checkpoint and group offsets never change where it starts (issue 33).
    assert final == {0: 300, 1: 120, 2: 0, 3: 77}
    assert len(seen) >= 3
    # Lag-tool commits are asynchronous (planning never waits for the coordinator): at a
    # batch's start the group is never ahead of what the table holds, and it catches up. A
    # partition the table has not seen has its start committed (0 here: earliest), so a member
    # taking it over continues from there (issue 26).
    for kafka_offsets, table_offsets in seen:
        for p, committed in kafka_offsets.items():
            in_table = table_offsets[p]
            assert committed is None or (committed <= in_table if in_table is not None else committed == 0), seen
    # The last batch reaches the group at the plan after it, and when the stopped query's member leaves.
    wait_for(lambda: group_committed(kafka.bootstrap_servers, group, topic, 4) == {**final, 2: 0},
             "the group's offsets to reach the table's", 60)
    history = DeltaTable(str(table)).history()
    assert all(entry.get("kafkaGroup.groupId") == group for entry in history)
    # A standard Delta table: another reader sees the same rows.
    import polars

    assert polars.read_delta(str(table)).height == sum(counts.values())


def test_deleted_checkpoint_repeats_and_misses_nothing(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    topic, group, table = make_topic(3), unique_name("group"), tmp_path / "table"
    produce(kafka.bootstrap_servers, topic, {0: 50, 1: 40, 2: 30})
    land_available_now(delta_source(spark, kafka, topic, group, table), DeltaSink(str(table)), tmp_path / "chk")
    shutil.rmtree(tmp_path / "chk")
    produce(kafka.bootstrap_servers, topic, {0: 10, 1: 0, 2: 5}, start=10_000)
    land_available_now(delta_source(spark, kafka, topic, group, table), DeltaSink(str(table)), tmp_path / "chk")
    assert table_records(table) == expected(topic, {0: 60, 1: 40, 2: 35})


def without_partition_columns(df: Any) -> Any:
    """A transform that keeps no 'topic' and 'partition' columns: the sink cannot drop one partition's rows."""
    return df.selectExpr("concat(topic, '-', CAST(partition AS STRING)) AS tp", "offset")


def landed_by_partition(table: pathlib.Path) -> Counter[Tuple[str, int]]:
    data = DeltaTable(str(table)).to_pyarrow_dataset().to_table(columns=["tp", "offset"])
    return Counter(zip(data.column("tp").to_pylist(), data.column("offset").to_pylist()))


def commit_as_new_owner(table: pathlib.Path, group: str, topic: str, partition: int, until: int) -> None:
    """What another member of the group does after a rebalance: it lands [0, until) of the partition."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = pa.table({"tp": [f"{topic}-{partition}"] * until, "offset": pa.array(range(until), pa.int64())})
    name = f"data/other-{partition}-{until}.parquet"
    (table / "data").mkdir(parents=True, exist_ok=True)
    pq.write_table(rows, table / name)
    DeltaOffsetStore(str(table), group).commit([DataFile(name, (table / name).stat().st_size, until)],
                                               rows.schema, [OffsetRange(TopicPartition(topic, partition), 0, until)])


def test_conflicting_batch_without_partition_columns_lands_nothing_and_is_replanned(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Forced interleaving: after this query planned its batch, another member commits one of its partitions.

    The sink cannot drop that partition's rows (the stream was transformed before foreachBatch),
    so the batch lands nothing (the table holds only the other member's row after it), its warning
    names the conflicting partition, its planned range and the table's position, the query goes on,
    and its next batch plans from the table: every record lands once, none is lost, the query never fails.
    """
    topic, group, table = make_topic(2), unique_name("group"), tmp_path / "table"
    produce(kafka.bootstrap_servers, topic, {0: 20, 1: 20})
    sink = DeltaSink(str(table))
    batches: List[int] = []
    after_the_refused_batch: List[Counter[Tuple[str, int]]] = []
    caplog.set_level(logging.WARNING, logger="pyspark_kafka_group.sink.delta_sink")  # foreachBatch runs in this process

    def land_after_the_new_owner(batch: Any, batch_id: int) -> None:
        first = not batches
        if first:
            commit_as_new_owner(table, group, topic, 0, 1)
        batches.append(batch_id)
        sink(batch, batch_id)
        if first:
            after_the_refused_batch.append(landed_by_partition(table))

    df = without_partition_columns(delta_source(spark, kafka, topic, group, table))
    land_available_now(df, land_after_the_new_owner, tmp_path / "chk")
    assert landed_by_partition(table) == Counter(
        [(f"{topic}-0", o) for o in range(20)] + [(f"{topic}-1", o) for o in range(20)])
    assert table_positions(table, group, topic, 2) == {0: 20, 1: 20}
    assert len(batches) >= 2  # the refused batch, then the one planned from the table
    assert after_the_refused_batch == [Counter([(f"{topic}-0", 0)])], "the refused batch landed rows"
    refused = [r.getMessage() for r in caplog.records if f"batch {batches[0]} lands nothing" in r.getMessage()]
    assert len(refused) == 1, [r.getMessage() for r in caplog.records]
    assert f"{topic}-0 planned [0, 20) but the table is at 1" in refused[0], refused[0]
    assert f"{topic}-1 planned" not in refused[0], refused[0]  # only the partition the other member committed


def test_replayed_batch_whose_partition_moved_meanwhile_does_not_wedge_the_query(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    """The replay case: the driver dies between Spark's offsets/N and the sink's commit, and
    another member advances one of the batch's partitions before the restart. Spark replays
    batch N from its checkpoint without asking the source; restarts must not fail for ever."""
    topic, group, table = make_topic(2), unique_name("group"), tmp_path / "table"
    produce(kafka.bootstrap_servers, topic, {0: 20, 1: 20})
    sink = DeltaSink(str(table))
    chk = tmp_path / "chk"

    def die_before_landing(batch: Any, batch_id: int) -> None:
        commit_as_new_owner(table, group, topic, 0, 5)
        raise RuntimeError("driver lost before the sink committed")

    with pytest.raises(StreamingQueryException, match="driver lost"):
        land_available_now(without_partition_columns(delta_source(spark, kafka, topic, group, table)),
                           die_before_landing, chk)
    assert (chk / "offsets" / "0").exists() and not (chk / "commits" / "0").exists()
    produce(kafka.bootstrap_servers, topic, {0: 3, 1: 3}, start=10_000)
    for _ in range(2):  # a second restart lands nothing new and fails nothing
        land_available_now(without_partition_columns(delta_source(spark, kafka, topic, group, table)), sink, chk)
    assert landed_by_partition(table) == Counter(
        [(f"{topic}-0", o) for o in range(23)] + [(f"{topic}-1", o) for o in range(23)])
    assert table_positions(table, group, topic, 2) == {0: 23, 1: 23}


def test_transform_lands_the_partitions_still_owned(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    topic, group, table = make_topic(2), unique_name("group"), tmp_path / "table"
    produce(kafka.bootstrap_servers, topic, {0: 20, 1: 20})
    store = DeltaOffsetStore(str(table), group)
    sink = DeltaSink(str(table), transform=keep_columns)
    committed_by_other = False

    def land(batch: Any, batch_id: int) -> None:
        nonlocal committed_by_other
        if not committed_by_other:
            import pyarrow as pa

            schema = pa.schema([("value", pa.string()), ("topic", pa.string()), ("partition", pa.int32()),
                                ("offset", pa.int64())])
            store.commit([], schema, [OffsetRange(TopicPartition(topic, 0), 0, 20)])
            committed_by_other = True
        sink(batch, batch_id)

    land_available_now(delta_source(spark, kafka, topic, group, table), land, tmp_path / "chk")
    assert table_records(table) == expected(topic, {1: 20})
    assert table_positions(table, group, topic, 2) == {0: 20, 1: 20}


def test_writers_of_one_partition_conflict_and_of_different_partitions_both_land(tmp_path: pathlib.Path) -> None:
    import pyarrow as pa

    schema = pa.schema([("offset", pa.int64())])
    a, b = DeltaOffsetStore(str(tmp_path / "t"), "g"), DeltaOffsetStore(str(tmp_path / "t"), "g")
    p0, p1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
    a.commit([], schema, [OffsetRange(p0, 0, 10)])
    b.commit([], schema, [OffsetRange(p1, 0, 5)])  # another partition: both land
    with pytest.raises(OffsetConflictError, match=r"orders-0 planned \[0, 7\) but the table is at 10"):
        b.commit([], schema, [OffsetRange(p0, 0, 7)])  # a stale plan of the same partition: refused
    with pytest.raises(OffsetConflictError, match="already holds exactly these ranges"):
        b.commit([], schema, [OffsetRange(p0, 0, 10)])  # the very same range again: refused too
    assert a.positions([p0, p1]) == {p0: 10, p1: 5}


class _CreatesAfterAnotherWriter(DeltaOffsetStore):
    """A forced interleaving: ``other`` creates the table right after this store found none."""

    def __init__(self, path: str, group: str, other: Any) -> None:
        self._other = None
        super().__init__(path, group)
        self._other = other

    def _load(self, refresh: bool = False) -> Any:
        table = super()._load(refresh)
        if table is None and self._other is not None:
            other, self._other = self._other, None
            other()
        return table


def test_two_writers_creating_the_table_at_once_both_check_their_offsets(tmp_path: pathlib.Path) -> None:
    """Issue 13, smaller finding: both writers saw no table; the second one's create fails
    (delta-rs 1.6.6: "SaveMode `append` is not allowed for create operation", with no
    "already exists" in it) and must check its offsets again against the new table."""
    import pyarrow as pa

    schema = pa.schema([("offset", pa.int64())])
    p0, p1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
    path = str(tmp_path / "t")
    first = lambda: DeltaOffsetStore(path, "g").commit([], schema, [OffsetRange(p0, 0, 10)])  # noqa: E731
    _CreatesAfterAnotherWriter(path, "g", first).commit([], schema, [OffsetRange(p1, 0, 5)])
    assert DeltaOffsetStore(path, "g").positions([p0, p1]) == {p0: 10, p1: 5}  # another partition: both land
    path = str(tmp_path / "u")
    first = lambda: DeltaOffsetStore(path, "g").commit([], schema, [OffsetRange(p0, 0, 10)])  # noqa: E731
    with pytest.raises(OffsetConflictError, match=r"orders-0 planned \[0, 7\) but the table is at 10"):
        _CreatesAfterAnotherWriter(path, "g", first).commit([], schema, [OffsetRange(p0, 0, 7)])


def test_holding_a_refused_batch_records_only_partitions_never_seen(tmp_path: pathlib.Path) -> None:
    import pyarrow as pa

    store = DeltaOffsetStore(str(tmp_path / "t"), "g")
    p0, p1, p2 = (TopicPartition("orders", p) for p in range(3))
    assert store.hold_unseen([OffsetRange(p0, 3, 9)], reason="no table yet") == []
    store.commit([], pa.schema([("offset", pa.int64())]), [OffsetRange(p0, 0, 10)])
    held = store.hold_unseen([OffsetRange(p0, 4, 9), OffsetRange(p1, 7, 12), OffsetRange(p2, 0, 5)], reason="test")
    assert held == [p1, p2]
    assert store.positions([p0, p1, p2]) == {p0: 10, p1: 7, p2: 0}  # a known position is never moved
    assert store.hold_unseen([OffsetRange(p1, 12, 20)], reason="again") == []
    assert store.positions([p1]) == {p1: 7}


def test_offsets_table_that_is_not_delta_or_of_another_group(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    topic = make_topic(1)
    produce(kafka.bootstrap_servers, topic, {0: 5})
    not_delta = tmp_path / "plain"
    not_delta.mkdir()
    (not_delta / "data.csv").write_text("a,b\n")
    df = delta_source(spark, kafka, topic, unique_name("group"), not_delta)
    with pytest.raises(StreamingQueryException, match="is not a Delta table"):
        land_available_now(df, DeltaSink(str(not_delta)), tmp_path / "chk1")

    table = tmp_path / "table"
    land_available_now(delta_source(spark, kafka, topic, "group-a", table), DeltaSink(str(table)), tmp_path / "chk2")
    with pytest.raises(StreamingQueryException, match="holds the offsets of consumer group 'group-a', not 'group-b'"):
        land_available_now(delta_source(spark, kafka, topic, "group-b", table), DeltaSink(str(table)),
                           tmp_path / "chk3")
    with pytest.raises(OffsetStoreError, match="holds the offsets of consumer group 'group-a'"):
        DeltaOffsetStore(str(table), "group-b")


@pytest.mark.crash
def test_killed_at_every_step_lands_each_record_exactly_once(
    kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    """SIGKILL the whole query (driver, JVM, workers) at each step of the commit protocol, many times,
    while a producer writes to the topic: records arrive during every run, also while it is killed.

    The query reads its four partitions by ``assign`` (not as a group member: a killed member would hold
    its partitions until its session times out, and every restart would wait for that).
    """
    # One round of the four points by default (each child run is a driver's start, about a minute on a loaded
    # 2-core CI machine: CI's budget), three in the long tier; KAFKA_GROUP_CRASH_KILLS asks for any number.
    kills_wanted = int(os.environ.get("KAFKA_GROUP_CRASH_KILLS", "12" if RUN_SLOW else "4"))
    rng = random.Random(20261123)
    topic, group, table, checkpoint = make_topic(4), unique_name("group"), tmp_path / "table", tmp_path / "chk"
    kills = runs = 0
    query = (kafka.bootstrap_servers, topic, group, table, checkpoint, "--available-now",
             "--assign", f'{{"{topic}":[0,1,2,3]}}')
    command = delta_query_command(*query, "--max-offsets", "60")
    # 8 records a second over the four partitions: a run (a driver's start, seconds to a minute) mostly finds
    # two batches of 60 to be killed in; one that finds fewer ends without a kill and is run again (bounded).
    producer = BackgroundProducer(kafka.bootstrap_servers, topic, 4, per_tick=1)
    producer.start()
    try:
        while kills < kills_wanted:
            point = POINTS[kills % len(POINTS)]
            env = {**os.environ, "KAFKA_GROUP_FAULT_POINT": point, "KAFKA_GROUP_FAULT_HIT": str(rng.randint(1, 2))}
            sent_before = producer.sent()
            result = subprocess.run(command, cwd=REPO, env=env, start_new_session=True, capture_output=True,
                                    timeout=300)
            runs += 1
            assert result.returncode in (0, -signal.SIGKILL), result.stderr.decode()[-3000:]
            assert producer.sent() > sent_before, "no record arrived while the query ran"
            kills += result.returncode == -signal.SIGKILL
            assert runs < kills_wanted * 3, "the fault points are not being reached"
    finally:
        producer.stop()
    assert not producer.failed(), producer.failed()[:5]
    # The last run lands the backlog in one batch: no --max-offsets.
    result = subprocess.run(delta_query_command(*query), cwd=REPO, start_new_session=True, capture_output=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    acknowledged = producer.expected()
    assert table_records(table) == Counter((topic, p, o) for p, o in acknowledged)
    assert table_positions(table, group, topic, 4) == {
        p: max((o + 1 for q, o in acknowledged if q == p), default=None) for p in range(4)}


def test_batches_that_land_no_rows_leave_no_files_and_the_session_untouched(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    """Smaller findings of issue 13: a batch whose rows are all filtered out moves the offsets
    without leaving an empty data folder behind, and the sink's Parquet setting stays in the
    query's own session (Spark runs foreachBatch on a clone), not the user's."""
    topic, group, table = make_topic(2), unique_name("group"), tmp_path / "table"
    produce(kafka.bootstrap_servers, topic, {0: 30, 1: 30})
    spark.conf.set("spark.sql.parquet.outputTimestampType", "INT96")
    try:
        land_available_now(delta_source(spark, kafka, topic, group, table, maxOffsetsPerTrigger=20),
            DeltaSink(str(table), transform=lambda df: df.where("false")), tmp_path / "chk")
        assert spark.conf.get("spark.sql.parquet.outputTimestampType") == "INT96"
    finally:
        spark.conf.unset("spark.sql.parquet.outputTimestampType")
    assert table_positions(table, group, topic, 2) == {0: 30, 1: 30}
    assert DeltaTable(str(table)).to_pyarrow_dataset().count_rows() == 0
    leftovers = sorted(p.name for p in (table / "data").iterdir()) if (table / "data").exists() else []
    assert leftovers == []
