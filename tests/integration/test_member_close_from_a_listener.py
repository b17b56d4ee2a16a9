"""A group member closed from inside its own rebalance callback, on its polling thread (Apache Kafka).

A rebalance listener (the option ``rebalanceListener``, or the connector's own) runs on the member's polling
thread, inside ``poll()``, holding the consumer lock: a ``close()`` there must neither wait for that thread
nor close the client under the ``poll()`` it is in. It returns at once; the polling thread leaves the group
and closes the client once the callback returned.
"""

from __future__ import annotations

import logging
import threading
from typing import Dict, List

import pytest

from kafka_group.group.membership import GroupMember
from kafka_group.rebalance_event import RebalanceEvent
from tests.support import Cluster, MakeTopic, unique_name, wait_for

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_close_from_a_rebalance_listener_leaves_the_group_and_closes_the_client(
        kafka: Cluster, make_topic: MakeTopic, caplog: pytest.LogCaptureFixture, static: bool) -> None:
    topic = make_topic(4)
    group = unique_name("group")
    # A session far longer than the bounds below: the other member can only own everything again by a leave.
    settings: Dict[str, str] = {"bootstrap.servers": kafka.bootstrap_servers, "session.timeout.ms": "180000",
                                "heartbeat.interval.ms": "500"}
    other = GroupMember(settings, group, [topic])
    members: List[GroupMember] = []
    returned = threading.Event()

    def close_on_assign(event: RebalanceEvent) -> None:
        if event.kind == "assign" and event.partitions and not returned.is_set():
            members[0].close()  # on the polling thread, inside its rebalance callback
            returned.set()

    try:
        wait_for(lambda: len(other.owned()) == 4, "the other member to own every partition")
        with caplog.at_level(logging.INFO, logger="kafka_group"):
            members.append(GroupMember({**settings, **({"group.instance.id": "closing"} if static else {})},
                                       group, [topic]))
            members[0].add_listener(close_on_assign)
            wait_for(returned.is_set, "close() called by the listener to return", 60)
            wait_for(lambda: len(other.owned()) == 4,
                     "the other member to take over from the member closed by its listener (session: 180 s)", 90)
            wait_for(lambda: "left consumer group" in caplog.text, "the closed member's client to close", 60)
        assert "did not finish" not in caplog.text and "was not closed" not in caplog.text, caplog.text
        assert not members[0]._thread.is_alive()  # the polling thread ended after the close
    finally:
        for member in members:
            member.close()
        other.close()
