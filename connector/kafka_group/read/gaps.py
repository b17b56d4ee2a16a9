"""Gaps and data loss while reading a range: error events, missing offsets, repositioning.

Gaps inside a range are normal in compacted topics and around transaction markers; a gap
is *data loss* only when the broker's earliest offset has moved past offsets the plan
promised (retention, a deleted or recreated topic). A partition the cluster answers as
unknown (``UNKNOWN_TOPIC_OR_PART``, ``_UNKNOWN_PARTITION``, ``_UNKNOWN_TOPIC``) is not loss by
itself: a leader move or broker restart answers so for a while. Its watermarks are asked
again, with fresh metadata, until ``kafkaConsumer.pollTimeoutMs`` passes; loss is declared
only from offsets the broker does answer, and a partition still unknown fails the task with
a retriable :class:`~kafka_group.errors.FetchError` (Spark retries it), never skipped. Lost offsets fail the read
(``failOnDataLoss``, the default) or are skipped and logged; a skip repositions its
partition alone. Called by the read loop, :mod:`kafka_group.read.fetch`, on the Spark
task's thread.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Optional, Tuple

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kafka_group.auth.access_errors import access_error
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

#: The first pause between two watermark requests for a partition the cluster did not know; doubled up to 2 s.
_UNKNOWN_RETRY_S = 0.2
_UNKNOWN_CODES = (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC)


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
    refused = access_error(error, settings.client_config, topic=tp.topic)
    if refused is not None:
        raise refused  # no READ on the topic (an ACL removed since the plan, say): retrying cannot help
    if code == KafkaError._PARTITION_EOF:
        end = message.offset()
        if end is not None and end >= offset_range.until_offset:
            # The client delivered everything before the end in order: offsets of the range
            # that never came hold no records for us (transaction markers, aborted or
            # compacted records).
            return offset_range.until_offset
        if end is not None:
            low, high = watermarks(consumer, offset_range, settings)
            if high < offset_range.until_offset:
                return skip_lost(consumer, offset_range, max(next_offset, high), offset_range.until_offset, settings,
                             why=f"the partition now ends at offset {high} (was the topic deleted and recreated?)")
        return next_offset
    if code == KafkaError._AUTO_OFFSET_RESET or code == KafkaError.OFFSET_OUT_OF_RANGE:
        skipped = _skip_what_the_broker_lost(consumer, offset_range, next_offset, settings)
        if skipped is not None:
            return skipped
        raise FetchError(f"offset {next_offset} of {tp} is out of range on the broker ({error.str()})",
                         kafka_error_code=code)
    if code in _UNKNOWN_CODES:
        # Transient during a leader move or broker restart: loss only from offsets the broker answers.
        logger.warning("reading %s at offset %d: %s; asking the cluster for the partition's offsets again",
                       tp, next_offset, error.str())
        skipped = _skip_what_the_broker_lost(consumer, offset_range, next_offset, settings)
        if skipped is not None:
            return skipped
        reposition_partition(consumer, tp, next_offset)  # the client may have stopped fetching it
        return next_offset
    if error.fatal() or not error.retriable():
        raise FetchError(f"reading {tp} at offset {next_offset} failed: {error.str()}", kafka_error_code=code)
    logger.warning("retriable error reading %s at offset %d: %s", tp, next_offset, error.str())
    return next_offset


def _skip_what_the_broker_lost(consumer: Consumer, offset_range: OffsetRange, next_offset: int,
                               settings: ReadSettings) -> Optional[int]:
    """Skip (or fail on, per ``failOnDataLoss``) what the broker's watermarks show is gone between
    ``next_offset`` and the range's end; the offset to go on from, or None when nothing is gone."""
    low, high = watermarks(consumer, offset_range, settings)
    if low > next_offset:
        return skip_lost(consumer, offset_range, next_offset, min(low, offset_range.until_offset), settings,
                         why=f"the earliest offset on the broker is now {low} (retention or deleted records)")
    if high < offset_range.until_offset:
        return skip_lost(consumer, offset_range, max(next_offset, high), offset_range.until_offset, settings,
                         why=f"the partition now ends at offset {high} (was the topic deleted and recreated?)")
    return None


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


def watermarks(consumer: Consumer, offset_range: OffsetRange, settings: ReadSettings) -> Tuple[int, int]:
    """The partition's earliest and high watermark, from a ListOffsets request.

    A partition the cluster answers as unknown is asked again, after a metadata request for
    its topic, until ``settings.poll_timeout_ms`` passes (a leader move or a broker restart
    answers so for a while); never read as (0, 0), which would be taken for a recreated topic.

    Raises
    ------
    FetchError
        Retriable: the partition stayed unknown, or the request failed otherwise.
    """
    tp = offset_range.topic_partition
    ktp = KafkaTopicPartition(tp.topic, tp.partition)
    deadline = time.monotonic() + settings.poll_timeout_ms / 1000
    pause = _UNKNOWN_RETRY_S
    while True:
        try:
            low, high = consumer.get_watermark_offsets(ktp, timeout=10, cached=False)
            return int(low), int(high)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if not isinstance(error, KafkaError) or error.code() not in _UNKNOWN_CODES:
                raise FetchError(f"could not read the watermarks of {tp}: {exc}") from exc
            if time.monotonic() + pause > deadline:
                raise FetchError(
                    f"{tp} of the planned range [{offset_range.from_offset}, {offset_range.until_offset}) is "
                    f"unknown to the cluster at {settings.client_config.get('bootstrap.servers')} for "
                    f"{settings.poll_timeout_ms} ms ({error.str()}): a leader move or broker restart that has "
                    "not settled, or a deleted topic. Failing the task for Spark to retry; nothing is skipped "
                    "(the driver's next plan decides from fresh metadata). Raise 'kafkaConsumer.pollTimeoutMs' "
                    "to wait longer", kafka_error_code=error.code()) from exc
            logger.debug("%s is unknown to the cluster (%s); asking for its offsets again in %.1f s, with fresh "
                         "metadata", tp, error.str(), pause)
        time.sleep(pause)
        pause = min(pause * 2, 2.0)
        try:
            consumer.list_topics(tp.topic, timeout=min(10.0, max(0.1, deadline - time.monotonic())))
        except KafkaException as exc:  # the next watermark request tells
            logger.debug("metadata of %s: %s", tp.topic, exc)
