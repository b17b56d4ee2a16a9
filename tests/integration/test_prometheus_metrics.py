"""Spark's Kafka lag metrics for Prometheus: a scrape of a running query, checked against the broker."""

from __future__ import annotations

import threading
import urllib.request
from typing import Any, Dict, FrozenSet, List, Tuple

import pytest
from confluent_kafka import TopicPartition
from pyspark.sql import SparkSession

from pyspark_kafka_group.prometheus import export_metrics
from tests.support import Cluster, MakeTopic, group_stream, new_consumer, produce, unique_name, wait_for

pytestmark = pytest.mark.integration

Samples = Dict[Tuple[str, FrozenSet[Tuple[str, str]]], float]


def scrape(port: int) -> Samples:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


class HoldAfterFirstRows:
    """A foreachBatch function that keeps each batch's (partition, offset)s and, from the batch after
    the first one with rows on, waits until released: the query's last progress then stays that of
    the first batch with rows, so a scrape sees one fixed state. Caller: Spark's foreachBatch thread."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.batches: Dict[int, List[Tuple[int, int]]] = {}
        self.first_with_rows: Any = None

    def __call__(self, batch: Any, batch_id: int) -> None:
        if self.first_with_rows is not None and batch_id > self.first_with_rows:
            self.release.wait(300)
            return
        rows = [(r.partition, r.offset) for r in batch.select("partition", "offset").collect()]
        self.batches[batch_id] = rows
        if rows:
            self.first_with_rows = batch_id


def test_scraped_lag_matches_the_broker_while_a_query_runs(spark: SparkSession, kafka: Cluster,
                                                           make_topic: MakeTopic) -> None:
    servers = kafka.bootstrap_servers
    topic = make_topic(3)
    produce(servers, topic, {0: 100, 1: 60, 2: 20})
    listener = export_metrics(spark, port=0, addr="127.0.0.1")
    sink = HoldAfterFirstRows()
    query = (group_stream(spark, servers, topic, unique_name("group"), maxOffsetsPerTrigger="30").load()
             .writeStream.foreachBatch(sink).queryName("lag_metrics").start())
    try:
        assert listener.port is not None
        port = listener.port
        labels = {"query_id": str(query.id), "query_name": "lag_metrics", "source": "0"}

        def key(name: str, **more: str) -> Tuple[str, FrozenSet[Tuple[str, str]]]:
            return name, frozenset({**labels, **more}.items())

        wait_for(lambda: sink.first_with_rows is not None
                 and scrape(port).get(key("kafka_group_batch_id")) == sink.first_with_rows,
                 "the first batch with rows to reach the metrics endpoint")
        samples = scrape(port)

        # The position after the batch: one past the last offset it read of each partition (from 0).
        read: Dict[int, int] = {p: 0 for p in range(3)}
        for partition, offset in sink.batches[sink.first_with_rows]:
            read[partition] = max(read[partition], offset + 1)
        consumer = new_consumer(servers)
        try:
            high = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(3)}
        finally:
            consumer.close()
        assert high == {0: 100, 1: 60, 2: 20}
        behind = {p: high[p] - read[p] for p in range(3)}
        assert sum(read.values()) <= 30 and sum(behind.values()) >= 150  # the cap held most back

        for p in range(3):
            assert samples[key("kafka_group_offsetsBehindLatest", topic=topic, partition=str(p))] == behind[p]
        assert samples[key("kafka_group_minOffsetsBehindLatest")] == min(behind.values())
        assert samples[key("kafka_group_maxOffsetsBehindLatest")] == max(behind.values())
        assert samples[key("kafka_group_avgOffsetsBehindLatest")] == pytest.approx(sum(behind.values()) / 3)
        assert samples[key("kafka_group_owned_partitions")] == 3
        assert samples[key("kafka_group_paused_partitions")] == 0
        assert samples[key("kafka_group_generation")] >= 1
        assert samples[key("kafka_group_input_rows")] == sum(read.values())

        sink.release.set()
        query.stop()
        # A stopped query's series go (the terminated event arrives on Spark's listener thread).
        wait_for(lambda: not any(dict(labelset).get("query_id") == str(query.id) for _, labelset in scrape(port)),
                 "the stopped query's series to be removed")
    finally:
        sink.release.set()
        query.stop()
        spark.streams.removeListener(listener)
        listener.stop()
