"""Issue 33, finding 4: where a partition starts, for every combination of what the offsets table, the
group's committed offsets and Spark's checkpoint know of it, and ``startingOffsets``.

The rows are the table of docs/exactly-once.md (*Where a partition starts*). :func:`expected_start` is that
table, written once; every combination is checked against it through
:func:`~kafka_group.plan.positioning.position_new` (the decisions :func:`known_positions`,
:func:`topics_read`, :func:`starting_spec`, :func:`resolve_positions` read through in-memory collaborators),
then the durable-start rule through the source driver: the start chosen for a partition the table has not
seen is recorded in the table.
"""

from __future__ import annotations

import functools
import itertools
import logging
from typing import Dict, Optional, Tuple

import pytest

from kafka_group.offsets import EARLIEST, LATEST, BatchOffsets, StartingOffsets, TopicPartition
from kafka_group.plan.positioning import position_new, starting_spec, topics_read
from tests.unit.driver_fakes import T0, T1, T2, FakeCluster, FakeMember, FakeStore, driver, options, with_table

P = T1  # the partition whose start each case decides; T0 is another partition of its topic
EARLIEST_P, LATEST_P = 5, 50  # t-1's earliest (after retention) and latest offsets
TABLE_P, GROUP_P, CHECKPOINT_P = 20, 30, 40  # t-1's position in the table, the group, the checkpoint
JSON_P, TIME_P = 33, 12  # where startingOffsets JSON names t-1, and its first offset at the time asked

#: What the offsets table holds: t-1's position; a position of t-0 that is not a recorded start (the table
#: reads topic t); only t-0's recorded start (another new query positioned it, nothing landed); nothing;
#: no offsets.table at all; t-0's recorded start with topic t's count then 1 (P was added since: nothing landed,
#: or the offsets tool reset t-0 to its start); t-0 landed past its start with t's count then 2 (P existed).
TABLES = ("has P", "reads the topic", "only recorded starts", "nothing", "no offsets.table",
          "counted before P", "counted with P, t-0 landed")
GROUPS = ("has P", "none or expired")
CHECKPOINTS = ("has P", "other partitions only", "none or lost")
STARTING = ("earliest", "latest", "json", "timestamps")


def expected_start(table: str, group: str, checkpoint: str, appeared: bool, starting: str) -> Tuple[int, str]:
    """docs/exactly-once.md's table: t-1's start and the row that decides it."""
    if table == "has P":
        return TABLE_P, "1"
    if group == "has P":
        return (max(CHECKPOINT_P, GROUP_P), "2") if checkpoint == "has P" else (GROUP_P, "2")
    if checkpoint == "has P":
        return CHECKPOINT_P, "3"
    if checkpoint == "other partitions only":
        return EARLIEST_P, "4"
    if appeared:
        return EARLIEST_P, "5"
    if table in ("reads the topic", "counted before P"):
        return EARLIEST_P, "6"
    return {"earliest": EARLIEST_P, "latest": LATEST_P, "json": JSON_P, "timestamps": TIME_P}[starting], "7"


def _starting(starting: str) -> Dict[str, str]:
    return {"earliest": {"startingOffsets": "earliest"}, "latest": {"startingOffsets": "latest"},
            "json": {"startingOffsets": f'{{"t":{{"1":{JSON_P}}}}}'},
            "timestamps": {"startingOffsetsByTimestamp": f'{{"t":{{"0":0,"1":{TIME_P * 10}}}}}'}}[starting]


def _position(table: str, group: str, checkpoint: str, appeared: bool, starting: str) -> Optional[int]:
    cluster = FakeCluster({"t": 2})
    cluster.produce(T0, 60)
    cluster.produce(P, LATEST_P)
    cluster.earliest[P] = EARLIEST_P
    cluster.timestamps[T0] = [i * 10 for i in range(60)]
    cluster.timestamps[P] = [i * 10 for i in range(LATEST_P)]
    store: Optional[FakeStore] = None if table == "no offsets.table" else FakeStore()
    if store is not None and table == "has P":
        store.table[P] = TABLE_P
    if store is not None and table in ("reads the topic", "only recorded starts", "counted before P",
                                       "counted with P, t-0 landed"):
        store.table[T0] = 10
        if table in ("only recorded starts", "counted before P"):
            store.recorded_starts[T0] = 10
        if table.startswith("counted"):
            store.recorded_starts[T0] = 3 if table == "counted with P, t-0 landed" else 10
            store.recorded_counts["t"] = 1 if table == "counted before P" else 2
    member = FakeMember()
    if group == "has P":
        member.group_offsets[P] = GROUP_P
    ckpt = {"has P": {T0: 10, P: CHECKPOINT_P}, "other partitions only": {T0: 10}, "none or lost": {}}[checkpoint]
    opts = (options if store is None else with_table)(**_starting(starting))
    known_at_start = {T0} if appeared else {T0, P}
    spec = functools.partial(starting_spec, known_at_start=known_at_start, starting_offsets=opts.starting_offsets)
    positioned = position_new([P], ckpt, cluster=cluster, store=store, member=member, timeout_s=1.0, spec=spec,
                              on_no_match=opts.starting_offsets.on_no_match)
    return positioned.resolved.get(P)


CASES = list(itertools.product(TABLES, GROUPS, CHECKPOINTS, (False, True), STARTING))


@pytest.mark.parametrize("table,group,checkpoint,appeared,starting", CASES,
                         ids=["|".join([a, b, c, "appeared since" if d else "existed", e]) for a, b, c, d, e in CASES])
def test_every_combination_starts_where_the_table_of_rules_says(table: str, group: str, checkpoint: str,
                                                              appeared: bool, starting: str) -> None:
    want, row = expected_start(table, group, checkpoint, appeared, starting)
    assert _position(table, group, checkpoint, appeared, starting) == want, f"row {row}"


def test_every_row_of_the_table_is_reached() -> None:
    assert {expected_start(*case)[1] for case in CASES} == {"1", "2", "3", "4", "5", "6", "7"}


# -- the pure decisions ----------------------------------------------------------------------------------------


def test_a_topic_is_read_by_a_position_that_is_not_its_recorded_start() -> None:
    other = TopicPartition("u", 0)
    assert topics_read({T0: 10, other: 3}, {}) == {"t", "u"}  # a table from before recorded starts: every one
    assert topics_read({T0: 10, other: 3}, {T0: 10}) == {"u"}  # t-0 is only a start nothing moved
    assert topics_read({T0: 12}, {T0: 10}) == {"t"}  # something of t-0 landed since its start
    assert topics_read({}, {}) == frozenset()


def test_a_topic_the_table_reads_resumes_like_a_checkpoint() -> None:
    # position_new asks starting_spec with resumed=True for such a topic's partitions: startingOffsets is ignored.
    spec = StartingOffsets(LATEST, {P: 7})
    assert starting_spec(P, True, known_at_start={T0, P}, starting_offsets=spec) == EARLIEST
    assert starting_spec(P, False, known_at_start={T0, P}, starting_offsets=spec) == 7


def test_the_new_partition_rule_is_logged_naming_the_partition_and_the_option(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kafka_group"):
        assert _position("reads the topic", "none or expired", "none or lost", False, "latest") == EARLIEST_P
    [message] = [r.getMessage() for r in caplog.records if "added since" in r.getMessage()]
    assert "t-1" in message and "'startingOffsets'" in message, message


def test_no_new_partition_warning_where_it_would_have_started_at_earliest_anyway(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kafka_group"):
        _position("reads the topic", "none or expired", "none or lost", False, "earliest")
    assert not [r for r in caplog.records if "added since" in r.getMessage()]


# -- the reported case, and where a start is made durable -------------------------------------------------------


def test_issue_33_a_partition_added_while_stopped_starts_at_earliest_on_a_new_checkpoint() -> None:
    """The table has t-0 at 100; t-1 was added while the query was stopped and got 50 records; the query
    restarts on a new checkpoint with the default startingOffsets=latest. t-1 must start at 0."""
    cluster, member, store = FakeCluster({"t": 2}), FakeMember(), FakeStore({T0: 100})
    cluster.produce(T0, 100)
    cluster.produce(T1, 50)
    member.group_offsets[T0] = 100  # what the last run committed; nothing for t-1, which did not exist
    query = driver(with_table(startingOffsets="latest"), cluster, member, store)
    member.assign(T0, T1)
    start = query.initial_offsets()
    assert dict(start.positions) == {T0: 100, T1: 0}, f"records [0, 50) of t-1 would never land: {start.positions}"


def test_a_start_is_recorded_in_the_table_when_positioned_and_survives_the_checkpoint_and_the_group() -> None:
    cluster, store = FakeCluster({"t": 2}), FakeStore({T0: 100})
    store.recorded_starts[T0] = 100  # the table has read nothing of t: t-1 follows startingOffsets
    cluster.produce(T0, 100)
    cluster.produce(T1, 50)
    member = FakeMember()
    query = driver(with_table(startingOffsets="latest"), cluster, member, store)
    member.assign(T0, T1)
    assert dict(query.initial_offsets().positions) == {T0: 100, T1: 50}
    assert store.holds == [(T1, 50)] and store.recorded_starts[T1] == 50
    # The checkpoint is lost, the group's offsets expire, t-1 gets records: a new query starts where it did.
    cluster.produce(T1, 7)
    again = FakeMember()
    query = driver(with_table(startingOffsets="latest"), cluster, again, store)
    again.assign(T0, T1)
    assert dict(query.initial_offsets().positions) == {T0: 100, T1: 50}


def test_a_start_positioned_before_the_table_exists_is_recorded_at_the_first_plan_after_it_does() -> None:
    cluster, member, store = FakeCluster({"t": 2}), FakeMember(), FakeStore()
    store.exists = False
    cluster.produce(T0, 10)
    cluster.produce(T1, 10)
    query = driver(with_table(startingOffsets="latest"), cluster, member, store)
    member.assign(T0, T1)
    start = query.initial_offsets()
    assert store.holds == []
    cluster.produce(T0, 5)
    batch = query.next_offsets(start, None)
    assert batch is not None and set(batch.ranges) == {T0}
    store.exists = True  # the first batch creates the table with t-0's records
    store.land(batch)
    query.next_offsets(batch, None)
    assert store.holds == [(T1, 10)], "t-1, positioned and not landed, must get its start recorded"


def test_a_start_is_never_recorded_over_a_position_the_table_has_nor_for_a_partition_revoked() -> None:
    cluster, member, store = FakeCluster({"t": 2}), FakeMember(), FakeStore()
    store.exists = False
    cluster.produce(T0, 10)
    cluster.produce(T1, 10)
    query = driver(with_table(startingOffsets="latest"), cluster, member, store)
    member.assign(T0, T1)
    start = query.initial_offsets()
    member.revoke(T1)  # its next owner records its own start
    store.exists = True
    cluster.produce(T0, 5)
    store.table[T0] = 12  # another writer landed t-0 meanwhile
    query.next_offsets(BatchOffsets(dict(start.positions), {}), None)
    assert store.holds == [] and store.table == {T0: 12}


# -- review of the fix of issue 33: the table records each topic's partition count with its first starts --------


def _new_query_at_latest_on_an_idle_topic() -> Tuple[FakeCluster, FakeStore]:
    """A new query at latest positions t-0 and t-1 at 100 (recorded in the table); the topic is idle."""
    cluster, member, store = FakeCluster({"t": 2}), FakeMember(), FakeStore()
    cluster.produce(T0, 100)
    cluster.produce(T1, 100)
    query = driver(with_table(startingOffsets="latest"), cluster, member, store)
    member.assign(T0, T1)
    assert dict(query.initial_offsets().positions) == {T0: 100, T1: 100}
    assert store.recorded_starts == {T0: 100, T1: 100}
    return cluster, store


def _restart_on_a_new_checkpoint_after_t2_was_added(cluster: FakeCluster,
                                                    store: FakeStore) -> Dict[TopicPartition, int]:
    cluster.topics["t"] = 3  # CreatePartitions while the query is stopped; t-2 gets 30 records
    cluster.produce(T2, 30)
    member = FakeMember()  # the group never had t-2 (and its other offsets expired)
    query = driver(with_table(startingOffsets="latest"), cluster, member, store)
    member.assign(T0, T1, T2)
    return dict(query.initial_offsets().positions)


def test_a_partition_added_to_a_topic_whose_table_holds_only_starts_starts_at_earliest() -> None:
    """Finding 1: t-0 and t-1 were recorded at 100 and nothing landed; t-2 was added while the query was stopped
    and the checkpoint is lost: t-2's 30 records must land (before: started at latest, as the table 'read'
    nothing of t)."""
    cluster, store = _new_query_at_latest_on_an_idle_topic()
    positions = _restart_on_a_new_checkpoint_after_t2_was_added(cluster, store)
    assert positions == {T0: 100, T1: 100, T2: 0}, f"records [0, 30) of t-2 would never land: {positions}"
    assert store.recorded_counts == {"t": 2}  # recorded with the first starts; t-2's start did not change it


def test_a_partition_added_after_a_reset_to_the_recorded_start_starts_at_earliest() -> None:
    """Finding 8: the offsets tool reset t-0 and t-1 to exactly their recorded starts after batches landed."""
    cluster, store = _new_query_at_latest_on_an_idle_topic()
    store.table.update({T0: 120, T1: 110})  # batches landed
    store.table.update({T0: 100, T1: 100})  # offsets_tool reset to the recorded starts
    positions = _restart_on_a_new_checkpoint_after_t2_was_added(cluster, store)
    assert positions[T2] == 0, f"records [0, 30) of t-2 would never land: {positions}"


def test_two_new_queries_at_latest_both_start_there_even_after_one_landed_a_batch() -> None:
    """Finding 3 (docs/exactly-once.md, Where a partition starts): Q1 lands a batch of t-0 before Q2 positions
    t-1; t-1 existed when the queries started, so Q2, a new query at latest, starts it at latest."""
    cluster, store = FakeCluster({"t": 2}), FakeStore()
    cluster.produce(T0, 100)
    cluster.produce(T1, 100)
    opts = with_table(startingOffsets="latest")
    m1, m2 = FakeMember(), FakeMember()
    m2.member_id = "member-2"
    m2.group_offsets = m1.group_offsets
    q1, q2 = driver(opts, cluster, m1, store), driver(opts, cluster, m2, store)
    m1.assign(T0)
    start = q1.initial_offsets()
    cluster.produce(T0, 10)
    batch = q1.next_offsets(start, None)
    assert batch is not None
    store.land(batch)  # t-0 now at 110: the table 'reads' t
    m2.assign(T1)
    assert dict(q2.initial_offsets().positions) == {T1: 100}


def test_two_new_queries_at_latest_both_start_there_when_the_first_batch_created_the_table() -> None:
    """Finding 3 where Q1 positioned t-0 before the table existed and its first batch created it."""
    cluster, store = FakeCluster({"t": 2}), FakeStore()
    store.exists = False
    cluster.produce(T0, 100)
    cluster.produce(T1, 100)
    opts = with_table(startingOffsets="latest")
    m1, m2 = FakeMember(), FakeMember()
    m2.member_id = "member-2"
    m2.group_offsets = m1.group_offsets
    q1, q2 = driver(opts, cluster, m1, store), driver(opts, cluster, m2, store)
    m1.assign(T0)
    start = q1.initial_offsets()
    cluster.produce(T0, 10)
    batch = q1.next_offsets(start, None)
    assert batch is not None
    store.exists = True
    store.land(batch)  # the first batch creates the table with t-0 at 110
    q1.next_offsets(batch, None)  # t-0 landed: only t's count (taken while the table held nothing of t) is recorded
    assert store.recorded_counts == {"t": 2} and store.holds == []
    m2.assign(T1)
    assert dict(q2.initial_offsets().positions) == {T1: 100}


def test_no_count_is_taken_for_a_topic_the_table_holds_something_of() -> None:
    """A table holding recorded starts without a count (or landed positions) never gets one for that topic: t-2,
    added since, would count as existing then."""
    cluster, member, store = FakeCluster({"t": 3}), FakeMember(), FakeStore({T0: 100, T1: 100})
    store.recorded_starts.update({T0: 100, T1: 100})
    cluster.produce(T2, 30)
    query = driver(with_table(startingOffsets="latest"), cluster, member, store)
    member.assign(T0, T1, T2)
    query.initial_offsets()
    assert store.recorded_counts == {} and store.holds == [(T2, 30)]
