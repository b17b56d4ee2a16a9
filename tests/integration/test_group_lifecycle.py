"""A query's life in its group: slow batches, user rebalance listeners, static membership, progress."""

from __future__ import annotations

import time
from typing import Any, Dict, List

import pytest
from pyspark.sql import SparkSession

from kafka_group.formats import read_progress
from kafka_group.group.membership import GroupMember
from tests.support import (
    BROKER_ENGINE,
    Cluster,
    MakeTopic,
    RECORD_REBALANCE,
    events_file,
    group_stream,
    produce,
    recorded,
    unique_name,
    wait_for,
)

pytestmark = pytest.mark.integration


def member_report(query: Any) -> Dict[str, Any]:
    """The ``@member`` report of the source in the query's last progress."""
    progress = query.lastProgress
    sources = read_progress(progress).sources if progress else ()
    return dict(sources[0].latest.member) if sources else {}


def test_batch_slower_than_max_poll_interval_keeps_membership(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic
) -> None:
    topic = make_topic(3)
    produce(kafka.bootstrap_servers, topic, {0: 20, 1: 20, 2: 20})
    seen: List[Any] = []
    slow_s = 13  # twice max.poll.interval.ms below and more: a member that stopped polling would have left

    def land(batch: Any, batch_id: int) -> None:
        rows = batch.select("partition", "offset").collect()
        if rows and not seen:
            time.sleep(slow_s)  # the member must keep polling while the batch runs
        seen.extend((r.partition, r.offset) for r in rows)

    df = group_stream(spark, kafka.bootstrap_servers, topic, unique_name("group"),
                      **{"kafka.max.poll.interval.ms": "6000"}).load()  # librdkafka's least: the session timeout
    query = df.writeStream.foreachBatch(land).trigger(processingTime="500 milliseconds").start()
    try:
        wait_for(lambda: len(seen) == 60, "the slow batch to land", 180)
        produce(kafka.bootstrap_servers, topic, {0: 5, 1: 5, 2: 5}, start=20)
        wait_for(lambda: len(seen) == 75, "the batch after the slow one", 120)
        wait_for(lambda: member_report(query).get("generation") is not None, "a progress with the member report")
        report = member_report(query)
    finally:
        query.stop()
    assert sorted(seen) == sorted((p, o) for p in range(3) for o in range(25))
    # One assignment, never revoked or lost: the slow batch did not cost the membership.
    assert report["generation"] == 1, report
    assert report["lastRebalance"]["kind"] == "assign"
    assert report["owned"] == {topic: [0, 1, 2]}
    assert report["memberId"]


def test_user_rebalance_listener_sees_assign_and_revoke(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic
) -> None:
    topic = make_topic(4)
    group = unique_name("group")
    events_file(group).unlink(missing_ok=True)
    produce(kafka.bootstrap_servers, topic, {p: 5 for p in range(4)})
    df = group_stream(spark, kafka.bootstrap_servers, topic, group,
                      rebalanceListener=RECORD_REBALANCE).load()
    query = df.writeStream.format("noop").trigger(processingTime="500 milliseconds").start()
    other = None
    try:
        wait_for(lambda: any(e["kind"] == "assign" for e in recorded(group)), "the listener to see the assignment")
        other = GroupMember({"bootstrap.servers": kafka.bootstrap_servers, "session.timeout.ms": "6000"},
                            group, [topic])
        wait_for(lambda: any(e["kind"] == "revoke" for e in recorded(group)), "the listener to see a revoke", 180)
        wait_for(lambda: bool(other.owned()), "the second member to get partitions", 180)
        taken = sorted(tp.partition for tp in other.owned())
    finally:
        query.stop()
        if other is not None:
            other.close()
    events = recorded(group)
    assert events[0]["kind"] == "assign" and events[0]["partitions"] == [0, 1, 2, 3]
    assert events[0]["generation"] == 1 and events[0]["member_id"]
    revoke = next(e for e in events if e["kind"] == "revoke")
    assert set(revoke["partitions"]) <= set(taken) and revoke["partitions"]
    assert not set(revoke["owned"]) & set(revoke["partitions"])
    assert [e["generation"] for e in events] == list(range(1, len(events) + 1))


def test_static_member_restarted_within_session_timeout_gets_its_partitions_back(
    kafka: Cluster, make_topic: MakeTopic
) -> None:
    """KIP-345 on Apache Kafka: a member with the same ``group.instance.id`` that comes back within
    the session timeout gets exactly its partitions back and the group does not rebalance: the other
    member sees no event at all (no revoke, no assign) and its generation stays. The mock cluster
    does not implement static membership (docs/brokers.md); there the test only checks that the
    restarted member gets its own partitions back and the other loses none."""
    topic = make_topic(6)
    group = unique_name("group")

    def config(instance: str) -> Dict[str, str]:
        # A session far longer than the test: nothing here can be explained by an expiry.
        return {"bootstrap.servers": kafka.bootstrap_servers, "session.timeout.ms": "45000",
                "heartbeat.interval.ms": "500", "group.instance.id": instance}

    # A planned restart that must not rebalance the group: the static member keeps its partitions on close.
    members = [GroupMember(config("query-a"), group, [topic], leave_on_close=False)]
    try:
        members.append(GroupMember(config("query-b"), group, [topic]))
        a, b = members
        wait_for(lambda: bool(a.owned()) and bool(b.owned()) and len(a.owned() | b.owned()) == 6,
                 "both members to own partitions")
        a_owned, b_owned, b_events, b_generation = a.owned(), b.owned(), len(b.events()), b.generation
        a.close()  # with leave_on_close=False a static member does not leave the group when it closes
        restarted = GroupMember(config("query-a"), group, [topic], leave_on_close=False)
        members.append(restarted)
        wait_for(lambda: restarted.owned() == a_owned, "the restarted member to get its partitions back", 30)
        # Give a rebalance, had one started, time to reach the other member (a heartbeat is 0.5 s).
        wait_for(lambda: restarted.events() and time.time() > restarted.events()[-1].at + 5, "five quiet seconds")
        assert b.owned() == b_owned
        if BROKER_ENGINE == "kafka":
            assert b.events()[b_events:] == [], "the group rebalanced when the static member came back"
            assert b.generation == b_generation
            assert [e.kind for e in restarted.events()] == ["assign"]
        else:
            assert all(e.kind == "assign" for e in b.events()[b_events:]), b.events()[b_events:]
    finally:
        for member in members:
            member.close()
