"""Pure micro-batch planning: how many records each owned partition gets, and in how many tasks.

Nothing here talks to Kafka or Spark; the functions take positions and latest
offsets and return offset ranges, so they are unit-tested without processes.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence

from kafka_group.offsets import OffsetRange, TopicPartition

__all__ = ["allocate_budget", "plan_ranges", "split_ranges"]


def allocate_budget(backlogs: Mapping[TopicPartition, int], budget: Optional[int]) -> Dict[TopicPartition, int]:
    """Share a batch budget among partitions in proportion to their backlogs.

    Parameters
    ----------
    backlogs : mapping of TopicPartition to int
        Records waiting in each partition (negative values count as 0).
    budget : int or None
        The most records the batch may take; None takes everything.

    Returns
    -------
    dict
        Records granted to each partition: never more than its backlog, summing to
        ``min(budget, total backlog)`` exactly (largest-remainder rounding, ties to
        the lower topic-partition), so the budget is neither exceeded nor wasted.
    """
    clean = {tp: max(0, n) for tp, n in backlogs.items()}
    total = sum(clean.values())
    if budget is None or total <= budget:
        return clean
    if budget <= 0:
        return {tp: 0 for tp in clean}
    grants: Dict[TopicPartition, int] = {}
    remainders: List[tuple[float, TopicPartition]] = []
    for tp in sorted(clean):
        exact = budget * clean[tp] / total
        grants[tp] = int(exact)
        remainders.append((exact - int(exact), tp))
    left = budget - sum(grants.values())
    remainders.sort(key=lambda item: (-item[0], item[1]))
    for _, tp in remainders:
        if left <= 0:
            break
        if grants[tp] < clean[tp]:
            grants[tp] += 1
            left -= 1
    return grants


def plan_ranges(
    positions: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    budget: Optional[int],
) -> List[OffsetRange]:
    """Plan the ranges of one micro-batch.

    Parameters
    ----------
    positions : mapping of TopicPartition to int
        The next offset to read of each partition that may be planned.
    latest : mapping of TopicPartition to int
        The end of each partition (or the AvailableNow target); partitions missing
        here are not planned.
    budget : int or None
        ``maxOffsetsPerTrigger``, or None.

    Returns
    -------
    list of OffsetRange
        Non-empty ranges, sorted by topic-partition.
    """
    backlogs = {tp: latest[tp] - pos for tp, pos in positions.items() if tp in latest}
    grants = allocate_budget(backlogs, budget)
    return [
        OffsetRange(tp, positions[tp], positions[tp] + n)
        for tp, n in sorted(grants.items())
        if n > 0
    ]


def split_ranges(ranges: Sequence[OffsetRange], min_tasks: Optional[int]) -> List[OffsetRange]:
    """Split ranges so that a batch runs as at least ``min_tasks`` Spark tasks.

    Like Spark's ``minPartitions``: the largest ranges are split first, into
    pieces of near-equal size, so work spreads over the cores under skew.

    Parameters
    ----------
    ranges : sequence of OffsetRange
        The planned ranges.
    min_tasks : int or None
        The least number of tasks; None or no more than ``len(ranges)`` keeps them.

    Returns
    -------
    list of OffsetRange
        Pieces that cover exactly the input ranges, in order.
    """
    if not min_tasks or len(ranges) >= min_tasks:
        return list(ranges)
    total = sum(r.size for r in ranges)
    if total == 0:
        return list(ranges)
    pieces: List[OffsetRange] = []
    for r in ranges:
        parts = max(1, min(r.size, round(min_tasks * r.size / total)))
        step, extra = divmod(r.size, parts)
        start = r.from_offset
        for i in range(parts):
            end = start + step + (1 if i < extra else 0)
            pieces.append(OffsetRange(r.topic_partition, start, end))
            start = end
    return pieces
