"""A change of the group member's assignment, as the member reports it to its listeners."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import FrozenSet

from kafka_group.offsets import TopicPartition

__all__ = ["RebalanceEvent"]


@dataclass(frozen=True)
class RebalanceEvent:
    """One change of the member's assignment."""

    kind: str
    """``assign``, ``revoke`` or ``lost``."""
    partitions: FrozenSet[TopicPartition]
    """The partitions added (assign) or removed (revoke, lost)."""
    generation: int
    """The member's rebalance count after this event (1 after the first assignment)."""
    owned: FrozenSet[TopicPartition] = frozenset()
    """Every partition the member owns after this event."""
    group_id: str = ""
    """The consumer group."""
    member_id: str = ""
    """The member id the group coordinator gave this member ("" before it had one)."""
    at: float = field(default_factory=time.time)
    """When the event happened (seconds since the epoch)."""

    @property
    def cause(self) -> str:
        """Why the assignment changed, in words, as far as a member can tell."""
        return _CAUSES.get(self.kind, self.kind)


_CAUSES = {
    "assign": "the group coordinator assigned partitions (this member joined, or the group rebalanced)",
    "revoke": "the group is rebalancing (a member joined or left, or the subscription's topics changed)",
    "lost": "this member lost its membership (session timed out or it was fenced); the partitions may "
            "already belong to another member",
}
