"""Issue 33, finding 4, on Apache Kafka, real Spark and Delta: a lost checkpoint never skips records of a
partition the offsets table has not seen, and never moves where a partition starts.

1. The table has ``t-0``; ``t-1`` is added while the query is stopped and gets records; the query restarts
   on a new checkpoint with the default ``startingOffsets=latest``: every record of ``t-1`` lands once (it
   started at ``t-1``'s latest offset, and the records produced while stopped never landed).
2. ``t-1`` was positioned at ``latest`` and nothing of it landed; the checkpoint is lost and the group's
   offsets are gone (expired: here deleted); the restart starts ``t-1`` where the first run did (its start
   is recorded in the table), neither at its new latest offset nor at its earliest.

Both need Apache Kafka: the mock cluster has no CreatePartitions and no DeleteGroups.
"""

from __future__ import annotations

import pathlib
from collections import Counter
from typing import Any, Dict, Optional, Tuple

import pytest
from pyspark.sql import SparkSession

from pyspark_kafka_group import DeltaSink
from tests.support import Cluster, apache, group_stream, produce, table_offsets, table_positions, unique_name, wait_for

pytestmark = pytest.mark.integration

Key = Tuple[int, int]  # (partition, offset)


@pytest.fixture(autouse=True)
def _real_kafka(kafka: Cluster) -> None:
    if kafka.engine != "kafka":
        pytest.skip("needs Apache Kafka: the mock cluster has no CreatePartitions and no DeleteGroups")


def _offsets(partitions: Dict[int, range]) -> Counter[Key]:
    return Counter((p, o) for p, r in partitions.items() for o in r)


def _alive(query: Any) -> bool:
    if not query.isActive:
        raise AssertionError(f"the query stopped: {query.exception()}")
    return True


def _start(spark: SparkSession, servers: str, topic: str, group: str, table: pathlib.Path,
           checkpoint: pathlib.Path, *, available_now: bool) -> Any:
    """A query at the default startingOffsets (latest) landing into ``table`` with DeltaSink."""
    stream = group_stream(spark, servers, topic, group, startingOffsets="latest",
                          **{"offsets.table": str(table), "kafka.topic.metadata.refresh.interval.ms": "1000"})
    writer = (stream.load().writeStream.foreachBatch(DeltaSink(str(table)))
              .option("checkpointLocation", str(checkpoint)))
    if available_now:
        return writer.trigger(availableNow=True).start()
    return writer.trigger(processingTime="500 milliseconds").start()


def _restart_on_a_new_checkpoint(spark: SparkSession, servers: str, topic: str, group: str,
                                 table: pathlib.Path, checkpoint: pathlib.Path) -> None:
    query = _start(spark, servers, topic, group, table, checkpoint, available_now=True)
    try:
        assert query.awaitTermination(300), "the AvailableNow run did not end"
        assert query.exception() is None
    finally:
        query.stop()


def _delete_group(servers: str, group: str) -> None:
    """Remove the (empty) group and its committed offsets, as offsets.retention.minutes would."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": servers})

    def deleted() -> bool:
        try:
            admin.delete_consumer_groups([group], request_timeout=10)[group].result(timeout=15)
        except Exception as exc:  # still non-empty while the stopped member's session is ending
            if "GROUP_ID_NOT_FOUND" in str(exc):
                return True
            return False
        return True

    wait_for(deleted, f"group {group} to be deleted", 120, interval_s=2)


def test_a_partition_added_while_stopped_lands_whole_after_a_restart_on_a_new_checkpoint(
    spark: SparkSession, kafka: Cluster, tmp_path: pathlib.Path
) -> None:
    servers, topic, group = kafka.bootstrap_servers, unique_name("lost"), unique_name("group")
    table = tmp_path / "table"
    kafka.create_topic(topic, 1)
    query = _start(spark, servers, topic, group, table, tmp_path / "chk", available_now=False)
    try:
        wait_for(lambda: query.lastProgress is not None, "the query's first trigger", 180)
        produce(servers, topic, {0: 100})
        wait_for(lambda: _alive(query) and table_offsets(table) == _offsets({0: range(100)}), "t-0's records", 180)
    finally:
        query.stop()
    apache(kafka).create_partitions(topic, 2)
    produce(servers, topic, {0: 10}, start=100)
    produce(servers, topic, {1: 50})
    _restart_on_a_new_checkpoint(spark, servers, topic, group, table, tmp_path / "new-chk")  # the old one is lost
    landed = table_offsets(table)
    want = _offsets({0: range(110), 1: range(50)})
    missing = sorted((want - landed).elements())
    print(f"after the restart on a new checkpoint: {sum(landed.values())} landed, missing {len(missing)}: "
          f"{missing[:4]}...")
    assert landed == want


def test_a_lost_checkpoint_and_expired_group_offsets_keep_where_a_partition_started(
    spark: SparkSession, kafka: Cluster, tmp_path: pathlib.Path
) -> None:
    servers, topic, group = kafka.bootstrap_servers, unique_name("lost"), unique_name("group")
    table = tmp_path / "table"
    kafka.create_topic(topic, 2)
    produce(servers, topic, {0: 10, 1: 10})  # before the first run: startingOffsets=latest skips these
    query = _start(spark, servers, topic, group, table, tmp_path / "chk", available_now=False)
    recorded: Optional[str] = None
    try:
        wait_for(lambda: query.lastProgress is not None, "the query's first trigger", 180)
        produce(servers, topic, {0: 5}, start=10)  # t-1 gets nothing: positioned at 10, nothing lands
        wait_for(lambda: _alive(query) and table_offsets(table) == _offsets({0: range(10, 15)}), "t-0's records", 180)
        try:  # the start of t-1 is recorded at the plan after the table exists
            wait_for(lambda: table_positions(table, group, topic, 2)[1] is not None, "t-1's start in the table", 180)
        except AssertionError as not_recorded:
            recorded = str(not_recorded)
    finally:
        query.stop()
    _delete_group(servers, group)
    produce(servers, topic, {1: 7}, start=10)  # t-1's first records after its start
    _restart_on_a_new_checkpoint(spark, servers, topic, group, table, tmp_path / "new-chk")  # the old one is lost
    landed = table_offsets(table)
    want = _offsets({0: range(10, 15), 1: range(10, 17)})
    print(f"after the restart: t-1 landed {sorted(o for p, o in landed.elements() if p == 1)}")
    assert landed == want
    assert recorded is None, recorded
