"""What this query commits to its Kafka group: the next owner's start and the lag tools' view.

The group's committed offsets are never the source of truth with ``offsets.table`` (the
Delta table is), but they are what a member taking a partition over reads for a
partition the table has not seen (:mod:`~kafka_group.positioning`), and what Kafka's
lag tools (``kafka-consumer-groups --describe``) show. :class:`GroupCommits` keeps them
following the query:

- *Starts*: a partition positioned while neither the table nor the group holds a
  position for it (``startingOffsets=latest`` of a new query, a checkpoint's position)
  has its start committed at once by a member (an ``assign`` query's committer commits no
  starts: ``commit_starts``), so a member that takes it over before anything
  landed continues from it instead of the then latest offset (issue 26, item 1). The
  planning call waits for the coordinator's acknowledgement (bounded by
  ``kafkaConsumer.connectTimeoutMs``, else the query fails; an answer a rebalance or a
  coordinator move gives is retried within that bound, for the partitions the member
  still owns under the same assignment: issue 33, finding 5): a crash right after
  positioning must not leave a start only this process knew (review of issue 26,
  finding 8). A revoke commits it again, synchronously, before the next owner gets
  the partition.
- *Landed*: at each planning call the positions that landed are committed: the
  table's (what landed), or without a table the previous batch's end (Spark writes
  batch N's commit log before it asks the source for the next latest offset, see
  ``MicroBatchExecution``), so lag tools see a batch within one trigger of it landing,
  also when no batch follows (Spark's ``commit(N)`` comes only with batch N+1).
  The planning call that ends an AvailableNow run waits for the group to take them
  (:meth:`GroupCommits.settle`): the process may end right after it.

Invariants
----------
- The table wins: a start is committed only for a partition the table has no position
  for, and never over an offset the group already has (it would move it backwards or
  past what landed).
- Only the owner commits, and only what it computed under its current assignment: each
  commit carries the member's generation read before its positions were computed, and
  the member drops the positions of partitions revoked, or revoked and assigned again,
  since (review of issue 26, finding 5); a stale member (fenced, or whose session
  expired) is refused by the coordinator (generation / member epoch).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import AbstractSet, Callable, Dict, FrozenSet, Iterable, List, Mapping, Optional

from kafka_group.collaborators import Committer, OffsetStore
from kafka_group.errors import KafkaGroupError
from kafka_group.offsets import TopicPartition

__all__ = ["GroupCommits"]

logger = logging.getLogger(__name__)

#: Seconds after which unchanged positions are committed again (a queued commit may have
#: failed, for example during a rebalance; the lag tools then catch up by this bound).
RECOMMIT_AFTER_S = 30.0
#: Seconds :meth:`GroupCommits.settle` waits past the commit's own bound before it stops waiting.
_SETTLE_GRACE_S = 1.0


class GroupCommits:
    """Commits positions to the group for the next owner of a partition and for lag tools.

    Parameters
    ----------
    committer : Committer or None
        The group member (or, for ``assign`` with ``kafka.group.id``, a committer that does
        not join); None when the query has no group to commit to.
    commit_starts : bool, optional
        Whether to commit starts (only a member's: positioning reads the group's offsets only then).
    start_timeout_s : float, optional
        How long a planning call waits for the group to acknowledge a start (``kafkaConsumer.connectTimeoutMs``).
    clock : callable, optional
        Monotonic seconds (tests replace it).

    Notes
    -----
    Callers: Spark's planning thread (:meth:`positioned`, :meth:`landed`), the member's poll
    thread inside a rebalance callback (:meth:`revoked`, :meth:`forget`). One lock guards the
    bookkeeping; commits are made outside it.
    """

    def __init__(self, committer: Optional[Committer], *, commit_starts: bool = True, start_timeout_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._committer = committer
        self._start_timeout_s = start_timeout_s
        self._commit_starts = commit_starts
        self._clock = clock
        # Re-entrant (the SIGTERM handler closes on a thread of its own, never inside positioned() or landed()).
        self._lock = threading.RLock()
        self._final = False  # final() started: the planning thread's later landed() commits nothing
        self._starts: Dict[TopicPartition, int] = {}  # committed starts nothing has landed for yet
        self._sent: Dict[TopicPartition, int] = {}  # the landed positions last committed
        self._sent_at = clock()

    def positioned(self, resolved: Mapping[TopicPartition, int], durable: AbstractSet[TopicPartition],
                   owned: Callable[[], FrozenSet[TopicPartition]], generation: Optional[int] = None) -> None:
        """Newly owned partitions were positioned at ``resolved`` (under the member's ``generation``); commit
        the starts of those still ``owned`` whose position neither the table nor the group holds (``durable``),
        and wait for the group's answer. Caller: Spark's planning thread.

        Ownership is read under the lock :meth:`revoked` takes, after the member has dropped revoked
        partitions from it: a start is either kept and committed again by the revoke, or left out.

        Raises
        ------
        GroupMembershipError
            The group refused the starts or did not acknowledge them in time."""
        with self._lock:
            still = owned()
            for tp in resolved:
                self._sent.pop(tp, None)
                self._starts.pop(tp, None)
            starts = {tp: pos for tp, pos in resolved.items()
                      if self._commit_starts and tp in still and tp not in durable}
            self._starts.update(starts)
        if starts and self._committer is not None:
            logger.info("committing the start of partitions the group has no position for: %s",
                        ", ".join(f"{tp}@{pos}" for tp, pos in sorted(starts.items())))
            self._committer.commit_and_wait(starts, generation, self._start_timeout_s)

    def landed(self, positions: Mapping[TopicPartition, int], generation: Optional[int] = None) -> None:
        """``positions`` landed (the table's, or the previous batch's end without a table; computed under the
        member's ``generation``): commit those not committed yet. Caller: Spark's planning thread, at each
        planning call."""
        now = self._clock()
        with self._lock:  # held over the commit, so that final()'s positions, read later, are sent later
            if self._final:
                return
            if now - self._sent_at > RECOMMIT_AFTER_S:
                self._sent.clear()
                self._sent_at = now
            changed = {tp: pos for tp, pos in positions.items() if self._sent.get(tp) != pos}
            for tp in positions:
                self._starts.pop(tp, None)
            self._sent.update(changed)
            if changed and self._committer is not None:
                self._committer.commit(changed, generation)

    def follow(self, positions: Mapping[TopicPartition, int], store: Optional[OffsetStore],
               pending: Mapping[TopicPartition, int],
               generation: Optional[int] = None) -> Optional[Dict[TopicPartition, int]]:
        """Commit what landed of the partitions at ``positions`` (the previous batch's end, which Spark
        completed): the table's positions of them with ``offsets.table`` (returned), else ``positions``
        without the ``pending`` ones (positioned since: nothing of theirs landed). Caller: Spark's planning
        thread, at each planning call and at Spark's ``commit``; ``generation`` is the member's, read before
        ``positions`` were computed."""
        in_table = store.positions(positions) if store is not None else None
        self.landed(in_table if in_table is not None else
                    {tp: pos for tp, pos in positions.items() if tp not in pending}, generation)
        return in_table

    def settle(self, positions: Mapping[TopicPartition, int], generation: Optional[int] = None) -> None:
        """An AvailableNow run ends with this planning call: commit what landed (``positions``, the table's or the
        last batch's end) and wait for the group's answer, bounded by ``start_timeout_s``. Spark ends the query
        once the call returns and may end this process before the member's poll thread sends a queued commit,
        or before :meth:`final` runs (issue 33, finding 7: under Spark Connect the last batch was missing from
        the group's offsets, shown as lag until the next run). A refusal (any :class:`KafkaGroupError`: the
        group's, or a refused login or ACL the committer's client reports) is logged, not raised: the run's
        records have landed (review of issue 33's fix, finding 3). The wait is bounded here too: the committer
        of an ``assign`` query commits synchronously and does not bound it itself; a commit still unanswered
        then is left to finish on a daemon thread (:meth:`final`, at stop, waits for the committer's lock it
        holds). Caller: Spark's planning thread."""
        if not positions or self._committer is None:
            return
        with self._lock:
            if self._final:  # the query stops: final() committed the table's positions, maybe newer than these
                return
            for tp in positions:
                self._starts.pop(tp, None)
            self._sent.update(positions)
        committer = self._committer
        failed: List[BaseException] = []

        def commit() -> None:  # the settling thread
            try:
                committer.commit_and_wait(positions, generation, self._start_timeout_s)
            except BaseException as exc:  # handed to the planning thread
                failed.append(exc)

        worker = threading.Thread(target=commit, name="kafka-group-settle", daemon=True)
        worker.start()
        worker.join(self._start_timeout_s + _SETTLE_GRACE_S)  # the member's own bound answers first
        if worker.is_alive():
            logger.warning("the AvailableNow run ends, but the group did not answer the commit of what landed within "
                           "option 'kafkaConsumer.connectTimeoutMs' (%d ms; lag tools show it until the next run)",
                           round(self._start_timeout_s * 1000))
        elif failed and isinstance(failed[0], KafkaGroupError):
            logger.warning("the AvailableNow run ends, but the group did not take what landed (lag tools show it "
                           "until the next run): %s", failed[0])
        elif failed:
            raise failed[0]

    def final(self, store: Optional[OffsetStore], owned: FrozenSet[TopicPartition],
              generation: Optional[int] = None) -> None:
        """The query stops: commit the table's positions of ``owned`` (without a table nothing more: Spark
        may not have finished the running batch). A planning call still under way (SIGTERM does not stop it)
        commits nothing after this: its positions may be older. Caller: the SIGTERM handler's thread, or
        Spark's ``stop()``."""
        with self._lock:
            self._final = True
            if store is None or self._committer is None:
                return
            try:
                self._committer.commit(store.positions(owned), generation)
            except Exception:  # leaving the group matters more than lag reporting
                logger.exception("committing the final positions to the Kafka group failed")

    def revoked(self, partitions: Iterable[TopicPartition]) -> Dict[TopicPartition, int]:
        """The committed starts of ``partitions`` (nothing landed for them since), which the revoke commits
        again before the next owner gets them; forgets them. Caller: the poll thread, in a revoke."""
        with self._lock:
            starts = {tp: self._starts[tp] for tp in partitions if tp in self._starts}
        self.forget(partitions)
        return starts

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        """``partitions`` left this member (revoked or lost). Caller: the poll thread, in a rebalance."""
        with self._lock:
            for tp in partitions:
                self._starts.pop(tp, None)
                self._sent.pop(tp, None)
