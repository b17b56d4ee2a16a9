"""Static membership (``kafka.group.instance.id``, KIP-345) on Apache Kafka, under both group protocols.

A member that comes back with its instance id within the session timeout gets
its partitions back and the group does not rebalance: the other member sees no
event at all. The same restart without an instance id does rebalance the other
member, which shows the assertions can see a rebalance. The mock cluster does
not implement static membership, so these tests need Apache Kafka.
"""

from __future__ import annotations

import logging
import os
import pathlib
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List, Tuple

import pytest
from pyspark.sql import SparkSession

from kafka_group.group.membership import GroupMember
from kafka_group.group.offset_commits import CLIENT_CLOSE_TIMEOUT_S
from kafka_group.rebalance_event import RebalanceEvent
from tests.support import (long_tier, BROKER_ENGINE, REPO, Cluster, GroupQueries, MakeTopic, create_topic, produce,
                           unique_name, wait_for)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(BROKER_ENGINE != "kafka", reason="needs Apache Kafka: the mock cluster does not implement "
                       "static membership (KIP-345) or the consumer protocol (KIP-848)"),
]

#: Member settings per protocol. Classic: a session far longer than any wait of these tests. Consumer
#: protocol: the session is the broker's (group.consumer.session.timeout.ms, 10 s on the test broker).
PROTOCOLS: Dict[str, Dict[str, str]] = {
    "classic": {"session.timeout.ms": "45000", "heartbeat.interval.ms": "500"},
    "consumer": {"group.protocol": "consumer"},
}


def quiet_for(member: GroupMember, seconds: float) -> bool:
    """Whether ``member``'s last rebalance event is at least ``seconds`` old."""
    events = member.events()
    return bool(events) and time.time() > events[-1].at + seconds


def kinds(events: List[RebalanceEvent]) -> List[Tuple[str, List[int]]]:
    return [(e.kind, sorted(tp.partition for tp in e.partitions)) for e in events]


@pytest.mark.parametrize("protocol, static", [
    pytest.param("classic", True, id="classic-static"), pytest.param("consumer", False, id="consumer-dynamic"),
    long_tier("classic", False, id="classic-dynamic"), pytest.param("consumer", True, id="consumer-static")])
def test_member_restarted_within_session_timeout(
    kafka: Cluster, make_topic: MakeTopic, protocol: str, static: bool
) -> None:
    topic = make_topic(6)
    group = unique_name("group")

    def config(instance: str) -> Dict[str, str]:
        settings = {"bootstrap.servers": kafka.bootstrap_servers, **PROTOCOLS[protocol]}
        if static:
            settings["group.instance.id"] = instance
        return settings

    # A planned restart that must not rebalance the group: the static member keeps its partitions on close.
    members = [GroupMember(config("query-a"), group, [topic], leave_on_close=False)]
    try:
        wait_for(lambda: len(members[0].owned()) == 6, "the first member to own every partition")
        members.append(GroupMember(config("query-b"), group, [topic]))
        a, b = members
        wait_for(lambda: bool(a.owned()) and bool(b.owned()) and len(a.owned() | b.owned()) == 6,
                 "both members to own partitions")
        wait_for(lambda: quiet_for(a, 3) and quiet_for(b, 3), "the group to settle")
        a_owned, b_owned, b_seen, b_generation = a.owned(), b.owned(), len(b.events()), b.generation
        a.close()
        # A restart takes a while: let several heartbeats (0.5 s classic, 1 s consumer protocol) pass, well
        # within the session timeout. (Under the consumer protocol a dynamic member back within one heartbeat
        # goes unnoticed too: the broker's reconciliation never tells the others.)
        time.sleep(3)
        restarted_at = time.monotonic()
        restarted = GroupMember(config("query-a"), group, [topic], leave_on_close=False)
        members.append(restarted)
        wait_for(lambda: len(restarted.owned() | b.owned()) == 6 and bool(restarted.owned()),
                 "the restarted member to own partitions again", 30)
        took = time.monotonic() - restarted_at
        # A rebalance, had one started, reaches the other member within a few heartbeats.
        wait_for(lambda: quiet_for(restarted, 5) and quiet_for(b, 5), "five quiet seconds")
        b_events = b.events()[b_seen:]
        print(f"\n[{protocol}, {'static' if static else 'dynamic'}] restarted member owns "
              f"{sorted(tp.partition for tp in restarted.owned())} {took:.1f} s after its restart; the other member's "
              f"events meanwhile: {kinds(b_events)}")
        if static:
            assert restarted.owned() == a_owned
            assert b_events == [], "the group rebalanced when the static member came back"
            assert b.generation == b_generation and b.owned() == b_owned
        else:
            # Without an instance id the leave and the rejoin both rebalance the group.
            assert b_events and b.generation > b_generation
    finally:
        for member in members:
            member.close()


def test_static_query_restarted_within_session_timeout_keeps_the_group_still(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    """A Spark query with ``kafka.group.instance.id`` stopped and started again from its checkpoint:
    its member does not leave on stop, the restarted one gets the same partitions back, the other
    member of the group sees no rebalance at all, and every record lands once."""
    topic = make_topic(4)
    group = unique_name("group")
    produce(kafka.bootstrap_servers, topic, {p: 10 for p in range(4)})
    other = GroupMember({"bootstrap.servers": kafka.bootstrap_servers, "session.timeout.ms": "120000",
                         "heartbeat.interval.ms": "500"}, group, [topic])
    landed: Dict[Tuple[int, int], List[Tuple[int, int]]] = {}  # (run, batch id) -> rows, a replay replaces

    def start(run: int) -> Any:
        def land(batch: Any, batch_id: int) -> None:
            landed[(run, batch_id)] = [(r.partition, r.offset) for r in batch.select("partition", "offset").collect()]

        df = (spark.readStream.format("kafka-group")
              .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
              .option("subscribe", topic)
              .option("kafka.group.id", group)
              .option("kafka.group.instance.id", "orders-query")
              .option("leaveGroupOnStop", "false")  # a planned restart: keep the partitions while stopped
              # Far longer than a query's restart on a loaded machine: the member must come back within it.
              .option("kafka.session.timeout.ms", "120000")
              .option("kafka.heartbeat.interval.ms", "500")
              .option("startingOffsets", "earliest")
              .load())
        return (df.writeStream.foreachBatch(land).option("checkpointLocation", str(tmp_path / "chk"))
                .trigger(processingTime="500 milliseconds").start())

    def rows() -> List[Tuple[int, int]]:
        latest: Dict[int, List[Tuple[int, int]]] = {}
        for (run, batch_id), batch_rows in sorted(landed.items()):
            latest[batch_id] = batch_rows  # the restarted run replays a batch under its old id
        return sorted(r for batch_rows in latest.values() for r in batch_rows)

    query = None
    try:
        wait_for(lambda: len(other.owned()) == 4, "the other member to own every partition")
        query = start(1)
        wait_for(lambda: len(other.owned()) == 2 and quiet_for(other, 3), "the query to take half the partitions",
                 180)
        mine = {0, 1, 2, 3} - {tp.partition for tp in other.owned()}
        wait_for(lambda: {p for p, _ in rows()} == mine and len(rows()) == 20, "the query's first records", 180)
        seen, generation, owned = len(other.events()), other.generation, other.owned()
        query.stop()  # SIGTERM to the source's process: with leaveGroupOnStop=false a static member stays
        stopped_at = time.monotonic()
        query = start(2)
        produce(kafka.bootstrap_servers, topic, {p: 5 for p in range(4)}, start=10)
        wait_for(lambda: len([r for r in rows() if r[0] in mine]) == 30, "the restarted query to land new records",
                 100)
        print(f"\n[static query] restarted query landed new records {time.monotonic() - stopped_at:.1f} s after the "
              f"first run stopped; the other member's events meanwhile: {kinds(other.events()[seen:])}")
        wait_for(lambda: quiet_for(other, 5), "five quiet seconds")
        assert other.events()[seen:] == [], "the group rebalanced when the static query came back"
        assert other.generation == generation and other.owned() == owned
    finally:
        if query is not None:
            query.stop()
        other.close()
    expected = sorted((p, o) for p in mine for o in range(15))
    assert rows() == expected


def test_static_member_leaves_on_close_so_the_others_take_over_at_once(kafka: Cluster, make_topic: MakeTopic) -> None:
    """A static member that stops cleanly leaves the group (classic protocol, KIP-345's leave naming its instance
    id): the other member takes its partitions over at once instead of after the session timeout."""
    topic = make_topic(4)
    group = unique_name("group")
    # A session far longer than the bound below: owning everything within it can only come from a leave.
    settings = {"bootstrap.servers": kafka.bootstrap_servers, "session.timeout.ms": "180000",
                "heartbeat.interval.ms": "500"}
    static = GroupMember({**settings, "group.instance.id": "query-a"}, group, [topic])
    other = GroupMember(settings, group, [topic])
    try:
        wait_for(lambda: bool(static.owned()) and bool(other.owned())
                 and len(static.owned() | other.owned()) == 4, "both members to own partitions")
        wait_for(lambda: quiet_for(static, 3) and quiet_for(other, 3), "the group to settle")
        held = static.owned()
        static.close()
        wait_for(lambda: len(other.owned()) == 4,
                 f"the other member to take over {sorted(tp.partition for tp in held)} from the static member that "
                 "stopped (its session timeout is 180 s)", 90)
    finally:
        static.close()
        other.close()


def test_static_query_stopped_hands_its_partitions_over_at_once(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    """A Spark query with ``kafka.group.instance.id`` that stops (``query.stop()``: Spark ends the source's
    process with SIGTERM) leaves the group: the other member owns every partition again long before the
    static member's session timeout."""
    topic = make_topic(4)
    group = unique_name("group")
    produce(kafka.bootstrap_servers, topic, {p: 10 for p in range(4)})
    other = GroupMember({"bootstrap.servers": kafka.bootstrap_servers, "session.timeout.ms": "180000",
                         "heartbeat.interval.ms": "500"}, group, [topic])
    query = None
    try:
        wait_for(lambda: len(other.owned()) == 4, "the other member to own every partition")
        df = (spark.readStream.format("kafka-group")
              .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
              .option("subscribe", topic)
              .option("kafka.group.id", group)
              .option("kafka.group.instance.id", "orders-query")
              # Far longer than the bound below: the other member can only own everything again by a leave.
              .option("kafka.session.timeout.ms", "180000")
              .option("kafka.heartbeat.interval.ms", "500")
              .option("startingOffsets", "earliest")
              .load())
        query = (df.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "chk"))
                 .trigger(processingTime="500 milliseconds").start())
        wait_for(lambda: len(other.owned()) == 2 and quiet_for(other, 3), "the query to take half the partitions",
                 180)
        query.stop()
        wait_for(lambda: len(other.owned()) == 4,
                 "the other member to take the stopped static query's partitions over (its session timeout is 180 s)",
                 90)
    finally:
        if query is not None:
            query.stop()
        other.close()


#: A static member in a process of its own that SIGKILLs itself once it owns partitions (argv: servers, group,
#: topic, protocol): it never leaves, as a query's driver that crashed.
_CRASHING_MEMBER = """
import os, signal, sys, time
from kafka_group.group.membership import GroupMember
servers, group, topic, protocol = sys.argv[1:5]
member = GroupMember({"bootstrap.servers": servers, "group.protocol": protocol, "group.instance.id": "query-a"},
                     group, [topic])
deadline = time.monotonic() + 120
while not member.owned() and time.monotonic() < deadline:
    time.sleep(0.1)
print(sorted(tp.partition for tp in member.owned()), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("late_close", [False, True], ids=["closed-in-time", "old-client-closing-late"])
def test_static_member_restarted_after_a_crash_under_the_consumer_protocol(
        kafka: Cluster, make_topic: MakeTopic, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        late_close: bool) -> None:
    """Under the consumer protocol a static member that crashed (SIGKILL, no leave) keeps its instance id until its
    session times out; the broker refuses its successor's join with UNRELEASED_INSTANCE_ID, which librdkafka makes a
    fatal error of the client. The restarted member joins again once the id is released instead of failing: it
    ends up owning partitions, and never reports an error.

    ``old-client-closing-late``: the fault point ``group.before_refused_client_close`` holds every refused client's
    close back past its bound, so it ends after the new client joined and got partitions; whatever it still
    reports must leave the new client's membership alone (no error, no revoke or loss)."""
    topic = make_topic(4)
    group = unique_name("group")
    settings = {"bootstrap.servers": kafka.bootstrap_servers, "group.protocol": "consumer"}
    other = GroupMember(settings, group, [topic])
    restarted = None
    try:
        wait_for(lambda: len(other.owned()) == 4, "the other member to own every partition")
        crashed = subprocess.run([sys.executable, "-c", _CRASHING_MEMBER, kafka.bootstrap_servers, group, topic,
                                  "consumer"], cwd=REPO, capture_output=True, timeout=180)
        assert crashed.returncode == -9 and crashed.stdout.strip() not in (b"", b"[]"), crashed
        if late_close:
            monkeypatch.setenv("KAFKA_GROUP_FAULT_POINT", "group.before_refused_client_close")
            monkeypatch.setenv("KAFKA_GROUP_FAULT_SLEEP_S", str(CLIENT_CLOSE_TIMEOUT_S + 5))
        with caplog.at_level(logging.DEBUG, logger="kafka_group.group"):
            restarted = GroupMember({**settings, "group.instance.id": "query-a"}, group, [topic])
            # The predecessor's session (the broker's group.consumer.session.timeout.ms: 10 s on the test broker)
            # ends, then the member joins. Before, the refusal killed its client and the member never joined.
            wait_for(lambda: bool(restarted.owned()), "the restarted static member to own partitions", 120)
            late = [r for r in caplog.records if "did not finish" in r.getMessage() and "refused" in r.getMessage()]
            assert bool(late) == late_close, caplog.text  # forced: the race happens
            wait_for(lambda: sum("closed the refused client" in r.getMessage() for r in caplog.records) >= len(late),
                     "the refused clients' late closes to end", 60)
        wait_for(lambda: len(restarted.owned() | other.owned()) == 4, "the group to own every partition again", 60)
        kinds = [e.kind for e in restarted.events()]
        assert kinds[-1] == "assign" and "lost" not in kinds and "revoke" not in kinds, restarted.events()
    finally:
        if restarted is not None:
            restarted.close()
        other.close()


@pytest.mark.crash
@pytest.mark.parametrize("protocol", ["classic", long_tier("consumer", id="consumer")])
def test_static_query_restarted_after_sigkill_takes_its_partitions_back(
    kafka: Cluster, tmp_path: pathlib.Path, protocol: str
) -> None:
    """A DeltaSink query with ``kafka.group.instance.id``, its driver SIGKILLed (its member never leaves), started
    again on its checkpoint. Classic protocol: the restart takes its dead predecessor's place and partitions as
    soon as it joins: the group's other member sees no rebalance at all, and the restart lands batches long
    before the dead member's session (300 s) could have ended. Consumer protocol: the broker refuses the id until
    the dead member's session (10 s on the test broker) ends; the restart then joins and lands. Every record lands
    once."""
    topic = create_topic(kafka, 4, "static-crash")
    group = unique_name("group")
    produce(kafka.bootstrap_servers, topic, {p: 200 for p in range(4)})
    options = ["kafka.group.instance.id=orders-query", f"kafka.group.protocol={protocol}"]
    settings = {"bootstrap.servers": kafka.bootstrap_servers}
    if protocol == "classic":
        options += ["kafka.session.timeout.ms=300000", "kafka.heartbeat.interval.ms=1000"]
        settings.update({"session.timeout.ms": "300000", "heartbeat.interval.ms": "1000"})
    else:
        settings["group.protocol"] = "consumer"
    other = GroupMember(settings, group, [topic])
    try:
        with GroupQueries(kafka.bootstrap_servers, topic, group, tmp_path, max_offsets=20,
                          trigger_seconds=2) as queries:
            wait_for(lambda: len(other.owned()) == 4, "the other member to own every partition")
            crashed = queries.start("a", 600, options)
            wait_for(lambda: queries.wrote(crashed), "the first run's first batch", 240)
            wait_for(lambda: len(other.owned()) == 2, "the query to own half the partitions")
            seen = len(other.events())
            os.killpg(crashed.pid, signal.SIGKILL)  # the driver dies: its member stays in the group
            crashed.wait(30)
            restarted = queries.start("a", 600, options)
            wait_for(lambda: queries.wrote(restarted), "the restarted run to land a batch", 240)
            if protocol == "classic":
                assert other.events()[seen:] == [], "the group rebalanced for the restarted static query"
                assert len(other.owned()) == 2
            queries.stop_file("a").touch()
            assert restarted.wait(120) == 0, queries.log("a")[-3000:]
            assert queries.landed() and set(queries.landed().values()) == {1}, queries.landed()
    finally:
        other.close()
