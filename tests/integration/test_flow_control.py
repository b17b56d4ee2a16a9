"""Flow control per partition: pause and resume from the notebook, caps, fair shares, event-time alignment."""

from __future__ import annotations

import pathlib
import threading
import time
from collections import Counter
from typing import Any, Dict, List, Tuple

import pytest
from confluent_kafka import Producer
from pyspark.sql import SparkSession

from kafka_group.errors import FlowControlError
from kafka_group.formats import read_progress
from kafka_group.offsets import TopicPartition
from pyspark_kafka_group import flow
from tests.support import Cluster, MakeTopic, group_stream, produce, unique_name, wait_for

pytestmark = pytest.mark.integration

Row = Tuple[int, str, int, int, int]  # batch id, topic, partition, offset, timestamp ms


class Collector:
    """A foreachBatch function that keeps every row with its batch id.

    Idempotent per batch id: Spark replays a batch that was not committed before a
    stop with the same id and data, and the replay replaces the first delivery.
    """

    def __init__(self) -> None:
        self._by_batch: Dict[int, List[Row]] = {}
        self._lock = threading.Lock()

    def __call__(self, batch: Any, batch_id: int) -> None:
        found = batch.selectExpr("topic", "partition", "offset", "unix_millis(timestamp) AS ts").collect()
        with self._lock:
            self._by_batch[batch_id] = [(batch_id, r.topic, r.partition, r.offset, r.ts) for r in found]

    @property
    def rows(self) -> List[Row]:
        with self._lock:
            return [row for rows in self._by_batch.values() for row in rows]

    def count(self, partition: int) -> int:
        return sum(1 for r in self.rows if r[2] == partition)

    def landed(self) -> Counter[Tuple[int, int]]:
        return Counter((r[2], r[3]) for r in self.rows)

    def batches(self) -> Dict[int, List[Row]]:
        with self._lock:
            return {batch_id: list(rows) for batch_id, rows in sorted(self._by_batch.items())}


def member_generation(query: Any) -> int:
    for progress in reversed(query.recentProgress):
        sources = read_progress(progress).sources
        if sources and sources[0].latest.generation is not None:
            return sources[0].latest.generation
    raise AssertionError("no progress with a member report")


def test_pause_and_resume_partitions_of_a_running_query(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    topic, group = make_topic(4), unique_name("group")
    produce(kafka.bootstrap_servers, topic, {p: 20 for p in range(4)})
    collector = Collector()

    def start() -> Any:
        return (group_stream(spark, kafka.bootstrap_servers, topic, group).load().writeStream
                .foreachBatch(collector).option("checkpointLocation", str(tmp_path / "chk"))
                .trigger(processingTime="500 milliseconds").start())

    query = start()
    try:
        wait_for(lambda: len(collector.landed()) == 80, "the first records")
        assert sorted(flow.pause(query, topic, partitions=[1, 2])) == [f"{topic}-1", f"{topic}-2"]

        # Bad requests fail clearly and leave the query alone.
        with pytest.raises(FlowControlError, match="topic 'no-such-topic' is not read by this query"):
            flow.pause(query, "no-such-topic")
        with pytest.raises(FlowControlError, match=f"topic '{topic}' has partitions 0 to 3; there is no partition 9"):
            flow.pause(query, topic, partitions=[9])
        with pytest.raises(FlowControlError, match="partition numbers start at 0"):
            flow.pause(query, topic, partitions=[-1])
        assert query.isActive

        produce(kafka.bootstrap_servers, topic, {p: 10 for p in range(4)}, start=20)
        wait_for(lambda: collector.count(0) == 30 and collector.count(3) == 30, "the unpaused partitions")
        assert collector.count(1) == 20 and collector.count(2) == 20
        wait_for(lambda: {r["partition"]: r["lag"] for r in flow.status(query) if r["paused"]} == {1: 10, 2: 10},
                 "the status to show the paused partitions' lag")
        paused_rows = [r for r in flow.status(query) if r["paused"]]
        assert all(r["heldBy"] == "paused" and r["planned"] is None for r in paused_rows)
        assert member_generation(query) == 1  # paused partitions stay with this member: no rebalance
    finally:
        query.stop()

    # The pause is kept in the checkpoint: a restarted query is still paused.
    query = start()
    try:
        produce(kafka.bootstrap_servers, topic, {p: 5 for p in range(4)}, start=30)
        wait_for(lambda: collector.count(0) == 35 and collector.count(3) == 35, "the restarted query's batches")
        assert collector.count(1) == 20 and collector.count(2) == 20
        assert sorted(flow.resume(query, topic)) == [f"{topic}-1", f"{topic}-2"]
        wait_for(lambda: collector.count(1) == 35 and collector.count(2) == 35, "the resumed partitions")
    finally:
        query.stop()
    assert collector.landed() == Counter((p, o) for p in range(4) for o in range(35))


def test_per_partition_cap_under_skew_keeps_every_partition_moving(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic
) -> None:
    topic = make_topic(4)
    sizes = {0: 1800, 1: 200, 2: 200, 3: 200}  # partition 0 holds 90% of the backlog
    produce(kafka.bootstrap_servers, topic, sizes)
    collector = Collector()
    query = (group_stream(spark, kafka.bootstrap_servers, topic, unique_name("group"),
                          maxOffsetsPerPartition="100", maxOffsetsPerTrigger="250").load()
             .writeStream.foreachBatch(collector).trigger(availableNow=True).start())
    query.awaitTermination()
    assert collector.landed() == Counter((p, o) for p, n in sizes.items() for o in range(n))
    read: Dict[int, int] = {p: 0 for p in sizes}
    for batch_id, rows in collector.batches().items():
        per_partition = Counter(r[2] for r in rows)
        assert all(n <= 100 for n in per_partition.values()), (batch_id, per_partition)
        assert sum(per_partition.values()) <= 250
        waiting = [p for p in sizes if read[p] < sizes[p]]
        assert all(per_partition[p] > 0 for p in waiting), (batch_id, per_partition, read)
        for p, n in per_partition.items():
            read[p] += n
    held = [source.latest.held for p in query.recentProgress for source in read_progress(p).sources]
    assert any(h.get(TopicPartition(topic, 0)) == "maxOffsetsPerPartition" for h in held)


def produce_timed(servers: str, topic: str, partition: int, timestamps: List[int]) -> None:
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 5})
    for i, ts in enumerate(timestamps):
        producer.produce(topic, key=str(i).encode(), value=b"x" * 20, partition=partition, timestamp=ts)
    assert producer.flush(30) == 0


def test_event_time_alignment_holds_partitions_that_run_ahead(spark: SparkSession, kafka: Cluster) -> None:
    slow, fast = unique_name("slow"), unique_name("fast")
    kafka.create_topic(slow, 2)
    kafka.create_topic(fast, 2)
    hour, minute = 3_600_000, 60_000
    # Recent times: Apache Kafka's retention (7 days) would delete records stamped in the past.
    t0 = int(time.time() * 1000) - 10 * hour
    times: Dict[Tuple[str, int], List[int]] = {}
    for p in range(2):
        times[(slow, p)] = [t0 + i * 3 * minute for i in range(100)]  # five hours, a record every 3 minutes
        times[(fast, p)] = [t0 + 3 * hour + i * 1000 for i in range(100)]  # starts three hours later
    for (topic, p), stamps in times.items():
        produce_timed(kafka.bootstrap_servers, topic, p, stamps)
    drift = hour
    collector = Collector()
    query = (group_stream(spark, kafka.bootstrap_servers, f"{slow},{fast}", unique_name("group"),
                          maxOffsetsPerTrigger="200", **{"flow.alignment.maxDrift": "1 hour"}).load()
             .writeStream.foreachBatch(collector).trigger(availableNow=True).start())
    query.awaitTermination()
    assert Counter((r[1], r[2], r[3]) for r in collector.rows) == Counter(
        (t, p, o) for (t, p), stamps in times.items() for o in range(len(stamps)))
    next_offset = {key: 0 for key in times}
    fast_started = False
    for batch_id, rows in collector.batches().items():
        waiting = [times[key][o] for key, o in next_offset.items() if o < len(times[key])]
        bound = min(waiting) + drift  # the slowest partition with a backlog, at the batch's start
        assert all(r[4] < bound for r in rows), (batch_id, bound, max(r[4] for r in rows))
        fast_started = fast_started or any(r[1] == fast for r in rows)
        for r in rows:
            next_offset[(r[1], r[2])] = max(next_offset[(r[1], r[2])], r[3] + 1)
    assert fast_started


def test_pause_survives_an_eager_rebalance_that_gives_the_partition_straight_back(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic
) -> None:
    """Issue 13, finding 7: an eager strategy revokes every partition at each rebalance; a pause of a
    partition that comes straight back must not be lost."""
    from confluent_kafka import Consumer

    topic, other, group = make_topic(2), make_topic(1), unique_name("group")
    produce(kafka.bootstrap_servers, topic, {0: 5, 1: 5})
    collector = Collector()
    stream = group_stream(spark, kafka.bootstrap_servers, topic, group,
                          **{"kafka.partition.assignment.strategy": "range"}).load()
    query = stream.writeStream.foreachBatch(collector).trigger(processingTime="500 milliseconds").start()
    stranger = None
    try:
        wait_for(lambda: collector.count(0) == 5 and collector.count(1) == 5, "the first records", 180)
        flow.pause(query, topic, partitions=[0])
        generation = member_generation(query)
        # Another member of the group, reading another topic: the whole group rebalances and,
        # under 'range', this query gives both partitions up and gets both straight back.
        stranger = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": group,
                             "partition.assignment.strategy": "range", "session.timeout.ms": 6000})
        stranger.subscribe([other])
        wait_for(lambda: stranger.poll(0.2) is None and bool(stranger.assignment())
                 and member_generation(query) > generation, "the group to rebalance", 180)
        produce(kafka.bootstrap_servers, topic, {0: 5, 1: 5}, start=5)
        wait_for(lambda: collector.count(1) == 10, "partition 1's new records", 180)
        assert collector.count(0) == 5, "partition 0 was read although it is paused"
        paused = {(row["topic"], row["partition"]) for row in flow.status(query) if row["paused"]}
        assert paused == {(topic, 0)}
    finally:
        query.stop()
        if stranger is not None:
            stranger.close()


def test_pause_restored_from_the_checkpoint_is_dropped_when_another_member_read_the_partition(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    """Issue 13, finding 7: a pause kept in query a's checkpoint must not hold the partition when a
    restarts after query b of the same group has read it meanwhile (b knew nothing of the pause)."""
    from pyspark_kafka_group import DeltaSink
    from tests.support import delta_source, expected, keep_columns, table_records

    topic, group, table = make_topic(1), unique_name("group"), tmp_path / "table"
    produce(kafka.bootstrap_servers, topic, {0: 10})

    def start(checkpoint: str) -> Any:
        return (delta_source(spark, kafka, topic, group, table).writeStream
                .foreachBatch(DeltaSink(str(table), transform=keep_columns))
                .option("checkpointLocation", str(tmp_path / checkpoint))
                .trigger(processingTime="500 milliseconds").start())

    def landed() -> Counter[Tuple[str, int, int]]:
        return table_records(table) if (table / "_delta_log").exists() else Counter()

    def paused_in_checkpoint(query: Any) -> bool:
        progress = query.lastProgress
        sources = read_progress(progress).sources if progress else ()
        return bool(sources) and sources[0].end is not None and "paused" in sources[0].end.flow

    first = start("chk-a")
    try:
        wait_for(lambda: landed() == expected(topic, {0: 10}), "query a's first records", 180)
        flow.pause(query=first, topic=topic, partitions=[0])
        wait_for(lambda: paused_in_checkpoint(first), "the pause to reach query a's checkpoint", 120)
    finally:
        first.stop()
    def run_until(checkpoint: str, records: int, what: str) -> None:
        query = start(checkpoint)
        try:
            wait_for(lambda: landed() == expected(topic, {0: records}), what, 180)
        finally:
            query.stop()

    produce(kafka.bootstrap_servers, topic, {0: 10}, start=10)
    run_until("chk-b", 20, "query b reading the partition")
    produce(kafka.bootstrap_servers, topic, {0: 10}, start=20)
    run_until("chk-a", 30, "query a, restarted, to read on")
