"""The source driver's orchestration, driven with in-memory fakes (no broker, no Spark, no Delta).

Each test fires what Spark, the group and the sink would do, in the order they
would do it, and checks what the driver plans and commits.
"""

from __future__ import annotations

import threading
from typing import Dict, List, Mapping, Optional, Tuple

import pytest

from kafka_group.errors import AvailableNowIncompleteError, BrokerUnavailableError, DataLossError
from kafka_group.offsets import BatchOffsets, OffsetRange, TopicPartition
from kafka_group.source_driver import SourceDriver
from tests.unit.driver_fakes import (
    T0,
    T1,
    FakeCluster,
    FakeMember,
    FakeStore,
    driver,
    one_partition,
    options,
    quick,
    with_table,
)


def first_batch(d: SourceDriver) -> BatchOffsets:
    """The first batch ``d`` plans from where its owned partitions start (one is expected)."""
    batch = d.next_offsets(d.initial_offsets(), None)
    assert batch is not None
    return batch


def ranges_of(batch: Optional[BatchOffsets]) -> Dict[TopicPartition, Tuple[int, int]]:
    assert batch is not None
    return {tp: (r.from_offset, r.until_offset) for tp, r in batch.ranges.items()}


# -- assignment and planning ------------------------------------------------------------------


def test_first_assignment_starts_at_starting_offsets_and_plans_to_latest() -> None:
    cluster, member = FakeCluster({"t": 2}), FakeMember()
    cluster.produce(T0, 5)
    cluster.produce(T1, 3)
    d = driver(options(), cluster, member)
    member.assign(T0, T1)
    start = d.initial_offsets()
    assert dict(start.positions) == {T0: 0, T1: 0}
    assert ranges_of(d.next_offsets(start, None)) == {T0: (0, 5), T1: (0, 3)}


def test_starting_offsets_latest_starts_new_query_at_the_end() -> None:
    cluster, member, d = one_partition(5, options(startingOffsets="latest"))
    assert dict(d.initial_offsets().positions) == {T0: 5}


def test_nothing_new_plans_nothing() -> None:
    cluster, member = FakeCluster({"t": 1}), FakeMember()
    d = driver(options(), cluster, member)
    member.assign(T0)
    assert d.next_offsets(d.initial_offsets(), None) is None


def test_assign_mode_plans_its_fixed_partitions() -> None:
    cluster = FakeCluster({"t": 2})
    cluster.produce(T1, 4)
    d = driver(options(subscribe="", assign='{"t":[1]}'), cluster, None)
    assert ranges_of(d.next_offsets(d.initial_offsets(), None)) == {T1: (0, 4)}
    assert d.membership_report() == {"owned": {"t": [1]}, "assign": True}


# -- rebalances -------------------------------------------------------------------------------


def test_revoke_waits_until_the_store_shows_the_running_batch_landed() -> None:
    store = FakeStore()
    cluster, member, d = one_partition(10, with_table(), store)
    batch = first_batch(d)
    d.on_batch_running(batch)
    reads_before = store.reads
    store.on_read = lambda n: store.land(batch) if n == reads_before + 3 else None
    member.revoke(T0)  # the poll thread: returns only when the batch landed
    assert store.reads >= reads_before + 3
    assert member.commits[-1] == {T0: 10}


def test_revoke_gives_up_after_revoke_timeout_and_commits_what_landed() -> None:
    store = FakeStore({T0: 0})
    cluster, member, d = one_partition(10, quick(with_table(), revoke_timeout_ms=1), store)
    batch = first_batch(d)
    d.on_batch_running(batch)
    member.revoke(T0)
    assert member.commits[-1] == {T0: 0}


def test_revoke_without_offsets_table_does_not_wait_or_commit_the_running_batch() -> None:
    cluster, member, d = one_partition(10, options())
    batch = first_batch(d)
    d.on_batch_running(batch)
    member.revoke(T0)
    # Only the start the group had no position for (issue 26), never the running batch's end.
    assert member.commits and all(commit == {T0: 0} for commit in member.commits)


def test_lost_partitions_never_wait() -> None:
    store = FakeStore()
    cluster, member, d = one_partition(10, with_table(), store)
    batch = first_batch(d)
    d.on_batch_running(batch)
    reads, commits = store.reads, len(member.commits)
    member.lost(T0)
    assert store.reads == reads and len(member.commits) == commits


def test_revoke_between_ownership_read_and_registration_keeps_the_partition_out_of_the_batch() -> None:
    cluster, member, store = FakeCluster({"t": 2}), FakeMember(), FakeStore()
    cluster.produce(T0, 10)
    cluster.produce(T1, 10)
    d = driver(with_table(), cluster, member, store)
    member.assign(T0, T1)
    start = d.initial_offsets()
    cluster.on_latest = lambda: member.revoke(T1)  # the poll thread, in the middle of the plan
    batch = d.next_offsets(start, None)
    assert ranges_of(batch) == {T0: (0, 10)}
    # Nothing of T1 ran, nothing landed: let go at once, committing its start for the next owner (issue 26).
    assert member.commits[-1] == {T1: 0}


def test_revoked_partition_is_positioned_again_from_the_table_when_it_comes_back() -> None:
    store = FakeStore()
    cluster, member, d = one_partition(10, with_table(), store)
    batch = first_batch(d)
    store.land(batch)
    member.revoke(T0)
    store.table[T0] = 7  # another member moved it meanwhile (or a reset)
    member.assign(T0)
    cluster.produce(T0, 5)
    assert ranges_of(d.next_offsets(batch, None)) == {T0: (7, 15)}


def test_eager_rebalance_revoking_everything_then_reassigning_keeps_pauses() -> None:
    cluster, member = FakeCluster({"t": 2}), FakeMember()
    cluster.produce(T0, 5)
    cluster.produce(T1, 5)
    d = driver(options(), cluster, member)
    member.assign(T0, T1)
    start = d.initial_offsets()
    d.flow.handle_request({"op": "pause", "topic": "t", "partitions": [0]})
    member.revoke(T0, T1)
    assert d.next_offsets(start, None) is not None  # planned mid-rebalance: nothing owned
    member.assign(T0, T1)
    batch = d.next_offsets(start, None)
    assert ranges_of(batch) == {T1: (0, 5)}
    assert batch is not None and batch.flow == {"paused": {"t": [0]}}


def test_pause_survives_an_eager_rebalance_whose_assignment_lands_while_planning() -> None:
    cluster, member = FakeCluster({"t": 2}), FakeMember()
    cluster.produce(T0, 5)
    cluster.produce(T1, 5)
    d = driver(options(), cluster, member)
    member.assign(T0, T1)
    start = d.initial_offsets()
    d.flow.handle_request({"op": "pause", "topic": "t", "partitions": [0]})
    member.revoke(T0, T1)  # eager: everything revoked; the plan reads owned() as nothing...
    member.on_events = lambda: member.assign(T0, T1)  # ...then the same partitions come back
    first = d.next_offsets(start, None)
    batch = d.next_offsets(first or start, None)
    assert ranges_of(batch) == {T1: (0, 5)}  # T0 stays paused
    assert d.flow_report()["paused"] == {"t": [0]}


def test_pause_of_a_partition_given_to_another_member_is_dropped() -> None:
    cluster, member = FakeCluster({"t": 2}), FakeMember()
    d = driver(options(), cluster, member)
    member.assign(T0, T1)
    start = d.initial_offsets()
    d.flow.handle_request({"op": "pause", "topic": "t", "partitions": [0]})
    member.revoke(T0)
    member.assign()  # the rebalance ends with T0 elsewhere
    d.next_offsets(start, None)
    assert d.flow_report() == {}


# -- Spark's replays and commits ----------------------------------------------------------------


def test_replayed_batch_registers_its_ranges_before_positioning_and_a_revoke_waits_for_it() -> None:
    cluster, member, store = FakeCluster({"t": 1}), FakeMember(), FakeStore({T0: 5})
    cluster.produce(T0, 10)
    replayed = BatchOffsets.from_ranges({T0: 5}, [OffsetRange(T0, 5, 10)], group="g", offsets_table="x")
    d = driver(with_table(), cluster, member, store)  # restarted: Spark replays batch N from its checkpoint
    d.on_batch_running(replayed)
    member.assign(T0)
    store.on_read = lambda n: store.land(replayed) if n == 2 else None
    member.revoke(T0)
    assert member.commits[-1] == {T0: 10}


def test_commit_of_the_previous_batch_drops_only_its_own_ranges() -> None:
    store = FakeStore()
    cluster, member, d = one_partition(5, with_table(), store)
    first = first_batch(d)
    d.on_batch_running(first)
    store.land(first)
    cluster.produce(T0, 5)
    second = d.next_offsets(first, None)  # Spark plans N ...
    assert ranges_of(second) == {T0: (5, 10)}
    assert second is not None
    d.on_batch_running(second)
    d.on_batch_committed(first)  # ... then commits N-1
    assert member.commits[-1] == {T0: 5}
    store.on_read = lambda n: store.land(second)  # N lands at the revoke's next read
    member.revoke(T0)
    assert member.commits[-1] == {T0: 10}


def test_without_table_a_batchs_end_reaches_the_group_at_the_plan_after_it_not_at_sparks_commit() -> None:
    # Spark calls commit(N) only after it planned N+1; that plan committed N's end already, and a
    # commit(N) of N's end could move back a partition re-positioned meanwhile.
    cluster, member, d = one_partition(5, options())
    batch = first_batch(d)
    assert d.next_offsets(batch, None) is None
    assert member.group_offsets[T0] == 5
    sent = len(member.commits)
    d.on_batch_committed(batch)
    assert len(member.commits) == sent and member.group_offsets[T0] == 5


# -- offsets table resets and restarts -----------------------------------------------------------


def test_table_moved_by_the_offsets_tool_is_followed() -> None:
    store = FakeStore()
    cluster, member, d = one_partition(10, with_table(), store)
    batch = first_batch(d)
    store.table[T0] = 3  # the offsets tool reset it
    assert ranges_of(d.next_offsets(batch, None)) == {T0: (3, 10)}


def test_restart_resumes_from_the_checkpoint_without_a_table() -> None:
    cluster, member, d = one_partition(10, options(startingOffsets="latest"))
    assert ranges_of(d.next_offsets(BatchOffsets({T0: 4}, {}), None)) == {T0: (4, 10)}


def test_restart_takes_the_group_offsets_when_another_member_read_further() -> None:
    cluster, member, d = one_partition(10, options())
    member.group_offsets[T0] = 6
    assert ranges_of(d.next_offsets(BatchOffsets({T0: 4}, {}), None)) == {T0: (6, 10)}


def test_restart_with_a_table_takes_the_table_over_checkpoint_and_group() -> None:
    store = FakeStore({T0: 2})
    cluster, member, d = one_partition(10, with_table(), store)
    member.group_offsets[T0] = 8
    assert ranges_of(d.next_offsets(BatchOffsets({T0: 4}, {}), None)) == {T0: (2, 10)}


def test_restart_with_a_new_checkpoint_but_a_table_continues_unlanded_partitions_from_the_group() -> None:
    # T1 was positioned by the lost run, which committed its start to the group; nothing of it landed.
    cluster, member, store = FakeCluster({"t": 2}), FakeMember(), FakeStore({T0: 2})
    cluster.produce(T0, 10)
    cluster.produce(T1, 10)
    member.group_offsets[T1] = 3
    d = driver(with_table(startingOffsets="latest"), cluster, member, store)
    member.assign(T0, T1)
    assert dict(d.initial_offsets().positions) == {T0: 2, T1: 3}


def test_a_new_checkpoint_starts_a_partition_neither_the_table_nor_the_group_knows_at_earliest() -> None:
    # Issue 33, finding 4 (it started at 10, the latest offset, and t-1's records [0, 10) never landed): the
    # table reads topic t (t-0 landed up to 2), so t-1, which has no position anywhere, is a partition added
    # since. Not "resumed" from what is assigned with it (review of issue 26, finding 3): assigned alone too.
    for assigned in ((T0, T1), (T1,)):
        cluster, member, store = FakeCluster({"t": 2}), FakeMember(), FakeStore({T0: 2})
        cluster.produce(T0, 10)
        cluster.produce(T1, 10)
        d = driver(with_table(startingOffsets="latest"), cluster, member, store)
        member.assign(*assigned)
        assert dict(d.initial_offsets().positions)[T1] == 0, assigned


def test_a_new_checkpoint_starts_a_partition_at_starting_offsets_while_the_table_holds_only_recorded_starts() -> None:
    # t-0's position is the start another new query of the group recorded (nothing landed): t-1 is not new.
    cluster, member, store = FakeCluster({"t": 2}), FakeMember(), FakeStore({T0: 2})
    store.recorded_starts[T0] = 2
    cluster.produce(T0, 10)
    cluster.produce(T1, 10)
    d = driver(with_table(startingOffsets="latest"), cluster, member, store)
    member.assign(T0, T1)
    assert dict(d.initial_offsets().positions) == {T0: 2, T1: 10}


def test_partition_created_since_start_starts_at_earliest() -> None:
    cluster, member = FakeCluster({"t": 1}), FakeMember()
    cluster.produce(T0, 10)
    d = driver(options(startingOffsets="latest"), cluster, member)
    start = d.initial_offsets()
    member.assign(T0)
    start = BatchOffsets(dict(d.initial_offsets().positions), {})
    cluster.topics["t"] = 2  # CreatePartitions
    cluster.produce(T1, 4)
    member.assign(T1)
    assert ranges_of(d.next_offsets(start, None)) == {T1: (0, 4)}


def test_pause_restored_from_checkpoint_is_dropped_when_another_member_read_meanwhile() -> None:
    cluster, member, d = one_partition(10, options())
    member.group_offsets[T0] = 6
    restored = BatchOffsets({T0: 4}, {}, flow={"paused": {"t": [0]}})
    assert ranges_of(d.next_offsets(restored, None)) == {T0: (6, 10)}


# -- data loss ----------------------------------------------------------------------------------


def test_data_loss_fails_the_query_when_fail_on_data_loss() -> None:
    cluster, member, d = one_partition(10, options())
    start = d.initial_offsets()
    cluster.earliest[T0] = 4  # retention removed [0, 4)
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        d.next_offsets(start, None)


def test_data_loss_skipped_moves_the_table_past_the_loss() -> None:
    store = FakeStore({T0: 0})
    cluster, member, d = one_partition(10, with_table(failOnDataLoss="false"), store)
    cluster.earliest[T0] = 4
    assert ranges_of(d.next_offsets(d.initial_offsets(), None)) == {T0: (4, 10)}
    assert store.moves[0][:3] == (T0, 0, 4)


def test_data_loss_skipped_leaves_out_a_partition_whose_table_moved_meanwhile() -> None:
    store = FakeStore({T0: 0})
    cluster, member, d = one_partition(10, with_table(failOnDataLoss="false"), store)
    cluster.earliest[T0] = 4
    start = d.initial_offsets()
    reads = store.reads
    store.on_read = lambda n: store.table.update({T0: 6}) if n == reads + 2 else None  # before the move
    assert d.next_offsets(start, None) is None


def test_position_past_the_end_of_a_recreated_topic_restarts_at_earliest_when_skipping() -> None:
    cluster, member, d = one_partition(3, options(failOnDataLoss="false"))
    assert ranges_of(d.next_offsets(BatchOffsets({T0: 50}, {}), None)) == {T0: (0, 3)}


def test_position_past_last_stable_offset_waits_for_the_open_transaction() -> None:
    cluster, member, d = one_partition(5, options())
    cluster.high[T0] = 8
    assert d.next_offsets(BatchOffsets({T0: 7}, {}), None) is None


# -- AvailableNow -------------------------------------------------------------------------------


def test_available_now_ends_when_every_target_partition_reached_its_end() -> None:
    cluster, member, d = one_partition(5, options())
    start = d.initial_offsets()
    d.prepare_available_now()
    cluster.produce(T0, 100)  # after the run's start: not part of it
    batch = d.next_offsets(start, None)
    assert ranges_of(batch) == {T0: (0, 5)}
    assert batch is not None
    assert d.next_offsets(batch, None) is None  # at the target: the run ends


class QueuingMember(FakeMember):
    """As the real member commits from Spark's planning thread: ``commit`` only queues for its poll thread
    (lost if the process ends before that thread sends it); ``commit_and_wait`` returns once acknowledged."""

    def __init__(self) -> None:
        super().__init__()
        self.acknowledged: List[Dict[TopicPartition, int]] = []

    def commit(self, positions: Mapping[TopicPartition, int], generation: Optional[int] = None) -> bool:
        return True  # queued, and never sent: the process ends first

    def commit_and_wait(self, positions: Mapping[TopicPartition, int], generation: Optional[int],
                        timeout_s: float) -> None:
        super().commit(positions, generation)
        self.acknowledged.append(dict(positions))


def test_the_plan_that_ends_an_available_now_run_waits_until_the_group_has_what_landed() -> None:
    """Issue 33, finding 7: Spark ends the query once that plan returns and may end the runner process before
    its poll thread sends a queued commit (and before a close): the last batch's positions were left out of
    the group's offsets, shown as lag until the next run."""
    store, cluster, member = FakeStore(), FakeCluster({"t": 1}), QueuingMember()
    cluster.produce(T0, 3000)
    d = driver(with_table(maxOffsetsPerTrigger="1500"), cluster, member, store)
    member.assign(T0)
    start = d.initial_offsets()
    d.prepare_available_now()
    batch = d.next_offsets(start, 1500)
    assert ranges_of(batch) == {T0: (0, 1500)}
    assert batch is not None
    store.land(batch)
    last = d.next_offsets(batch, 1500)
    assert ranges_of(last) == {T0: (1500, 3000)}
    assert last is not None
    store.land(last)
    assert d.next_offsets(last, 1500) is None  # the run ends
    assert member.group_offsets == {T0: 3000}, member.acknowledged


def test_available_now_fails_while_a_partition_owned_elsewhere_stays_short() -> None:
    cluster, member, store = FakeCluster({"t": 2}), FakeMember(), FakeStore({T1: 1})
    cluster.produce(T0, 5)
    cluster.produce(T1, 5)
    d = driver(quick(with_table(), available_now_timeout_ms=1), cluster, member, store)
    member.assign(T0)
    start = d.initial_offsets()
    d.prepare_available_now()
    batch = d.next_offsets(start, None)
    assert batch is not None
    store.land(batch)
    with pytest.raises(AvailableNowIncompleteError, match="owned elsewhere"):
        d.next_offsets(batch, None)


def test_available_now_ends_when_the_other_owner_landed_the_rest() -> None:
    cluster, member, store = FakeCluster({"t": 2}), FakeMember(), FakeStore({T1: 1})
    cluster.produce(T0, 5)
    cluster.produce(T1, 5)
    d = driver(with_table(), cluster, member, store)
    member.assign(T0)
    d.prepare_available_now()
    batch = first_batch(d)
    store.land(batch)  # the sink lands it (positioning recorded t-0's start, 0, in the table)
    store.on_read = lambda n: store.table.update({T1: 5})  # the other query lands its last batch
    assert d.next_offsets(batch, None) is None


def test_available_now_asks_again_for_a_target_partition_the_cluster_did_not_answer() -> None:
    cluster, member = FakeCluster({"t": 2}), FakeMember()
    cluster.produce(T0, 5)
    cluster.produce(T1, 5)
    d = driver(options(), cluster, member)
    member.assign(T0, T1)
    start = d.initial_offsets()
    cluster.unanswered[T1] = 1  # its leader did not answer the run's first ListOffsets
    d.prepare_available_now()
    batch = d.next_offsets(start, None)
    assert ranges_of(batch) == {T0: (0, 5), T1: (0, 5)}


def test_available_now_fails_when_a_target_partition_is_never_answered() -> None:
    cluster, member = FakeCluster({"t": 2}), FakeMember()
    cluster.produce(T0, 5)
    cluster.produce(T1, 5)
    d = driver(options(**{"kafkaConsumer.connectTimeoutMs": "1"}), cluster, member)
    member.assign(T0, T1)
    d.initial_offsets()
    cluster.unanswered[T1] = 1_000_000
    with pytest.raises(BrokerUnavailableError, match=r"t-1.*kafkaConsumer.connectTimeoutMs"):
        d.prepare_available_now()


# -- close ----------------------------------------------------------------------------------------


def test_close_commits_what_landed_and_leaves_without_waiting_for_the_running_batch() -> None:
    store = FakeStore()
    cluster, member, d = one_partition(10, with_table(), store)
    batch = first_batch(d)
    d.on_batch_running(batch)
    store.table[T0] = 4
    d.close()
    assert member.commits[-1] == {T0: 4} and member.closed
    member.revoke(T0)  # closing the real member fires this: it must not wait
    assert member.commits[-1] == {T0: 4}


def test_close_ends_a_revoke_that_waits_for_the_running_batch() -> None:
    store = FakeStore()
    cluster, member, d = one_partition(10, quick(with_table(), revoke_timeout_ms=3_600_000), store)
    assert d.next_offsets(d.initial_offsets(), None) is not None  # running; it will never land
    waiting = threading.Event()
    store.on_read = lambda n: waiting.set()
    revoke = threading.Thread(target=member.revoke, args=(T0,), daemon=True)  # the poll thread's callback
    revoke.start()
    assert waiting.wait(30), "the revoke never read the table"
    d.close()  # SIGTERM: the query stops, its running batch with it
    revoke.join(30)
    assert not revoke.is_alive(), "the revoke still waits for a batch the stopped query abandoned"


def test_a_second_close_waits_for_the_first_and_closes_nothing_twice() -> None:
    """The SIGTERM handler's thread and Spark's ``stop()`` (the runner's socket ended) may both close the driver."""
    store = FakeStore()
    cluster, member, d = one_partition(10, with_table(), store)
    first_batch(d)
    leaving, release = threading.Event(), threading.Event()
    closes: List[str] = []
    close_member = member.close

    def slow_close() -> None:  # the real member's close talks to the coordinator
        closes.append(threading.current_thread().name)
        leaving.set()
        assert release.wait(30)
        close_member()

    member.close = slow_close  # type: ignore[method-assign]
    first = threading.Thread(target=d.close, name="kafka-group-close-on-sigterm", daemon=True)
    first.start()
    assert leaving.wait(30)
    second_done = threading.Event()

    def close_again() -> None:
        d.close()
        second_done.set()

    second = threading.Thread(target=close_again, daemon=True)
    second.start()
    assert not second_done.wait(0.5), "the second close returned while the first was still leaving"
    release.set()
    first.join(30)
    assert second_done.wait(30)
    assert closes == ["kafka-group-close-on-sigterm"] and member.closed
