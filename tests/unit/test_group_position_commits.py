"""Issue 26, items 1 and 2: the Kafka group's committed offsets, driven with the driver fakes.

Item 1: once a group has a position for a partition (positioned by any member), a member that
takes the partition over continues from it, even when nothing has landed in the offsets table
yet. Item 2: the group's committed offsets follow what landed within one planning call, without
waiting for Spark's ``commit`` (which Spark sends only when it builds the next batch).
"""

from __future__ import annotations

from typing import Dict, Iterable, Optional, Tuple

from kafka_group.offsets import BatchOffsets, TopicPartition
from tests.unit.driver_fakes import T0, T1, FakeCluster, FakeMember, FakeStore, driver, options, with_table


def ranges_of(batch: Optional[BatchOffsets]) -> Dict[TopicPartition, Tuple[int, int]]:
    assert batch is not None
    return {tp: (r.from_offset, r.until_offset) for tp, r in batch.ranges.items()}


def second_member(first: FakeMember) -> FakeMember:
    """Another member of ``first``'s group: the group's committed offsets are shared."""
    member = FakeMember(first.group_id)
    member.member_id = "member-2"
    member.group_offsets = first.group_offsets
    return member


def test_a_member_joining_at_latest_continues_from_where_the_group_positioned_the_partition() -> None:
    cluster, store = FakeCluster({"t": 2}), FakeStore()
    cluster.produce(T0, 100)
    cluster.produce(T1, 100)
    opts = with_table(startingOffsets="latest")
    m1 = FakeMember()
    q1 = driver(opts, cluster, m1, store)
    m1.assign(T0, T1)
    start = q1.initial_offsets()
    assert start.positions == {T0: 100, T1: 100}
    assert q1.next_offsets(start, None) is None  # batch 0: nothing new, nothing lands
    cluster.produce(T0, 5)
    cluster.produce(T1, 5)

    # Q2 (a new checkpoint, the same table) joins; the group hands it T1 before Q1 plans again.
    m2 = second_member(m1)
    m1.revoke(T1)
    q2 = driver(opts, cluster, m2, store)
    m2.assign(T1)
    q2_start = q2.initial_offsets()
    assert q2_start.positions == {T1: 100}, "Q2 skipped the records Q1's position (100) says are unread"
    assert ranges_of(q2.next_offsets(q2_start, None)) == {T1: (100, 105)}
    assert ranges_of(q1.next_offsets(start, None)) == {T0: (100, 105)}


def test_a_lost_checkpoint_on_an_idle_topic_continues_from_the_group_position() -> None:
    cluster, store = FakeCluster({"t": 1}), FakeStore()
    cluster.produce(T0, 100)
    opts = with_table(startingOffsets="latest")
    m1 = FakeMember()
    q1 = driver(opts, cluster, m1, store)
    m1.assign(T0)
    assert q1.next_offsets(q1.initial_offsets(), None) is None
    q1.close()
    cluster.produce(T0, 7)  # while the query is down; then its checkpoint is lost

    m2 = second_member(m1)
    again = driver(opts, cluster, m2, store)
    m2.assign(T0)
    assert ranges_of(again.next_offsets(again.initial_offsets(), None)) == {T0: (100, 107)}


def test_the_table_wins_over_the_group_and_a_start_never_moves_a_committed_offset() -> None:
    cluster, store = FakeCluster({"t": 2}), FakeStore({T0: 40})
    cluster.produce(T0, 100)
    cluster.produce(T1, 100)
    member = FakeMember()
    member.group_offsets.update({T0: 90, T1: 60})
    d = driver(with_table(startingOffsets="latest"), cluster, member, store)
    member.assign(T0, T1)
    start = d.initial_offsets()
    assert start.positions == {T0: 40, T1: 60}
    # Nothing landed: no start was committed over the group's offsets (the table's 40 is committed
    # once the driver follows the table, as before).
    assert all(commit.get(T1, 60) == 60 for commit in member.commits)


def test_the_group_follows_the_table_at_the_next_plan_after_a_batch_lands() -> None:
    cluster, store = FakeCluster({"t": 1}), FakeStore()
    cluster.produce(T0, 30)
    member = FakeMember()
    d = driver(with_table(), cluster, member, store)
    member.assign(T0)
    batch = d.next_offsets(d.initial_offsets(), None)
    assert ranges_of(batch) == {T0: (0, 30)}
    d.on_batch_running(batch)  # type: ignore[arg-type]
    store.land(batch)  # type: ignore[arg-type]
    # Spark plans again (no new data: no batch, so Spark never calls commit for this batch).
    assert d.next_offsets(batch, None) is None  # type: ignore[arg-type]
    assert member.group_offsets.get(T0) == 30, "the group's offset does not follow the batch that landed"


def test_without_a_table_the_group_follows_the_previous_batch_end_at_the_next_plan() -> None:
    cluster = FakeCluster({"t": 1})
    cluster.produce(T0, 30)
    member = FakeMember()
    d = driver(options(), cluster, member)
    member.assign(T0)
    batch = d.next_offsets(d.initial_offsets(), None)
    assert ranges_of(batch) == {T0: (0, 30)}
    assert d.next_offsets(batch, None) is None  # type: ignore[arg-type]
    assert member.group_offsets.get(T0) == 30


def test_two_new_queries_starting_together_at_latest_both_start_at_latest() -> None:
    # Each gets partitions no one positioned; the other's committed starts do not make it "resumed".
    cluster, store = FakeCluster({"t": 2}), FakeStore()
    cluster.produce(T0, 100)
    cluster.produce(T1, 100)
    opts = with_table(startingOffsets="latest")
    m1 = FakeMember()
    m2 = second_member(m1)
    q1, q2 = driver(opts, cluster, m1, store), driver(opts, cluster, m2, store)
    m1.assign(T0)
    m2.assign(T1)
    assert q1.initial_offsets().positions == {T0: 100}
    assert m1.group_offsets == {T0: 100}
    assert q2.initial_offsets().positions == {T1: 100}


def test_a_stale_start_is_never_committed_over_a_partition_that_came_back() -> None:
    # Q1 positions T0 and loses it before anything lands; Q2 lands 100..105; T0 comes back to Q1.
    cluster, store = FakeCluster({"t": 1}), FakeStore()
    cluster.produce(T0, 100)
    opts = with_table(startingOffsets="latest")
    m1 = FakeMember()
    q1 = driver(opts, cluster, m1, store)
    m1.assign(T0)
    q1_start = q1.initial_offsets()
    m1.revoke(T0)
    m2 = second_member(m1)
    q2 = driver(opts, cluster, m2, store)
    m2.assign(T0)
    cluster.produce(T0, 5)
    batch = q2.next_offsets(q2.initial_offsets(), None)
    assert ranges_of(batch) == {T0: (100, 105)}
    store.land(batch)  # type: ignore[arg-type]
    assert q2.next_offsets(batch, None) is None  # type: ignore[arg-type]
    assert m1.group_offsets[T0] == 105
    m2.revoke(T0)
    m1.assign(T0)
    assert q1.next_offsets(q1_start, None) is None
    m1.revoke(T0)
    assert m1.group_offsets[T0] == 105, "a stale start moved the group's offset back"


def test_every_client_gets_a_client_id_naming_the_connector_and_group_unless_the_user_set_one() -> None:
    from kafka_group.config.client_config import member_config, reader_config, with_client_id

    servers = {"bootstrap.servers": "127.0.0.1:9092"}
    assert member_config(servers, "orders")["client.id"] == "pyspark-kafka-group-orders-driver"
    assert reader_config(servers, "orders")["client.id"] == "pyspark-kafka-group-orders-reader"
    assert reader_config(servers, None)["client.id"] == "pyspark-kafka-group-reader"
    assert with_client_id(servers, "orders", "admin")["client.id"] == "pyspark-kafka-group-orders-admin"
    mine = {**servers, "client.id": "billing"}
    assert member_config(mine, "orders")["client.id"] == "billing"
    assert reader_config(mine, "orders")["client.id"] == "billing"
    assert with_client_id(mine, "orders", "admin")["client.id"] == "billing"


def test_without_a_table_sparks_commit_of_a_batch_never_moves_the_group_back_over_a_repositioned_partition(
) -> None:
    """Review of issue 26: batch N read t-0 0..50; t-0 left, another member moved the group to 90, t-0 came
    back and batch N+1 was positioned at 90. Spark's commit(N), which comes after planning N+1, must not
    commit N's end (50) over the group's 90: the next owner would read 50..90 again."""
    cluster = FakeCluster({"t": 1})
    cluster.produce(T0, 100)
    member = FakeMember()
    query = driver(options(startingOffsets="earliest"), cluster, member, None)
    member.assign(T0)
    batch_n = query.next_offsets(query.initial_offsets(), 50)
    assert ranges_of(batch_n) == {T0: (0, 50)}
    assert batch_n is not None
    query.on_batch_running(batch_n)
    member.revoke(T0)
    member.group_offsets[T0] = 90
    member.assign(T0)
    assert ranges_of(query.next_offsets(batch_n, None)) == {T0: (90, 100)}
    query.on_batch_committed(batch_n)
    assert member.group_offsets[T0] == 90, member.commits


def test_a_revoke_arriving_on_the_thread_that_holds_the_commit_bookkeeping_does_not_deadlock() -> None:
    """SIGTERM runs its handler on the main thread, possibly while that thread is inside
    GroupCommits.positioned/landed; the handler's close() fires the revoke callback, which calls
    GroupCommits.revoked on the same thread. Emulated by revoking from inside positioned()."""
    import threading

    from kafka_group.group.group_commits import GroupCommits

    commits = GroupCommits(None)
    finished = threading.Event()

    def owned_then_revoked() -> "frozenset[TopicPartition]":
        commits.revoked([T0])  # re-entered on the same thread, as a signal handler would
        return frozenset({T0})

    def run() -> None:
        commits.positioned({T0: 5}, set(), owned_then_revoked)
        finished.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(10)
    assert finished.is_set(), "GroupCommits deadlocked on its own lock"


def test_with_a_table_positioning_partitions_the_table_holds_does_not_need_the_group_coordinator() -> None:
    """Review of issue 26: positioning asked the coordinator for every new partition, so a coordinator
    that does not answer (moving, restarting) failed the query even where the table holds every position."""
    from kafka_group.errors import GroupMembershipError

    class CoordinatorDown(FakeMember):
        def committed(self, partitions: Iterable[TopicPartition], timeout_s: float) -> Dict[TopicPartition, int]:
            if list(partitions):
                raise GroupMembershipError("the group coordinator did not answer")
            return {}

    cluster, store = FakeCluster({"t": 1}), FakeStore()
    cluster.produce(T0, 10)
    store.table[T0] = 4
    member = CoordinatorDown()
    query = driver(with_table(startingOffsets="earliest"), cluster, member, store)
    member.assign(T0)
    assert ranges_of(query.next_offsets(query.initial_offsets(), None)) == {T0: (4, 10)}


def test_a_planning_call_that_outlives_the_final_commit_commits_nothing_after_it() -> None:
    """SIGTERM does not stop the planning call it interrupted: the close's final commit of the table's positions
    must stay the last one the group gets, whatever positions that call read before."""
    from kafka_group.group.group_commits import GroupCommits

    member, store = FakeMember(), FakeStore()
    member.assign(T0)
    commits = GroupCommits(member)
    store.table[T0] = 9
    commits.final(store, frozenset({T0}))
    commits.landed({T0: 4})  # read before the table moved to 9, committed after the final commit
    assert member.commits[-1] == {T0: 9}, member.commits


def test_an_available_now_run_settling_after_the_final_commit_commits_nothing_after_it() -> None:
    """The same for the planning call that ends an AvailableNow run (``settle``), which waits for the group."""
    from kafka_group.group.group_commits import GroupCommits

    member, store = FakeMember(), FakeStore()
    member.assign(T0)
    commits = GroupCommits(member)
    store.table[T0] = 9
    commits.final(store, frozenset({T0}))
    commits.settle({T0: 4})
    assert member.commits[-1] == {T0: 9}, member.commits
