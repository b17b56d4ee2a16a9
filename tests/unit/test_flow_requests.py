"""Flow-control requests of the control channel, handled by FlowControl (no channel, no broker)."""

from __future__ import annotations

from typing import Any, Dict

import pytest

from kafka_group.errors import FlowControlError
from kafka_group.offsets import TopicPartition
from kafka_group.source_driver import SourceDriver
from tests.unit.driver_fakes import T0, T1, FakeCluster, FakeMember, driver, options


def owning(*partitions: TopicPartition) -> SourceDriver:
    member = FakeMember()
    d = driver(options(), FakeCluster({"t": 2, "other": 1}), member)
    member.assign(*partitions)
    return d


def test_pause_and_resume_a_partition() -> None:
    d = owning(T0, T1)
    assert d.flow.handle_request({"op": "pause", "topic": "t", "partitions": [1]}) == {
        "ok": True, "changed": ["t-1"], "paused": {"paused": {"t": [1]}}}
    assert d.flow.handle_request({"op": "resume", "topic": "t", "partitions": [1]})["paused"] == {}


def test_pause_of_a_whole_topic_covers_its_partitions() -> None:
    d = owning(T0, T1)
    d.flow.handle_request({"op": "pause", "topic": "t"})
    assert d.flow.paused_among({T0, T1}) == {T0, T1}
    assert d.flow_report() == {"pausedTopics": ["t"]}


@pytest.mark.parametrize("request_, message", [
    ({"op": "stop", "topic": "t"}, "unknown flow-control operation 'stop'"),
    ({"op": "pause"}, "name a topic"),
    ({"op": "pause", "topic": "t", "partitions": [True]}, "must be a list of partition numbers"),
    ({"op": "pause", "topic": "other"}, "topic 'other' is not read by this query"),
    ({"op": "pause", "topic": "t", "partitions": [5]}, "has partitions 0 to 1; there is no partition 5"),
    ({"op": "pause", "topic": "t", "partitions": [1]}, "t-1 not owned by this query"),
])
def test_bad_requests_are_refused_naming_the_fix(request_: Dict[str, Any], message: str) -> None:
    d = owning(T0)
    with pytest.raises(FlowControlError, match=message):
        d.flow.handle_request(request_)


def test_held_partitions_appear_in_the_flow_report() -> None:
    cluster, member = FakeCluster({"t": 1}), FakeMember()
    cluster.produce(T0, 5)
    d = driver(options(), cluster, member)
    member.assign(T0)
    d.flow.handle_request({"op": "pause", "topic": "t", "partitions": [0]})
    d.next_offsets(d.initial_offsets(), None)
    assert d.flow_report() == {"paused": {"t": [0]}, "held": {"t": {"0": "paused"}}}


def test_requests_sent_before_the_checkpoints_pauses_are_restored_apply_after_them_in_order() -> None:
    """Issue 26, item 9: a restarted query restores its pauses from the checkpoint at its first plan, after
    its first assignment; a ``flow.resume`` the control channel took while it waited for that assignment
    was undone by the restore."""
    from kafka_group.offsets import BatchOffsets

    cluster, member = FakeCluster({"t": 2}), FakeMember()
    cluster.produce(T0, 5)
    cluster.produce(T1, 5)
    d = driver(options(), cluster, member)
    checkpoint = BatchOffsets({T0: 0, T1: 0}, {}, flow={"paused": {"t": [0, 1]}, "pausedTopics": []})
    # Waiting for the first assignment: resume T0, pause then resume then pause T1 (the last word counts).
    assert d.flow.handle_request({"op": "resume", "topic": "t", "partitions": [0]})["ok"]
    d.flow.handle_request({"op": "resume", "topic": "t", "partitions": [1]})
    member.assign(T0, T1)
    d.flow.handle_request({"op": "pause", "topic": "t", "partitions": [1]})
    batch = d.next_offsets(checkpoint, None)
    assert batch is not None
    assert {tp: (r.from_offset, r.until_offset) for tp, r in batch.ranges.items()} == {T0: (0, 5)}
    assert batch.flow == {"paused": {"t": [1]}}
    assert d.flow_report()["paused"] == {"t": [1]}
