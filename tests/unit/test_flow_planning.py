"""Flow-control planning: pauses, caps, fair shares, event-time limits and topic priority (pure)."""

from __future__ import annotations

import random
from typing import Dict

import pytest

from kafka_group.offsets import TopicPartition
from kafka_group.config.plan_options import FlowPolicy
from kafka_group.plan.planning import BatchPlan, HoldReason, fair_share, plan_batch


def tp(partition: int, topic: str = "t") -> TopicPartition:
    return TopicPartition(topic, partition)


def sizes(plan: BatchPlan) -> Dict[TopicPartition, int]:
    return {r.topic_partition: r.size for r in plan.ranges}


def test_fair_share_never_starves_small_partitions_under_skew() -> None:
    allowances = {tp(0): 900_000, tp(1): 10, tp(2): 3, tp(3): 50}
    grants = fair_share(allowances, 100)
    assert sum(grants.values()) == 100
    assert grants[tp(2)] == 3 and grants[tp(1)] == 10
    assert grants[tp(0)] >= 1 and grants[tp(3)] >= 1
    assert grants[tp(0)] - grants[tp(3)] <= 1  # the two big ones share what is left equally


@pytest.mark.parametrize("seed", range(20))
def test_fair_share_properties(seed: int) -> None:
    rng = random.Random(seed)
    allowances = {tp(p): rng.choice([0, 1, 5, 100, 10_000]) for p in range(rng.randint(1, 12))}
    budget = rng.randint(0, 2_000)
    grants = fair_share(allowances, budget)
    assert all(0 <= grants[k] <= allowances[k] for k in allowances)
    assert sum(grants.values()) == min(budget, sum(allowances.values()))
    waiting = [k for k, n in allowances.items() if n > 0]
    if budget >= len(waiting):
        assert all(grants[k] >= 1 for k in waiting)


def test_paused_partitions_get_nothing_and_are_reported() -> None:
    plan = plan_batch({tp(0): 0, tp(1): 0}, {tp(0): 10, tp(1): 10}, None, paused={tp(1)})
    assert sizes(plan) == {tp(0): 10}
    assert plan.held == {tp(1): HoldReason.PAUSED}


def test_per_partition_cap_and_budget_compose() -> None:
    positions = {tp(p): 0 for p in range(4)}
    latest = {tp(0): 90_000, tp(1): 100, tp(2): 100, tp(3): 100}
    plan = plan_batch(positions, latest, 1_000, FlowPolicy(max_per_partition=300))
    assert all(n <= 300 for n in sizes(plan).values())
    assert sum(sizes(plan).values()) <= 1_000
    assert sizes(plan)[tp(1)] == 100 and sizes(plan)[tp(0)] == 300
    assert plan.held == {tp(0): HoldReason.CAP}


def test_event_time_limits_hold_partitions_that_run_ahead() -> None:
    positions = {tp(0): 5, tp(1): 0}
    plan = plan_batch(positions, {tp(0): 50, tp(1): 50}, None, limits={tp(0): 20, tp(1): 0})
    assert sizes(plan) == {tp(0): 15}
    assert plan.held == {tp(0): HoldReason.ALIGNMENT, tp(1): HoldReason.ALIGNMENT}


def test_higher_priority_topics_take_the_budget_first() -> None:
    positions = {tp(0, "hot"): 0, tp(0, "cold"): 0, tp(1, "cold"): 0}
    latest = {tp(0, "hot"): 80, tp(0, "cold"): 80, tp(1, "cold"): 80}
    policy = FlowPolicy(topic_priority={"hot": 10})
    plan = plan_batch(positions, latest, 100, policy)
    assert sizes(plan)[tp(0, "hot")] == 80
    assert sum(n for k, n in sizes(plan).items() if k.topic == "cold") == 20
    starved = plan_batch(positions, latest, 80, policy)
    assert sizes(starved) == {tp(0, "hot"): 80}
    assert starved.held == {tp(0, "cold"): HoldReason.PRIORITY, tp(1, "cold"): HoldReason.PRIORITY}


def test_proportional_sharing_is_still_available() -> None:
    positions = {tp(0): 0, tp(1): 0}
    plan = plan_batch(positions, {tp(0): 900, tp(1): 100}, 100, FlowPolicy(sharing="proportional"))
    assert sizes(plan) == {tp(0): 90, tp(1): 10}
