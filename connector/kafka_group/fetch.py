"""Executor side: read one planned offset range with ``assign()`` and return Arrow batches.

A reader never joins the consumer group: it assigns itself the one partition of
its range at the range's first offset, reads in bulk until the range's end, and
turns the records into Arrow record batches of Spark's Kafka schema.

A task reads all its ranges with one client, checked out of the process's
:mod:`kafka_group.reader_pool` (so the next task of the same Python worker reuses
it): each range re-``assign()``-s it at the range's start. ``assign()`` replaces
the assignment, and librdkafka's op versions drop what was prefetched for the old
one; the offset checks below (and a check of the first and last record's
partition) guard that anyway.

Gaps inside a range are normal in compacted topics and around transaction
markers; a gap is *data loss* only when the broker's earliest offset has moved
past offsets the plan promised (retention, a deleted or recreated topic).
"""

from __future__ import annotations

import itertools
import logging
import operator
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, List, Mapping, Optional, Sequence, Tuple, cast

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kafka_group.errors import DataLossError, FetchError
from kafka_group.offsets import OffsetRange
from kafka_group.reader_pool import DEFAULT_IDLE_TIMEOUT_MS, ReaderPool, default_pool
from kafka_group.record_schema import HEADER_TYPE, TIMESTAMP_TYPE_BY_LIBRDKAFKA, arrow_schema

__all__ = ["ReadSettings", "read_range", "read_ranges", "RecordBatchBuilder"]

logger = logging.getLogger(__name__)

_CONSUME_WAIT_S = 0.5

# confluent-kafka's accessors, unbound: ``map(_OFFSET, messages)`` runs no Python frame per record.
# Records of a partition always have an offset; headers are a list of pairs as confluent-kafka returns them.
_KEY = Message.key
_VALUE = Message.value
_OFFSET = cast("Callable[[Message], int]", Message.offset)
_TIMESTAMP = Message.timestamp
_HEADERS = cast("Callable[[Message], Optional[List[Tuple[str, Optional[bytes]]]]]", Message.headers)
_ERROR = Message.error
_PARTITION = Message.partition
_TOPIC = Message.topic

_TIMESTAMP_ARROW = pa.timestamp("us", tz="UTC")
#: librdkafka's ``TIMESTAMP_NOT_AVAILABLE``.
_TIMESTAMP_NOT_AVAILABLE = 0


@dataclass(frozen=True)
class ReadSettings:
    """How an executor reads a range.

    Attributes
    ----------
    client_config : dict
        Settings of the reader's Kafka client (see :func:`kafka_group.client_config.reader_config`).
    include_headers : bool
        Whether to return the ``headers`` column.
    fail_on_data_loss : bool
        Whether missing planned offsets fail the read (else they are skipped and logged).
    poll_timeout_ms : int
        The longest wait for the next planned record before the read fails.
    max_records_per_batch : int
        Records per returned Arrow batch.
    client_idle_timeout_ms : int
        How long the reader's client stays open in the process's pool after its
        task, for the next task to reuse (``kafkaConsumer.cacheTimeoutMs``).
    """

    client_config: Mapping[str, str] = field(repr=False)
    include_headers: bool
    fail_on_data_loss: bool
    poll_timeout_ms: int
    max_records_per_batch: int
    client_idle_timeout_ms: int = DEFAULT_IDLE_TIMEOUT_MS


class RecordBatchBuilder:
    """Accumulates records of one partition, then builds an Arrow batch of Spark's Kafka schema.

    Per record, only confluent-kafka's own accessors run (through ``map`` over the
    unbound ``Message`` methods, so no Python frame per record); every column is
    then built in one call: ``topic`` and ``partition`` as repeated scalars,
    ``timestamp`` by one vectorized multiply, ``timestampType`` as a repeated
    scalar when all records share a type (they do unless the topic mixes them).

    Parameters
    ----------
    topic : str
        The records' topic.
    partition : int
        The records' partition.
    include_headers : bool
        Whether to build the ``headers`` column.
    """

    def __init__(self, topic: str, partition: int, include_headers: bool) -> None:
        self._topic = pa.scalar(topic, pa.string())
        self._partition = pa.scalar(partition, pa.int32())
        self._include_headers = include_headers
        self._schema = arrow_schema(include_headers)
        self._reset()

    def _reset(self) -> None:
        self._keys: List[Optional[bytes]] = []
        self._values: List[Optional[bytes]] = []
        self._offsets: List[int] = []
        self._stamps: List[Tuple[int, int]] = []
        self._headers: List[Optional[List[Tuple[str, Optional[bytes]]]]] = []

    def __len__(self) -> int:
        return len(self._offsets)

    def add_messages(self, messages: Sequence[Message], offsets: Optional[Sequence[int]] = None) -> None:
        """Append confluent-kafka messages.

        Parameters
        ----------
        messages : sequence of confluent_kafka.Message
            Records of this builder's partition, all without error, in offset order.
        offsets : sequence of int, optional
            Their offsets, when the caller has them already.
        """
        self._keys.extend(map(_KEY, messages))
        self._values.extend(map(_VALUE, messages))
        self._offsets.extend(map(_OFFSET, messages) if offsets is None else offsets)
        self._stamps.extend(map(_TIMESTAMP, messages))
        if self._include_headers:
            self._headers.extend(map(_HEADERS, messages))

    def build(self) -> pa.RecordBatch:
        """Return the accumulated records as one batch and start a new one."""
        n = len(self._offsets)
        timestamps, timestamp_types = _timestamp_columns(self._stamps)
        columns = [
            pa.array(self._keys, pa.binary()),
            pa.array(self._values, pa.binary()),
            pa.repeat(self._topic, n),
            pa.repeat(self._partition, n),
            pa.array(self._offsets, pa.int64()),
            timestamps,
            timestamp_types,
        ]
        if self._include_headers:
            columns.append(pa.array(self._headers, HEADER_TYPE))
        batch = pa.RecordBatch.from_arrays(columns, schema=self._schema)
        self._reset()
        return batch


def _timestamp_columns(stamps: Sequence[Tuple[int, int]]) -> Tuple[pa.Array, pa.Array]:
    """The ``timestamp`` and ``timestampType`` columns from librdkafka's ``(type, ms)`` pairs."""
    n = len(stamps)
    if n == 0:
        return pa.array([], _TIMESTAMP_ARROW), pa.array([], pa.int32())
    kinds, millis = zip(*stamps)
    first = kinds[0]
    if first != _TIMESTAMP_NOT_AVAILABLE and kinds.count(first) == n:
        micros = pc.multiply(pa.array(millis, pa.int64()), 1000).cast(_TIMESTAMP_ARROW)
        kind = pa.scalar(TIMESTAMP_TYPE_BY_LIBRDKAFKA.get(first, -1), pa.int32())
        return micros, pa.repeat(kind, n)
    # Mixed types or records without a timestamp: per record (rare).
    return (
        pa.array([ms * 1000 if t != _TIMESTAMP_NOT_AVAILABLE else None for t, ms in stamps], _TIMESTAMP_ARROW),
        pa.array([TIMESTAMP_TYPE_BY_LIBRDKAFKA.get(t, -1) for t in kinds], pa.int32()),
    )


def read_range(
    offset_range: OffsetRange, settings: ReadSettings, *, consumer: Optional[Consumer] = None
) -> Iterator[pa.RecordBatch]:
    """Read the records of one planned range.

    Parameters
    ----------
    offset_range : OffsetRange
        The range ``[from_offset, until_offset)`` of one partition.
    settings : ReadSettings
        How to read.
    consumer : confluent_kafka.Consumer, optional
        The client to read with, held by the caller alone (:func:`read_ranges` passes
        the task's pooled client); it is re-assigned to this range. Without it, a
        client is checked out of the process's pool for this range.

    Yields
    ------
    pyarrow.RecordBatch
        Batches of Spark's Kafka schema, in offset order, each at most
        ``settings.max_records_per_batch`` records.

    Raises
    ------
    DataLossError
        Planned offsets are gone from the broker and ``failOnDataLoss`` is true.
    FetchError
        No record arrived within ``kafkaConsumer.pollTimeoutMs``, or the client failed.
    """
    if offset_range.size <= 0:
        return
    if consumer is None:
        with default_pool().client(settings.client_config, idle_timeout_ms=settings.client_idle_timeout_ms) as pooled:
            yield from _read(offset_range, settings, pooled)
    else:
        yield from _read(offset_range, settings, consumer)


def _read(offset_range: OffsetRange, settings: ReadSettings, consumer: Consumer) -> Iterator[pa.RecordBatch]:
    """:func:`read_range` with its client."""
    tp = offset_range.topic_partition
    started = time.monotonic()
    first_at: Optional[float] = None
    consumer.assign([KafkaTopicPartition(tp.topic, tp.partition, offset_range.from_offset)])
    builder = RecordBatchBuilder(tp.topic, tp.partition, settings.include_headers)
    next_offset = offset_range.from_offset
    until = offset_range.until_offset
    deadline = time.monotonic() + settings.poll_timeout_ms / 1000
    while next_offset < until:
        want = min(settings.max_records_per_batch - len(builder), until - next_offset)
        messages = consumer.consume(num_messages=max(1, want), timeout=_CONSUME_WAIT_S)
        if messages:
            if first_at is None:
                first_at = time.monotonic()
            taken = _take_contiguous(messages, tp.topic, tp.partition, next_offset, until)
            if taken is not None:
                # The common case, with no Python code per record: no errors, no gaps.
                builder.add_messages(*taken)
                next_offset += len(taken[1])
                deadline = time.monotonic() + settings.poll_timeout_ms / 1000
            else:
                before = len(builder)
                next_offset = _take_one_by_one(consumer, offset_range, messages, next_offset, builder, settings)
                if len(builder) > before:
                    deadline = time.monotonic() + settings.poll_timeout_ms / 1000
        if len(builder) >= settings.max_records_per_batch:
            yield builder.build()
        if next_offset < until and time.monotonic() > deadline:
            raise FetchError(
                f"no record of {tp} arrived for {settings.poll_timeout_ms} ms while reading the "
                f"planned range [{offset_range.from_offset}, {until}) at offset {next_offset}; "
                f"check that the brokers ({settings.client_config.get('bootstrap.servers')}) are "
                "reachable from the executors, or raise 'kafkaConsumer.pollTimeoutMs'"
            )
    if len(builder):
        yield builder.build()
    logger.debug("read %s [%d, %d) in %.3f s (first records after %.3f s)", tp, offset_range.from_offset, until,
                 time.monotonic() - started, (first_at or started) - started)


def read_ranges(
    offset_ranges: Sequence[OffsetRange], settings: ReadSettings, *, pool: Optional[ReaderPool] = None
) -> Iterator[pa.RecordBatch]:
    """Read several planned ranges one after another, as one Spark task.

    A Spark task has a fixed cost (about 0.1 s of a core measured with Spark 4.3
    ``local[2]``), so a micro-batch of many small ranges runs faster as a few
    tasks that each read several ranges than as one task per range.

    The task reads every range with one client, checked out of ``pool`` when the
    first record is asked for and returned (unassigned) when the last range is
    done or Spark stops reading early; the next task of this Python worker with the
    same client settings reuses it.

    Parameters
    ----------
    offset_ranges : sequence of OffsetRange
        The ranges, read in the given order.
    settings : ReadSettings
        How to read.
    pool : ReaderPool, optional
        Where the client comes from; the process's :func:`~kafka_group.reader_pool.default_pool`
        when not given.

    Yields
    ------
    pyarrow.RecordBatch
        The batches of :func:`read_range` for each range in turn.

    Notes
    -----
    Caller: the Spark task's thread (``read()`` of the stream and batch readers).
    """
    todo = [r for r in offset_ranges if r.size > 0]
    if not todo:
        return
    source = default_pool() if pool is None else pool
    with source.client(settings.client_config, idle_timeout_ms=settings.client_idle_timeout_ms) as consumer:
        for offset_range in todo:
            yield from _read(offset_range, settings, consumer)


def _take_contiguous(
    messages: List[Message], topic: str, partition: int, next_offset: int, until: int
) -> Optional[Tuple[List[Message], List[int]]]:
    """The messages and their offsets when they carry no error, are of ``topic`` and
    ``partition``, and continue exactly at ``next_offset`` without a gap (cut at
    ``until``); None otherwise."""
    n = len(messages)
    # Identity, not list.count(None): comparing a KafkaError with None by == leaves a
    # Python exception set inside confluent-kafka (SystemError), seen at partition EOF.
    if any(map(operator.is_not, map(_ERROR, messages), itertools.repeat(None))):
        return None
    # A reused client: records of an earlier assignment would come first (the queue is in
    # order), or last; librdkafka drops them, and this check costs two records, not n.
    first, last = messages[0], messages[-1]
    if (_PARTITION(first) != partition or _PARTITION(last) != partition
            or _TOPIC(first) != topic or _TOPIC(last) != topic):
        return None
    offsets = list(map(_OFFSET, messages))
    if offsets != list(range(next_offset, next_offset + n)):
        return None
    if next_offset + n > until:
        keep = until - next_offset
        return messages[:keep], offsets[:keep]
    return messages, offsets


def _take_one_by_one(
    consumer: Consumer,
    offset_range: OffsetRange,
    messages: List[Message],
    next_offset: int,
    builder: RecordBatchBuilder,
    settings: ReadSettings,
) -> int:
    """Add ``messages`` one by one, dealing with errors, gaps and records outside the
    range; return the offset to continue from."""
    until = offset_range.until_offset
    tp = offset_range.topic_partition
    good: List[Message] = []
    # The broker's earliest offset, asked at the first gap of these messages and kept for
    # the others: they all came in one fetch, so one answer tells for every gap in it
    # whether offsets below it were removed (retention) or never held records (transaction
    # markers, compaction). One request per gap made a range of small transactions cost a
    # round trip per record.
    earliest: Optional[int] = None
    for message in messages:
        if message.partition() is not None and (message.partition() != tp.partition or message.topic() != tp.topic):
            # Of an earlier assignment of this reused client (librdkafka should have dropped it).
            logger.debug("ignoring a record or event of %s [%s] while reading %s", message.topic(),
                         message.partition(), tp)
            continue
        error = message.error()
        if error is not None:
            next_offset = _handle_error(consumer, offset_range, next_offset, error, message, settings)
            continue
        offset = message.offset()
        if offset is None or offset < next_offset:
            continue
        if offset >= until:
            next_offset = until
            break
        if offset > next_offset:
            if earliest is None:
                earliest = _watermarks(consumer, offset_range)[0]
            _check_gap(consumer, offset_range, next_offset, offset, settings, earliest)
        good.append(message)
        next_offset = offset + 1
    if good:
        builder.add_messages(good)
    return next_offset


def _handle_error(
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
            low, high = _watermarks(consumer, offset_range)
            if high < offset_range.until_offset:
                return _lost(consumer, offset_range, max(next_offset, high), offset_range.until_offset, settings,
                             why=f"the partition now ends at offset {high} (was the topic deleted and recreated?)")
        return next_offset
    if code == KafkaError._AUTO_OFFSET_RESET or code == KafkaError.OFFSET_OUT_OF_RANGE:
        low, high = _watermarks(consumer, offset_range)
        if low > next_offset:
            return _lost(consumer, offset_range, next_offset, min(low, offset_range.until_offset), settings,
                         why=f"the earliest offset on the broker is now {low} (retention or deleted records)")
        if high < offset_range.until_offset:
            return _lost(consumer, offset_range, max(next_offset, high), offset_range.until_offset, settings,
                         why=f"the partition now ends at offset {high} (was the topic deleted and recreated?)")
        raise FetchError(f"offset {next_offset} of {tp} is out of range on the broker ({error.str()})",
                         kafka_error_code=code)
    if code in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC):
        return _lost(consumer, offset_range, next_offset, offset_range.until_offset, settings,
                     why=f"the broker no longer has the partition ({error.str()})")
    if error.fatal() or not error.retriable():
        raise FetchError(f"reading {tp} at offset {next_offset} failed: {error.str()}", kafka_error_code=code)
    logger.warning("retriable error reading %s at offset %d: %s", tp, next_offset, error.str())
    return next_offset


def _check_gap(consumer: Consumer, offset_range: OffsetRange, expected: int, got: int, settings: ReadSettings,
               low: int) -> None:
    """A gap ``[expected, got)`` in the delivered records is data loss when the broker's
    earliest offset ``low`` is past its start; else no record was ever there."""
    if low > expected:
        _lost(consumer, offset_range, expected, min(low, got), settings,
              why=f"the earliest offset on the broker is now {low} (retention or deleted records)",
              reposition=False)
    else:
        logger.debug("gap in %s from %d to %d (compaction or transaction markers)", offset_range.topic_partition,
                     expected, got)


def _lost(
    consumer: Consumer,
    offset_range: OffsetRange,
    missing_from: int,
    missing_until: int,
    settings: ReadSettings,
    *,
    why: str,
    reposition: bool = True,
) -> int:
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
        consumer.assign([KafkaTopicPartition(tp.topic, tp.partition, missing_until)])
    return missing_until


def _watermarks(consumer: Consumer, offset_range: OffsetRange) -> Tuple[int, int]:
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
