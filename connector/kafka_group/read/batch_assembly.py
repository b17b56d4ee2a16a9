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

from kafka_group.errors import RecordError
from kafka_group.read.record_schema import TIMESTAMP_TYPE_BY_LIBRDKAFKA, arrow_schema, header_type

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
#: A record's headers as confluent-kafka returns them.
_Headers = Optional[List[Tuple[str, Optional[bytes]]]]
#: The largest record time (ms, either sign) whose microseconds fit Spark's 64-bit timestamp.
_MAX_TIMESTAMP_MS = (2 ** 63 - 1) // 1000

#: Bytes of keys, values and headers (with ``includeHeaders``) at which a batch is cut, whatever its
#: record count: well below the 2 GiB a ``binary`` column holds (20,000 records of 110 kB overflowed
#: it: ``TypeError: Cannot convert pyarrow.lib.ChunkedArray`` on every replay; so did 70 records of a
#: 32 MiB header each while headers were not counted), so records of any size Kafka takes read.
DEFAULT_MAX_BATCH_BYTES = 256 << 20
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

    A run that would take the batch past ``max_bytes`` of keys, values and (with
    ``include_headers``) header keys and values is cut: the records that fit complete the
    batch, which is built at once and kept for :meth:`take_full`, and the rest start the next
    (a record above ``max_bytes`` is a batch of its own). The sizes come from C-level ``len``
    over the run (headers: one Python call per record), checked once per run; records are
    only measured one by one when a run crosses the cap.

    Parameters
    ----------
    include_headers : bool
        Whether to build the ``headers`` column.
    max_bytes : int
        Bytes of keys, values and headers at which a batch is cut.
    """

    def __init__(self, include_headers: bool, max_bytes: int = DEFAULT_MAX_BATCH_BYTES) -> None:
        self._include_headers = include_headers
        self._schema = arrow_schema(include_headers)
        self._max_bytes = max_bytes
        self._full: List[pa.RecordBatch] = []
        self._reset()

    def _reset(self) -> None:
        self._keys: List[Optional[bytes]] = []
        self._values: List[Optional[bytes]] = []
        self._offsets: List[int] = []
        self._stamps: List[Tuple[int, int]] = []
        self._headers: List[_Headers] = []
        # One (topic, partition, count) per run; consecutive runs of one partition share an entry.
        self._runs: List[List[Any]] = []
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._offsets)

    def take_full(self) -> List[pa.RecordBatch]:
        """The batches the byte cap completed since the last call, oldest first (records of
        one partition stay in offset order across them and the batch being built)."""
        full, self._full = self._full, []
        return full

    def add_run(self, topic: str, partition: int, messages: Sequence[Message],
                offsets: Optional[Sequence[int]] = None) -> None:
        """Append confluent-kafka messages of one partition (cutting a batch at the byte cap).

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

        Raises
        ------
        RecordError
            A record's header key is not UTF-8 (with ``includeHeaders``).
        """
        if not messages:
            return
        keys = list(map(_KEY, messages))
        headers = _headers_of(topic, partition, messages) if self._include_headers else None
        # len(Message) is its value's length (0 for none); C-level loops, no Python frame per record
        # (but one per record with headers).
        size = sum(map(len, messages)) + sum(map(len, filter(None, keys)))
        if headers is not None:
            size += sum(map(_header_bytes, headers))
        if self._bytes + size <= self._max_bytes:
            self._bytes += size
            self._append(topic, partition, messages, keys, headers, offsets)
            return
        self._add_cut(topic, partition, messages, keys, headers, offsets)

    def _add_cut(self, topic: str, partition: int, messages: Sequence[Message], keys: List[Optional[bytes]],
                 headers: Optional[List[_Headers]], offsets: Optional[Sequence[int]]) -> None:
        """Add a run that crosses the byte cap: record by record sizes, a batch completed at each crossing."""
        sizes = [len(m) + (len(k) if k else 0) for m, k in zip(messages, keys)]
        if headers is not None:
            sizes = [size + _header_bytes(h) for size, h in zip(sizes, headers)]
        start = 0
        while start < len(messages):
            end, used = start, self._bytes
            while end < len(messages) and used + sizes[end] <= self._max_bytes:
                used += sizes[end]
                end += 1
            if end == start and not len(self):
                used, end = used + sizes[start], start + 1  # a record above the cap: a batch of its own
            if end > start:
                self._bytes = used
                self._append(topic, partition, messages[start:end], keys[start:end],
                             None if headers is None else headers[start:end],
                             None if offsets is None else offsets[start:end])
            if end < len(messages):
                self._full.append(self.build())
            start = end

    def _append(self, topic: str, partition: int, messages: Sequence[Message], keys: List[Optional[bytes]],
                headers: Optional[List[_Headers]], offsets: Optional[Sequence[int]]) -> None:
        n = len(messages)
        if headers is not None:
            self._headers.extend(headers)
        self._keys.extend(keys)
        self._values.extend(map(_VALUE, messages))
        self._offsets.extend(map(_OFFSET, messages) if offsets is None else offsets)
        self._stamps.extend(map(_TIMESTAMP, messages))
        runs = self._runs
        if runs and runs[-1][1] == partition and runs[-1][0] == topic:
            runs[-1][2] += n
        else:
            runs.append([topic, partition, n])

    def build(self) -> pa.RecordBatch:
        """Return the accumulated records as one batch and start a new one.

        Raises
        ------
        RecordError
            A record's timestamp is out of the range of Spark's timestamps (microseconds in
            64 bits), naming its topic, partition and offset.
        """
        n = len(self._offsets)
        try:
            timestamps, timestamp_types = _timestamp_columns(self._stamps)
        except pa.ArrowInvalid as exc:  # overflow of ms * 1000
            raise self._timestamp_error() from exc
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
            columns.append(pa.array(self._headers, header_type()))
        batch = pa.RecordBatch.from_arrays(columns, schema=self._schema)
        self._reset()
        return batch

    def _timestamp_error(self) -> RecordError:
        index = next(i for i, (kind, ms) in enumerate(self._stamps)
                     if kind != _TIMESTAMP_NOT_AVAILABLE and abs(ms) > _MAX_TIMESTAMP_MS)
        topic, partition, before = "", 0, 0
        for topic, partition, count in self._runs:
            if index < before + count:
                break
            before += count
        kind, ms = self._stamps[index]
        return RecordError(
            f"the record of {topic}-{partition} at offset {self._offsets[index]} has timestamp {ms} ms "
            f"(type {TIMESTAMP_TYPE_BY_LIBRDKAFKA.get(kind, -1)}), outside what a Spark timestamp holds "
            f"(|ms| <= {_MAX_TIMESTAMP_MS}); Spark's own Kafka source fails on it too. Fix the producer's "
            "timestamp, or start the query past this offset (startingOffsets, or the offsets of the group or table)"
        )


def _header_bytes(headers: _Headers) -> int:
    """Bytes of a record's header keys (UTF-8) and values, which count against the byte cap as the compiled
    path counts them (``native/src/batch.rs``, ``record_size``)."""
    if not headers:
        return 0
    return sum(len(key.encode("utf-8")) + (len(value) if value else 0) for key, value in headers)


def _headers_of(topic: str, partition: int, messages: Sequence[Message]) -> List[_Headers]:
    """Each message's headers; a header key confluent-kafka cannot decode fails naming the record.

    confluent-kafka decodes header keys as strict UTF-8 and has no way to hand over their
    bytes, so such a key cannot be read as Spark reads it (Java's lenient decoding, with
    U+FFFD for bad bytes); failing with the record's place beats a bare
    ``UnicodeDecodeError`` on every retry. confluent-kafka's ``Message.headers()`` (2.x) returns
    with that error set, which Python raises as a ``SystemError`` caused by it: both are caught.
    """
    out: List[_Headers] = []
    try:
        out.extend(map(_HEADERS, messages))  # what was decoded before a failure stays in ``out``
    except (UnicodeDecodeError, SystemError) as raised:
        exc = raised if isinstance(raised, UnicodeDecodeError) else raised.__cause__ or raised.__context__
        if not isinstance(exc, UnicodeDecodeError):
            raise
        offset = messages[len(out)].offset()
        raise RecordError(
            f"the record of {topic}-{partition} at offset {offset} has a header key that is not UTF-8 "
            f"({exc.reason} at byte {exc.start}), which the Kafka client cannot decode. Set option "
            "'includeHeaders' to 'false' to read the records without their headers, fix the producer, or "
            "start the query past this offset"
        ) from exc
    return out


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
        micros = pc.multiply_checked(pa.array(millis, pa.int64()), 1000).cast(_TIMESTAMP_ARROW)
        kind = pa.scalar(TIMESTAMP_TYPE_BY_LIBRDKAFKA.get(first, -1), pa.int32())
        return micros, pa.repeat(kind, n)
    # Mixed types or records without a timestamp: per record (rare).
    if any(t != _TIMESTAMP_NOT_AVAILABLE and abs(ms) > _MAX_TIMESTAMP_MS for t, ms in stamps):
        raise pa.ArrowInvalid("overflow")
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
