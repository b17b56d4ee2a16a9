"""The offset commits of one group member (:class:`~kafka_group.group.membership.GroupMember`).

Two threads commit positions to the group: Spark's planning thread (after each batch, and a start the
next owner of a partition must find) and the member's polling thread (inside a revoke callback: the
next owner should find the positions). The polling thread commits synchronously; the planning thread
never takes the consumer lock (a revoke callback may hold it, waiting for the running batch to land):
it queues its positions in a :class:`~kafka_group.group.pending_commits.PendingCommits`, which the
polling thread sends between two polls without waiting; the coordinator's answers arrive in
:meth:`MemberCommits.on_commit`, inside ``poll()``.

Two locks, both the member's: the consumer lock guards the client; the state lock guards the
partitions the member owns and the queue. This module sits beside ``pending_commits.py``, not in it:
that one is bookkeeping without a client, under the state lock only; this one calls the client.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import AbstractSet, Any, List, Mapping, Optional

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kafka_group.errors import GroupMembershipError
from kafka_group.group.offset_commits import AwaitedCommit, commit_positions, describe_positions
from kafka_group.group.pending_commits import PendingCommits
from kafka_group.offsets import TopicPartition

__all__ = ["FLUSH_TIMEOUT_S", "MemberCommits"]

logger = logging.getLogger(__name__)

#: Seconds a closing member waits for the answers to its last offset commits (:meth:`MemberCommits.flush`).
FLUSH_TIMEOUT_S = 10.0

#: Seconds of each poll while :meth:`MemberCommits.flush` waits.
_FLUSH_POLL_S = 0.1

#: Seconds before the first retry of an awaited commit a rebalance refused, and the most between two.
_RETRY_BACKOFF_S = (0.1, 1.0)


class MemberCommits:
    """The commits of one group member: queued by other threads, sent and answered on its polling thread.

    Parameters
    ----------
    consumer : confluent_kafka.Consumer
        The member's client; its ``on_commit`` callback must call :meth:`on_commit`.
    lock : threading.RLock
        The member's consumer lock (``poll()`` runs under it, so rebalance and commit callbacks do).
    state : threading.RLock
        The member's state lock, which guards ``owned``.
    owned : set of TopicPartition
        The partitions the member owns, the member's own set (changed by it under ``state``, only read here).
    polling_thread : threading.Thread
        The member's polling thread.
    group_id : str
        The group (for logs and errors).

    Notes
    -----
    Callers: each method names its own.
    """

    def __init__(self, consumer: Consumer, lock: Any, state: Any, owned: AbstractSet[TopicPartition],
                 polling_thread: threading.Thread, group_id: str) -> None:
        self.group_id = group_id
        self._consumer = consumer
        self._lock = lock
        self._state = state
        self._owned = owned
        self._thread = polling_thread
        # Commits queued by other threads for the polling thread (guarded by the state lock).
        self.pending = PendingCommits(group_id)
        # Awaited commits sent and not answered yet (polling thread only).
        self._acks_sent: List[AwaitedCommit] = []
        self._async_commits_unanswered = 0

    def commit(self, positions: Mapping[TopicPartition, int], generation: Optional[int] = None) -> bool:
        """Commit ``positions`` (see :meth:`GroupMember.commit <kafka_group.group.membership.GroupMember.commit>`).

        Callers: Spark's planning thread after each batch, the polling thread inside a revoke callback,
        and the thread that closes the member. From the polling thread (a revoke: the next owner should
        find these positions) it waits for the coordinator's answer, as a rebalance listener's commit does.
        From any other thread it only queues the positions for the polling thread, which sends them
        without waiting between two polls: waiting, or even taking the consumer lock, there would make
        planning wait on the coordinator (issue 13, finding 10) or on a revoke callback that waits for the
        running batch to land. Its outcome is logged when the polling thread next polls; a commit still
        unanswered when the member closes is waited for, within a bound (:meth:`flush`).
        """
        if threading.current_thread() is self._thread:
            return commit_positions(self._consumer, self._lock, self.group_id, positions)
        if positions:
            # Handed to the polling thread: taking the consumer lock here would wait for a
            # revoke callback that is itself waiting for this very batch to land.
            with self._state:
                self.pending.queue(positions, generation, self._owned)
        return True

    def commit_and_wait(self, positions: Mapping[TopicPartition, int], generation: Optional[int],
                        timeout_s: float) -> None:
        """Commit ``positions`` and wait until the coordinator acknowledged them (see
        :meth:`GroupMember.commit_and_wait <kafka_group.group.membership.GroupMember.commit_and_wait>`).

        Caller: Spark's planning thread; the polling thread commits synchronously. The polling thread
        sends them at its next poll; this thread waits for the answer without taking the consumer lock
        (a revoke callback may hold it).

        A refusal a retry may outlive (:data:`~kafka_group.group.offset_commits.RETRIABLE_COMMIT_ERRORS`: the
        group completes a rebalance, the member's generation is stale, the coordinator moves) is retried until
        ``timeout_s`` has passed, each time only for the positions still current (:meth:`PendingCommits.current
        <kafka_group.group.pending_commits.PendingCommits.current>`): a partition revoked, or assigned afresh,
        since ``generation`` is left out, and a commit left with no position returns (the partition's next
        owner, or this member's next positioning of it, decides its start).

        Raises
        ------
        GroupMembershipError
            The coordinator refused the commit (not retriable), kept refusing it, or did not answer, within
            ``timeout_s``.
        """
        if threading.current_thread() is self._thread:
            if not commit_positions(self._consumer, self._lock, self.group_id, positions):
                raise GroupMembershipError(f"group '{self.group_id}' refused the commit of {describe_positions(positions)}")
            return
        deadline = time.monotonic() + timeout_s
        backoff_s, refused = _RETRY_BACKOFF_S[0], None
        while True:
            # Again at each try: a rebalance since the last may have taken partitions away, or assigned them
            # afresh; their positions are stale then and never sent (a stale owner never commits).
            with self._state:
                ack = self.pending.await_commit(positions, generation, self._owned)
            if ack is None:
                return
            answered = ack.done.wait(max(0.0, deadline - time.monotonic()))
            if answered and ack.error is None:
                return
            if answered and not ack.retriable:
                raise GroupMembershipError(f"group '{self.group_id}' refused the commit of "
                                           f"{describe_positions(ack.positions)}: {ack.error}")
            refused = ack.error if answered else refused
            left = deadline - time.monotonic()
            if left <= 0:
                answer = (f"answered it with '{refused}' until then (the group did not settle)" if refused else
                          "the group coordinator is unreachable or moving")
                raise GroupMembershipError(
                    f"group '{self.group_id}' did not acknowledge the commit of {describe_positions(ack.positions)} "
                    f"within {int(timeout_s * 1000)} ms (option 'kafkaConsumer.connectTimeoutMs'): {answer}. The "
                    "query stops rather than plan from a start the next owner of these partitions could not find; "
                    "restart it once the coordinator is back, or raise the option")
            logger.info("group '%s' answered the commit of %s with '%s' (a rebalance or a coordinator move): "
                        "trying again for the partitions this member still owns", self.group_id,
                        describe_positions(ack.positions), ack.error)
            time.sleep(min(backoff_s, left))
            backoff_s = min(backoff_s * 2, _RETRY_BACKOFF_S[1])

    def send_queued(self) -> None:
        """Send the queued positions of partitions still owned, without waiting for the answer.

        Caller: the polling thread, under the consumer lock, between polls (and :meth:`flush`); so no
        rebalance callback runs meanwhile, and a partition revoked since the positions were queued is
        left out (its new owner's commits must not be overwritten).
        """
        with self._state:
            (queued, acks), owned = self.pending.take(), set(self._owned)
        for ack in acks:
            # Those revoked meanwhile are left out: the revoke committed the starts it knew of.
            ack.positions = {tp: pos for tp, pos in ack.positions.items() if tp in owned}
            offsets = [KafkaTopicPartition(tp.topic, tp.partition, pos) for tp, pos in sorted(ack.positions.items())]
            if not offsets:
                ack.answer(None)
                continue
            try:
                self._consumer.commit(offsets=offsets, asynchronous=True)
            except KafkaException as exc:
                ack.answer(str(exc))
                continue
            self._acks_sent.append(ack)
        offsets = [KafkaTopicPartition(tp.topic, tp.partition, pos)
                   for tp, pos in sorted(queued.items()) if tp in owned]
        if not offsets:
            return
        try:
            self._consumer.commit(offsets=offsets, asynchronous=True)
        except KafkaException as exc:
            logger.warning("committing offsets to group '%s' failed (nothing is lost): %s", self.group_id, exc)
            return
        self._async_commits_unanswered += 1

    def on_commit(self, error: Optional[KafkaError], partitions: List[KafkaTopicPartition]) -> None:
        """The answer to an asynchronous commit (the client's ``on_commit``).

        Caller: the polling thread, inside ``poll()``, under the consumer lock.
        """
        awaited = next((ack for ack in self._acks_sent if ack.answered_by(error, partitions)), None)
        if awaited is not None:
            self._acks_sent.remove(awaited)
            return
        self._async_commits_unanswered = max(0, self._async_commits_unanswered - 1)
        if error is not None:
            logger.warning("committing offsets to group '%s' failed (nothing is lost): %s", self.group_id,
                           error.str())
        else:
            logger.debug("committed offsets to group '%s': %s", self.group_id,
                         ", ".join(f"{p.topic}-{p.partition}@{p.offset}" for p in partitions))

    def flush(self, timeout_s: float = FLUSH_TIMEOUT_S) -> bool:
        """Send what is queued, and wait, at most ``timeout_s``, for the answers to every commit still
        unanswered: the last positions should reach the group before it forgets the member.

        The wait polls the client (which serves the answers, :meth:`on_commit`); it never makes a synchronous
        commit, which has no bound (with the coordinator gone it waited for ever, and a stopped query's
        process outlived its JVM).

        Caller: the thread closing the member, once the polling thread has stopped (or is that thread).

        Returns
        -------
        bool
            Whether every commit was answered (accepted or refused: a refusal is logged and loses nothing).
        """
        deadline = time.monotonic() + timeout_s
        # The polling thread can hold the lock for ever (a synchronous commit inside a revoke, with the
        # coordinator gone): the lock is waited for within the same bound.
        if not self._lock.acquire(timeout=max(timeout_s, 0.0)):
            logger.warning("the member of group '%s' could not send its last offset commits within %g s (its "
                           "polling thread is stuck talking to an unreachable coordinator; nothing is lost): "
                           "leaving without them", self.group_id, timeout_s)
            return False
        try:
            self.send_queued()
            if threading.current_thread() is self._thread:
                # Inside poll() (a callback): the answers come at a later poll, not inside this one.
                return not (self._async_commits_unanswered or self._acks_sent)
            while self._async_commits_unanswered or self._acks_sent:
                left = deadline - time.monotonic()
                if left <= 0:
                    logger.warning("group '%s' did not answer the last offset commits within %g s (the group "
                                   "coordinator is unreachable; nothing is lost): leaving without them",
                                   self.group_id, timeout_s)
                    return False
                try:
                    self._consumer.poll(min(left, _FLUSH_POLL_S))  # the member's partitions are paused: no record
                except Exception as exc:  # poll() also raises a bare KafkaError when a rebalance callback fails
                    logger.warning("waiting for the answers of group '%s' failed: %s", self.group_id, exc)
                    return False
        finally:
            self._lock.release()
        return True

    def abandon(self) -> None:
        """Answer every awaited commit still waiting: the member is leaving the group.

        Caller: the thread closing the member, under the consumer lock, just before the client closes.
        """
        with self._state:
            waiting = self._acks_sent + self.pending.take()[1]
        for ack in waiting:
            ack.answer("the member left the group before the coordinator answered")
