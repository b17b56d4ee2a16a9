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
