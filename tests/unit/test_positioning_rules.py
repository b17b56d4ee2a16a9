"""Issue 33, finding 4: where a partition starts, for every combination of what the offsets table, the
group's committed offsets and Spark's checkpoint know of it, and ``startingOffsets``.

Each test is one row of the table in docs/exactly-once.md (*Where a partition starts*), driven through the
source driver with the in-memory fakes (the decision functions of :mod:`kafka_group.plan.positioning`, read
through :func:`~kafka_group.plan.positioning.position_new`), then the durable-start rule: the start chosen
for a partition the table has not seen is recorded in the table.
"""

from __future__ import annotations

from tests.unit.driver_fakes import T0, T1, FakeCluster, FakeMember, FakeStore, driver, with_table


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
