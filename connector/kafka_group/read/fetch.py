"""Executor side: read a task's planned offset ranges with ``assign()`` and return Arrow batches.

A reader never joins the consumer group: it assigns itself the partitions of its
ranges at the ranges' first offsets, reads in bulk until each range's end, and
turns the records into Arrow record batches of Spark's Kafka schema.

A task reads all its ranges with one client, checked out of the process's
:mod:`kafka_group.read.reader_pool` (so the next task of the same Python worker reuses
it), and with **one assignment**: every range's partition at once, at the range's
start (a task of a 1,000-partition topic has about 250 ranges; re-assigning per
range cost a fetch round trip each, 5-7 ms). What ``consume()`` returns is split
into runs of one partition (``itertools.groupby`` on ``Message.partition``, no
Python frame per record), and each run goes to its range:

* the fast path takes a run whole when it has no error event, is of the range's
  topic and partition, and continues exactly at the range's next offset (cut at
  its end);
* anything else goes record by record: error events (partition EOF, offset out of
  range, unknown partition), gaps (compaction, transaction markers, or data loss
  when the broker's earliest offset moved past them), records of an earlier
  assignment of a reused client;
* a range that reaches its end is ``incremental_unassign()``-ed (no more fetching
  or prefetched memory for it), and whatever of its partition still arrives is
  dropped; a data-loss skip repositions its partition alone
  (``incremental_unassign`` then ``incremental_assign`` at the new offset), the
  others keep their place.

Several ranges of one partition in a task: adjacent pieces (``[a, b)`` and
``[b, c)``) are read as one; other pieces of that partition are read in a later
*pass* (a second assignment), since one assignment holds a partition once.

Batches hold records of several partitions (Spark needs no batch to hold one):
one builder for the task, flushed at ``maxRecordsPerBatch`` records or at
:data:`~kafka_group.read.batch_assembly.DEFAULT_MAX_BATCH_BYTES` of keys, values and headers,
whichever comes first, so memory is bounded by the batch size whatever the number of
partitions, and no column outgrows what Arrow's ``binary`` holds (2 GiB). Records of one
partition stay in offset order; across partitions the order is the arrival order.

Gaps inside a range are normal in compacted topics and around transaction
markers; a gap is *data loss* only when the broker's earliest offset has moved
past offsets the plan promised (retention, a deleted or recreated topic).

This module is the read loop; the passes and their read state are :mod:`kafka_group.read.passes`,
the batch assembly :mod:`kafka_group.read.batch_assembly`, gap and loss handling
:mod:`kafka_group.read.gaps`, the settings :mod:`kafka_group.read.read_settings`.
"""

from __future__ import annotations

import itertools
import logging
import time
from typing import Iterator, List, NoReturn, Optional, Sequence

import pyarrow as pa
from confluent_kafka import Consumer, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kafka_group.auth.access_errors import access_error
from kafka_group.errors import FetchError
from kafka_group.offsets import OffsetRange
from kafka_group.read import gaps
from kafka_group.read.batch_assembly import MixedBatchBuilder, partition_runs, take_contiguous
from kafka_group.read.default_pool import default_pool
from kafka_group.read.passes import PassState, read_passes
from kafka_group.read.read_settings import ReadSettings
from kafka_group.read.reader_pool import ReaderPool

__all__ = [
    "read_range",
    "read_ranges",
]

logger = logging.getLogger(__name__)

_CONSUME_WAIT_S = 0.5
#: Messages one ``consume()`` asks for at most, whatever ``fetch.maxRecordsPerBatch`` is (a positive int with
#: no upper bound): confluent-kafka refuses more than 1,000,000 (``ValueError``) and reads nothing when asked
#: for 2^32 or more. The loop asks again; the compiled path has the same bound (``native/src/raw.rs``).
_MAX_CONSUME = 100_000
_TOPIC = Message.topic


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
        The client to read with, held by the caller alone; it is re-assigned to this
        range. Without it, a client is checked out of the process's pool for this range.

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
    if consumer is None:
        yield from read_ranges([offset_range], settings)
    elif offset_range.size > 0:
        yield from _read_passes(consumer, [[offset_range]], settings)


def read_ranges(
    offset_ranges: Sequence[OffsetRange], settings: ReadSettings, *, pool: Optional[ReaderPool] = None
) -> Iterator[pa.RecordBatch]:
    """Read several planned ranges as one Spark task, with one client and one assignment.

    A Spark task has a fixed cost (about 0.1 s of a core measured with Spark 4.3
    ``local[2]``), so a micro-batch of many small ranges runs faster as a few
    tasks that each read several ranges than as one task per range; and the task
    reads its ranges together, every partition assigned at once (see the module
    docstring), so a range costs no fetch round trip of its own.

    The task reads with one client, checked out of ``pool`` when the first record
    is asked for and returned (unassigned) when the last range is done or Spark
    stops reading early; the next task of this Python worker with the same client
    settings reuses it.

    Parameters
    ----------
    offset_ranges : sequence of OffsetRange
        The ranges. Adjacent ranges of one partition are read as one; other ranges of
        a partition that already has one are read after it, in a later assignment.
    settings : ReadSettings
        How to read.
    pool : ReaderPool, optional
        Where the client comes from; the process's :func:`~kafka_group.read.default_pool.default_pool`
        when not given.

    Yields
    ------
    pyarrow.RecordBatch
        Batches of Spark's Kafka schema, each at most ``settings.max_records_per_batch``
        records, possibly of several partitions: each planned record once, those of
        one partition in offset order.

    Raises
    ------
    DataLossError
        Planned offsets are gone from the broker and ``failOnDataLoss`` is true.
    FetchError
        No planned record of any unfinished range arrived within
        ``kafkaConsumer.pollTimeoutMs``, or the client failed.

    Notes
    -----
    Caller: the Spark task's thread (``read()`` of the stream and batch readers).
    """
    passes = read_passes(offset_ranges)
    if not passes:
        return
    source = default_pool() if pool is None else pool
    with source.client(settings.client_config, idle_timeout_ms=settings.client_idle_timeout_ms) as consumer:
        yield from _read_passes(consumer, passes, settings)


def _read_passes(consumer: Consumer, passes: Sequence[Sequence[OffsetRange]],
                 settings: ReadSettings) -> Iterator[pa.RecordBatch]:
    """Read each pass with one assignment of ``consumer``; batches span passes."""
    builder = MixedBatchBuilder(settings.include_headers, settings.max_bytes_per_batch)
    for ranges in passes:
        yield from _read_pass(consumer, ranges, settings, builder)
    yield from builder.take_full()
    if len(builder):
        yield builder.build()


def _read_pass(consumer: Consumer, ranges: Sequence[OffsetRange], settings: ReadSettings,
               builder: MixedBatchBuilder) -> Iterator[pa.RecordBatch]:
    """Read ranges of distinct partitions with one assignment; yield each full batch of ``builder``."""
    started = time.monotonic()
    reading = PassState(ranges)
    consumer.assign([KafkaTopicPartition(r.topic_partition.topic, r.topic_partition.partition, r.from_offset)
                     for r in ranges])
    states = reading.states
    cap = settings.max_records_per_batch
    timeout_s = settings.poll_timeout_ms / 1000
    deadline = time.monotonic() + timeout_s
    while reading.pending:
        want = max(1, min(cap - len(builder), reading.remaining, _MAX_CONSUME))
        messages = consumer.consume(num_messages=want, timeout=_CONSUME_WAIT_S)
        progressed = False
        for partition, run in partition_runs(messages):
            if partition is None or partition < 0:
                progressed = _unpartitioned(consumer, run, reading, settings) or progressed
                continue
            first_topic = _TOPIC(run[0])
            state = states.get((first_topic, partition)) if first_topic is not None else None
            if state is not None and not state.done:
                topic = state.offset_range.topic_partition.topic
                taken = take_contiguous(run, topic, partition, state.next_offset, state.offset_range.until_offset)
                if taken is not None:
                    # The common case, with no Python code per record: no errors, no gaps.
                    builder.add_run(topic, partition, *taken)
                    progressed = reading.advance(state, state.next_offset + len(taken[1])) or progressed
                    continue
            for topic_or_none, records in itertools.groupby(run, key=_TOPIC):
                if topic_or_none is None:
                    progressed = _unpartitioned(consumer, list(records), reading, settings) or progressed
                    continue
                state = states.get((topic_or_none, partition))
                if state is None:
                    # Of an earlier assignment of this reused client (librdkafka should have dropped it).
                    logger.debug("ignoring records or events of %s [%d] (not planned in this assignment)",
                                 topic_or_none, partition)
                    continue
                if state.done:
                    continue  # the rest of a finished range's partition, fetched before it was unassigned
                next_offset = _take_one_by_one(consumer, state.offset_range, list(records), state.next_offset,
                                               builder, settings)
                progressed = reading.advance(state, next_offset) or progressed
        if reading.finished:
            # No more fetching (nor prefetched memory) for finished ranges, in one call for all;
            # what is queued of them already is dropped above (state.done).
            consumer.incremental_unassign(reading.finished)
            reading.finished = []
        if progressed:
            # Progress of any range: a planned record, or offsets known to hold none (gaps, skips, EOF).
            deadline = time.monotonic() + timeout_s
        yield from builder.take_full()  # cut at the byte cap
        if len(builder) >= cap:
            yield builder.build()
        if reading.pending and time.monotonic() > deadline:
            _stalled(reading, settings)
    logger.debug("read %d ranges in %.3f s", len(ranges), time.monotonic() - started)


def _unpartitioned(consumer: Consumer, messages: List[Message], reading: PassState, settings: ReadSettings) -> bool:
    """Error events of no partition; return whether a range moved.

    One that names a topic (the topic is gone, say) is an error of every pending range of
    that topic, dealt with as :func:`~kafka_group.read.gaps.handle_error` does for one range. One that names
    none (transport, all brokers down) is logged when retriable and fails the task
    otherwise.
    """
    progressed = False
    for message in messages:
        error = message.error()
        if error is None:
            continue  # no record lacks a partition
        topic = message.topic()
        if topic is not None:
            for state in [s for s in reading.pending_states() if s.offset_range.topic_partition.topic == topic]:
                next_offset = gaps.handle_error(consumer, state.offset_range, state.next_offset, error, message,
                                                settings)
                progressed = reading.advance(state, next_offset) or progressed
            continue
        refused = access_error(error, settings.client_config)
        if refused is not None:
            raise refused
        if error.fatal() or not error.retriable():
            raise FetchError(f"reading {reading.describe_pending()} failed: {error.str()}",
                             kafka_error_code=error.code())
        logger.warning("retriable error reading %s: %s", reading.describe_pending(), error.str())
    return progressed


def _take_one_by_one(
    consumer: Consumer,
    offset_range: OffsetRange,
    messages: List[Message],
    next_offset: int,
    builder: MixedBatchBuilder,
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
            next_offset = gaps.handle_error(consumer, offset_range, next_offset, error, message, settings)
            continue
        offset = message.offset()
        if offset is None or offset < next_offset:
            continue
        if offset >= until:
            next_offset = until
            break
        if offset > next_offset:
            if earliest is None:
                earliest = gaps.watermarks(consumer, offset_range, settings)[0]
            gaps.check_gap(consumer, offset_range, next_offset, offset, settings, earliest)
        good.append(message)
        next_offset = offset + 1
    if good:
        builder.add_run(tp.topic, tp.partition, good)
    return next_offset


def _stalled(reading: PassState, settings: ReadSettings) -> NoReturn:
    """Fail a read whose planned records stopped arriving for ``kafkaConsumer.pollTimeoutMs`` (both
    read paths: :mod:`kafka_group.read.native_fetch` raises it too). Caller: the Spark task's thread."""
    raise FetchError(
        f"no planned record of {reading.pending} partition(s) arrived for {settings.poll_timeout_ms} ms: "
        f"{reading.describe_pending(positions=True)}; check that the brokers "
        f"({settings.client_config.get('bootstrap.servers')}) are reachable from the executors, "
        "or raise 'kafkaConsumer.pollTimeoutMs'"
    )
