"""Review of issue 26's group-commit fixes, driven with the driver fakes.

Finding 3: a partition without a position of its own follows ``startingOffsets`` (or starts at the
earliest offset when the query resumes from its checkpoint or the partition appeared since the query
started), whatever the group knows of the other partitions assigned with it.
Finding 5: a commit computed before a rebalance never reaches the group after the partition came back.
Finding 6: the group's committed offsets overriding ``startingOffsets`` is logged, once.
Finding 7: an AvailableNow run's end check counts the group's committed starts of partitions owned elsewhere.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping, Optional

import pytest

from kafka_group.offsets import TopicPartition
from tests.unit.driver_fakes import T0, T1, FakeCluster, FakeMember, FakeStore, driver, options, quick, with_table


def test_a_partition_the_group_has_no_offset_for_follows_starting_offsets_whatever_else_is_assigned_with_it(
) -> None:
    """The group has an offset for t-0 only. A new query at ``latest`` must start t-1 at its latest offset
    whether the group hands it t-1 alone or with t-0 (it started t-1 at 0 in the second case)."""
    for assigned in ((T1,), (T0, T1)):
        cluster = FakeCluster({"t": 2})
        cluster.produce(T0, 100)
        cluster.produce(T1, 100)
        member = FakeMember()
        member.group_offsets[T0] = 40
        query = driver(options(startingOffsets="latest"), cluster, member)
        member.assign(*assigned)
        positions = query.initial_offsets().positions
        assert positions[T1] == 100, f"assigned {assigned}: t-1 ignored startingOffsets=latest: {positions}"


def test_a_partition_the_table_has_no_position_for_starts_the_same_whatever_else_is_assigned_with_it() -> None:
    """Finding 3 kept under issue 33's rule (finding 4): t-1 has no position anywhere. Where the table reads
    its topic (t-0 landed up to 40) it is a partition added since and starts at the earliest offset; where
    the table holds only t-0's recorded start (positioned, nothing landed) it starts at ``startingOffsets``.
    Either way the same whether the group hands it t-1 alone or with t-0."""
    for recorded_start, want in ((False, 0), (True, 100)):
        for assigned in ((T1,), (T0, T1)):
            cluster, store = FakeCluster({"t": 2}), FakeStore({T0: 40})
            if recorded_start:
                store.recorded_starts[T0] = 40
            cluster.produce(T0, 100)
            cluster.produce(T1, 100)
            member = FakeMember()
            query = driver(with_table(startingOffsets="latest"), cluster, member, store)
            member.assign(*assigned)
            positions = query.initial_offsets().positions
            assert positions[T1] == want, f"recorded start {recorded_start}, assigned {assigned}: {positions}"


def test_a_resumed_query_still_starts_a_partition_it_never_positioned_at_the_earliest_offset() -> None:
    """Spark's rule, kept: a query resuming from its checkpoint starts a partition new to it at the earliest."""
    cluster = FakeCluster({"t": 2})
    cluster.produce(T0, 100)
    cluster.produce(T1, 100)
    member = FakeMember()
    query = driver(options(startingOffsets="latest"), cluster, member)
    member.assign(T0)
    start = query.initial_offsets()
    assert start.positions == {T0: 100}
    member.assign(T1)
    assert query.next_offsets(start, None) is not None
    assert query.latest_report() == {T0: 100, T1: 100}
    assert member.group_offsets[T1] == 0


def test_the_group_overriding_starting_offsets_is_logged_once_naming_the_partitions_and_the_option(
        caplog: pytest.LogCaptureFixture) -> None:
    cluster = FakeCluster({"t": 2})
    cluster.produce(T0, 100)
    cluster.produce(T1, 100)
    member = FakeMember()
    member.group_offsets.update({T0: 40, T1: 60})
    query = driver(options(startingOffsets="earliest"), cluster, member)
    with caplog.at_level(logging.INFO, logger="kafka_group"):
        member.assign(T0)
        start = query.initial_offsets()
        member.assign(T1)
        query.next_offsets(start, None)
    assert start.positions == {T0: 40}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    overrides = [m for m in warnings if "startingOffsets" in m]
    assert len(overrides) == 1, warnings
    assert "t-0@40" in overrides[0] and "'g'" in overrides[0], overrides[0]


def test_no_override_is_logged_for_a_resumed_query_or_a_group_without_offsets(caplog: pytest.LogCaptureFixture) -> None:
    cluster = FakeCluster({"t": 1})
    cluster.produce(T0, 100)
    member = FakeMember()
    query = driver(options(startingOffsets="earliest"), cluster, member)
    with caplog.at_level(logging.INFO, logger="kafka_group"):
        member.assign(T0)
        query.initial_offsets()
    assert not [r for r in caplog.records if r.levelno == logging.WARNING and "startingOffsets" in r.getMessage()]


def test_available_now_ends_when_the_group_holds_the_other_owners_start_at_the_run_end() -> None:
    """With a table: t-1 is owned by another query that positioned it at latest (5) and committed that start;
    nothing landed for it (no new record), so the table has no position. The run must end: t-1 is at its end."""
    cluster, member, store = FakeCluster({"t": 2}), FakeMember(), FakeStore()
    cluster.produce(T0, 5)
    cluster.produce(T1, 5)
    member.group_offsets[T1] = 5
    d = driver(quick(with_table(), available_now_timeout_ms=1), cluster, member, store)
    member.assign(T0)
    start = d.initial_offsets()
    d.prepare_available_now()
    batch = d.next_offsets(start, None)
    assert batch is not None
    store.land(batch)
    assert d.next_offsets(batch, None) is None


def test_available_now_still_waits_for_a_group_start_short_of_the_run_end() -> None:
    cluster, member, store = FakeCluster({"t": 2}), FakeMember(), FakeStore()
    cluster.produce(T0, 5)
    cluster.produce(T1, 5)
    member.group_offsets[T1] = 3
    d = driver(quick(with_table(), available_now_timeout_ms=1), cluster, member, store)
    member.assign(T0)
    start = d.initial_offsets()
    d.prepare_available_now()
    batch = d.next_offsets(start, None)
    assert batch is not None
    store.land(batch)
    from kafka_group.errors import AvailableNowIncompleteError

    with pytest.raises(AvailableNowIncompleteError, match="t-1 at 3 of 5"):
        d.next_offsets(batch, None)


class GenerationMember(FakeMember):
    """A member whose ``on_commit`` fires a rebalance just before a commit is taken (the fakes drop, as the real
    member does, positions computed under an older assignment of a partition)."""

    def __init__(self) -> None:
        super().__init__()
        self.on_commit: Optional[Callable[[], None]] = None

    def commit(self, positions: Mapping[TopicPartition, int], generation: Optional[int] = None) -> bool:
        hook, self.on_commit = self.on_commit, None
        if hook is not None:
            hook()
        return super().commit(positions, generation)


def test_a_commit_computed_before_a_revoke_and_reassign_never_moves_the_group_back() -> None:
    """Without a table, batch 0..30 of t-0; at the next plan the group follows its end (30). Between the
    computation and the commit, t-0 leaves, another member moves the group to 80, and t-0 comes back: the
    stale 30 must not reach the group (the next owner would read 30..80 again)."""
    cluster = FakeCluster({"t": 1})
    cluster.produce(T0, 30)
    member = GenerationMember()
    query = driver(options(), cluster, member)
    member.assign(T0)
    batch = query.next_offsets(query.initial_offsets(), None)
    assert batch is not None

    def moved_elsewhere_and_back() -> None:
        member.revoke(T0)
        member.group_offsets[T0] = 80
        member.assign(T0)

    member.on_commit = moved_elsewhere_and_back
    cluster.produce(T0, 70)
    query.next_offsets(batch, None)
    assert member.group_offsets[T0] == 80, member.commits


def test_the_members_pending_commits_drop_positions_computed_under_an_older_assignment() -> None:
    """The real member's bookkeeping (GroupMember keeps a PendingCommits under its state lock)."""
    from kafka_group.group.pending_commits import PendingCommits

    pending = PendingCommits("g")
    pending.assigned([T0, T1], 1)
    pending.queue({T0: 30, T1: 5}, 1, {T0, T1})
    assert pending.take() == ({T0: 30, T1: 5}, [])
    pending.queue({T0: 31}, 1, {T0, T1})
    pending.removed([T0])  # revoked: what was queued for it is dropped
    pending.assigned([T0], 3)  # and given back
    pending.queue({T0: 30, T1: 6}, 2, {T0, T1})  # computed before the revoke
    assert pending.take() == ({T1: 6}, [])
    assert pending.await_commit({T0: 30}, 2, {T0, T1}) is None
    awaited = pending.await_commit({T0: 80, T1: 7}, 3, {T0, T1})
    assert awaited is not None and awaited.positions == {T0: 80, T1: 7}
    assert pending.take() == ({}, [awaited])
    assert pending.current({T0: 1}, None, set()) == {T0: 1}  # the polling thread's own commits are never stale


def test_an_awaited_commit_not_sent_yet_drops_a_partition_revoked_meanwhile() -> None:
    """Issue 33, finding 5: a start commit awaited (and retried) across a rebalance. A partition revoked
    before the polling thread sent it, then given back, must not be sent with the stale start (the polling
    thread checks only what the member owns when it sends)."""
    from kafka_group.group.pending_commits import PendingCommits

    pending = PendingCommits("g")
    pending.assigned([T0, T1], 1)
    awaited = pending.await_commit({T0: 5, T1: 5}, 1, {T0, T1})
    assert awaited is not None
    pending.removed([T0])
    pending.assigned([T0], 2)
    assert pending.take() == ({}, [awaited])
    assert awaited.positions == {T1: 5}


def test_a_commit_answer_is_retriable_only_when_every_refusal_is() -> None:
    """Issue 33, finding 5: what a retry may outlive (a rebalance, a stale generation, a moving coordinator)."""
    from types import SimpleNamespace

    from confluent_kafka import KafkaError
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    from kafka_group.group.offset_commits import AwaitedCommit

    def answer(*codes: int) -> AwaitedCommit:
        # The client's per-partition answers (its TopicPartition's error cannot be set from Python).
        awaited = AwaitedCommit({T0: 5, T1: 5})
        parts: Any = [SimpleNamespace(topic=tp.topic, partition=tp.partition, offset=5,
                                      error=KafkaError(code) if code else None) for tp, code in zip((T0, T1), codes)]
        assert awaited.answered_by(None, parts)
        return awaited

    assert answer(KafkaError.REBALANCE_IN_PROGRESS, 0).retriable
    assert answer(KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS).retriable
    assert not answer(KafkaError.REBALANCE_IN_PROGRESS, KafkaError.GROUP_AUTHORIZATION_FAILED).retriable
    accepted = answer(0, 0)
    assert accepted.error is None and not accepted.retriable
    whole = AwaitedCommit({T0: 5})
    assert whole.answered_by(KafkaError(KafkaError.UNKNOWN_MEMBER_ID), [KafkaTopicPartition(T0.topic, 0, 5)])
    assert whole.retriable and whole.error
