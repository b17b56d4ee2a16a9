"""Bytes per record of each partition, measured on the driver from the records a batch reads first.

For ``maxBytesPerTrigger`` (:mod:`kafka_group.plan.byte_budget`). At each plan, for every partition with a
backlog, a peeking reader (never a group member) fetches up to :data:`SAMPLE_RECORDS` records from the
partition's position (the first ones its batch would read, at most :data:`SAMPLE_BYTES` per partition)
and measures their key, value and header bytes. A partition whose sample times out keeps its last
estimate; one never measured takes the largest estimate of the others (or none: the plan then gives it
nothing until it is measured, and logs why). Cost: one bounded fetch of all backlogged partitions per
plan, only with the option set.

Kafka's own log sizes (DescribeLogDirs) are not used: confluent-kafka's admin client does not offer
that request, and a log's size is compressed batches, not the bytes the rows carry.
"""

from __future__ import annotations

import logging
import time
from typing import Dict, Mapping, Optional

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kafka_group.auth.clients import new_consumer
from kafka_group.config.client_config import reader_config
from kafka_group.errors import KafkaGroupError
from kafka_group.offsets import TopicPartition

__all__ = ["RecordSizes", "SAMPLE_BYTES", "SAMPLE_RECORDS", "record_bytes"]

logger = logging.getLogger(__name__)

#: Records sampled per partition and plan.
SAMPLE_RECORDS = 32
#: The most bytes fetched per partition for a sample.
SAMPLE_BYTES = 1 << 20


def record_bytes(key: Optional[bytes], value: Optional[bytes], headers: object) -> int:
    """The payload bytes of one record as a row carries them: key, value, header names and values."""
    size = len(key or b"") + len(value or b"")
    if isinstance(headers, list):
        for name, data in headers:
            size += len(str(name).encode()) + len(data or b"")
    return size


class RecordSizes:
    """The bytes-per-record estimates of the partitions, refreshed at each plan (:meth:`measure`).

    Caller: the source driver's planning thread (one call at a time).
    """

    def __init__(self, client_config: Mapping[str, str], group_id: Optional[str], timeout_ms: int) -> None:
        config = reader_config(client_config, group_id)
        config.update({"max.partition.fetch.bytes": str(SAMPLE_BYTES), "fetch.max.bytes": str(8 * SAMPLE_BYTES),
                       "queued.max.messages.kbytes": str(SAMPLE_BYTES // 1024)})
        self._config = config
        self._consumer: Optional[Consumer] = None
        self._timeout_s = timeout_ms / 1000
        self.estimates: Dict[TopicPartition, float] = {}

    def measure(self, positions: Mapping[TopicPartition, int],
                latest: Mapping[TopicPartition, int]) -> Dict[TopicPartition, float]:
        """Sample the backlogged partitions at their positions; the estimate of every partition with a backlog."""
        backlogged = {tp: pos for tp, pos in positions.items() if latest.get(tp, pos) > pos}
        for tp, (total, count) in self._sample(backlogged, latest).items():
            if count:
                self.estimates[tp] = total / count
        known = [self.estimates[tp] for tp in backlogged if tp in self.estimates]
        fallback = max(known) if known else None
        found = {tp: self.estimates.get(tp, fallback) for tp in backlogged}
        unknown = sorted(tp for tp, size in found.items() if size is None)
        if unknown:
            logger.warning("maxBytesPerTrigger: no record size measured yet for %s; they read nothing this batch",
                           ", ".join(map(str, unknown)))
        return {tp: size for tp, size in found.items() if size is not None}

    def close(self) -> None:
        """Release the peeking reader."""
        if self._consumer is not None:
            consumer, self._consumer = self._consumer, None
            try:
                consumer.close()
            except KafkaGroupError as exc:
                logger.debug("closing the record-size reader: %s", exc)

    def _sample(self, positions: Mapping[TopicPartition, int],
                latest: Mapping[TopicPartition, int]) -> Dict[TopicPartition, "tuple[int, int]"]:
        """(bytes, records) of up to :data:`SAMPLE_RECORDS` records from each position."""
        if not positions:
            return {}
        if self._consumer is None:
            self._consumer = new_consumer(self._config, client="record-sizes")
        consumer = self._consumer
        want = {tp: min(SAMPLE_RECORDS, latest[tp] - pos) for tp, pos in positions.items()}
        sums: Dict[TopicPartition, "tuple[int, int]"] = {tp: (0, 0) for tp in positions}
        consumer.assign([KafkaTopicPartition(tp.topic, tp.partition, pos) for tp, pos in positions.items()])
        deadline = time.monotonic() + self._timeout_s
        open_ = set(positions)
        try:
            while open_ and time.monotonic() < deadline:
                for message in consumer.consume(num_messages=max(1, sum(want.values())), timeout=0.2):
                    tp = TopicPartition(str(message.topic()), int(message.partition() or 0))
                    if tp not in open_:
                        continue
                    error = message.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            open_.discard(tp)
                        continue
                    total, count = sums[tp]
                    sums[tp] = (total + record_bytes(message.key(), message.value(), message.headers()), count + 1)
                    if count + 1 >= want[tp] or int(message.offset() or 0) + 1 >= latest[tp]:
                        open_.discard(tp)
        except KafkaException as exc:
            logger.warning("sampling record sizes failed: %s", exc)
        finally:
            consumer.unassign()
        return sums
