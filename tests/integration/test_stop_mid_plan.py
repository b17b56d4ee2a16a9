"""A query stopped while its source's planning call holds a lock its close needs still leaves its group.

Spark ends a Python streaming source's runner with SIGTERM when the query stops, and Python runs the handler on
the runner's main thread, the one that serves Spark's planning calls. The handler closes the source: its last
commits read the offsets table's positions, whose Delta transaction versions one lock guards, a lock that is not
reentrant; and planning reads them at every call. A SIGTERM landing while the main thread was inside that lock
made the close wait for ever on its own thread's lock: the process ended at its bound (45 s) without leaving,
and the group kept the member until its session timed out. For that long nobody read its partitions (seen in CI:
a stopped query's partitions reached the other query only after the session timeout).

The fault point ``delta.reading_transactions`` holds every read of those versions on a process's main thread for
a few seconds (the development hook's sleep), so the runner's main thread is there when the query stops.
"""

from __future__ import annotations

import pathlib
import re

import pytest

from tests.support import (
    Cluster,
    GroupQueries,
    MakeTopic,
    RECORD_REBALANCE,
    events_file,
    produce,
    recorded,
    unique_name,
    wait_for,
)

pytestmark = pytest.mark.integration

#: Seconds each read of the transaction versions is held at the fault point (each planning call reads them).
HELD_S = 5


def runner_pid(log: str) -> int:
    """The source runner's process id: the one that logs the plans."""
    found = re.search(r"\[pid (\d+)\] kafka_group\.source_driver: planned", log)
    assert found is not None, log[-4000:]
    return int(found.group(1))


def test_a_query_stopped_while_planning_inside_the_offsets_lock_leaves_its_group(
    kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = make_topic(2)
    group = unique_name("group")
    events_file(group).unlink(missing_ok=True)
    produce(kafka.bootstrap_servers, topic, {0: 40, 1: 40})
    monkeypatch.setenv("KAFKA_GROUP_FAULT_POINT", "delta.reading_transactions")
    monkeypatch.setenv("KAFKA_GROUP_FAULT_SLEEP_S", str(HELD_S))
    monkeypatch.setenv("KAFKA_GROUP_FAULT_THREAD", "MainThread")  # planning, never the threads that close
    options = [f"rebalanceListener={RECORD_REBALANCE}"]
    with GroupQueries(kafka.bootstrap_servers, topic, group, tmp_path, max_offsets=20) as queries:
        query = queries.start("a", 900, options)
        wait_for(lambda: queries.wrote(query) or query.poll() is not None, "the query to land a batch", 400)
        assert query.poll() is None, queries.log("a")[-4000:]
        member = recorded(group)[-1]["member_id"]
        assert recorded(group)[-1]["owned"] == [0, 1], recorded(group)

        pid = runner_pid(queries.log("a"))
        held = f"fault point delta.reading_transactions reached in pid {pid}: sleeping"

        def holds() -> int:
            return queries.log("a").count(held)

        before = holds()
        wait_for(lambda: holds() > before, "the runner's planning to enter the offsets lock again", 120)
        queries.stop_file("a").touch()  # SIGTERM reaches the runner while its main thread sits in the lock
        assert query.wait(300) == 0, queries.log("a")[-4000:]

        def gave_up_its_partitions() -> bool:
            mine = [e for e in recorded(group) if e["member_id"] == member]
            return bool(mine[-1]["kind"] == "revoke" and mine[-1]["owned"] == [])

        # Leaving fires the revoke (the listener records it) before the group is told; a process that ended
        # without leaving never records it, and the group drops its member only when its session times out.
        wait_for(gave_up_its_partitions, "the stopped query's member to give its partitions up and leave", 90)
