"""Gaps and data loss while reading a range: error events, missing offsets, repositioning.

Gaps inside a range are normal in compacted topics and around transaction markers; a gap
is *data loss* only when the broker's earliest offset has moved past offsets the plan
promised (retention, a deleted or recreated topic). Lost offsets fail the read
(``failOnDataLoss``, the default) or are skipped and logged; a skip repositions its
partition alone. Called by the read loop, :mod:`kafka_group.read.fetch`, on the Spark
task's thread.
"""

from __future__ import annotations

import logging
from typing import Any, Tuple

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kafka_group.errors import DataLossError, FetchError
from kafka_group.offsets import OffsetRange, TopicPartition
from kafka_group.read.read_settings import ReadSettings

__all__ = [
    "check_gap",
    "handle_error",
    "reposition_partition",
    "skip_lost",
    "watermarks",
]

logger = logging.getLogger(__name__)


def handle_error(
    consumer: Consumer,
    offset_range: OffsetRange,
    next_offset: int,
    error: KafkaError,
    message: Any,
    settings: ReadSettings,
) -> int:
    """Deal with an error event; return the offset to continue from."""
    code = error.code()
    tp = offset_range.topic_partition
    if code == KafkaError._PARTITION_EOF:
        end = message.offset()
        if end is not None and end >= offset_range.until_offset:
            # The client delivered everything before the end in order: offsets of the range
            # that never came hold no records for us (transaction markers, aborted or
            # compacted records).
            return offset_range.until_offset
        if end is not None:
            low, high = watermarks(consumer, offset_range)
            if high < offset_range.until_offset:
                return skip_lost(consumer, offset_range, max(next_offset, high), offset_range.until_offset, settings,
                             why=f"the partition now ends at offset {high} (was the topic deleted and recreated?)")
        return next_offset
    if code == KafkaError._AUTO_OFFSET_RESET or code == KafkaError.OFFSET_OUT_OF_RANGE:
        low, high = watermarks(consumer, offset_range)
        if low > next_offset:
            return skip_lost(consumer, offset_range, next_offset, min(low, offset_range.until_offset), settings,
                         why=f"the earliest offset on the broker is now {low} (retention or deleted records)")
        if high < offset_range.until_offset:
            return skip_lost(consumer, offset_range, max(next_offset, high), offset_range.until_offset, settings,
                         why=f"the partition now ends at offset {high} (was the topic deleted and recreated?)")
        raise FetchError(f"offset {next_offset} of {tp} is out of range on the broker ({error.str()})",
                         kafka_error_code=code)
    if code in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC):
        return skip_lost(consumer, offset_range, next_offset, offset_range.until_offset, settings,
                     why=f"the broker no longer has the partition ({error.str()})")
    if error.fatal() or not error.retriable():
        raise FetchError(f"reading {tp} at offset {next_offset} failed: {error.str()}", kafka_error_code=code)
    logger.warning("retriable error reading %s at offset %d: %s", tp, next_offset, error.str())
    return next_offset


def check_gap(consumer: Consumer, offset_range: OffsetRange, expected: int, got: int, settings: ReadSettings,
               low: int) -> None:
    """A gap ``[expected, got)`` in the delivered records is data loss when the broker's
    earliest offset ``low`` is past its start; else no record was ever there."""
    if low > expected:
        skip_lost(consumer, offset_range, expected, min(low, got), settings,
              why=f"the earliest offset on the broker is now {low} (retention or deleted records)",
              reposition=False)
    else:
        logger.debug("gap in %s from %d to %d (compaction or transaction markers)", offset_range.topic_partition,
                     expected, got)


def skip_lost(
    consumer: Consumer,
    offset_range: OffsetRange,
    missing_from: int,
    missing_until: int,
    settings: ReadSettings,
    *,
    why: str,
    reposition: bool = True,
) -> int:
    """Offsets ``[missing_from, missing_until)`` of ``offset_range`` are gone from the broker:
    fail with :class:`~kafka_group.errors.DataLossError`, or (``failOnDataLoss`` false) log
    them and return the offset to continue from, repositioning the partition there."""
    tp = offset_range.topic_partition
    text = (
        f"data loss in {tp}: offsets [{missing_from}, {missing_until}) of the planned range "
        f"[{offset_range.from_offset}, {offset_range.until_offset}) are no longer on the broker: {why}"
    )
    if settings.fail_on_data_loss:
        raise DataLossError(
            text + ". Set option 'failOnDataLoss' to 'false' to skip missing offsets and go on"
        )
    logger.warning("%s; skipping them because failOnDataLoss is false", text)
    if reposition and missing_until < offset_range.until_offset:
        reposition_partition(consumer, tp, missing_until)
    return missing_until


def reposition_partition(consumer: Consumer, tp: TopicPartition, offset: int) -> None:
    """Fetch ``tp`` from ``offset`` on, leaving the client's other partitions where they are.

    ``assign()`` would replace the whole assignment; ``seek()`` fails on a partition whose
    fetcher stopped at an offset error (``auto.offset.reset=error``). Removing the
    partition and adding it back at the offset works in every state.
    """
    consumer.incremental_unassign([KafkaTopicPartition(tp.topic, tp.partition)])
    consumer.incremental_assign([KafkaTopicPartition(tp.topic, tp.partition, offset)])


def watermarks(consumer: Consumer, offset_range: OffsetRange) -> Tuple[int, int]:
    """The broker's earliest and latest offsets of the range's partition (0, 0 once it is gone)."""
    tp = offset_range.topic_partition
    try:
        low, high = consumer.get_watermark_offsets(KafkaTopicPartition(tp.topic, tp.partition), timeout=10,
                                                   cached=False)
    except KafkaException as exc:
        error = exc.args[0]
        if isinstance(error, KafkaError) and error.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART,
                                                              KafkaError._UNKNOWN_PARTITION):
            return 0, 0
        raise FetchError(f"could not read the watermarks of {tp}: {exc}") from exc
    return int(low), int(high)
