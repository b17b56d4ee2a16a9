"""Exactly once across a route's tables under members that interleave (pure): a stale owner replaying its
batch, a new owner planning from the tables, crashes between two tables' commits and between the first sights.

Each table is modelled as its offsets commits do it: a commit is atomic and lands the ranges the offset check
(:func:`~kafka_group.delta.offsets.offset_check.check_ranges`) finds committable on the table *as it is then*;
each batch computes its steps (:func:`first_sights`, then :func:`route_shares`) from the tables as they were
when it started, as ``RoutedDeltaSink`` does. Whatever the interleaving, every table holds each offset it
landed once, in order, from its first position on, and after a final catch-up every offset of the log."""

from __future__ import annotations

import random
from typing import Dict, Iterator, List, Optional

import pytest

from kafka_group.delta.offsets.offset_check import check_ranges
from kafka_group.delta.offsets.table_routes import TableRoutes, first_sights, route_shares, start_positions
from kafka_group.offsets import OffsetRange, TopicPartition

TP = TopicPartition("orders", 0)
ROUTES = TableRoutes(template="/lake/{topic}", shared=("/lake/_dlq",))
TABLES = ROUTES.tables_of(TP)
LOG_END = 40


class Table:
    def __init__(self) -> None:
        self.pos: Optional[int] = None
        self.landed: List[int] = []

    def commit(self, ranges: List[OffsetRange]) -> None:
        held = {} if self.pos is None else {TP: self.pos}
        check = check_ranges(held, ranges)
        if check.already_committed:
            return
        for r in check.committable:
            self.landed += range(r.from_offset, r.until_offset)
            self.pos = r.until_offset


def held_of(tables: Dict[str, Table]) -> Dict[str, Dict[TopicPartition, int]]:
    """Each table's positions, as the sink reads them (a table that never saw the partition lacks it)."""
    found: Dict[str, Dict[TopicPartition, int]] = {}
    for name, table in tables.items():
        found[name] = {} if table.pos is None else {TP: table.pos}
    return found


def run_batch(tables: Dict[str, Table], r: OffsetRange) -> Iterator[None]:
    """One batch of ``r``, a step at a time (the caller may stop it anywhere: a crash)."""
    held = held_of(tables)
    shares = route_shares(held, [r], ROUTES)
    for table, share in [*first_sights(held, shares).items(), *((t, s) for t, s in shares.items() if s.ranges)]:
        yield
        tables[table].commit(share.ranges)


def plan(tables: Dict[str, Table], size: int) -> Optional[OffsetRange]:
    held = held_of(tables)
    start = start_positions(held, [TP], ROUTES).get(TP, 0)
    return None if start >= LOG_END else OffsetRange(TP, start, min(LOG_END, start + size))


@pytest.mark.parametrize("seed", range(400))
def test_members_interleaving_with_crashes_and_stale_replays_land_every_offset_once_in_every_table(seed: int) -> None:
    rnd = random.Random(seed)
    tables = {t: Table() for t in TABLES}
    running: List[Iterator[None]] = []
    replays: List[OffsetRange] = []  # batches a (stale) member replays from its checkpoint
    for _ in range(60):
        choice = rnd.random()
        if choice < 0.3 or not running:  # a member plans from the tables (a new owner, or a lost checkpoint)
            r = plan(tables, rnd.randint(1, 12))
            if r is not None:
                running.append(run_batch(tables, r))
                replays.append(r)
        elif choice < 0.4 and replays:  # a stale member replays an old batch of its checkpoint
            running.append(run_batch(tables, rnd.choice(replays)))
        elif choice < 0.5:  # a crash: a running batch stops between two steps
            running.pop(rnd.randrange(len(running)))
        else:  # a running batch takes its next step
            i = rnd.randrange(len(running))
            if next(running[i], StopIteration) is StopIteration:
                running.pop(i)
        for table in tables.values():
            if table.pos is not None:
                first = table.landed[0] if table.landed else table.pos
                assert table.landed == list(range(first, table.pos)), (seed, tables)
    # the query runs alone to the log's end (each batch to its end)
    while (r := plan(tables, 12)) is not None:
        for _ in run_batch(tables, r):
            pass
    for name, table in tables.items():
        assert table.landed == list(range(LOG_END)), (seed, name, table.landed)
