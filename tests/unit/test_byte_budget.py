"""``maxBytesPerTrigger``: the byte budget as record caps per partition (pure), and the planner keeping to them."""

from __future__ import annotations

from kafka_group.config.options import parse_source_options
from kafka_group.flow.record_sizes import record_bytes
from kafka_group.offsets import TopicPartition
from kafka_group.plan.byte_budget import record_caps
from kafka_group.plan.planning import HoldReason, plan_batch

A, B, C = (TopicPartition("t", p) for p in range(3))


def test_the_estimated_bytes_stay_within_the_budget_and_the_budget_is_shared_fairly() -> None:
    positions = {A: 0, B: 0, C: 0}
    latest = {A: 1000, B: 1000, C: 3}
    sizes = {A: 100.0, B: 250.0, C: 1000.0}
    caps = record_caps(positions, latest, sizes, 30_000)
    assert sum(caps[tp] * sizes[tp] for tp in caps) <= 30_000
    # The small backlog takes what it needs (3,000 bytes); the others share the rest equally in bytes.
    assert caps == {A: 135, B: 54, C: 3}


def test_a_budget_below_every_record_still_moves_one_record() -> None:
    caps = record_caps({A: 0, B: 0}, {A: 10, B: 10}, {A: 5000.0, B: 9000.0}, 100)
    assert sorted(caps.values()) == [0, 1]


def test_paused_and_unmeasured_partitions_get_nothing_and_idle_ones_no_cap() -> None:
    caps = record_caps({A: 0, B: 0, C: 5}, {A: 10, B: 10, C: 5}, {A: 10.0}, 1000, paused={B})
    assert caps == {A: 10, B: 0}


def test_never_more_than_the_backlog() -> None:
    assert record_caps({A: 7}, {A: 9}, {A: 1.0}, 10**9) == {A: 2}


def test_plan_batch_holds_partitions_by_their_byte_share() -> None:
    plan = plan_batch({A: 0, B: 0}, {A: 100, B: 100}, None, caps={A: 10, B: 100})
    assert [(r.topic_partition, r.size) for r in plan.ranges] == [(A, 10), (B, 100)]
    assert plan.held == {A: HoldReason.BYTES}
    both = plan_batch({A: 0, B: 0}, {A: 100, B: 100}, 20, caps={A: 10, B: 100})
    assert sum(r.size for r in both.ranges) == 20 and dict((r.topic_partition, r.size) for r in both.ranges)[A] <= 10


def test_record_bytes_counts_key_value_and_headers() -> None:
    assert record_bytes(b"ab", b"cde", [("h", b"12"), ("hh", None)]) == 2 + 3 + 1 + 2 + 2
    assert record_bytes(None, None, None) == 0


def test_the_option_takes_sizes() -> None:
    base = {"kafka.bootstrap.servers": "x:9092", "subscribe": "t", "kafka.group.id": "g"}
    assert parse_source_options({**base, "maxbytespertrigger": "64m"}).max_bytes_per_trigger == 64 << 20
    assert parse_source_options({**base, "maxBytesPerTrigger": "1000"}).max_bytes_per_trigger == 1000
    assert parse_source_options(base).max_bytes_per_trigger is None
