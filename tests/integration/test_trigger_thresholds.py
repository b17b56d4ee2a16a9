"""minOffsetsPerTrigger and maxTriggerDelay on real Kafka: small trickles wait and land together."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import pytest
from pyspark.sql import SparkSession

from kafka_group.formats import read_progress
from pyspark_kafka_group import flow
from tests.support import Cluster, MakeTopic, group_stream, produce, unique_name, wait_for

pytestmark = pytest.mark.integration


class Batches:
    """A foreachBatch function keeping each batch's offsets. Caller: Spark's foreachBatch thread."""

    def __init__(self) -> None:
        self.offsets: Dict[int, List[int]] = {}

    def __call__(self, batch: Any, batch_id: int) -> None:
        self.offsets[batch_id] = sorted(r.offset for r in batch.select("offset").collect())

    def non_empty(self) -> List[Tuple[int, List[int]]]:
        return [(b, o) for b, o in sorted(self.offsets.items()) if o]

    def landed(self) -> List[int]:
        """Every offset landed, in batch order (a replayed batch counted once)."""
        return [offset for _, offsets in self.non_empty() for offset in offsets]


def start_gated_query(spark: SparkSession, servers: str, topic: str, sink: Batches, *, min_offsets: int,
                      max_delay: str) -> Any:
    """A query of ``topic`` into ``sink`` with ``minOffsetsPerTrigger`` and ``maxTriggerDelay``, every 500 ms."""
    return (group_stream(spark, servers, topic, unique_name("group"), minOffsetsPerTrigger=str(min_offsets),
                         maxTriggerDelay=max_delay).load()
            .writeStream.foreachBatch(sink).trigger(processingTime="500 milliseconds").start())


def trigger_report(query: Any, batch_id: int) -> Dict[str, Any]:
    """The trigger report in the progress event of ``batch_id``.

    Spark appends a batch's progress event after the batch's sink call returns, so a test that
    saw the batch land may ask before the event exists: wait for it.
    """
    reports: List[Dict[str, Any]] = []

    def found() -> bool:
        for event in query.recentProgress:
            parsed = read_progress(event)
            if parsed.batch_id == batch_id and parsed.sources:
                reports.append(parsed.sources[0].latest.flow["trigger"])
                return True
        return False

    wait_for(found, f"the progress event of batch {batch_id}", timeout_s=180)
    return reports[0]


def latest_in_status(query: Any) -> int:
    rows = flow.status(query)
    return int(rows[0]["latest"]) if rows and rows[0]["latest"] is not None else -1


def test_a_trickle_waits_for_min_offsets_and_the_delay_lets_the_rest_through(
        spark: SparkSession, kafka: Cluster, make_topic: MakeTopic) -> None:
    servers = kafka.bootstrap_servers
    topic = make_topic(1)
    produce(servers, topic, {0: 5})
    sink = Batches()
    query = start_gated_query(spark, servers, topic, sink, min_offsets=50, max_delay="1h")
    try:
        # The first trigger runs whatever waits, as Spark's source does.
        wait_for(lambda: sink.non_empty() == [(0, [0, 1, 2, 3, 4])], "the first batch")
        produce(servers, topic, {0: 20}, start=5)
        # A plan has seen the 20 new records (status is rewritten by every plan) and ran no batch.
        wait_for(lambda: latest_in_status(query) == 25, "a plan that sees the 20 records")
        assert sink.non_empty() == [(0, [0, 1, 2, 3, 4])]
        produce(servers, topic, {0: 40}, start=25)
        wait_for(lambda: len(sink.landed()) == 65, "every record to land")
        assert sorted(sink.landed()) == list(range(65))  # each once
        batch_id, offsets = sink.non_empty()[1]
        # The 20 did not land alone: they waited for a batch of at least 50 (the 40 may become visible
        # to a plan in more than one step, so the batch is the first plan that saw 50 or more).
        assert offsets[0] == 5 and len(offsets) >= 50
        report = trigger_report(query, batch_id)
        assert report["ranBecause"] == "minOffsetsPerTrigger" and report["skipped"] >= 1
        assert 20 <= report["waiting"] < 50 and report["minOffsetsPerTrigger"] == 50
    finally:
        query.stop()


def test_max_trigger_delay_lands_a_small_batch(spark: SparkSession, kafka: Cluster, make_topic: MakeTopic) -> None:
    servers = kafka.bootstrap_servers
    topic = make_topic(1)
    produce(servers, topic, {0: 2})
    sink = Batches()
    query = start_gated_query(spark, servers, topic, sink, min_offsets=1000, max_delay="3s")
    try:
        wait_for(lambda: len(sink.non_empty()) == 1, "the first batch")
        produce(servers, topic, {0: 3}, start=2)
        wait_for(lambda: len(sink.landed()) == 5, "the delay to let 3 records through")
        assert sorted(sink.landed()) == [0, 1, 2, 3, 4]
        for batch_id, _ in sink.non_empty()[1:]:  # far below 1000 records: each ran because the delay passed
            assert trigger_report(query, batch_id)["ranBecause"] == "maxTriggerDelay"
    finally:
        query.stop()
