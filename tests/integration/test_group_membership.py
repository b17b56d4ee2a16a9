"""Several queries in one consumer group: partitions split, move on join and leave, never planned twice."""

from __future__ import annotations

import pathlib
from typing import List, Tuple

import pytest

from kafka_group.formats import read_checkpoint_offsets
from tests.support import BackgroundProducer, Cluster, GroupQueries, MakeTopic, unique_name, wait_for

pytestmark = pytest.mark.integration


def planned_ranges(checkpoint: pathlib.Path) -> List[Tuple[int, int, int]]:
    """(partition, from, until) of every batch a query planned and ran to completion, from its checkpoint.

    A batch planned when its query was stopped never ran (no ``commits/<n>``): its
    partitions were released with it, so another owner planning them later is fine.
    """
    ranges: List[Tuple[int, int, int]] = []
    for path in (checkpoint / "offsets").glob("[0-9]*"):
        if not (checkpoint / "commits" / path.name).exists():
            continue
        doc = read_checkpoint_offsets(path.read_text(), where=str(path)).source(0)
        ranges.extend((r.topic_partition.partition, r.from_offset, r.until_offset) for r in doc.ranges.values())
    return ranges


def test_three_queries_split_partitions_and_never_plan_the_same_offsets(
    kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    topic = make_topic(6)
    producer = BackgroundProducer(kafka.bootstrap_servers, topic, 6, per_tick=3)
    # A 2 s trigger: the batches (72 records at most, under maxOffsetsPerTrigger) are what is planned and
    # checked; 0.5 s made four times as many while the next query's Spark started.
    with GroupQueries(kafka.bootstrap_servers, topic, unique_name("group"), tmp_path, max_offsets=100,
                      trigger_seconds=2) as queries:
        try:
            producer.produce(30)
            producer.start()
            first = queries.start("a", 400)
            wait_for(lambda: queries.wrote(first), "the first query to land records", 180)
            second = queries.start("b", 400)
            wait_for(lambda: queries.wrote(second), "the second query to take partitions over", 180)
            third = queries.start("c", 400)
            wait_for(lambda: queries.wrote(third), "the third query to take partitions over", 180)
            # Asked to stop once all three run (the query stops, leaving the group), not after a fixed 75 s:
            # that ran three queries' batches for however long was left, and on a slow start ended query a
            # before the third had joined.
            queries.stop_file("a").touch()
            assert first.wait(240) == 0, queries.log("a")[-3000:]
            landed_before = len(queries.rows())
            wait_for(lambda: len(queries.rows()) > landed_before + 50, "the others to go on after one left", 180)
        finally:
            producer.stop()
        wait_for(lambda: queries.landed() == producer.expected(), "every record exactly once", 240)
        # At every moment each partition was planned by at most one query: no two plans overlap.
        plans = {name: planned_ranges(queries.checkpoint(name)) for name in ("a", "b", "c")}
    for name, ranges in plans.items():
        for other, other_ranges in plans.items():
            if other <= name:
                continue
            for p, lo, hi in ranges:
                for q, olo, ohi in other_ranges:
                    assert p != q or hi <= olo or ohi <= lo, f"{name} planned {p}:[{lo},{hi}), {other} [{olo},{ohi})"
