"""Issue 26, items 1 and 2, on Apache Kafka: what the group's committed offsets say.

1. A query that joins a running group at ``startingOffsets=latest`` continues the partitions it
   takes over from where the group positioned them: nothing produced meanwhile is skipped.
2. Kafka's own lag tool (``kafka-consumer-groups --describe``) sees the last batch that landed,
   while the query runs and after an AvailableNow run, under a client id naming the connector.
"""

from __future__ import annotations

import pathlib
import subprocess
from collections import Counter
from typing import TYPE_CHECKING, Dict

import pytest

from tests.support import (
    BROKER_ENGINE,
    REPO,
    Cluster,
    GroupQueries,
    MakeTopic,
    OffsetCollector,
    delta_query_command,
    describe_group,
    group_stream,
    produce,
    run_available_now,
    unique_name,
    wait_for,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(BROKER_ENGINE != "kafka", reason="Kafka's own tools run against Apache Kafka"),
]


def test_a_query_joining_at_latest_continues_where_the_group_positioned_the_partitions(
    kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    servers, topic = kafka.bootstrap_servers, make_topic(4)
    produce(servers, topic, {p: 50 for p in range(4)})  # before Q1 starts: not read (latest)
    with GroupQueries(servers, topic, unique_name("group"), tmp_path, max_offsets=10_000) as queries:
        # Q1's next trigger is far away: it plans nothing more unless the test stops it.
        q1 = queries.start("q1", 900, options=["startingOffsets=latest"], extra=["--trigger-seconds", "600"])
        wait_for(lambda: (queries.checkpoint("q1") / "commits" / "0").exists(), "Q1's first (empty) batch", 180)
        produce(servers, topic, {p: 100 for p in range(4)}, start=50)
        # Q2 (its own checkpoint, the same table) joins and takes partitions over before Q1 plans again.
        q2 = queries.start("q2", 900, options=["startingOffsets=latest"])
        wait_for(lambda: "positioned newly owned partitions: " + topic in queries.log("q2"),
                 "Q2 to take partitions over", 300)
        # Q1 leaves before it planned again: Q2 takes the rest over too (a member's close, not a rebalance).
        queries.stop_file("q1").touch()
        want = Counter({(p, o): 1 for p in range(4) for o in range(50, 150)})

        def missing() -> Dict[int, int]:
            landed = queries.landed()
            return {p: sum(1 for o in range(50, 150) if (p, o) not in landed) for p in range(4)}

        try:
            wait_for(lambda: queries.landed() == want, "every record produced after Q1's start to land", 180)
        except AssertionError as timed_out:
            raise AssertionError(f"{timed_out}; records never landed, by partition: {missing()}; "
                                 f"rows by writer: {Counter(pid for _, _, pid in queries.rows())} "
                                 f"(Q1 pid {q1.pid}, Q2 pid {q2.pid})") from None
        assert queries.wrote(q2) and not queries.wrote(q1)
        queries.stop_file("q2").touch()
        q1.wait(120)
        q2.wait(120)


def _current(rows: Dict[int, Dict[str, str]]) -> Dict[int, str]:
    return {p: row["CURRENT-OFFSET"] for p, row in sorted(rows.items())}


def test_kafkas_lag_tool_sees_the_last_batch_while_the_query_runs(
    kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    servers, topic, group = kafka.bootstrap_servers, make_topic(4), unique_name("group")
    produce(servers, topic, {p: 1000 for p in range(4)})
    with GroupQueries(servers, topic, group, tmp_path, max_offsets=100_000) as queries:
        query = queries.start("q", 600)
        wait_for(lambda: len(queries.rows()) == 4000, "the 4,000 records to land", 180)
        seen: Dict[int, Dict[str, str]] = {}

        def caught_up() -> bool:
            seen.clear()
            seen.update(describe_group(servers, group))
            return _current(seen) == {p: "1000" for p in range(4)}

        try:
            # Within a trigger or two of the batch landing (500 ms triggers); the bound is generous.
            wait_for(caught_up, "the group's committed offsets to reach the end offsets", 180, interval_s=2)
        except AssertionError as timed_out:
            raise AssertionError(f"{timed_out}; kafka-consumer-groups --describe: {seen}") from None
        assert all(row["LAG"] == "0" for row in seen.values()), seen
        assert {row["CLIENT-ID"] for row in seen.values()} == {f"pyspark-kafka-group-{group}-driver"}, seen
        assert queries.landed() == Counter({(p, o): 1 for p in range(4) for o in range(1000)})
        queries.stop_file("q").touch()
        query.wait(120)


def test_an_available_now_run_leaves_the_group_at_what_it_landed(
    kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    servers, topic, group = kafka.bootstrap_servers, make_topic(4), unique_name("group")
    produce(servers, topic, {p: 750 for p in range(4)})
    command = delta_query_command(servers, topic, group, tmp_path / "table", tmp_path / "checkpoint",
                                  "--available-now", "--max-offsets", "1500")
    with open(tmp_path / "run.log", "wb") as log:
        done = subprocess.run(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=log, timeout=600, check=False)
    assert done.returncode == 0, (tmp_path / "run.log").read_text()[-3000:]
    rows = describe_group(servers, group)
    assert _current(rows) == {p: "750" for p in range(4)}, f"kafka-consumer-groups --describe: {rows}"
    assert sum(int(row["CURRENT-OFFSET"]) for row in rows.values()) == 3000


def test_an_available_now_run_without_a_table_leaves_the_group_at_its_last_batch(
    spark: "SparkSession", kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    servers, topic, group = kafka.bootstrap_servers, make_topic(4), unique_name("group")
    produce(servers, topic, {p: 750 for p in range(4)})
    collected = OffsetCollector()
    stream = group_stream(spark, servers, topic, group, maxOffsetsPerTrigger="1500").load()
    run_available_now(stream.writeStream.foreachBatch(collected).option("checkpointLocation", str(tmp_path / "chk")))
    assert collected.landed() == Counter({(p, o): 1 for p in range(4) for o in range(750)})
    rows: Dict[int, Dict[str, str]] = {}

    def committed_all() -> bool:
        rows.clear()
        rows.update(describe_group(servers, group))
        return _current(rows) == {p: "750" for p in range(4)}

    try:
        # The runner leaves the group when Spark ends it; its commits are sent by then.
        wait_for(committed_all, "the group's committed offsets to sum to 3,000", 180, interval_s=2)
    except AssertionError as timed_out:
        raise AssertionError(f"{timed_out}; kafka-consumer-groups --describe: {rows}") from None
