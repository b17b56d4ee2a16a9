"""The driver's side of the group's rebalances: what planning knows of the partitions it owns
(:class:`OwnedPartitions`), revokes that wait for the running batch (:func:`finish_revoke`), and
the ``@member`` progress report.

Beside :mod:`kafka_group.group.membership` (which joins the group and records the
events): what the source does when the member tells it partitions are going.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Dict, FrozenSet, Iterable, List, Mapping, Optional, Set, Tuple

from kafka_group.collaborators import Committer, Member, OffsetStore
from kafka_group.offsets import OffsetRange, TopicPartition, partitions_by_topic

__all__ = ["OwnedPartitions", "finish_revoke", "membership_report"]

logger = logging.getLogger(__name__)


class OwnedPartitions:
    """Planning's bookkeeping of the partitions this query owns, shared with the member's poll thread.

    - *positioned*: the partitions positioned since they entered ownership (a revoke or
      a loss takes them out, so they are positioned again when they come back);
    - *pending*: positions decided for them and not yet carried by a planned batch;
    - *running*: the ranges of the batch Spark runs, which a revoke of their partitions
      waits for. Looked up by partition but dropped only by the range itself: Spark
      commits batch N-1 after it planned batch N, and N's ranges must stay.

    One reentrant lock guards all three. The SIGTERM handler closes the driver on a thread
    of its own (:mod:`kafka_group.group.sigterm`), never inside a locked block of the
    planning call it interrupted.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._positioned: Set[TopicPartition] = set()
        self._pending: Dict[TopicPartition, int] = {}
        self._running: Dict[TopicPartition, OffsetRange] = {}

    def unpositioned(self, owned: FrozenSet[TopicPartition]) -> List[TopicPartition]:
        """The owned partitions not positioned yet, sorted. Caller: Spark's planning thread."""
        with self._lock:
            return sorted(owned - self._positioned)

    def admit(self, resolved: Mapping[TopicPartition, int], owned: Callable[[], FrozenSet[TopicPartition]]) -> None:
        """Take the positions of newly owned partitions, for those still owned. Caller: Spark's planning thread."""
        with self._lock:
            # A rebalance may have taken some away meanwhile (read under the lock a revoke takes).
            still_owned = owned()
            for tp, pos in resolved.items():
                if tp in still_owned:
                    self._pending[tp] = pos
                    self._positioned.add(tp)

    def pending(self) -> Dict[TopicPartition, int]:
        """The positions decided and not planned yet. Caller: Spark's planning thread."""
        with self._lock:
            return dict(self._pending)

    def plannable(self, start: Mapping[TopicPartition, int],
                  owned: FrozenSet[TopicPartition]) -> Tuple[Dict[TopicPartition, int], Dict[TopicPartition, int]]:
        """Every known position (``start``'s, updated by the pending ones), and those of the owned,
        positioned partitions: what a plan starts from. Caller: Spark's planning thread."""
        with self._lock:
            positions = {**start, **self._pending}
            return positions, {tp: positions[tp] for tp in owned if tp in self._positioned and tp in positions}

    def start_batch(self, positions: Dict[TopicPartition, int], checked: Mapping[TopicPartition, int],
                    ranges: Iterable[OffsetRange]) -> List[OffsetRange]:
        """Take a planned batch: ``positions`` updated with ``checked``, pending positions used; return its
        ranges of partitions still positioned, now running. Caller: Spark's planning thread."""
        with self._lock:
            positions.update(checked)
            self._pending.clear()
            # A revoke that ran while this plan was made (the poll thread, between the
            # ownership read and here) found no running range for its partitions
            # and let them go at once: keep them out of this batch. A revoke after this
            # block finds the ranges in flight and waits for the batch to land.
            kept = []
            for r in ranges:
                if r.topic_partition in self._positioned:
                    kept.append(r)
                else:
                    logger.info("%s was revoked while the batch was planned: left out of it", r.topic_partition)
            self._running = {r.topic_partition: r for r in kept}
            return kept

    def running(self, ranges: Mapping[TopicPartition, OffsetRange]) -> None:
        """Spark runs the batch of ``ranges`` (new, or replayed from its checkpoint).
        Caller: Spark's planning thread (``partitions``)."""
        with self._lock:
            # Every range, owned or not yet: a batch Spark replays after a restart runs before
            # this member has positioned anything, and a revoke of its partitions must wait too.
            self._running = dict(ranges)

    def committed(self, ranges: Mapping[TopicPartition, OffsetRange], positions: Mapping[TopicPartition, int],
                  owned: FrozenSet[TopicPartition]) -> Dict[TopicPartition, int]:
        """Spark completed the batch of ``ranges``: they no longer run. Returns its ``positions`` of the
        partitions still owned and positioned. Caller: Spark's planning thread (``commit``)."""
        with self._lock:
            # Spark commits batch N-1 after it planned batch N: drop only N-1's own ranges,
            # never the running batch's ranges of the same partitions.
            for tp, done in ranges.items():
                if self._running.get(tp) == done:
                    del self._running[tp]
            return {tp: pos for tp, pos in positions.items() if tp in owned and tp in self._positioned}

    def forget(self, partitions: FrozenSet[TopicPartition]) -> Dict[TopicPartition, OffsetRange]:
        """Partitions revoked or lost: forget their positions; return their running ranges.

        Caller: the member's poll thread, inside the rebalance callback.
        """
        with self._lock:
            self._positioned.difference_update(partitions)
            for tp in partitions:
                self._pending.pop(tp, None)
            return {tp: self._running.pop(tp) for tp in partitions if tp in self._running}

    def stop_waiting(self) -> None:
        """Forget the running ranges: the query stops. Caller: the SIGTERM handler, or Spark's ``stop()``."""
        with self._lock:
            self._running.clear()


def finish_revoke(
    store: Optional[OffsetStore],
    member: Committer,
    revoked: FrozenSet[TopicPartition],
    running: Mapping[TopicPartition, OffsetRange],
    *,
    timeout_ms: int,
    starts: Optional[Mapping[TopicPartition, int]] = None,
    stopping: Callable[[], bool] = lambda: False,
    poll_s: float = 0.2,
    clock: Callable[[], float] = time.monotonic,
) -> Dict[TopicPartition, int]:
    """Hold a revoke until the running batch of its partitions has landed, then commit them.

    Kafka's usual rebalance listener: commit on revoke, so the next owner starts
    exactly where this one stopped. Only the offsets table can tell that a batch
    landed (Spark reports completion to the source only at the next plan), so
    without ``offsets.table`` the revoke does not wait (the caller does not call
    this with a store: it commits only ``starts``). Lost partitions never wait: the
    table's commit check keeps a late commit of theirs out.

    ``starts`` are the revoked partitions' starts this member committed while nothing
    of theirs had landed (:meth:`~kafka_group.group.group_commits.GroupCommits.revoked`):
    committed again here, where the table has no position, so the next owner continues
    from them even if the first commit was still queued.

    A running range has landed when the table's position of its partition is no
    longer the range's start. After ``timeout_ms`` (``revokeTimeoutMs``) the
    revoke goes on, logged: the next owner may plan the same offsets, and
    whichever commits second is refused. It stops waiting at once when
    ``stopping()`` says the query is stopping: Spark interrupts the running batch,
    which may never land, and closing the member waits for this callback to return
    (the group meanwhile waits for this member to leave).

    Caller: the member's poll thread, inside the revoke callback (the next owner
    does not get the partitions until it returns).

    Returns
    -------
    dict
        The positions committed: the table's of the revoked partitions, else their ``starts``.
    """
    deadline = clock() + timeout_ms / 1000
    pending = dict(running) if store is not None else {}
    while pending and store is not None:
        held = store.positions(pending)
        pending = {tp: r for tp, r in pending.items() if held.get(tp, r.from_offset) == r.from_offset}
        if not pending:
            break
        if stopping():
            logger.info("revoking %s while the query stops: not waiting for its running batch (%s)",
                        ",".join(str(tp) for tp in sorted(pending)), ", ".join(str(r) for r in pending.values()))
            break
        if clock() > deadline:
            logger.warning(
                "revoking %s: the running batch (%s) did not land within %d ms (option 'revokeTimeoutMs'); the "
                "next owner may plan the same offsets, and whichever commits second is refused",
                ",".join(str(tp) for tp in sorted(pending)), ", ".join(str(r) for r in pending.values()),
                timeout_ms,
            )
            break
        time.sleep(poll_s)
    positions = {**(starts or {}), **(store.positions(revoked) if store is not None else {})}
    member.commit(positions)
    logger.info("revoke of %s complete; committed %s", ",".join(str(tp) for tp in sorted(revoked)),
                ", ".join(f"{tp}@{pos}" for tp, pos in sorted(positions.items())) or "nothing")
    return positions


def membership_report(owned: FrozenSet[TopicPartition], member: Optional[Member]) -> Dict[str, Any]:
    """This query's place in its group, for query progress (key ``@member`` of ``latestOffset``).

    ``generation`` counts the member's rebalance events; ``owned`` lists its
    partitions per topic; ``lastRebalance`` says what changed last and why.
    ``member`` is None for ``assign`` (reported as ``"assign": true``).
    """
    report: Dict[str, Any] = {"owned": partitions_by_topic(owned)}
    if member is None:
        report["assign"] = True
        return report
    events = member.events()
    report.update(group=member.group_id, memberId=member.member_id, generation=member.generation)
    if events:
        last = events[-1]
        report["lastRebalance"] = {
            "kind": last.kind, "partitions": partitions_by_topic(last.partitions), "cause": last.cause,
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(last.at)),
        }
    return report
