"""The benchmark workload: one topic, records of fixed key and value sizes.

:func:`produce` checks after producing that the broker kept every record (every
partition still starts at offset 0): librdkafka's mock broker (which
``bench.profile_read`` runs on with ``KAFKA_GROUP_BENCH_BROKER=mock``) keeps at most 5 MiB (or 100,000 record batches) per
partition and silently drops older batches.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from typing import Any, Dict, Tuple

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

__all__ = ["Workload", "produce", "watermarks"]



@dataclass(frozen=True)
class Workload:
    """What is produced: ``records`` spread evenly (round robin) over ``partitions``."""

    topic: str
    partitions: int
    records: int
    key_bytes: int = 16
    value_bytes: int = 100

    @property
    def per_partition(self) -> int:
        """Records in the fullest partition."""
        return -(-self.records // self.partitions)

    @property
    def payload_bytes(self) -> int:
        """Key and value bytes of all records."""
        return self.records * (self.key_bytes + self.value_bytes)

    def describe(self) -> str:
        """One line: records, partitions, sizes."""
        return (f"{self.records:,} records ({self.key_bytes} B keys, {self.value_bytes} B values) over "
                f"{self.partitions} partitions ({self.per_partition:,} per partition, "
                f"{self.payload_bytes / 1e6:.0f} MB of keys and values)")

    def to_json(self) -> Dict[str, Any]:
        """The workload as a JSON-able dict."""
        return asdict(self)


def _values(value_bytes: int) -> Tuple[bytes, int]:
    pool = os.urandom(value_bytes * 64 + 4096)
    return pool, len(pool) - value_bytes


def produce(servers: str, workload: Workload, *, check_retained: bool = True) -> float:
    """Produce the workload; return the seconds it took.

    Keys are 16-byte record numbers, values random bytes (slices of one random
    pool, so they do not compress). Raises ``RuntimeError`` when the broker did not
    keep every record (the mock's retention bound).
    """
    producer = Producer({
        "bootstrap.servers": servers,
        "linger.ms": 50,
        "batch.num.messages": 10000,
        "batch.size": 1_000_000,
        "queue.buffering.max.kbytes": 262144,
        "queue.buffering.max.messages": 1_000_000,
        "compression.type": "none",
        "acks": "1",
    })
    pool, spread = _values(workload.value_bytes)
    n_parts = workload.partitions
    vb = workload.value_bytes
    kfmt = "{:0%dd}" % workload.key_bytes
    started = time.monotonic()
    produce_one = producer.produce
    for i in range(workload.records):
        start = (i * 61) % spread
        while True:
            try:
                produce_one(workload.topic, pool[start:start + vb], kfmt.format(i).encode(), i % n_parts)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 20000 == 0:
            producer.poll(0)
    left = producer.flush(300)
    seconds = time.monotonic() - started
    if left:
        raise RuntimeError(f"{left} records were not delivered")
    if check_retained:
        marks = watermarks(servers, workload.topic, n_parts)
        total = sum(high - low for low, high in marks.values())
        dropped = {p: low for p, (low, _) in marks.items() if low > 0}
        if dropped or total != workload.records:
            raise RuntimeError(
                f"the broker kept {total:,} of {workload.records:,} records (low watermarks moved in partitions "
                f"{sorted(dropped)[:8]}): the mock keeps at most 5 MiB per partition; use more partitions "
                "(--partitions) or fewer records (--records)")
    return seconds


def watermarks(servers: str, topic: str, partitions: int) -> Dict[int, Tuple[int, int]]:
    """Low and high watermark of every partition of ``topic``."""
    consumer = Consumer({"bootstrap.servers": servers, "group.id": "bench-watermarks"})
    try:
        found: Dict[int, Tuple[int, int]] = {}
        for p in range(partitions):
            low, high = consumer.get_watermark_offsets(KafkaTopicPartition(topic, p), timeout=10)
            found[p] = (low, high)
        return found
    finally:
        consumer.close()
