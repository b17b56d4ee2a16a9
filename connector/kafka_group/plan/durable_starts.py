"""Record in the offsets table where positioning started each partition the table had not seen.

A start chosen by ``startingOffsets`` (``latest`` of a new query, a time), or taken from the
group's committed offset or Spark's checkpoint, must outlive both of those: a query whose
checkpoint is lost and whose group's offsets expired (an idle group loses them after Kafka's
``offsets.retention.minutes``) would otherwise position the partition again, at another
offset (issue 33, finding 4). So each such start is written into the table, where the offsets
live, as the partition's position and its recorded start
(:meth:`~kafka_group.delta.offsets.offset_moves.OffsetMoves.hold_starts`), in a data-less commit:

- at once, in the planning call that positioned it, when the table exists;
- else at each later plan until the table exists (the first batch creates it; a partition
  that batch landed has its position by then and needs nothing more).

With them goes the partition count of each topic the table held nothing of when they were
positioned (alone if a batch landed every start first): a partition numbered from it on was
added since and starts at the earliest offset (:mod:`~kafka_group.plan.positioning`; review of
issue 33's fix, finding 1).

Invariants
----------
- Only a partition the table has never seen is recorded, and only while this query owns it:
  a position the table holds (landed, held by another member, reset) is never moved here.
- Until it is recorded a start is durable in the checkpoint and, for a ``subscribe`` or
  ``subscribePattern`` query, in the group (committed and acknowledged when it was positioned,
  :mod:`~kafka_group.group.group_commits`; an ``assign`` query commits no starts to the group); the
  window is one plan where the table exists, and until the first batch lands where it does not.
- A start a member recorded is the start it committed to the group: a member taking the
  partition over reads the same offset from either.
"""

from __future__ import annotations

import logging
from typing import AbstractSet, Callable, Dict, FrozenSet, Iterable, Mapping, Optional, Protocol

from kafka_group.collaborators import OffsetStore
from kafka_group.errors import ConditionalPutError, OffsetStoreError
from kafka_group.offsets import TopicPartition

__all__ = ["DurableStarts", "StartStore"]

logger = logging.getLogger(__name__)

_REASON = "the start positioning chose for partitions the table had not seen"


class StartStore(OffsetStore, Protocol):
    """The offsets table with the partition counts recorded with topics' first starts
    (:class:`~kafka_group.delta.offsets.delta_offsets.DeltaOffsetStore`)."""

    def partition_counts(self, topics: Iterable[str]) -> Dict[str, int]:
        """The partition count recorded with each topic's first starts (those without one left out), as of the
        last :meth:`positions` read."""

    def hold_starts(self, starts: Mapping[TopicPartition, int], *, reason: str,
                    counts: Optional[Mapping[str, int]] = None) -> FrozenSet[TopicPartition]:
        """Record ``starts`` as in :class:`~kafka_group.collaborators.OffsetStore`, with the ``counts`` of the topics
        the table holds nothing of yet."""


class DurableStarts:
    """The starts of owned partitions not recorded in the offsets table yet, and their recording.

    Parameters
    ----------
    store : StartStore or None
        The offsets table (None without ``offsets.table``: then this does nothing).
    owned : callable
        The partitions the query owns now.

    Notes
    -----
    Caller: Spark's planning thread only (positioning and planning); a revoke is seen through
    ``owned`` at the next :meth:`record`.
    """

    def __init__(self, store: Optional[StartStore], owned: Callable[[], FrozenSet[TopicPartition]]) -> None:
        self._store, self._owned = store, owned
        self._pending: Dict[TopicPartition, int] = {}
        self._counts: Dict[str, int] = {}  # the partition counts of pending starts' topics when positioned

    def positioned(self, resolved: Mapping[TopicPartition, int], in_table: AbstractSet[TopicPartition],
                   counts: Optional[Mapping[str, int]] = None) -> None:
        """Partitions were positioned at ``resolved``; those not ``in_table`` wait to be recorded (a
        partition positioned again replaces its earlier start). ``counts``: their topics' partition counts
        then (the earliest seen is kept: a partition added later must not count as existing then)."""
        if self._store is None:
            return
        for tp, pos in resolved.items():
            if tp in in_table:
                self._pending.pop(tp, None)
            else:
                self._pending[tp] = pos
        for topic, count in (counts or {}).items():
            self._counts[topic] = min(count, self._counts.get(topic, count))

    def record(self) -> None:
        """Record the pending starts of partitions still owned; keep those the table cannot take yet.

        A failure to record (concurrent writers kept winning) is logged and retried at the next plan:
        the starts are durable in the group and the checkpoint meanwhile.

        Raises
        ------
        ConditionalPutError
            The table's store ignores conditional puts (no commit to it is safe).
        """
        if self._store is None or not self._pending:
            return
        owned = self._owned()
        for tp in [tp for tp in self._pending if tp not in owned]:
            del self._pending[tp]  # its next owner records its own start
        self._forget_counts()
        if not self._pending:
            return
        try:
            topics = {tp.topic for tp in self._pending}
            settled = self._store.hold_starts(dict(self._pending), reason=_REASON,
                                              counts={t: n for t, n in self._counts.items() if t in topics})
        except ConditionalPutError:
            raise
        except OffsetStoreError as exc:
            logger.warning("%s; retried at the next plan", exc)
            return
        for tp in settled:
            self._pending.pop(tp, None)
        self._forget_counts()

    def _forget_counts(self) -> None:
        """Keep only the counts of topics with starts still pending."""
        topics = {tp.topic for tp in self._pending}
        self._counts = {t: n for t, n in self._counts.items() if t in topics}

    def pending(self) -> Dict[TopicPartition, int]:
        """The starts not recorded yet (for tests and logs)."""
        return dict(self._pending)
