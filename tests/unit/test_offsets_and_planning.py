"""The offset document and batch planning: pure functions, no processes."""

from __future__ import annotations

import json

import pytest

from kafka_group.errors import OffsetFormatError
from kafka_group.offsets import BatchOffsets, OffsetRange, TopicPartition
from kafka_group.planning import allocate_budget, plan_ranges, split_ranges

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_document_round_trips_through_json() -> None:
    doc = BatchOffsets.from_ranges({A0: 5, A1: 7, B0: 0}, [OffsetRange(A0, 5, 10), OffsetRange(B0, 0, 0)])
    as_json = json.loads(json.dumps(doc.to_json_dict()))
    assert as_json == {"a": {"0": [5, 10], "1": 7}, "b": {"0": 0}}
    back = BatchOffsets.from_json_dict(as_json)
    assert back == doc
    assert back.planned_ranges() == [OffsetRange(A0, 5, 10)]
    assert back.positions == {A0: 10, A1: 7, B0: 0}


def test_range_may_start_away_from_the_previous_end() -> None:
    doc = BatchOffsets.from_json_dict({"a": {"0": [500, 600]}})
    assert doc.planned_ranges() == [OffsetRange(A0, 500, 600)]


@pytest.mark.parametrize("bad", [[], {"a": 1}, {"a": {"0": -1}}, {"a": {"0": [3, 1]}}, {"a": {"x": 1}}, {"a": {"0": "1"}}])
def test_malformed_documents(bad: object) -> None:
    with pytest.raises(OffsetFormatError):
        BatchOffsets.from_json_dict(bad)  # type: ignore[arg-type]


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


def test_plan_ranges_skips_empty_partitions() -> None:
    ranges = plan_ranges({A0: 5, A1: 7, B0: 0}, {A0: 15, A1: 7, B0: 4}, None)
    assert ranges == [OffsetRange(A0, 5, 15), OffsetRange(B0, 0, 4)]


def test_plan_ranges_ignores_partitions_without_latest() -> None:
    assert plan_ranges({A0: 0}, {}, None) == []


def test_split_covers_the_ranges_exactly() -> None:
    ranges = [OffsetRange(A0, 0, 1000), OffsetRange(B0, 10, 13)]
    pieces = split_ranges(ranges, 8)
    assert len(pieces) >= 8
    covered = {tp: set() for tp in (A0, B0)}
    for piece in pieces:
        assert piece.size > 0
        covered[piece.topic_partition].update(range(piece.from_offset, piece.until_offset))
    assert covered[A0] == set(range(0, 1000)) and covered[B0] == set(range(10, 13))


def test_split_keeps_ranges_when_there_are_enough() -> None:
    ranges = [OffsetRange(A0, 0, 10), OffsetRange(B0, 0, 10)]
    assert split_ranges(ranges, 2) == ranges
    assert split_ranges(ranges, None) == ranges
