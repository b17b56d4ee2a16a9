"""A member joining while another's batch is running: the revoke waits for that batch to land.

Issue 13, finding 2: batch N's in-flight ranges were dropped when Spark committed
batch N-1 (which it does after planning N), so in steady state a revoke returned
at once and the new owner planned, and read, the offsets batch N was still
writing.
"""

from __future__ import annotations

import pathlib
import time

import pytest
from deltalake import DeltaTable

from tests.support import BackgroundProducer, Cluster, GroupQueries, MakeTopic, unique_name, wait_for

pytestmark = pytest.mark.integration


#: How long query b gets to plan a partition it must not own yet (see the test): well under revokeTimeoutMs.
REVOKE_WINDOW_S = 30


def _plans(log: str) -> int:
    return log.count("kafka_group.source_driver: planned ")


def test_second_query_joining_mid_batch_waits_and_nothing_is_read_twice(
    kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    topic = make_topic(4)
    hold = tmp_path / "hold"
    hold.touch()
    producer = BackgroundProducer(kafka.bootstrap_servers, topic, 4, per_tick=0)
    producer.produce(30)
    with GroupQueries(kafka.bootstrap_servers, topic, unique_name("group"), tmp_path, max_offsets=40) as queries:
        # Query a lands batches 0 and 1; batch 2 (planned before Spark commits batch 1) waits while `hold` exists.
        first = queries.start("a", 1200, extra=["--hold-file", str(hold), "--hold-from-batch", "2",
                                                "--record-reads", str(tmp_path / "reads-a.txt")])
        wait_for(lambda: (tmp_path / "table" / "_delta_log").exists() and DeltaTable(str(queries.table)).version() >= 1
                 and _plans(queries.log("a")) >= 3, "query a's batch 2 to be planned and held", 300)
        second = queries.start("b", 1200, extra=["--record-reads", str(tmp_path / "reads-b.txt")])
        wait_for(lambda: "revoke" in queries.log("a") or second.poll() is not None,
                 "the group to start moving partitions to query b", 300)
        producer.produce(10)  # something for b to plan once it owns partitions
        # A negative window, the only honest form here: no event marks "b would have planned by now". Had the
        # revoke returned at once, b would own partitions within a join round (a few seconds) and plan them at
        # its next trigger; while the revoke waits for the held batch (up to revokeTimeoutMs, 60 s by default,
        # counted from the revoke's start, before this window), b owns nothing and plans nothing.
        window_end = time.monotonic() + REVOKE_WINDOW_S
        while time.monotonic() < window_end and _plans(queries.log("b")) == 0 and second.poll() is None:
            time.sleep(0.5)
        assert _plans(queries.log("b")) == 0, ("query b planned while query a's revoke waited for its running batch:\n"
                                               + queries.log("b")[-4000:])
        hold.unlink()

        def settled() -> bool:
            assert first.poll() is None, "query a failed:\n" + queries.log("a")[-4000:]
            assert second.poll() is None, "query b failed:\n" + queries.log("b")[-4000:]
            return queries.landed() == producer.expected()

        wait_for(settled, "every record exactly once with both queries running", 300)
        assert queries.wrote(second), "query b landed nothing"
        read_twice = sorted(key for key, n in queries.reads().items() if n > 1)
        assert not read_twice, f"records read by both queries: {read_twice[:12]}"
    assert max(queries.landed().values()) == 1
