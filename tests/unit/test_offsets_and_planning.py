"""The offset document and batch planning: pure functions, no processes."""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Dict, Iterable, List, Tuple

import pytest

from kafka_group.errors import OffsetFormatError
from kafka_group.formats import read_offset_document, write_offset_document
from kafka_group.offsets import BatchOffsets, OffsetRange, TopicPartition
from kafka_group.config.plan_options import TaskSizing
from kafka_group.plan.planning import allocate_budget, pack_ranges, plan_batch

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_document_round_trips_through_json() -> None:
    doc = BatchOffsets.from_ranges({A0: 5, A1: 7, B0: 0}, [OffsetRange(A0, 5, 10), OffsetRange(B0, 0, 0)])
    as_json = json.loads(json.dumps(write_offset_document(doc)))
    assert as_json == {"a": {"0": [5, 10], "1": 7}, "b": {"0": 0}}
    back = read_offset_document(as_json)
    assert back == doc
    assert back.planned_ranges() == [OffsetRange(A0, 5, 10)]
    assert back.positions == {A0: 10, A1: 7, B0: 0}


def test_range_may_start_away_from_the_previous_end() -> None:
    doc = read_offset_document({"a": {"0": [500, 600]}})
    assert doc.planned_ranges() == [OffsetRange(A0, 500, 600)]


@pytest.mark.parametrize("bad", [[], {"a": 1}, {"a": {"0": -1}}, {"a": {"0": [3, 1]}}, {"a": {"x": 1}}, {"a": {"0": "1"}}])
def test_malformed_documents(bad: object) -> None:
    with pytest.raises(OffsetFormatError):
        read_offset_document(bad)  # type: ignore[arg-type]


def test_budget_takes_everything_without_a_limit() -> None:
    assert allocate_budget({A0: 10, A1: 0, B0: 3}, None) == {A0: 10, A1: 0, B0: 3}


def test_budget_is_shared_by_backlog_and_sums_exactly() -> None:
    grants = allocate_budget({A0: 900, A1: 90, B0: 10}, 100)
    assert sum(grants.values()) == 100
    assert grants == {A0: 90, A1: 9, B0: 1}


def test_budget_never_exceeds_a_backlog() -> None:
    grants = allocate_budget({A0: 1, A1: 1, B0: 1000}, 500)
    assert sum(grants.values()) == 500
    assert grants[A0] <= 1 and grants[A1] <= 1


def test_plan_skips_empty_partitions() -> None:
    plan = plan_batch({A0: 5, A1: 7, B0: 0}, {A0: 15, A1: 7, B0: 4}, None)
    assert plan.ranges == [OffsetRange(A0, 5, 15), OffsetRange(B0, 0, 4)]


def test_plan_ignores_partitions_without_latest() -> None:
    assert plan_batch({A0: 0}, {}, None).ranges == []


def coverage(ranges: Iterable[OffsetRange]) -> Dict[TopicPartition, List[Tuple[int, int, int]]]:
    """How often each offset is covered, as (from, until, times) steps per partition: the multiset of
    offsets the ranges hold, computed from their bounds (a million-offset range costs two events)."""
    events: Dict[TopicPartition, Counter[int]] = {}
    for r in ranges:
        if r.until_offset > r.from_offset:
            steps = events.setdefault(r.topic_partition, Counter())
            steps[r.from_offset] += 1
            steps[r.until_offset] -= 1
    result: Dict[TopicPartition, List[Tuple[int, int, int]]] = {}
    for tp, steps in events.items():
        segments: List[Tuple[int, int, int]] = []
        times, at = 0, None
        for offset in sorted(steps):
            if at is not None and times:
                if segments and segments[-1][1] == at and segments[-1][2] == times:
                    segments[-1] = (segments[-1][0], offset, times)
                else:
                    segments.append((at, offset, times))
            times += steps[offset]
            at = offset
        result[tp] = segments
    return result


def covered(tasks: List[List[OffsetRange]]) -> Dict[TopicPartition, List[Tuple[int, int, int]]]:
    return coverage(r for task in tasks for r in task)


def test_coverage_counts_each_offset_as_often_as_the_ranges_hold_it() -> None:
    ranges = [OffsetRange(A0, 0, 4), OffsetRange(A0, 2, 6), OffsetRange(A0, 6, 8), OffsetRange(B0, 3, 3)]
    naive = Counter((r.topic_partition, o) for r in ranges for o in range(r.from_offset, r.until_offset))
    expanded = Counter((tp, o) for tp, steps in coverage(ranges).items()
                       for lo, hi, times in steps for o in range(lo, hi) for _ in range(times))
    assert expanded == naive
    assert coverage(ranges) == {A0: [(0, 2, 1), (2, 4, 2), (4, 8, 1)]}


def test_small_batches_run_as_one_task() -> None:
    ranges = [OffsetRange(A0, 0, 100), OffsetRange(A1, 5, 50), OffsetRange(B0, 0, 3)]
    tasks = pack_ranges(ranges, TaskSizing(min_records_per_task=50_000, max_tasks=4))
    assert tasks == [sorted(ranges)]


def test_a_huge_partition_is_spread_over_every_task() -> None:
    ranges = [OffsetRange(A0, 0, 1_000_000), OffsetRange(B0, 10, 13)]
    tasks = pack_ranges(ranges, TaskSizing(min_records_per_task=50_000, max_tasks=4))
    assert len(tasks) == 4
    sizes = [sum(r.size for r in task) for task in tasks]
    assert max(sizes) - min(sizes) <= 250_001
    assert covered(tasks) == coverage(ranges)


@pytest.mark.parametrize("seed", range(30))
def test_packing_covers_every_offset_once(seed: int) -> None:
    rng = random.Random(seed)
    ranges = []
    for p in range(rng.randint(1, 10)):
        start = rng.randint(0, 1000)
        ranges.append(OffsetRange(TopicPartition("t", p), start, start + rng.choice([0, 1, 7, 5_000, 200_000])))
    sizing = TaskSizing(min_records_per_task=rng.choice([1, 1000, 50_000]), max_tasks=rng.randint(1, 8),
                        min_tasks=rng.choice([None, 3]), max_records_per_task=rng.choice([None, 30_000]))
    tasks = pack_ranges(ranges, sizing)
    want = coverage(ranges)
    assert covered(tasks) == want
    if sizing.max_records_per_task:
        assert all(sum(r.size for r in task) <= sizing.max_records_per_task for task in tasks)
    if want and sizing.min_tasks:
        assert len(tasks) >= min(sizing.min_tasks, sum(r.size for r in ranges))
