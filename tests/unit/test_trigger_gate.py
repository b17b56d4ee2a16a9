"""minOffsetsPerTrigger and maxTriggerDelay: the gate alone, then through the driver on fakes."""

from __future__ import annotations

from typing import List

import pytest

from kafka_group.errors import ConfigError
from kafka_group.offsets import TopicPartition
from kafka_group.plan.trigger_gate import TriggerGate
from tests.unit.driver_fakes import T0, FakeCluster, FakeMember, driver, one_partition, options


class Clock:
    def __init__(self, now_ms: float) -> None:
        self.now_ms = now_ms

    def __call__(self) -> float:
        return self.now_ms


def gate(min_records: int = 100, delay_ms: int = 60_000) -> "tuple[TriggerGate, Clock]":
    clock = Clock(1_000_000_000)
    return TriggerGate(min_records, delay_ms, clock), clock


def test_the_first_trigger_always_runs_as_in_spark() -> None:
    g, _ = gate()
    assert g.admit(1)
    assert g.report()["ranBecause"] == "maxTriggerDelay"


def test_too_few_records_skip_until_enough_wait() -> None:
    g, clock = gate()
    assert g.admit(1)
    clock.now_ms += 1000
    assert not g.admit(40)
    clock.now_ms += 1000
    assert not g.admit(70)
    assert g.report() == {"minOffsetsPerTrigger": 100, "maxTriggerDelayMs": 60_000, "skipped": 2, "waiting": 70,
                          "ranBecause": None}
    clock.now_ms += 1000
    assert g.admit(120)
    assert g.report() == {"minOffsetsPerTrigger": 100, "maxTriggerDelayMs": 60_000, "skipped": 2, "waiting": 70,
                          "ranBecause": "minOffsetsPerTrigger"}


def test_the_delay_lets_a_small_batch_through() -> None:
    g, clock = gate()
    assert g.admit(1)
    clock.now_ms += 59_999
    assert not g.admit(5)
    clock.now_ms += 1
    assert g.admit(5)
    assert g.report()["ranBecause"] == "maxTriggerDelay" and g.report()["skipped"] == 1


def test_an_idle_trigger_after_the_delay_restarts_it_as_in_spark() -> None:
    g, clock = gate()
    assert g.admit(1)
    clock.now_ms += 120_000
    assert g.admit(0)  # nothing to read: no batch, but the delay counts from now
    clock.now_ms += 1000
    assert not g.admit(3)


# -- options -------------------------------------------------------------------------------------


def test_options_parse_with_spark_defaults() -> None:
    parsed = options(minOffsetsPerTrigger="50")
    assert (parsed.min_offsets_per_trigger, parsed.max_trigger_delay_ms) == (50, 15 * 60 * 1000)
    assert options(minOffsetsPerTrigger="5", maxTriggerDelay="30s").max_trigger_delay_ms == 30_000


@pytest.mark.parametrize("settings, message", [
    ({"minOffsetsPerTrigger": "0"}, "'minOffsetsPerTrigger' must be a positive whole number"),
    ({"maxTriggerDelay": "soon"}, "'maxTriggerDelay' must be a positive duration"),
])
def test_bad_thresholds_are_refused_naming_the_option(settings: "dict[str, str]", message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        options(**settings)


# -- the driver ----------------------------------------------------------------------------------


def test_driver_skips_small_triggers_and_reports_why() -> None:
    cluster, member, d = one_partition(5, options(minOffsetsPerTrigger="10", maxTriggerDelay="1h"))
    start = d.initial_offsets()
    first = d.next_offsets(start, None)  # the first trigger runs (as in Spark)
    assert first is not None and first.ranges[T0].size == 5
    cluster.produce(T0, 4)
    assert d.next_offsets(first, None) is None  # 4 < 10: skipped
    assert d.flow_report()["trigger"]["skipped"] == 1 and d.flow_report()["trigger"]["waiting"] == 4
    assert d.flow.report()["held"] == {"t": {"0": "minOffsetsPerTrigger"}}  # flow.status says why it waits
    cluster.produce(T0, 6)
    second = d.next_offsets(first, None)
    assert second is not None and (second.ranges[T0].from_offset, second.ranges[T0].until_offset) == (5, 15)
    assert d.flow_report()["trigger"]["ranBecause"] == "minOffsetsPerTrigger"


def test_available_now_is_not_gated() -> None:
    cluster, member, d = one_partition(3, options(minOffsetsPerTrigger="10", maxTriggerDelay="1h"))
    start = d.initial_offsets()
    d.prepare_available_now()
    seen: List[int] = []
    end = d.next_offsets(start, None)
    assert end is not None
    seen.append(end.ranges[T0].size)
    assert seen == [3]


def test_min_offsets_counts_the_backlog_before_the_per_partition_caps_as_spark_does() -> None:
    """Issue 26 item 8b: Spark's ``KafkaMicroBatchStream.delayBatch`` counts latest - start over the
    partitions, before any rate limit. Counting after ``maxOffsetsPerPartition`` made 4 x 1000 < 5000
    hold every trigger for the whole ``maxTriggerDelay`` whatever the backlog."""
    parts = [TopicPartition("t", p) for p in range(4)]
    cluster, member = FakeCluster({"t": 4}), FakeMember()
    for tp in parts:
        cluster.produce(tp, 1)
    d = driver(options(minOffsetsPerTrigger="5000", maxOffsetsPerPartition="1000", maxTriggerDelay="1h"),
               cluster, member)
    member.assign(*parts)
    first = d.next_offsets(d.initial_offsets(), None)  # the first trigger always runs
    assert first is not None
    for tp in parts:
        cluster.produce(tp, 2000)  # 8,000 records wait: above the minimum
    second = d.next_offsets(first, None)
    assert second is not None, d.flow_report()
    assert {tp: r.size for tp, r in second.ranges.items() if r.size} == {tp: 1000 for tp in parts}
    assert d.flow_report()["trigger"]["ranBecause"] == "minOffsetsPerTrigger"
    third = d.next_offsets(second, None)  # 4,000 still wait: below the minimum, skipped
    assert third is None


def test_min_offsets_above_max_offsets_is_accepted_as_in_spark() -> None:
    """With the backlog counted, a minimum above ``maxOffsetsPerTrigger`` is satisfiable (Spark accepts it)."""
    cluster, member, d = one_partition(1, options(minOffsetsPerTrigger="500", maxOffsetsPerTrigger="100",
                                                  maxTriggerDelay="1h"))
    first = d.next_offsets(d.initial_offsets(), None)
    assert first is not None
    cluster.produce(T0, 600)
    second = d.next_offsets(first, 100)
    assert second is not None and second.ranges[T0].size == 100
