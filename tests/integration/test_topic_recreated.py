"""A topic deleted and recreated while the query runs."""

from __future__ import annotations

import threading
from typing import Any, List, Tuple

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from tests.support import Cluster, group_stream, produce, unique_name, wait_for

pytestmark = pytest.mark.integration


def start(spark: SparkSession, kafka: Cluster, topic: str, fail_on_data_loss: str, rows: List[Tuple[int, int, bytes]]) -> Any:
    lock = threading.Lock()

    def land(batch: Any, batch_id: int) -> None:
        found = batch.select("partition", "offset", "value").collect()
        with lock:
            rows.extend((r.partition, r.offset, bytes(r.value)) for r in found)

    return (group_stream(spark, kafka.bootstrap_servers, topic, unique_name("group"),
                         failOnDataLoss=fail_on_data_loss,
                         **{"kafka.topic.metadata.refresh.interval.ms": "1000"}).load()
            .writeStream.foreachBatch(land).trigger(processingTime="500 milliseconds").start())


def recreate_under(spark: SparkSession, kafka: Cluster, partitions: int, fail_on_data_loss: str,
                   rows: List[Tuple[int, int, bytes]]) -> Tuple[Any, str]:
    """Start a query on a topic of 30 records per partition, then delete the topic and recreate it
    with 5 records per partition (values numbered from 1000); return the running query and the topic."""
    topic = unique_name("recreated")
    kafka.create_topic(topic, partitions)
    produce(kafka.bootstrap_servers, topic, {p: 30 for p in range(partitions)})
    query = start(spark, kafka, topic, fail_on_data_loss, rows)
    try:
        wait_for(lambda: len(rows) == 30 * partitions, "the first topic's records")
        kafka.delete_topic(topic)
        kafka.create_topic(topic, partitions)
        produce(kafka.bootstrap_servers, topic, {p: 5 for p in range(partitions)}, start=1000)
    except BaseException:
        query.stop()
        raise
    return query, topic


def test_recreated_topic_is_read_from_its_start_when_loss_is_allowed(spark: SparkSession, kafka: Cluster) -> None:
    rows: List[Tuple[int, int, bytes]] = []
    query, _ = recreate_under(spark, kafka, 2, "false", rows)
    try:
        wait_for(lambda: len(rows) == 70, "the recreated topic's records", 180)
        assert query.isActive
    finally:
        query.stop()
    new = sorted((p, o) for p, o, v in rows if b'"n":100' in v)
    assert new == [(p, o) for p in range(2) for o in range(5)]


def test_recreated_topic_fails_the_query_naming_the_partition(spark: SparkSession, kafka: Cluster) -> None:
    rows: List[Tuple[int, int, bytes]] = []
    query, topic = recreate_under(spark, kafka, 1, "true", rows)
    try:
        with pytest.raises(StreamingQueryException, match=rf"data loss in {topic}-0: the query is at offset 30 but "
                                                          "the partition now ends at 5"):
            query.awaitTermination(180)
    finally:
        query.stop()
