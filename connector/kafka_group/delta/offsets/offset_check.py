"""The offset check: may a batch's planned ranges commit on top of what the table holds?

The invariant (stated in :mod:`kafka_group.delta.offsets.delta_offsets`): a batch that read
``[from, until)`` of a partition may commit only if the table has that partition at
``from`` or has never seen it; every range at its ``until`` is a batch committed before.
Pure: the table's positions come in as a mapping.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Sequence

from kafka_group.offsets import OffsetRange, TopicPartition

__all__ = ["CommitCheck", "check_ranges"]


@dataclass(frozen=True)
class CommitCheck:
    """What the table says about a batch's planned ranges."""

    already_committed: bool
    """Every range is at its ``until``: the batch was committed before."""
    committable: List[OffsetRange] = field(default_factory=list)
    """Ranges whose partitions the table has at their ``from`` (or never saw)."""
    conflicts: Dict[TopicPartition, int] = field(default_factory=dict)
    """Partitions whose table position is neither ``from`` nor ``until``, with that position."""

    def describe_conflicts(self, ranges: Sequence[OffsetRange]) -> str:
        """A message naming each conflicting partition, its planned range and the table's position."""
        by_tp = {r.topic_partition: r for r in ranges}
        return "; ".join(
            f"{tp} planned [{by_tp[tp].from_offset}, {by_tp[tp].until_offset}) but the table is at {pos}"
            for tp, pos in sorted(self.conflicts.items())
        )


def check_ranges(held: Mapping[TopicPartition, int], ranges: Sequence[OffsetRange]) -> CommitCheck:
    """Compare ``ranges`` with ``held``, the table's positions of their partitions (absent: never seen)."""
    if ranges and all(held.get(r.topic_partition) == r.until_offset for r in ranges):
        return CommitCheck(already_committed=True)
    committable: List[OffsetRange] = []
    conflicts: Dict[TopicPartition, int] = {}
    for r in ranges:
        pos = held.get(r.topic_partition)
        if pos is None or pos == r.from_offset:
            committable.append(r)
        else:
            conflicts[r.topic_partition] = pos
    return CommitCheck(already_committed=False, committable=committable, conflicts=conflicts)

