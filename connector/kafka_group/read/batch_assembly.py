"""Batch assembly: confluent-kafka messages into Arrow record batches of Spark's Kafka schema.

What ``consume()`` returns is split into runs of one partition (:func:`partition_runs`); a run
that continues its range exactly is taken whole (:func:`take_contiguous`), and
:class:`MixedBatchBuilder` turns runs of any partitions into one batch, with no Python frame
per record. The read loop that drives them is :mod:`kafka_group.read.fetch`.
"""

from __future__ import annotations

import itertools
import operator
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple, cast

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Message

from kafka_group.read.record_schema import HEADER_TYPE, TIMESTAMP_TYPE_BY_LIBRDKAFKA, arrow_schema

__all__ = [
    "MixedBatchBuilder",
    "partition_runs",
    "take_contiguous",
]

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


class MixedBatchBuilder:
    """Accumulates runs of records of any partitions, then builds one Arrow batch of Spark's Kafka schema.

    Per record, only confluent-kafka's own accessors run (through ``map`` over the
    unbound ``Message`` methods, so no Python frame per record); every column is
    then built in one call: ``topic`` and ``partition`` from the runs (a repeated
    scalar when the batch holds one partition, else each run's value repeated by
    its length), ``timestamp`` by one vectorized multiply, ``timestampType`` as a
    repeated scalar when all records share a type (they do unless the topic mixes
    them).

    Parameters
    ----------
    include_headers : bool
        Whether to build the ``headers`` column.
    """

    def __init__(self, include_headers: bool) -> None:
        self._include_headers = include_headers
        self._schema = arrow_schema(include_headers)
        self._reset()

    def _reset(self) -> None:
        self._keys: List[Optional[bytes]] = []
        self._values: List[Optional[bytes]] = []
        self._offsets: List[int] = []
        self._stamps: List[Tuple[int, int]] = []
        self._headers: List[Optional[List[Tuple[str, Optional[bytes]]]]] = []
        # One (topic, partition, count) per run; consecutive runs of one partition share an entry.
        self._runs: List[List[Any]] = []

    def __len__(self) -> int:
        return len(self._offsets)

    def add_run(self, topic: str, partition: int, messages: Sequence[Message],
                offsets: Optional[Sequence[int]] = None) -> None:
        """Append confluent-kafka messages of one partition.

        Parameters
        ----------
        topic : str
            The records' topic.
        partition : int
            The records' partition.
        messages : sequence of confluent_kafka.Message
            Records of that partition, all without error, in offset order.
        offsets : sequence of int, optional
            Their offsets, when the caller has them already.
        """
        n = len(messages)
        if n == 0:
            return
        self._keys.extend(map(_KEY, messages))
        self._values.extend(map(_VALUE, messages))
        self._offsets.extend(map(_OFFSET, messages) if offsets is None else offsets)
        self._stamps.extend(map(_TIMESTAMP, messages))
        if self._include_headers:
            self._headers.extend(map(_HEADERS, messages))
        runs = self._runs
        if runs and runs[-1][1] == partition and runs[-1][0] == topic:
            runs[-1][2] += n
        else:
            runs.append([topic, partition, n])

    def build(self) -> pa.RecordBatch:
        """Return the accumulated records as one batch and start a new one."""
        n = len(self._offsets)
        timestamps, timestamp_types = _timestamp_columns(self._stamps)
        topics, partitions = _run_columns(self._runs, n)
        columns = [
            pa.array(self._keys, pa.binary()),
            pa.array(self._values, pa.binary()),
            topics,
            partitions,
            pa.array(self._offsets, pa.int64()),
            timestamps,
            timestamp_types,
        ]
        if self._include_headers:
            columns.append(pa.array(self._headers, HEADER_TYPE))
        batch = pa.RecordBatch.from_arrays(columns, schema=self._schema)
        self._reset()
        return batch


def _run_columns(runs: Sequence[Sequence[Any]], n: int) -> Tuple[pa.Array, pa.Array]:
    """The ``topic`` and ``partition`` columns of ``n`` records from their ``(topic, partition, count)`` runs."""
    if len(runs) <= 1:
        topic, partition = (runs[0][0], runs[0][1]) if runs else ("", 0)
        return pa.repeat(pa.scalar(topic, pa.string()), n), pa.repeat(pa.scalar(partition, pa.int32()), n)
    counts = [run[2] for run in runs]
    partitions = pa.array(_repeat_each([run[1] for run in runs], counts), pa.int32())
    names = list(dict.fromkeys(run[0] for run in runs))
    if len(names) == 1:
        return pa.repeat(pa.scalar(names[0], pa.string()), n), partitions
    index = {name: i for i, name in enumerate(names)}
    indices = pa.array(_repeat_each([index[run[0]] for run in runs], counts), pa.int32())
    return pc.take(pa.array(names, pa.string()), indices), partitions


def _repeat_each(values: Sequence[Any], counts: Sequence[int]) -> List[Any]:
    """``values[i]`` repeated ``counts[i]`` times, in order (C-level loops only)."""
    return list(itertools.chain.from_iterable(map(itertools.repeat, values, counts)))


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


def partition_runs(messages: Sequence[Message]) -> Iterator[Tuple[Optional[int], List[Message]]]:
    """Split what ``consume()`` returned into runs of consecutive messages of one partition number.

    A run may still hold records of two topics that share the partition number, or
    error events; :func:`take_contiguous` checks every record's topic.

    Parameters
    ----------
    messages : sequence of confluent_kafka.Message
        Records and events, in the order the client delivered them.

    Yields
    ------
    tuple of (int or None, list of confluent_kafka.Message)
        The partition number (None for events of no partition, such as transport
        errors) and the run's messages.
    """
    for partition, run in itertools.groupby(messages, key=_PARTITION):
        yield partition, list(run)


def take_contiguous(
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
    # A run of partition_runs() is of one partition number, but a task's ranges may span
    # topics that share it, and a reused client could deliver records of an earlier
    # assignment (librdkafka drops them): every record's topic is checked (C-level loops).
    first, last = messages[0], messages[-1]
    if _PARTITION(first) != partition or _PARTITION(last) != partition:
        return None
    if list(map(_TOPIC, messages)).count(topic) != n:
        return None
    offsets = list(map(_OFFSET, messages))
    if offsets != list(range(next_offset, next_offset + n)):
        return None
    if next_offset + n > until:
        keep = until - next_offset
        return messages[:keep], offsets[:keep]
    return messages, offsets
