"""Review of issue 26, finding 8, on Apache Kafka: a start is in the group when positioning returns.

A partition positioned where neither the table nor the group has a position has its start
committed to the group, so a member taking it over continues from it. The commit was only
queued for the member's poll thread: a crash right after the planning call returned (Spark
had written the batch's offsets) and before the poll thread sent it left the group without
the start, and the next owner started at the then latest offset, skipping what came between.
The poll thread is held here (its consumer lock taken) to open that window deterministically.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

import pytest

from kafka_group.errors import GroupMembershipError
from kafka_group.group.group_commits import GroupCommits
from kafka_group.group.membership import GroupMember
from kafka_group.offsets import TopicPartition
from tests.support import Cluster, MakeTopic, group_committed, unique_name, wait_for

pytestmark = pytest.mark.integration


class HeldPollThread:
    """Holds ``member``'s consumer lock until :meth:`release`: its poll thread sends nothing meanwhile."""

    def __init__(self, member: GroupMember) -> None:
        self._taken, self._release = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._hold, args=(member,), daemon=True)
        self._thread.start()
        assert self._taken.wait(120)

    def _hold(self, member: GroupMember) -> None:
        with member._lock:  # noqa: SLF001 - the test stands in for a poll thread that has not run yet
            self._taken.set()
            self._release.wait(120)

    def release(self) -> None:
        self._release.set()
        self._thread.join(30)


@contextlib.contextmanager
def member_of(kafka: Cluster, topic: str, partitions: int) -> Iterator[GroupMember]:
    member = GroupMember({"bootstrap.servers": kafka.bootstrap_servers}, unique_name("group"), [topic])
    try:
        wait_for(lambda: len(member.owned()) == partitions, "the member to own every partition", 120)
        yield member
    finally:
        member.close()


def test_a_start_is_committed_to_the_group_before_positioning_returns(kafka: Cluster, make_topic: MakeTopic) -> None:
    topic = make_topic(2)
    with member_of(kafka, topic, 2) as member:
        starts = {TopicPartition(topic, 0): 7, TopicPartition(topic, 1): 9}
        commits = GroupCommits(member)
        held = HeldPollThread(member)
        releaser = threading.Timer(3.0, held.release)  # the poll thread runs again a while later
        releaser.start()
        try:
            commits.positioned(starts, frozenset(), member.owned)
            # The planning call returned: the process may die now. The group must have the starts.
            seen = group_committed(kafka.bootstrap_servers, member.group_id, topic, 2)
        finally:
            releaser.cancel()
            held.release()
        assert seen == {0: 7, 1: 9}, f"the group had {seen} when positioning returned"


def test_a_start_the_group_does_not_acknowledge_in_time_fails_naming_the_option(
    kafka: Cluster, make_topic: MakeTopic
) -> None:
    topic = make_topic(1)
    with member_of(kafka, topic, 1) as member:
        commits = GroupCommits(member, start_timeout_s=1.0)
        held = HeldPollThread(member)
        try:
            with pytest.raises(GroupMembershipError, match=r"t.*-0@5.*kafkaConsumer\.connectTimeoutMs"):
                commits.positioned({TopicPartition(topic, 0): 5}, frozenset(), member.owned, member.generation)
        finally:
            held.release()
