"""A task's passes: its ranges grouped into assignments that hold each partition once
(:func:`read_passes`), and the read state of one pass (:class:`PassState`), which the read
loop (:mod:`kafka_group.read.fetch`) advances."""

from __future__ import annotations

import operator
from typing import Dict, List, Sequence, Tuple

from confluent_kafka import TopicPartition as KafkaTopicPartition

from kafka_group.offsets import OffsetRange, TopicPartition

__all__ = ["PassState", "PendingRange", "read_passes"]


def read_passes(offset_ranges: Sequence[OffsetRange]) -> List[List[OffsetRange]]:
    """Group a task's ranges into assignments that hold each partition at most once.

    Empty ranges are dropped; ranges of one partition that touch (``[a, b)`` and
    ``[b, c)``, in any order) become one; the ``i``-th remaining range of each
    partition (by start offset) goes to pass ``i``. Partitions keep the order of
    their first range.

    Parameters
    ----------
    offset_ranges : sequence of OffsetRange
        A task's planned ranges.

    Returns
    -------
    list of list of OffsetRange
        The passes, each with at most one range per partition; empty when nothing is to be read.
    """
    by_partition: Dict[TopicPartition, List[OffsetRange]] = {}
    for offset_range in offset_ranges:
        if offset_range.size > 0:
            by_partition.setdefault(offset_range.topic_partition, []).append(offset_range)
    passes: List[List[OffsetRange]] = []
    for pieces in by_partition.values():
        merged: List[OffsetRange] = []
        for piece in sorted(pieces, key=operator.attrgetter("from_offset", "until_offset")):
            if merged and merged[-1].until_offset == piece.from_offset:
                merged[-1] = merged[-1]._replace(until_offset=piece.until_offset)
            else:
                merged.append(piece)
        for i, piece in enumerate(merged):
            if i == len(passes):
                passes.append([])
            passes[i].append(piece)
    return passes


class PendingRange:
    """The read state of one range of a pass."""

    __slots__ = ("offset_range", "next_offset", "done")

    def __init__(self, offset_range: OffsetRange) -> None:
        self.offset_range = offset_range
        self.next_offset = offset_range.from_offset
        self.done = False


class PassState:
    """The read state of the ranges of one assignment (one range per partition)."""

    def __init__(self, ranges: Sequence[OffsetRange]) -> None:
        self.states: Dict[Tuple[str, int], PendingRange] = {}
        for offset_range in ranges:
            tp = offset_range.topic_partition
            self.states[(tp.topic, tp.partition)] = PendingRange(offset_range)
        self.pending = len(self.states)
        #: Offsets not yet read or skipped, over every range (an upper bound of the records to come).
        self.remaining = sum(r.size for r in ranges)
        #: Partitions of ranges done since the caller last unassigned them.
        self.finished: List[KafkaTopicPartition] = []

    def advance(self, state: PendingRange, next_offset: int) -> bool:
        """Move ``state`` to ``next_offset`` (never back); return whether it moved."""
        moved = next_offset - state.next_offset
        if moved <= 0:
            return False
        state.next_offset = next_offset
        self.remaining -= moved
        if next_offset >= state.offset_range.until_offset:
            state.done = True
            self.pending -= 1
            tp = state.offset_range.topic_partition
            self.finished.append(KafkaTopicPartition(tp.topic, tp.partition))
        return True

    def pending_states(self) -> List[PendingRange]:
        """The ranges not done yet."""
        return [s for s in self.states.values() if not s.done]

    def describe_pending(self, *, positions: bool = False, most: int = 10) -> str:
        """The partitions still pending (with their offsets), for messages."""
        waiting = self.pending_states()
        shown = ", ".join(
            f"{s.offset_range.topic_partition} at offset {s.next_offset} of "
            f"[{s.offset_range.from_offset}, {s.offset_range.until_offset})" if positions
            else str(s.offset_range.topic_partition) for s in waiting[:most])
        return shown + (f" and {len(waiting) - most} more" if len(waiting) > most else "")
