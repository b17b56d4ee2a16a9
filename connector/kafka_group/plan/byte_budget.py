"""``maxBytesPerTrigger``: a batch's byte budget turned into a record cap per partition (pure).

The planner knows offsets, not bytes. Each partition's bytes per record are estimated from a sample of
the records its batch would read first (:mod:`kafka_group.flow.record_sizes`: key, value and header bytes
of up to a few dozen records at the partition's position, fetched on the driver at planning). The budget
is then shared max-min fairly *in bytes* among the partitions with a backlog (as ``flow.budgetSharing=fair``
shares records: none starves), and each partition's share is turned into whole records:
``floor(share / bytes per record)``, never more than its backlog.

What is bounded: the estimated payload bytes (key + value + headers, uncompressed, as the rows carry
them) of the batch, ``sum(records * bytes per record) <= maxBytesPerTrigger``. Records of another size
than their sample make the real figure differ by that difference. When the budget is smaller than one
record of every partition, the partition with the largest share still gets one record, so a stream
whose records are all larger than the budget moves one record per batch instead of stalling.
"""

from __future__ import annotations

import math
from typing import AbstractSet, Dict, Mapping

from kafka_group.offsets import TopicPartition
from kafka_group.plan.planning import fair_share

__all__ = ["record_caps"]


def record_caps(positions: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
                bytes_per_record: Mapping[TopicPartition, float], max_bytes: int,
                paused: AbstractSet[TopicPartition] = frozenset()) -> Dict[TopicPartition, int]:
    """The most records each partition with a backlog may give a batch of at most ``max_bytes``.

    Parameters
    ----------
    positions, latest : mapping of TopicPartition to int
        The next offset to read and the end of each plannable partition.
    bytes_per_record : mapping of TopicPartition to float
        The estimate of each partition (a partition without one is given none: cap 0).
    max_bytes : int
        ``maxBytesPerTrigger``.
    paused : set of TopicPartition
        Partitions paused by hand: no share.

    Returns
    -------
    dict
        A cap per partition with a backlog (0 for those that get nothing this batch).
    """
    backlog = {tp: max(0, latest[tp] - pos) for tp, pos in positions.items() if tp in latest}
    sized = {tp: max(1.0, float(bytes_per_record[tp])) for tp, n in backlog.items()
             if n > 0 and tp not in paused and tp in bytes_per_record}
    wanted = {tp: math.ceil(backlog[tp] * size) for tp, size in sized.items()}
    shares = fair_share(wanted, max(0, max_bytes))
    caps = {tp: 0 for tp, n in backlog.items() if n > 0}
    for tp, share in shares.items():
        caps[tp] = min(backlog[tp], int(share // sized[tp]))
    if sized and not any(caps.values()):
        widest = max(sorted(sized), key=lambda tp: shares.get(tp, 0))
        caps[widest] = 1
    return caps
