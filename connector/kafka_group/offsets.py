"""The offset model: topic-partitions, offset ranges and the source's offset document.

Offsets follow Kafka's convention everywhere in the connector: a *position* is
the offset of the next record to read, and a range ``[from_offset, until_offset)``
holds the records ``from_offset`` up to but not including ``until_offset``.

The source's offset document (what Spark writes to its checkpoint and shows in
query progress) maps each topic to its partitions, like Spark's Kafka source::

    {"orders": {"0": [500, 600], "1": 30}}

A partition whose value is a pair was planned in that micro-batch, with the
range ``[500, 600)``; a partition whose value is a number was not planned and
is at that position. A document alone therefore says exactly which records its
batch holds, even when a partition's range does not start where the previous
batch ended (it moved between group members meanwhile).

This module is the in-memory model and imports no format: the document's JSON form (and
its ``@`` keys) is written and read by :mod:`kafka_group.formats`
(:func:`~kafka_group.formats.write_offset_document`,
:func:`~kafka_group.formats.read_offset_document`), its one owner, which builds on this model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Tuple, Union

from kafka_group.errors import OffsetFormatError
from kafka_group.json_text import INT32_MAX, INT64_MAX, NotJson, in_range, parse_json, show

__all__ = [
    "TopicPartition",
    "OffsetRange",
    "StartingOffsets",
    "AtTimestamp",
    "NO_MATCH_ERROR",
    "NO_MATCH_LATEST",
    "StartSpec",
    "BatchOffsets",
    "EARLIEST",
    "LATEST",
    "parse_assign",
    "parse_starting_offsets",
    "parse_starting_timestamps",
    "partitions_by_topic",
]

#: Spark's sentinel for "the earliest offset" in offsets JSON.
EARLIEST = -2
#: Spark's sentinel for "the latest offset" in offsets JSON.
LATEST = -1


class TopicPartition(NamedTuple):
    """One partition of one topic."""

    topic: str
    """The topic's name."""
    partition: int
    """The partition number, from 0."""

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class OffsetRange(NamedTuple):
    """The records ``[from_offset, until_offset)`` of one partition."""

    topic_partition: TopicPartition
    """The partition the records are in."""
    from_offset: int
    """The first offset of the range (inclusive)."""
    until_offset: int
    """The offset after the last one of the range (exclusive)."""

    @property
    def size(self) -> int:
        """The number of offsets in the range."""
        return self.until_offset - self.from_offset

    def __str__(self) -> str:
        return f"{self.topic_partition}[{self.from_offset},{self.until_offset})"


@dataclass(frozen=True)
class AtTimestamp:
    """A start "at the first record whose timestamp is at or after ``timestamp_ms``"
    (``startingTimestamp``, ``startingOffsetsByTimestamp``)."""

    timestamp_ms: int
    """Milliseconds since the epoch, compared with the records' timestamps by the broker."""
    option: str
    """The option that asked for it, for messages."""


#: Where a partition never read starts: an offset, :data:`EARLIEST`, :data:`LATEST`, or a time.
StartSpec = Union[int, AtTimestamp]

#: ``startingOffsetsByTimestampStrategy`` values: fail, or start at the latest offset, where no
#: record is as recent as the timestamp.
NO_MATCH_ERROR = "error"
NO_MATCH_LATEST = "latest"


@dataclass(frozen=True)
class StartingOffsets:
    """Where a partition that was never read before starts.

    As in Spark's Kafka source, ``startingTimestamp`` wins over
    ``startingOffsetsByTimestamp``, which wins over ``startingOffsets``.

    Attributes
    ----------
    default : int
        :data:`EARLIEST` or :data:`LATEST`: for partitions not named in ``specific``.
    specific : dict or None
        Explicit positions (or the sentinels) per partition, from JSON.
    timestamp : int or None
        ``startingTimestamp``: every partition starts at its first record at or after it.
    timestamps : dict or None
        ``startingOffsetsByTimestamp``: per named partition, a timestamp to start at;
        partitions it does not name start as ``specific`` and ``default`` say.
    on_no_match : str
        ``startingOffsetsByTimestampStrategy``: :data:`NO_MATCH_ERROR` (fail the query)
        or :data:`NO_MATCH_LATEST` (start at the latest offset) for a partition with no
        record that recent.
    """

    default: int
    specific: Optional[Mapping[TopicPartition, int]] = None
    timestamp: Optional[int] = None
    timestamps: Optional[Mapping[TopicPartition, int]] = None
    on_no_match: str = NO_MATCH_ERROR

    def for_partition(self, tp: TopicPartition) -> StartSpec:
        """The position, :data:`EARLIEST`, :data:`LATEST` or :class:`AtTimestamp` for ``tp``."""
        if self.timestamp is not None:
            return AtTimestamp(self.timestamp, "startingTimestamp")
        if self.timestamps is not None and tp in self.timestamps:
            return AtTimestamp(self.timestamps[tp], "startingOffsetsByTimestamp")
        if self.specific is not None and tp in self.specific:
            return self.specific[tp]
        return self.default

    def named_partitions(self) -> List[TopicPartition]:
        """The partitions the JSON options name (for checks against the subscription)."""
        return sorted(set(self.specific or {}) | set(self.timestamps or {}))


def parse_starting_offsets(text: str, option: str = "startingOffsets", unnamed: int = EARLIEST) -> StartingOffsets:
    """Parse the ``startingOffsets`` option (or ``endingOffsets``, same form).

    Parameters
    ----------
    text : str
        ``earliest``, ``latest`` or JSON like ``{"orders":{"0":23,"1":-2}}``
        (-2 means earliest, -1 latest). Partitions the JSON does not name start at
        the earliest offset, as new partitions do in Spark's Kafka source.
    option : str
        The option's name, for messages.
    unnamed : int
        Where the partitions a JSON value does not name go (``endingOffsets``: :data:`LATEST`).

    Returns
    -------
    StartingOffsets

    Raises
    ------
    OffsetFormatError
        The text is neither keyword nor valid offsets JSON.
    """
    value = text.strip()
    if value.lower() == "earliest":
        return StartingOffsets(EARLIEST)
    if value.lower() == "latest":
        return StartingOffsets(LATEST)
    doc = _load_json(option, value, 'earliest, latest or JSON like {"orders":{"0":23,"1":-2}}')
    specific: Dict[TopicPartition, int] = {}
    for topic, partitions in _topics(doc, option).items():
        if not isinstance(partitions, dict):
            raise OffsetFormatError(
                f"option '{option}': topic '{topic}' must map partition numbers to offsets, "
                f'like {{"{topic}":{{"0":23}}}}, got {_show(partitions)}'
            )
        for key, offset in partitions.items():
            tp = TopicPartition(topic, _partition_number(option, topic, key))
            if not in_range(offset, EARLIEST, INT64_MAX):
                raise OffsetFormatError(
                    f"option '{option}': offset of {tp} must be a whole number from 0 to {INT64_MAX}, "
                    f"or -2 (earliest) or -1 (latest), got {_show(offset)}"
                )
            specific[tp] = offset
    return StartingOffsets(unnamed, specific)


def parse_starting_timestamps(text: str, option: str = "startingOffsetsByTimestamp") -> Dict[TopicPartition, int]:
    """Parse ``startingOffsetsByTimestamp``: JSON like ``{"orders":{"0":1700000000000}}``
    (milliseconds since the epoch per partition).

    Raises
    ------
    OffsetFormatError
        The JSON is malformed, or a timestamp is not a whole number >= 0.
    """
    doc = _load_json(option, text.strip(), 'JSON like {"orders":{"0":1700000000000}} (milliseconds since the epoch)')
    found: Dict[TopicPartition, int] = {}
    for topic, partitions in _topics(doc, option).items():
        if not isinstance(partitions, dict) or not partitions:
            raise OffsetFormatError(
                f"option '{option}': topic '{topic}' must map partition numbers to timestamps in milliseconds, "
                f'like {{"{topic}":{{"0":1700000000000}}}}, got {_show(partitions)}'
            )
        for key, stamp in partitions.items():
            tp = TopicPartition(topic, _partition_number(option, topic, key))
            if not in_range(stamp, 0, INT64_MAX):
                raise OffsetFormatError(
                    f"option '{option}': the timestamp of {tp} must be milliseconds since the epoch (a whole "
                    f"number from 0 to {INT64_MAX}), got {_show(stamp)}"
                )
            found[tp] = stamp
    return found


def parse_assign(text: str) -> Tuple[TopicPartition, ...]:
    """Parse the ``assign`` option: JSON like ``{"orders":[0,1],"payments":[0]}``.

    Raises
    ------
    OffsetFormatError
        The JSON is malformed or names no partition.
    """
    doc = _load_json("assign", text, 'JSON like {"orders":[0,1]}')
    result: List[TopicPartition] = []
    for topic, partitions in _topics(doc, "assign").items():
        if not isinstance(partitions, list) or not partitions:
            raise OffsetFormatError(
                f"option 'assign': topic '{topic}' must map to a non-empty list of partition "
                f'numbers, like {{"{topic}":[0,1]}}, got {_show(partitions)}'
            )
        for p in partitions:
            result.append(TopicPartition(topic, _partition_number("assign", topic, p)))
    return tuple(dict.fromkeys(result))


def _load_json(option: str, text: str, expected: str) -> Dict[str, Any]:
    try:
        doc = parse_json(text)
    except NotJson as exc:  # the reason is in the message; its traceback is noise
        raise OffsetFormatError(f"option '{option}' is not valid JSON ({exc}): expected {expected}") from None
    if not isinstance(doc, dict) or not doc:
        raise OffsetFormatError(f"option '{option}' must be a non-empty JSON object: expected {expected}, "
                                f"got {_show(text)}")
    return doc


def _show(value: Any, limit: int = 200) -> str:
    """``value`` for a message, shortened: a string as it is, anything else as JSON."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[: limit - 3] + "..."
    return show(value, limit)


#: A Kafka topic name (as the broker allows it).
_TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$", re.ASCII)


def _topics(doc: Mapping[str, Any], option: str) -> Mapping[str, Any]:
    for topic in doc:
        if not topic or not isinstance(topic, str):
            raise OffsetFormatError(f"option '{option}' has an empty topic name")
        if not _TOPIC_NAME.match(topic):
            raise OffsetFormatError(
                f"option '{option}' names topic {_show(topic)}, which is not a valid Kafka topic name "
                "(letters, digits, '.', '_' and '-', at most 249 characters)"
            )
    return doc


def _partition_number(option: str, topic: str, value: Any) -> int:
    text = value.strip() if isinstance(value, str) else None
    if text is not None and text.isascii() and text.isdigit() and len(text) <= 10:
        value = int(text)
    if not in_range(value, 0, INT32_MAX):
        raise OffsetFormatError(
            f"option '{option}': partition {_show(value)} of topic '{topic}' must be a whole number from 0 "
            f"to {INT32_MAX}"
        )
    return int(value)


@dataclass(frozen=True)
class BatchOffsets:
    """The source's offset document for one micro-batch (see the module docstring).

    Attributes
    ----------
    positions : dict
        The position of every partition known to the query, after this batch.
    ranges : dict
        The range planned in this batch, for the partitions that were planned.
    group : str or None
        The consumer group (key ``@group``), when offsets are kept in a Delta table.
    offsets_table : str or None
        The Delta table holding the offsets (key ``@offsetsTable``), when there is one.
        Keys starting with ``@`` cannot be topics (Kafka topic names cannot hold ``@``).
    flow : dict
        The query's manual pauses (key ``@flow``, see :mod:`kafka_group.flow.flow_control`).
    """

    positions: Mapping[TopicPartition, int]
    ranges: Mapping[TopicPartition, OffsetRange]
    group: Optional[str] = None
    offsets_table: Optional[str] = None
    flow: Mapping[str, Any] = field(default_factory=dict)

    @staticmethod
    def empty() -> "BatchOffsets":
        """A document that knows no partition."""
        return BatchOffsets({}, {})

    @staticmethod
    def from_ranges(
        positions: Mapping[TopicPartition, int],
        ranges: Iterable[OffsetRange],
        *,
        group: Optional[str] = None,
        offsets_table: Optional[str] = None,
        flow: Optional[Mapping[str, Any]] = None,
    ) -> "BatchOffsets":
        """Build the document of a batch that plans ``ranges`` over ``positions``."""
        by_tp = {r.topic_partition: r for r in ranges if r.size > 0}
        merged = dict(positions)
        for tp, r in by_tp.items():
            merged[tp] = r.until_offset
        return BatchOffsets(merged, by_tp, group, offsets_table, dict(flow or {}))

    def planned_ranges(self) -> List[OffsetRange]:
        """The ranges of this batch, sorted by topic and partition."""
        return [self.ranges[tp] for tp in sorted(self.ranges)]


def partitions_by_topic(partitions: Iterable[TopicPartition]) -> Dict[str, List[int]]:
    """``{"orders": [0, 3]}``: the partitions of each topic, sorted (the form reports use)."""
    grouped: Dict[str, List[int]] = {}
    for tp in sorted(partitions):
        grouped.setdefault(tp.topic, []).append(tp.partition)
    return grouped

