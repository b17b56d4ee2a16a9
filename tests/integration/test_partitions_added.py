"""Partitions added with CreatePartitions on real Apache Kafka, while a query runs and while it is
stopped: every record of the new partitions lands exactly once (issue 13 finding 5).

The mock cluster has no CreatePartitions, so these tests need Apache Kafka. The
stopped case uses ``startingOffsets=latest`` (the default): partitions first seen
after a restart must still start at their earliest offset, as in Spark's Kafka
source.
"""

from __future__ import annotations

import pathlib
from collections import Counter
from typing import Any, Dict, Optional, Tuple

import pytest
from pyspark.sql import SparkSession

from pyspark_kafka_group import DeltaSink
from tests.support import long_tier, Cluster, OffsetCollector, apache, group_stream, produce, table_offsets, unique_name, wait_for

pytestmark = pytest.mark.integration

Key = Tuple[int, int]  # (partition, offset)


@pytest.fixture(autouse=True)
def _real_kafka(kafka: Cluster) -> None:
    if kafka.engine != "kafka":
        pytest.skip("needs Apache Kafka: the mock cluster has no CreatePartitions")


class Landing:
    """Where a test query lands its rows: a collecting foreachBatch, or DeltaSink into ``offsets.table``."""

    def __init__(self, tmp_path: pathlib.Path, with_table: bool) -> None:
        self.table: Optional[pathlib.Path] = tmp_path / "table" if with_table else None
        self.checkpoint = tmp_path / "chk"
        self._collector = OffsetCollector()

    def options(self) -> Dict[str, str]:
        # Partitions added to a topic reach the group member within this interval.
        options = {"kafka.topic.metadata.refresh.interval.ms": "1000", "startingOffsets": "latest"}
        if self.table is not None:
            options["offsets.table"] = str(self.table)
        return options

    def sink(self) -> Any:
        if self.table is not None:
            return DeltaSink(str(self.table))

        return self._collector

    def landed(self) -> Counter[Key]:
        if self.table is None:
            return self._collector.landed()
        return table_offsets(self.table)

    def start(self, spark: SparkSession, servers: str, topic: str, group: str, available_now: bool) -> Any:
        writer = (group_stream(spark, servers, topic, group, **self.options()).load()
                  .writeStream.foreachBatch(self.sink()).option("checkpointLocation", str(self.checkpoint)))
        if available_now:
            return writer.trigger(availableNow=True).start()
        return writer.trigger(processingTime="500 milliseconds").start()


def offsets(partitions: Dict[int, range]) -> Counter[Key]:
    return Counter((p, o) for p, r in partitions.items() for o in r)


def alive(query: Any) -> bool:
    """True while ``query`` runs; fails naming its error once it stopped."""
    if not query.isActive:
        raise AssertionError(f"the query stopped: {query.exception()}")
    return True


@pytest.mark.parametrize("with_table", [False, True], ids=["foreachBatch", "offsets.table"])
def test_partitions_added_while_the_query_runs_land_once(
    spark: SparkSession, kafka: Cluster, tmp_path: pathlib.Path, with_table: bool
) -> None:
    servers, topic, group = kafka.bootstrap_servers, unique_name("grow"), unique_name("group")
    kafka.create_topic(topic, 2)
    landing = Landing(tmp_path, with_table)
    query = landing.start(spark, servers, topic, group, available_now=False)
    try:
        wait_for(lambda: query.lastProgress is not None, "the query's first trigger", 180)
        produce(servers, topic, {0: 10, 1: 10})
        wait_for(lambda: alive(query) and landing.landed() == offsets({0: range(10), 1: range(10)}),
                 "the first records", 180)
        apache(kafka).create_partitions(topic, 4)
        produce(servers, topic, {0: 10, 1: 10, 2: 15, 3: 15}, start=10)  # before the member sees 2 and 3
        want = offsets({0: range(20), 1: range(20), 2: range(15), 3: range(15)})
        wait_for(lambda: alive(query) and sum(landing.landed().values()) >= sum(want.values()),
                 "the records of the added partitions", 180)
        alive(query)
    finally:
        query.stop()
    assert landing.landed() == want
    print(f"landed {sum(want.values())} records once, 30 of them in partitions added while running")


@pytest.mark.parametrize("with_table", [long_tier(False, id="foreachBatch"), pytest.param(True, id="offsets.table")])
def test_partitions_added_while_the_query_is_stopped_start_at_earliest(
    spark: SparkSession, kafka: Cluster, tmp_path: pathlib.Path, with_table: bool
) -> None:
    servers, topic, group = kafka.bootstrap_servers, unique_name("grow"), unique_name("group")
    kafka.create_topic(topic, 2)
    produce(servers, topic, {0: 10, 1: 10})  # before the query: startingOffsets=latest skips these
    landing = Landing(tmp_path, with_table)
    query = landing.start(spark, servers, topic, group, available_now=False)
    try:
        wait_for(lambda: query.lastProgress is not None, "the query's first trigger", 180)
        produce(servers, topic, {0: 10, 1: 10}, start=10)
        wait_for(lambda: alive(query) and landing.landed() == offsets({0: range(10, 20), 1: range(10, 20)}),
                 "the records produced after the start", 180)
    finally:
        query.stop()
    apache(kafka).create_partitions(topic, 4)
    produce(servers, topic, {0: 5, 1: 5, 2: 12, 3: 12}, start=20)
    query = landing.start(spark, servers, topic, group, available_now=True)  # restart from the checkpoint
    try:
        assert query.awaitTermination(300), "the AvailableNow run did not end"
        assert query.exception() is None
    finally:
        query.stop()
    landed = landing.landed()
    want = offsets({0: range(10, 25), 1: range(10, 25), 2: range(12), 3: range(12)})
    missing = sorted((want - landed).elements())
    print(f"after the restart: {sum(landed.values())} landed, missing {len(missing)}: {missing[:6]}...")
    assert landed == want
