"""Executor side, compiled: read a task's planned ranges into Arrow batches with ``kafka_group._native``.

The same read as :mod:`kafka_group.read.fetch` (the reference, and the fallback), with the
record loop in Rust: the task's ranges are grouped into passes (:func:`~kafka_group.read.passes.read_passes`),
each pass is one assignment, and :meth:`Client.fill` consumes a bulk of messages and appends
every record that continues its range exactly straight into Arrow columns (no Python object
per record). What it cannot take that way comes back as messages, in arrival order, and goes
through the reference path's own code: error events (:func:`kafka_group.read.fetch._unpartitioned`,
:func:`kafka_group.read.gaps.handle_error`), gaps and data loss
(:func:`kafka_group.read.fetch._take_one_by_one`). Batches are cut at
``fetch.maxRecordsPerBatch`` records and at the byte cap as the Python builder cuts them;
finished ranges are unassigned; the poll timeout fails the task with the same
:class:`~kafka_group.errors.FetchError`.

Clients come from a pool of their own (:func:`native_pool`), with the rules of
:mod:`kafka_group.read.reader_pool`.
"""

from __future__ import annotations

import atexit
import itertools
import logging
import threading
import time
from types import ModuleType
from typing import Any, Dict, Iterator, List, Optional, Sequence

import pyarrow as pa
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kafka_group.offsets import OffsetRange
from kafka_group.read.fetch import _MAX_CONSUME, _stalled, _take_one_by_one, _unpartitioned
from kafka_group.read.native_client import NativeConsumer, internal_error, kafka_error, record_error
from kafka_group.read.passes import PassState, read_passes
from kafka_group.read.read_settings import ReadSettings
from kafka_group.read.reader_pool import ReaderPool

__all__ = ["native_pool", "read_ranges_native"]

logger = logging.getLogger(__name__)

_CONSUME_WAIT_MS = 500

_pools: Dict[int, ReaderPool] = {}
_pools_lock = threading.Lock()


def native_pool(native: ModuleType) -> ReaderPool:
    """The process's pool of compiled reader clients (made on first use).

    Notes
    -----
    Caller: any thread.
    """
    with _pools_lock:
        pool = _pools.get(id(native))
        if pool is None:
            pool = ReaderPool(lambda config: NativeConsumer(native, config))
            atexit.register(pool.close_all)
            _pools[id(native)] = pool
        return pool


class _BatchSink:
    """The ``add_run`` that :func:`~kafka_group.read.fetch._take_one_by_one` appends checked records with."""

    def __init__(self, consumer: NativeConsumer) -> None:
        self._consumer = consumer

    def add_run(self, topic: str, partition: int, messages: Sequence[Any],
                offsets: Optional[Sequence[int]] = None) -> None:
        self._consumer.client.add_messages(topic, partition, [m.native for m in messages])


class _Event:
    """A message the extension handed back, with confluent-kafka's ``error()`` (a ``KafkaError`` or None)."""

    __slots__ = ("native", "_error")

    def __init__(self, message: Any) -> None:
        self.native = message
        info = message.error_info()
        self._error = None if info is None else kafka_error(*info)

    def error(self) -> Any:
        return self._error

    def topic(self) -> Optional[str]:
        return self.native.topic()  # type: ignore[no-any-return]

    def partition(self) -> Optional[int]:
        return self.native.partition()  # type: ignore[no-any-return]

    def offset(self) -> Optional[int]:
        return self.native.offset()  # type: ignore[no-any-return]


def read_ranges_native(offset_ranges: Sequence[OffsetRange], settings: ReadSettings, native: ModuleType, *,
                       pool: Optional[ReaderPool] = None) -> Iterator[pa.RecordBatch]:
    """Read a task's planned ranges with the compiled client, as
    :func:`kafka_group.read.fetch.read_ranges` reads them (same batches, same errors).

    Parameters
    ----------
    offset_ranges : sequence of OffsetRange
        The task's ranges.
    settings : ReadSettings
        How to read.
    native : module
        ``kafka_group._native``.
    pool : ReaderPool, optional
        Where the client comes from (:func:`native_pool` when not given).

    Yields
    ------
    pyarrow.RecordBatch
        Batches of Spark's Kafka schema, each at most ``settings.max_records_per_batch`` records.

    Raises
    ------
    DataLossError, FetchError, RecordError, AuthenticationError, AuthorizationError
        As the Python read path raises them; a Rust panic (a bug) as :class:`FetchError`
        (:func:`~kafka_group.read.native_client.internal_error`), its client closed.

    Notes
    -----
    Caller: the Spark task's thread.
    """
    passes = read_passes(offset_ranges)
    if not passes:
        return
    source = native_pool(native) if pool is None else pool
    # An error leaves the checkout's block, which closes the client rather than park it.
    try:
        with source.client(settings.client_config, idle_timeout_ms=settings.client_idle_timeout_ms) as consumer:
            client = consumer.client
            client.reset_batches(settings.include_headers, settings.max_bytes_per_batch)
            for ranges in passes:
                yield from _read_pass(consumer, ranges, settings, native)
            yield from client.take_full()
            if client.batch_len():
                yield client.build()
    except native.RecordProblem as exc:
        raise record_error(exc.args) from None
    except native.InternalProblem as exc:
        raise internal_error(exc.args) from None


def _read_pass(consumer: NativeConsumer, ranges: Sequence[OffsetRange], settings: ReadSettings,
               native: ModuleType) -> Iterator[pa.RecordBatch]:
    """Read ranges of distinct partitions with one assignment; yield each full batch."""
    client = consumer.client
    reading = PassState(ranges)
    client.begin_pass([(r.topic_partition.topic, r.topic_partition.partition, r.from_offset, r.until_offset)
                       for r in ranges])
    consumer.assign([KafkaTopicPartition(r.topic_partition.topic, r.topic_partition.partition, r.from_offset)
                     for r in ranges])
    states = reading.states
    sink = _BatchSink(consumer)
    cap = settings.max_records_per_batch
    timeout_s = settings.poll_timeout_ms / 1000
    deadline = time.monotonic() + timeout_s
    while reading.pending:
        want = max(1, min(cap - client.batch_len(), reading.remaining, _MAX_CONSUME))
        moves, others = client.fill(want, _CONSUME_WAIT_MS)
        consumer.raise_reported()
        progressed = False
        for topic, partition, next_offset in moves:
            progressed = reading.advance(states[(topic, partition)], next_offset) or progressed
        if others:
            progressed = _handle_others(consumer, [_Event(m) for m in others], reading, settings, sink) or progressed
        if reading.finished:
            consumer.incremental_unassign(reading.finished)
            reading.finished = []
        if progressed:
            deadline = time.monotonic() + timeout_s
        yield from client.take_full()
        if client.batch_len() >= cap:
            yield client.build()
        if reading.pending and time.monotonic() > deadline:
            _stalled(reading, settings)


def _handle_others(consumer: NativeConsumer, events: List[_Event], reading: PassState, settings: ReadSettings,
                   sink: _BatchSink) -> bool:
    """What ``fill`` left, in arrival order: runs of one partition, dealt with by the reference path's
    code; return whether a range moved."""
    client = consumer.client
    progressed = False
    for partition, run_iter in itertools.groupby(events, key=_Event.partition):
        run = list(run_iter)
        if partition is None or partition < 0:
            progressed = _unpartitioned(consumer, run, reading, settings) or progressed  # type: ignore[arg-type]
            _sync(client, reading)
            continue
        for topic, records_iter in itertools.groupby(run, key=_Event.topic):
            records = list(records_iter)
            if topic is None:
                progressed = _unpartitioned(consumer, records, reading, settings) or progressed  # type: ignore[arg-type]
                _sync(client, reading)
                continue
            state = reading.states.get((topic, partition))
            if state is None or state.done:
                continue
            next_offset = _take_one_by_one(consumer, state.offset_range, records,  # type: ignore[arg-type]
                                           state.next_offset, sink, settings)  # type: ignore[arg-type]
            progressed = reading.advance(state, next_offset) or progressed
            client.set_next(topic, partition, state.next_offset)
    return progressed


def _sync(client: Any, reading: PassState) -> None:
    """Tell the extension where every range is after Python moved some."""
    for state in reading.states.values():
        tp = state.offset_range.topic_partition
        client.set_next(tp.topic, tp.partition, state.next_offset)
