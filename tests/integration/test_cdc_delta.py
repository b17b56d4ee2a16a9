"""The keyed (CDC) sink: change events MERGEd into Delta with their offsets in one commit (Apache Kafka,
real Spark, delta-rs and delta-spark). Every expectation comes from the produced events alone
(``tests/cdc_support.py``), never from the sink."""

from __future__ import annotations

import logging
import os
import pathlib
import random
import shutil
import signal
import subprocess
import time
from typing import Any, Callable, Dict, List

import pytest
from pyspark.sql import SparkSession

from pyspark_kafka_group import DeltaSink
from tests.cdc_support import (
    Event,
    parse,
    produce_events,
    random_events,
    scd1_oracle,
    scd2_oracle,
    spark_rows,
    table_rows,
)
from tests.support import (
    REPO,
    Cluster,
    MakeTopic,
    apache,
    delta_query_command,
    delta_source,
    land_available_now,
    table_positions,
    unique_name,
    wait_for,
)

pytestmark = pytest.mark.integration

SCD1 = ["id", "v", "__SEQUENCE"]
SCD2 = ["id", "v", "__START_AT", "__END_AT"]


def scd1_expected(rounds: List[List[Event]], *, by_offset: bool) -> List[Any]:
    return sorted(((k, v, s) for k, (v, s) in scd1_oracle(rounds, by_offset=by_offset).items()), key=repr)


def test_scd1_applies_upserts_deletes_and_tombstones_once_through_replays_and_a_lost_checkpoint(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    """Default sequence (the Kafka offset); every batch is landed twice (the replay is skipped); the
    checkpoint is deleted between the rounds (the table's offsets say where to go on)."""
    rng = random.Random(36)
    topic, group, table = make_topic(3), unique_name("group"), tmp_path / "table"
    rounds = [random_events(rng, 40, 300, 3), random_events(rng, 40, 200, 3)]
    sink = DeltaSink(str(table), keys=["id"], transform=parse, apply_as_deletes="op = 'd'",
                     column_list=["id", "v"])

    def land_twice(batch: Any, batch_id: int) -> None:
        sink(batch, batch_id)
        sink(batch, batch_id)  # a replay: already in the table, skipped

    for events in rounds:
        produce_events(kafka.bootstrap_servers, topic, events)
        land_available_now(delta_source(spark, kafka, topic, group, table, maxOffsetsPerTrigger=60), land_twice,
                           tmp_path / "chk")
        shutil.rmtree(tmp_path / "chk")
    # The oracle's sequence is the production order; the table's is the Kafka offset: compare the rows.
    want = [(k, v) for k, v, _ in scd1_expected(rounds, by_offset=True)]
    assert [(k, v) for k, v, _ in table_rows(table, SCD1)] == want
    assert [(k, v) for k, v, _ in spark_rows(spark, table, SCD1)] == want
    produced = [sum(1 for r in rounds for e in r if e[0] == p) for p in range(3)]
    assert table_positions(table, group, topic, 3) == dict(enumerate(produced))


def land_rounds_by_seq(spark: SparkSession, kafka: Cluster, topic: str, group: str, table: pathlib.Path,
                       checkpoint: pathlib.Path, rounds: List[List[Event]]) -> None:
    """Produce each round and land it as one batch with the SCD1 sink ordered by the events' ``seq``
    (within a batch the latest sequence of a key wins whatever the order)."""
    sink = DeltaSink(str(table), keys=["id"], sequence_by="seq", apply_as_deletes="op = 'd'", transform=parse,
                     except_column_list=["seq", "op"])
    for events in rounds:
        produce_events(kafka.bootstrap_servers, topic, events)
        land_available_now(delta_source(spark, kafka, topic, group, table, maxOffsetsPerTrigger=1000), sink,
                           checkpoint)


def test_scd1_out_of_order_sequences_never_move_a_row_back(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    rng = random.Random(7)
    topic, group, table = make_topic(2), unique_name("group"), tmp_path / "table"
    first = [e for e in random_events(rng, 30, 200, 2, shuffle_seq=True) if e[2] is not None]
    alive = scd1_oracle([first], by_offset=False)
    stale: List[Event] = [(int(k[2:]) % 2, k, {"v": -1, "seq": s - 1, "op": "u"}) for k, (_, s) in alive.items()]
    second = stale + [e for e in random_events(rng, 30, 100, 2, seq_from=1000, shuffle_seq=True) if e[2] is not None]
    land_rounds_by_seq(spark, kafka, topic, group, table, tmp_path / "chk", [first, second])
    want = scd1_expected([first, second], by_offset=False)
    assert table_rows(table, SCD1) == want
    assert spark_rows(spark, table, SCD1) == want


def test_scd1_remembers_a_delete_against_older_events_of_later_batches(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    """Issue 36: batch 1 inserts k (seq 1) and deletes it (seq 10); batch 2 brings k with seq 5, older
    than the delete: k stays absent. A key deleted then upserted newer comes back; others update."""
    topic, group, table = make_topic(1), unique_name("group"), tmp_path / "table"
    first: List[Event] = [(0, "k", {"v": 1, "seq": 1, "op": "u"}), (0, "k", {"v": 0, "seq": 10, "op": "d"}),
                          (0, "back", {"v": 1, "seq": 1, "op": "u"}), (0, "back", {"v": 0, "seq": 10, "op": "d"}),
                          (0, "kept", {"v": 1, "seq": 1, "op": "u"})]
    second: List[Event] = [(0, "k", {"v": 5, "seq": 5, "op": "u"}), (0, "back", {"v": 12, "seq": 12, "op": "u"}),
                           (0, "kept", {"v": 7, "seq": 7, "op": "u"})]
    land_rounds_by_seq(spark, kafka, topic, group, table, tmp_path / "chk", [first, second])
    want = [("back", 12, 12), ("kept", 7, 7)]
    assert scd1_expected([first, second], by_offset=False) == want  # the oracle agrees
    assert table_rows(table, SCD1) == want
    assert spark_rows(spark, table, SCD1) == want
    # The tombstones are a Delta table in the table's '_' folder: VACUUM (delta-spark, delta-rs) keeps it.
    from deltalake import DeltaTable

    tombstones = table / "_kafka_group_tombstones"
    before = DeltaTable(str(tombstones)).to_pyarrow_dataset().to_table(columns=["id", "__SEQUENCE"]).to_pylist()
    assert sorted(before, key=repr) == [{"id": "back", "__SEQUENCE": 10}, {"id": "k", "__SEQUENCE": 10}]
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        spark.sql(f"VACUUM delta.`{table}` RETAIN 0 HOURS").collect()
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    DeltaTable(str(table)).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    after = DeltaTable(str(tombstones)).to_pyarrow_dataset().to_table(columns=["id", "__SEQUENCE"]).to_pylist()
    assert sorted(after, key=repr) == sorted(before, key=repr)
    assert spark_rows(spark, table, SCD1) == want


def test_scd2_history_equals_the_expected_intervals(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    rng = random.Random(11)
    topic, group, table = make_topic(2), unique_name("group"), tmp_path / "table"
    first = [e for e in random_events(rng, 20, 120, 2, shuffle_seq=True) if e[2] is not None]
    stale: List[Event] = [(0, "id0", {"v": -1, "seq": 0, "op": "u"}), (1, "id1", {"v": -1, "seq": 1, "op": "d"})]
    second = stale + [e for e in random_events(rng, 20, 80, 2, seq_from=1000, shuffle_seq=True) if e[2] is not None]
    sink = DeltaSink(str(table), keys=["id"], sequence_by="seq", apply_as_deletes="op = 'd'", transform=parse,
                     column_list=["id", "v"], stored_as_scd_type=2)
    for events in (first, second):
        produce_events(kafka.bootstrap_servers, topic, events)
        land_available_now(delta_source(spark, kafka, topic, group, table, maxOffsetsPerTrigger=1000), sink,
                           tmp_path / "chk")
    want = scd2_oracle([first, second], by_offset=False)
    assert table_rows(table, SCD2) == want
    assert spark_rows(spark, table, SCD2) == want


def test_two_queries_of_one_group_merge_into_one_table(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    """Two queries (each assigned two of the four partitions) merge into one table at once: their
    commits race (a MERGE planned on an older version never lands) and every change lands once.

    Each batch is read once more before the sink lands it and checked against its plan (the topic is
    neither compacted nor transactional: every planned offset holds a record), then the table's
    positions, then its rows; a failure names the table's commits (their batches, ranges and row
    counts), so a change that went missing is traced to a read, to a range left unlanded, or to a commit."""
    rng = random.Random(3)
    topic, group, table = make_topic(4), unique_name("group"), tmp_path / "table"
    events = random_events(rng, 60, 400, 4)
    produce_events(kafka.bootstrap_servers, topic, events)
    short: List[str] = []
    queries = []
    for n, parts in enumerate(([0, 1], [2, 3])):
        df = (spark.readStream.format("kafka-group").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
              .option("assign", f'{{"{topic}":{parts}}}').option("kafka.group.id", group)
              .option("startingOffsets", "earliest").option("offsets.table", str(table))
              .option("maxOffsetsPerTrigger", 50).load())
        sink = DeltaSink(str(table), keys=["id"], transform=parse, apply_as_deletes="op = 'd'",
                         column_list=["id", "v"], checkpoint_location=str(tmp_path / f"chk{n}"))
        queries.append(df.writeStream.foreachBatch(read_in_full(sink, tmp_path / f"chk{n}", short))
                       .option("checkpointLocation", str(tmp_path / f"chk{n}")).trigger(availableNow=True).start())
    for q in queries:
        q.awaitTermination()
        assert q.exception() is None
    history = commits_of(table)
    assert not short, "batches whose rows do not fill their plan:\n" + "\n".join(short) + history
    produced = {p: sum(1 for e in events if e[0] == p) for p in range(4)}
    assert table_positions(table, group, topic, 4) == produced, history
    want = [(k, v) for k, v, _ in scd1_expected([events], by_offset=True)]
    assert [(k, v) for k, v, _ in table_rows(table, SCD1)] == want, history


def read_in_full(sink: DeltaSink, checkpoint: pathlib.Path, short: List[str]) -> Callable[[Any, int], None]:
    """``sink`` as a ``foreachBatch`` function that first notes in ``short`` each planned range (of the
    batch's plan in ``checkpoint``) whose records a read of the batch (a Spark job of its own, before the
    sink's) does not give exactly, one per offset."""
    from pyspark.sql import functions as F

    from kafka_group.formats.checkpoint import read_checkpoint_offsets

    def land(batch: Any, batch_id: int) -> None:
        text = (checkpoint / "offsets" / str(batch_id)).read_text(encoding="utf-8")
        plan = read_checkpoint_offsets(text).offsets_table_sources()[0].planned_ranges()
        read = {r["partition"]: (r["n"], r["first"], r["last"]) for r in batch.groupBy("partition").agg(
            F.count(F.lit(1)).alias("n"), F.min("offset").alias("first"), F.max("offset").alias("last")).collect()}
        for r in plan:
            held = read.get(r.topic_partition.partition)
            if held != ((r.size, r.from_offset, r.until_offset - 1) if r.size else None):
                short.append(f"batch {batch_id} of {checkpoint.name}: planned {r}, read (records, first, last) {held}")
        sink(batch, batch_id)

    return land


def commits_of(table: pathlib.Path) -> str:
    """The table's commits, oldest first: version, operation, batch, ranges and row counts (for messages)."""
    from deltalake import DeltaTable

    lines = []
    for entry in sorted(DeltaTable(str(table)).history(), key=lambda e: int(e.get("version", -1))):
        lines.append(f"v{entry.get('version')} {entry.get('operation')} {entry.get('kafkaGroup.operation', '')} "
                     f"batch {entry.get('kafkaGroup.batchId')} ranges {entry.get('kafkaGroup.ranges')} "
                     f"{entry.get('operationParameters')}")
    return "\nthe table's commits:\n" + "\n".join(lines)


def test_a_partition_dropped_at_the_last_batch_of_an_available_now_run_is_planned_again(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The keyed sink drops the rows of a partition whose table position is not where its plan starts
    (here reset meanwhile, as the offsets tool does) and lands the others. At an AvailableNow run's
    last batch too, the run does not end there: its next plan reads the dropped range again from the
    table's position, and every change lands once."""
    from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
    from kafka_group.offsets import TopicPartition

    rng = random.Random(7)
    topic, group, table = make_topic(2), unique_name("group"), tmp_path / "table"
    rounds = [random_events(rng, 20, 60, 2), random_events(rng, 20, 60, 2)]
    sink = DeltaSink(str(table), keys=["id"], transform=parse, apply_as_deletes="op = 'd'", column_list=["id", "v"])
    produce_events(kafka.bootstrap_servers, topic, rounds[0])
    land_available_now(delta_source(spark, kafka, topic, group, table), sink, tmp_path / "chk")
    produce_events(kafka.bootstrap_servers, topic, rounds[1])
    first = sum(1 for e in rounds[0] if e[0] == 0)  # partition 0's position after the first run
    batches: List[int] = []
    caplog.set_level(logging.WARNING, logger="pyspark_kafka_group.sink.delta_sink")  # foreachBatch runs here

    def reset_then_land(batch: Any, batch_id: int) -> None:
        if not batches:  # planned from `first`: the run's only batch until the sink drops partition 0
            DeltaOffsetStore(str(table), group).reset({TopicPartition(topic, 0): first // 2}, reason="the test")
        batches.append(batch_id)
        sink(batch, batch_id)

    land_available_now(delta_source(spark, kafka, topic, group, table), reset_then_land, tmp_path / "chk")
    dropped = [r.getMessage() for r in caplog.records if "dropping those partitions' rows" in r.getMessage()]
    assert len(dropped) == 1 and f"{topic}-0 planned [{first}, " in dropped[0], dropped
    assert len(batches) == 2, batches  # the batch that dropped partition 0, then [first // 2, end) of it
    produced = {p: sum(1 for r in rounds for e in r if e[0] == p) for p in range(2)}
    assert table_positions(table, group, topic, 2) == produced
    want = [(k, v) for k, v, _ in scd1_expected(rounds, by_offset=True)]
    assert [(k, v) for k, v, _ in table_rows(table, SCD1)] == want


def test_compacted_topic_read_from_the_start_gives_the_same_table(
    spark: SparkSession, kafka: Cluster, tmp_path: pathlib.Path
) -> None:
    if kafka.engine != "kafka":
        pytest.skip("needs Apache Kafka: the mock cluster does not compact")
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    topic = unique_name("compacted")
    apache(kafka).create_topic(topic, 1, config={"cleanup.policy": "compact", "segment.ms": "100",
                                                 "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"})
    events = [e for e in random_events(random.Random(5), 10, 150, 1)]
    produce_events(kafka.bootstrap_servers, topic, events)
    time.sleep(0.3)  # older than segment.ms: the next record rolls a new segment, so the first can be cleaned
    roll: List[Event] = [(0, "roll", {"v": 0, "seq": 0, "op": "u"})]
    produce_events(kafka.bootstrap_servers, topic, roll)

    def log_size() -> int:
        """How many records the partition holds now, read to its end. An empty poll is not the end: one that
        came back empty on a loaded machine counted as "compacted" before any record was read."""
        consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": unique_name("peek"),
                             "enable.auto.commit": False, "enable.partition.eof": True})
        try:
            consumer.assign([TopicPartition(topic, 0, 0)])
            seen = 0
            while True:
                message = consumer.poll(60)
                assert message is not None, f"no end of {topic}[0] within 60 s"
                error = message.error()
                if error is not None:
                    assert error.code() == KafkaError._PARTITION_EOF, error
                    return seen
                seen += 1
        finally:
            consumer.close()

    wait_for(lambda: log_size() < len(events) // 2, "the log cleaner to compact the topic", 180)
    table = tmp_path / "table"
    land_available_now(delta_source(spark, kafka, topic, unique_name("group"), table, maxOffsetsPerTrigger=7),
                       DeltaSink(str(table), keys=["id"], transform=parse, apply_as_deletes="op = 'd'",
                                 column_list=["id", "v"]), tmp_path / "chk")
    want = [(k, v) for k, v, _ in scd1_expected([events, roll], by_offset=True)]
    assert [(k, v) for k, v, _ in table_rows(table, SCD1)] == want


def crash_round(rng: random.Random, rounds: List[List[Event]]) -> List[Event]:
    """The crash test's next round of events (no Kafka tombstones: both types order by ``seq``), the same
    for both types: sequences shuffled within the round (older events in later batches), even numbers;
    and, for each key whose last event so far is a delete, an upsert one below that delete (odd: no
    ties), mixed in: events older than an earlier delete, which SCD1 ignores (issue 36) and SCD2 places
    into the history, closed by that delete."""
    events = [e for e in random_events(rng, 25, 60, 3, seq_from=1000 * len(rounds), shuffle_seq=True)
              if e[2] is not None]
    events = [(p, k, {**v, "seq": 2 * v["seq"]}) for p, k, v in events if v is not None]
    last: Dict[str, Event] = {}
    for e in (e for r in rounds for e in r):
        assert e[2] is not None
        if e[1] not in last or e[2]["seq"] > last[e[1]][2]["seq"]:  # type: ignore[index]
            last[e[1]] = e
    for p, k, v in last.values():
        if v is not None and v["op"] == "d":
            events.insert(rng.randrange(len(events) + 1), (p, k, {"v": -1, "seq": v["seq"] - 1, "op": "u"}))
    return events


@pytest.mark.crash
@pytest.mark.parametrize("scd", [1, 2])
def test_killed_during_merge_batches_lands_each_change_exactly_once(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path, scd: int
) -> None:
    """SIGKILL the whole query at each step of the keyed commit (before the change set, after SCD1's
    tombstones, before and inside the MERGE's commit path, after it: the two SCD types share that path
    and split the points), then run to the end; the table then equals the oracle. Both order by ``seq``;
    later rounds bring events older than earlier deletes (:func:`crash_round`)."""
    # Two kills per SCD type by default (CI's budget), at different points for the two types so the pair
    # covers all four; KAFKA_GROUP_CRASH_KILLS asks for more (each point in turn).
    kills_wanted = int(os.environ.get("KAFKA_GROUP_CRASH_KILLS", "2"))
    rng = random.Random(2026 + scd)
    topic, group, table, checkpoint = make_topic(3), unique_name("group"), tmp_path / "table", tmp_path / "chk"
    command = delta_query_command(kafka.bootstrap_servers, topic, group, table, checkpoint, "--available-now",
                                  "--max-offsets", "40", "--keyed", str(scd))
    # The two types share the commit path and split its points; SCD1 adds its tombstones' (a batch's
    # deletes recorded, its data and offsets not committed). sink.before_write with more kills only.
    points = (["keyed.after_tombstones", "sink.before_commit"] if scd == 1 else
              ["delta.before_merge", "sink.after_commit"]) + ["sink.before_write"]
    rounds: List[List[Event]] = []
    kills = runs = 0
    while kills < kills_wanted:
        events = crash_round(rng, rounds)
        produce_events(kafka.bootstrap_servers, topic, events)
        rounds.append(events)
        env = {**os.environ, "KAFKA_GROUP_FAULT_POINT": points[kills % len(points)],
               "KAFKA_GROUP_FAULT_HIT": str(rng.randint(1, 2))}
        result = subprocess.run(command, cwd=REPO, env=env, start_new_session=True, capture_output=True, timeout=300)
        runs += 1
        assert result.returncode in (0, -signal.SIGKILL), result.stderr.decode()[-3000:]
        kills += result.returncode == -signal.SIGKILL
        assert runs < kills_wanted * 3, "the fault points are not being reached"
    result = subprocess.run(command, cwd=REPO, start_new_session=True, capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    if scd == 1:  # sequence_by seq; the last event of each key by seq, deletes applied
        want: Any = scd1_expected(rounds, by_offset=False)
        assert table_rows(table, SCD1) == want
        assert spark_rows(spark, table, SCD1) == want
    else:  # sequence_by seq
        want = scd2_oracle(rounds, by_offset=False)
        assert table_rows(table, SCD2) == want
        assert spark_rows(spark, table, SCD2) == want

