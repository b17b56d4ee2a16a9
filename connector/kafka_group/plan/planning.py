"""Pure micro-batch planning: how many records each owned partition gets, and in how many tasks.

Nothing here talks to Kafka or Spark; the functions take positions and latest
offsets and return offset ranges, so they are unit-tested without processes.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import AbstractSet, Dict, List, Mapping, Optional, Sequence

from kafka_group.config.plan_options import FlowPolicy, TaskSizing
from kafka_group.offsets import OffsetRange, TopicPartition

__all__ = [
    "BatchPlan",
    "HoldReason",
    "allocate_budget",
    "fair_share",
    "pack_ranges",
    "partition_tasks",
    "plan_batch",
]


class HoldReason:
    """Why a partition with a backlog got less than all of it in a batch (constants)."""

    PAUSED = "paused"
    """Paused by hand (``flow.pause``)."""
    ALIGNMENT = "alignment"
    """Its records run more than ``flow.alignment.maxDrift`` ahead of the slowest partition."""
    CAP = "maxOffsetsPerPartition"
    """The per-partition cap of a batch."""
    PRIORITY = "topicPriority"
    """Topics of a higher priority took the batch budget."""
    BUDGET = "maxOffsetsPerTrigger"
    """Its share of the batch budget."""
    BYTES = "maxBytesPerTrigger"
    """Its share of the batch's byte budget (:mod:`kafka_group.plan.byte_budget`)."""


@dataclass(frozen=True)
class BatchPlan:
    """The ranges of one micro-batch, and the partitions held back with the rule that held them."""

    ranges: List[OffsetRange]
    held: Dict[TopicPartition, str]

    def held_for_records(self, reason: str) -> "BatchPlan":
        """This plan skipped as a whole (``minOffsetsPerTrigger``): no range, each of its partitions
        held for ``reason``, with the ones it held already."""
        return BatchPlan([], {**self.held, **{r.topic_partition: reason for r in self.ranges}})

    def describe(self) -> str:
        """``records: ranges; held back: partitions (why)`` for the log."""
        held = ("; held back: " + ", ".join(f"{tp} ({why})" for tp, why in sorted(self.held.items()))
                if self.held else "")
        return f"{sum(r.size for r in self.ranges)} records: {', '.join(map(str, self.ranges)) or 'nothing'}{held}"


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


def fair_share(allowances: Mapping[TopicPartition, int], budget: Optional[int]) -> Dict[TopicPartition, int]:
    """Share ``budget`` max-min fairly: equal shares, what a partition cannot use goes to the others.

    Parameters
    ----------
    allowances : mapping of TopicPartition to int
        The most each partition may take (negative values count as 0).
    budget : int or None
        The most records in all; None grants every allowance.

    Returns
    -------
    dict
        Grants that never exceed an allowance and sum to ``min(budget, total)``. When
        the budget is at least the number of partitions with an allowance, every one
        of them gets at least one record, however skewed the backlogs.
    """
    clean = {tp: max(0, n) for tp, n in allowances.items()}
    if budget is None or sum(clean.values()) <= budget:
        return clean
    grants: Dict[TopicPartition, int] = {tp: 0 for tp in clean}
    remaining = max(0, budget)
    waiting = sorted((n, tp) for tp, n in clean.items() if n > 0)
    for i, (allowance, tp) in enumerate(waiting):
        level = remaining // (len(waiting) - i)
        if allowance <= level:
            grants[tp] = allowance
            remaining -= allowance
            continue
        # Everyone left wants more than the level: equal shares, the remainder one each in order.
        rest = sorted(other for _, other in waiting[i:])
        base, extra = divmod(remaining, len(rest))
        for j, other in enumerate(rest):
            grants[other] = base + (1 if j < extra else 0)
        break
    return grants


def plan_batch(
    positions: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    budget: Optional[int],
    policy: FlowPolicy = FlowPolicy(),
    paused: AbstractSet[TopicPartition] = frozenset(),
    limits: Optional[Mapping[TopicPartition, int]] = None,
    caps: Optional[Mapping[TopicPartition, int]] = None,
) -> BatchPlan:
    """Plan one micro-batch under the flow-control rules.

    The rules apply in this order, each only lowering what a partition may take:
    a pause (nothing), an event-time limit (up to an offset), the per-partition
    cap, then the batch budget, which higher-priority topics take first and which
    is shared within a priority by ``policy.sharing``.

    Parameters
    ----------
    positions : mapping of TopicPartition to int
        The next offset to read of each partition that may be planned.
    latest : mapping of TopicPartition to int
        The end of each partition; partitions missing here are not planned.
    budget : int or None
        The batch budget (``maxOffsetsPerTrigger``, Spark's read limit), or None.
    policy : FlowPolicy
        The automatic rules.
    paused : set of TopicPartition
        Partitions paused by hand.
    limits : mapping of TopicPartition to int, optional
        An offset each partition must not read up to (event-time alignment).
    caps : mapping of TopicPartition to int, optional
        The most records each partition may give (``maxBytesPerTrigger``'s share, applied after the
        per-partition cap; a partition missing here is not capped).

    Returns
    -------
    BatchPlan
        Non-empty ranges sorted by topic-partition, and each partition that has a
        backlog but got less than all of it, with the first rule that held it.
    """
    backlogs = {tp: max(0, latest[tp] - pos) for tp, pos in positions.items() if tp in latest}
    allowances: Dict[TopicPartition, int] = {}
    held: Dict[TopicPartition, str] = {}
    for tp, backlog in backlogs.items():
        allowance = backlog
        if tp in paused:
            allowance = 0
            reason: Optional[str] = HoldReason.PAUSED
        else:
            reason = None
            if limits is not None and tp in limits and limits[tp] - positions[tp] < allowance:
                allowance = max(0, limits[tp] - positions[tp])
                reason = HoldReason.ALIGNMENT
            if policy.max_per_partition is not None and allowance > policy.max_per_partition:
                allowance = policy.max_per_partition
                reason = reason or HoldReason.CAP
            if caps is not None and tp in caps and allowance > caps[tp]:
                allowance = caps[tp]
                reason = reason or HoldReason.BYTES
        allowances[tp] = allowance
        if reason is not None and backlog > 0:
            held[tp] = reason
    grants: Dict[TopicPartition, int] = {}
    remaining = budget
    for level in sorted({policy.topic_priority.get(tp.topic, 0) for tp in allowances}, reverse=True):
        tier = {tp: n for tp, n in allowances.items() if policy.topic_priority.get(tp.topic, 0) == level}
        taken_by_higher = remaining is not None and budget is not None and remaining < budget
        share = fair_share(tier, remaining) if policy.sharing == "fair" else allocate_budget(tier, remaining)
        for tp, n in share.items():
            grants[tp] = n
            if n < tier[tp] and tp not in held:
                held[tp] = HoldReason.PRIORITY if taken_by_higher and n == 0 else HoldReason.BUDGET
        if remaining is not None:
            remaining -= sum(share.values())
    ranges = [OffsetRange(tp, positions[tp], positions[tp] + n) for tp, n in sorted(grants.items()) if n > 0]
    return BatchPlan(ranges, held)


def pack_ranges(ranges: Sequence[OffsetRange], sizing: TaskSizing = TaskSizing()) -> List[List[OffsetRange]]:
    """Split and pack a batch's ranges onto Spark tasks of near-equal record counts.

    The task count is ``ceil(total / min_records_per_task)`` bounded by
    :meth:`TaskSizing.task_cap` (``fetch.maxTasks``, else twice the cluster's
    parallelism, else the batch's Kafka partition count), then raised to ``min_tasks`` and to what
    ``max_records_per_task`` needs. Ranges are cut into pieces of at most
    ``ceil(total / tasks)`` records (so one huge partition still keeps every core
    busy) and the pieces are packed largest first onto the least loaded task.

    Parameters
    ----------
    ranges : sequence of OffsetRange
        The planned ranges.
    sizing : TaskSizing
        The sizing options.

    Returns
    -------
    list of list of OffsetRange
        One list per task, each sorted by topic-partition and offset; together
        they cover exactly the input ranges. With ``sizing.layout == "partition"``,
        :func:`partition_tasks`.
    """
    if sizing.layout == "partition":
        return partition_tasks(ranges, sizing)
    total = sum(r.size for r in ranges if r.size > 0)
    if total == 0:
        return []
    tasks = min(sizing.task_cap(sum(1 for r in ranges if r.size > 0)), -(-total // max(1, sizing.min_records_per_task)))
    if sizing.min_tasks:
        tasks = max(tasks, sizing.min_tasks)
    if sizing.max_records_per_task:
        tasks = max(tasks, -(-total // sizing.max_records_per_task))
    tasks = max(1, min(tasks, total))
    limit = -(-total // tasks)
    pieces: List[OffsetRange] = []
    for r in ranges:
        start = r.from_offset
        while start < r.until_offset:
            end = min(r.until_offset, start + limit)
            pieces.append(OffsetRange(r.topic_partition, start, end))
            start = end
    capacity = sizing.max_records_per_task or total
    loads = [(0, i) for i in range(tasks)]
    packed: List[List[OffsetRange]] = [[] for _ in range(tasks)]
    for piece in sorted(pieces, key=lambda p: (-p.size, p.topic_partition, p.from_offset)):
        load, i = heapq.heappop(loads)
        if load + piece.size > capacity:  # only with maxRecordsPerPartition: open another task
            heapq.heappush(loads, (load, i))
            load, i = 0, len(packed)
            packed.append([])
        packed[i].append(piece)
        heapq.heappush(loads, (load + piece.size, i))
    return [sorted(task, key=lambda p: (p.topic_partition, p.from_offset)) for task in packed if task]


def partition_tasks(ranges: Sequence[OffsetRange], sizing: TaskSizing = TaskSizing()) -> List[List[OffsetRange]]:
    """Spark's layout: one task per Kafka partition's range, as ``KafkaOffsetRangeCalculator`` makes them.

    Every task reads one piece of one Kafka partition, tasks in topic-partition and
    offset order (so ``spark_partition_id()`` ``i`` is the ``i``-th partition of the
    batch with records, when no range is split). A range is split, into near-equal
    pieces that are each a task of their own, only as Spark splits it: into
    ``ceil(size / max_records_per_task)`` pieces with ``maxRecordsPerPartition``, and,
    with ``minPartitions`` above the number of pieces, large ranges in proportion to
    their size. ``fetch.minRecordsPerTask`` and ``fetch.maxTasks`` do not apply.

    Parameters
    ----------
    ranges : sequence of OffsetRange
        The planned ranges (at most one per partition; empty ones are dropped).
    sizing : TaskSizing
        ``min_tasks`` and ``max_records_per_task`` are used.

    Returns
    -------
    list of list of OffsetRange
        One single-range list per task.
    """
    pieces = sorted((r for r in ranges if r.size > 0), key=lambda r: (r.topic_partition, r.from_offset))
    if sizing.max_records_per_task:
        most = sizing.max_records_per_task
        pieces = [p for r in pieces for p in _divided(r, -(-r.size // most))]
    if sizing.min_tasks and sizing.min_tasks > len(pieces):
        total = sum(r.size for r in pieces)
        unsplit = [r for r in pieces if _part_count(r.size, total, sizing.min_tasks) == 1]
        split_total = total - sum(r.size for r in unsplit)
        split_min = max(sizing.min_tasks - len(unsplit), 1)
        pieces = [p for r in pieces for p in
                  ([r] if any(r is u for u in unsplit) else _divided(r, _part_count(r.size, split_total, split_min)))]
    return [[p] for p in pieces if p.size > 0]


def _part_count(size: int, total: int, parts: int) -> int:
    """Spark's ``getPartCount``: ``max(round(size / total * parts), 1)``, rounding halves up as Scala does."""
    return max(int(size / total * parts + 0.5), 1) if total else 1


def _divided(offset_range: OffsetRange, parts: int) -> List[OffsetRange]:
    """Spark's ``getDividedPartition``: ``parts`` near-equal pieces, the last ones a record larger."""
    pieces: List[OffsetRange] = []
    remaining, start = offset_range.size, offset_range.from_offset
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        end = min(start + this, offset_range.until_offset)
        pieces.append(OffsetRange(offset_range.topic_partition, start, end))
        start = end
    return pieces
