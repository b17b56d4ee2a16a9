"""The commits a group member's planning thread hands to its polling thread.

:class:`~kafka_group.group.membership.GroupMember` never lets Spark's planning thread take the
consumer lock (a revoke callback may hold it, waiting for the running batch to land): commits made
there are queued here and sent by the polling thread between two polls. This module keeps them:

- *Queued positions*, sent without waiting (lag tools, the next owner's position).
- *Awaited commits* (:class:`~kafka_group.group.offset_commits.AwaitedCommit`), whose thread waits
  for the coordinator's answer (a start the next owner must find, review of issue 26 finding 8).
- *Generations*: each partition's generation at its last assignment. Positions computed under an
  older generation of a partition (it was revoked, or revoked and given back, since: another
  member may have moved the group's offset meanwhile) are stale and dropped (finding 5).

Every method is called under the member's state lock (``GroupMember._state``), which also guards
what the member owns; so a rebalance never runs between the ownership check and the queueing.
"""

from __future__ import annotations

import logging
from typing import AbstractSet, Dict, Iterable, List, Mapping, Optional, Tuple

from kafka_group.group.offset_commits import AwaitedCommit, describe_positions
from kafka_group.offsets import TopicPartition

__all__ = ["PendingCommits"]

logger = logging.getLogger(__name__)


class PendingCommits:
    """Queued and awaited commits of one member, and the generation of each partition's assignment.

    Parameters
    ----------
    group_id : str
        The group (for logs).

    Notes
    -----
    Callers: any thread, holding the member's state lock (see the module docstring).
    """

    def __init__(self, group_id: str) -> None:
        self._group_id = group_id
        self._queued: Dict[TopicPartition, int] = {}
        self._assigned_at: Dict[TopicPartition, int] = {}
        self._awaited: List[AwaitedCommit] = []

    def assigned(self, partitions: Iterable[TopicPartition], generation: int) -> None:
        """``partitions`` were assigned at ``generation``. Caller: the polling thread, in a rebalance."""
        self._assigned_at.update((tp, generation) for tp in partitions)

    def removed(self, partitions: Iterable[TopicPartition]) -> None:
        """``partitions`` were revoked or lost: a commit queued before must not reach the group if they come back
        later (another member may have moved them on meanwhile), nor an awaited one not sent yet (the
        partitions may be assigned again before it is). Caller: the polling thread, in a rebalance."""
        removed = set(partitions)
        for tp in removed:
            self._queued.pop(tp, None)
            self._assigned_at.pop(tp, None)
        for awaited in self._awaited:  # replaced, not changed in place: its waiting thread may be reading it
            awaited.positions = {tp: pos for tp, pos in awaited.positions.items() if tp not in removed}

    def current(self, positions: Mapping[TopicPartition, int], generation: Optional[int],
                owned: AbstractSet[TopicPartition]) -> Dict[TopicPartition, int]:
        """``positions`` without the stale ones: of partitions not ``owned``, or assigned after ``generation``
        (None: the caller owns them throughout)."""
        if generation is None:
            return dict(positions)
        current = {tp: pos for tp, pos in positions.items()
                   if tp in owned and self._assigned_at.get(tp, 0) <= generation}
        if len(current) < len(positions):
            logger.info("not committing %s to group '%s': revoked or assigned again since they were computed",
                        describe_positions({tp: p for tp, p in positions.items() if tp not in current}),
                        self._group_id)
        return current

    def queue(self, positions: Mapping[TopicPartition, int], generation: Optional[int],
              owned: AbstractSet[TopicPartition]) -> None:
        """Queue the current ones of ``positions`` for the polling thread."""
        self._queued.update(self.current(positions, generation, owned))

    def await_commit(self, positions: Mapping[TopicPartition, int], generation: Optional[int],
                     owned: AbstractSet[TopicPartition]) -> Optional[AwaitedCommit]:
        """Queue the current ones of ``positions`` as a commit the caller waits for; None when none is current."""
        current = self.current(positions, generation, owned)
        if not current:
            return None
        awaited = AwaitedCommit(current)
        self._awaited.append(awaited)
        return awaited

    def take(self) -> Tuple[Dict[TopicPartition, int], List[AwaitedCommit]]:
        """What to send now: the queued positions and the awaited commits. Caller: the polling thread."""
        queued, self._queued = self._queued, {}
        awaited, self._awaited = self._awaited, []
        return queued, awaited
