"""``maxBytesPerTrigger`` on a real broker and Spark: every batch's payload stays within the budget, every record
is read once, and a budget that also has ``maxOffsetsPerTrigger`` keeps to both."""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Tuple

import pytest
from confluent_kafka import Producer
from pyspark.sql import SparkSession

from tests.support import Cluster, MakeTopic, group_stream, run_available_now, unique_name

pytestmark = pytest.mark.integration


def produce_sized(servers: str, topic: str, partitions: int, per_partition: int, size: int) -> None:
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 5})
    for p in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, key=f"k{p}-{i:04d}".encode(), value=bytes([65 + i % 26]) * size, partition=p)
    assert producer.flush(60) == 0


def run_batches(spark: SparkSession, kafka: Cluster, topic: str, tmp: Any,
                **options: Any) -> Dict[int, List[Tuple[int, int, int]]]:
    """(partition, offset, payload bytes) of every row, by batch id, of an AvailableNow run."""
    batches: Dict[int, List[Tuple[int, int, int]]] = {}
    lock = threading.Lock()

    def collect(batch: Any, batch_id: int) -> None:
        rows = batch.selectExpr("partition", "offset", "length(key) + length(value) AS n").collect()
        with lock:
            batches[batch_id] = [(r[0], r[1], r[2]) for r in rows]

    stream = group_stream(spark, kafka.bootstrap_servers, topic, unique_name("group"), **options).load()
    run_available_now(stream.writeStream.foreachBatch(collect).option("checkpointLocation", str(tmp)))
    return batches


def test_every_batch_stays_within_its_bytes_and_every_record_is_read_once(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: Any
) -> None:
    topic = make_topic(2)
    produce_sized(kafka.bootstrap_servers, topic, 2, 100, 1000)  # about 1,007 bytes a record
    batches = run_batches(spark, kafka, topic, tmp_path / "chk", maxBytesPerTrigger="20k")
    landed = sorted((p, o) for rows in batches.values() for p, o, _ in rows)
    assert landed == sorted((p, o) for p in range(2) for o in range(100))
    sizes = [sum(n for _, _, n in rows) for rows in batches.values() if rows]
    assert max(sizes) <= 20 * 1024, sizes
    assert len(sizes) >= 200 * 1007 // (20 * 1024), sizes  # no batch took more than its bytes


def test_with_max_offsets_per_trigger_both_bound_the_batch(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: Any
) -> None:
    topic = make_topic(1)
    produce_sized(kafka.bootstrap_servers, topic, 1, 60, 100)
    batches = run_batches(spark, kafka, topic, tmp_path / "chk", maxBytesPerTrigger="1m", maxOffsetsPerTrigger="7")
    counts = [len(rows) for rows in batches.values() if rows]
    assert max(counts) == 7 and sum(counts) == 60
    big = run_batches(spark, kafka, topic, tmp_path / "chk2", maxBytesPerTrigger="550", maxOffsetsPerTrigger="50")
    assert max(len(rows) for rows in big.values()) <= 5  # 550 bytes / ~106 bytes a record
    assert sum(len(rows) for rows in big.values()) == 60
