"""Event-time alignment's limits, computed over record times given in memory (no broker).

:class:`~kafka_group.flow.event_time.EventTimeAlignment` peeks at record times through
``_first_records``; these tests hand it the records of each partition instead, and a fixed clock.
"""

from __future__ import annotations

import logging
from typing import Dict, List, Mapping, Set, Tuple

import pytest

from kafka_group.flow.event_time import EventTimeAlignment
from kafka_group.offsets import TopicPartition

NOW_MS = 1_800_000_000_000
MINUTE = 60_000
A, B = TopicPartition("orders", 0), TopicPartition("orders", 1)


class InMemoryAlignment(EventTimeAlignment):
    """Alignment over ``records``: per partition, its (offset, timestamp ms) records in offset order."""

    def __init__(self, records: Mapping[TopicPartition, List[Tuple[int, int]]], max_drift_ms: int) -> None:
        super().__init__({"bootstrap.servers": "unused:9092"}, "g", max_drift_ms, 1000, clock=lambda: NOW_MS / 1000)
        self.records = records

    def _first_records(self, positions: Mapping[TopicPartition, int]
                       ) -> Tuple[Dict[TopicPartition, Tuple[int, int]], Set[TopicPartition]]:
        found = {}
        for tp, position in positions.items():
            later = [r for r in self.records[tp] if r[0] >= position]
            if later:
                found[tp] = later[0]
        return found, set()


def test_a_partition_ahead_by_more_than_max_drift_is_held() -> None:
    """The rule itself: B's records are an hour ahead of A's backlog, maxDrift 30 minutes."""
    records = {A: [(o, NOW_MS - 120 * MINUTE + o) for o in range(10)],
               B: [(o, NOW_MS - 60 * MINUTE + o) for o in range(10)]}
    view = InMemoryAlignment(records, 30 * MINUTE).view({A: 0, B: 0}, {A: 10, B: 10})
    assert view.slowest == A
    assert view.limits[B] == 0  # held: its next record is beyond the bound
    assert view.limits[A] == 10


@pytest.mark.parametrize("future_ms", [NOW_MS + 24 * 3600 * 1000, 2**62])
def test_a_far_future_record_does_not_hold_its_partition_behind_a_backlog(
        future_ms: int, caplog: pytest.LogCaptureFixture) -> None:
    """One record stamped in the far future (a bad producer clock) held its partition for as long as any
    other partition had a backlog: the others' records are older than now, so the bound (slowest + maxDrift)
    never reached it. It now counts as now: with the others within maxDrift of now it is read, and it is logged."""
    records = {A: [(o, NOW_MS - 5 * MINUTE + o) for o in range(10)],  # a backlog 5 minutes behind now
               B: [(0, future_ms)] + [(o, NOW_MS - 4 * MINUTE + o) for o in range(1, 10)]}
    alignment = InMemoryAlignment(records, 30 * MINUTE)
    with caplog.at_level(logging.WARNING, logger="kafka_group.flow.event_time"):
        view = alignment.view({A: 0, B: 0}, {A: 10, B: 10})
        alignment.view({A: 0, B: 0}, {A: 10, B: 10})  # the next batch peeks at it again: logged once
    assert view.limits[B] == 10, f"the future-stamped record holds {B}: limits {view.limits}"
    assert view.limits[A] == 10
    warnings = [r.getMessage() for r in caplog.records if "ahead of now" in r.getMessage()]
    assert len(warnings) == 1 and "offset 0 of orders-1" in warnings[0], warnings


def test_a_future_record_behind_a_lagging_partition_waits_like_a_record_of_now() -> None:
    """Counted as now, not ignored: while another partition lags more than maxDrift behind now, the
    future-stamped record waits as a record of now would."""
    records = {A: [(o, NOW_MS - 120 * MINUTE + o) for o in range(10)],
               B: [(0, NOW_MS + 24 * 3600 * 1000)]}
    view = InMemoryAlignment(records, 30 * MINUTE).view({A: 0, B: 0}, {A: 10, B: 1})
    assert view.limits[B] == 0
    assert view.next_timestamps[B] == NOW_MS
