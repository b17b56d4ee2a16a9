"""What the source driver needs of its collaborators, as :class:`typing.Protocol` types.

:class:`~kafka_group.source_driver.SourceDriver` takes its cluster view, group
member and offset store as constructor arguments typed by these protocols, so
tests drive it with in-memory fakes (``tests/unit/driver_fakes.py``) and the
real ones (:class:`~kafka_group.group.cluster_metadata.ClusterView`,
:class:`~kafka_group.group.membership.GroupMember`,
:class:`~kafka_group.delta.offsets.delta_offsets.DeltaOffsetStore`) satisfy them as they are.
Only the methods the driver uses are declared.
"""

from __future__ import annotations

from typing import Callable, Dict, FrozenSet, Iterable, List, Mapping, Optional, Protocol, Sequence

from kafka_group.offsets import TopicPartition
from kafka_group.rebalance_event import RebalanceEvent

__all__ = ["Cluster", "Committer", "Member", "OffsetStore"]


class Cluster(Protocol):
    """The cluster's topics and offsets (:class:`~kafka_group.group.cluster_metadata.ClusterView`)."""

    def topic_partitions(self, topics: Optional[Iterable[str]] = None) -> Dict[str, int]:
        """Partition counts of ``topics`` (every topic when None); missing topics are left out."""

    def matching_partitions(self, pattern: str) -> List[TopicPartition]:
        """The partitions of every topic matching ``pattern`` in full."""

    def partitions_of(self, topics: Sequence[str]) -> List[TopicPartition]:
        """The partitions of ``topics``."""

    def earliest_offsets(self, partitions: Iterable[TopicPartition]) -> Dict[TopicPartition, int]:
        """The first offset still on the broker, per partition (unanswered ones left out)."""

    def latest_offsets(self, partitions: Iterable[TopicPartition]) -> Dict[TopicPartition, int]:
        """The end offset at the query's isolation level (the last stable offset under read_committed)."""

    def high_watermarks(self, partitions: Iterable[TopicPartition]) -> Dict[TopicPartition, int]:
        """The high watermark, per partition."""

    def offsets_at_times(self, times: Mapping[TopicPartition, int]) -> Dict[TopicPartition, Optional[int]]:
        """Per partition, the first offset whose record time is at or after its time (ms); None where
        no record is that recent; unanswered partitions left out."""


class Committer(Protocol):
    """Commits positions to a Kafka group, for lag tools
    (:class:`~kafka_group.group.offset_commits.GroupOffsetCommitter`, or the member itself)."""

    def commit(self, positions: Mapping[TopicPartition, int], generation: Optional[int] = None) -> bool:
        """Commit ``positions`` (computed at the member's ``generation``: stale ones are dropped); a failure
        is logged and loses nothing."""

    def commit_and_wait(self, positions: Mapping[TopicPartition, int], generation: Optional[int],
                        timeout_s: float) -> None:
        """Commit ``positions`` (stale ones dropped) and wait for the answer; GroupMembershipError when the
        group refuses it or does not answer within ``timeout_s``."""

    def close(self) -> None:
        """Release the client."""


class Member(Committer, Protocol):
    """The query's consumer-group member (:class:`~kafka_group.group.membership.GroupMember`)."""

    group_id: str

    @property
    def member_id(self) -> str:
        """The member id the coordinator gave ("" before the first join)."""

    @property
    def generation(self) -> int:
        """How many rebalances changed the member's assignment."""

    def owned(self) -> FrozenSet[TopicPartition]:
        """The partitions the group assigns to this member now."""

    def events(self) -> List[RebalanceEvent]:
        """The rebalance events so far, oldest first."""

    def add_listener(self, listener: Callable[[RebalanceEvent], None]) -> None:
        """Call ``listener`` after each rebalance event, on the poll thread."""

    def wait_for_assignment(self, timeout_s: float) -> bool:
        """Wait until the group assigned partitions (possibly none); whether it did in time."""

    def committed(self, partitions: Iterable[TopicPartition], timeout_s: float) -> Dict[TopicPartition, int]:
        """The group's committed offsets of ``partitions`` (those without one left out)."""


class OffsetStore(Protocol):
    """The offsets table (:class:`~kafka_group.delta.offsets.delta_offsets.DeltaOffsetStore`)."""

    def positions(self, partitions: Iterable[TopicPartition]) -> Dict[TopicPartition, int]:
        """The table's positions of ``partitions`` (those it has seen)."""

    def move(self, tp: TopicPartition, expected: int, to: int, *, reason: str) -> bool:
        """Move ``tp`` from ``expected`` to ``to`` in one commit; False if it is no longer at ``expected``."""

    def starts(self, partitions: Iterable[TopicPartition]) -> Dict[TopicPartition, int]:
        """The starts recorded by :meth:`hold_starts` for ``partitions`` (those without one left out), as of
        the last :meth:`positions` read."""

    def hold_starts(self, starts: Mapping[TopicPartition, int], *, reason: str) -> FrozenSet[TopicPartition]:
        """Record ``starts`` as the positions and recorded starts of the partitions the table has never seen;
        the partitions of ``starts`` the table now has a position for (empty: no table yet)."""
