"""Commits of positions to the Kafka group, for lag tools: the member's own, and a committer
that does not join (``assign`` with ``kafka.group.id``)."""

from __future__ import annotations

import logging
import threading
from typing import Any, List, Mapping, Optional

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kafka_group.auth.clients import new_consumer
from kafka_group.config.client_config import member_config
from kafka_group.errors import GroupMembershipError, KafkaGroupError
from kafka_group.offsets import TopicPartition

__all__ = ["AwaitedCommit", "GroupOffsetCommitter", "RETRIABLE_COMMIT_ERRORS", "commit_positions",
           "describe_positions"]

logger = logging.getLogger(__name__)

#: Answers to an offset commit that a retry may outlive: the group is rebalancing or has moved on from the
#: member's generation or epoch (the member rejoins and its rebalance callbacks say what it owns then), or
#: the coordinator is moving or busy. A retry is never sent for a partition the member stopped owning.
RETRIABLE_COMMIT_ERRORS = frozenset({
    KafkaError.REBALANCE_IN_PROGRESS, KafkaError.ILLEGAL_GENERATION, KafkaError.UNKNOWN_MEMBER_ID,
    KafkaError.STALE_MEMBER_EPOCH, KafkaError.FENCED_MEMBER_EPOCH, KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.REQUEST_TIMED_OUT,
    KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._WAIT_COORD, KafkaError._ASSIGNMENT_LOST,
})


def describe_positions(positions: Mapping[TopicPartition, int]) -> str:
    """``t-0@5, t-1@7`` (``nothing`` when empty), for logs and errors."""
    return ", ".join(f"{tp}@{pos}" for tp, pos in sorted(positions.items())) or "nothing"


class AwaitedCommit:
    """An asynchronous commit a thread waits for (``GroupMember.commit_and_wait``).

    ``done`` is set once it is answered; ``error`` is None when the coordinator accepted every position,
    and ``retriable`` says whether the refusal is one a retry may outlive (:data:`RETRIABLE_COMMIT_ERRORS`).
    Callers: the waiting thread (``done``, ``error``, ``retriable``), the member's polling thread (the rest).
    """

    def __init__(self, positions: Mapping[TopicPartition, int]) -> None:
        self.positions = dict(positions)
        self.done = threading.Event()
        self.error: Optional[str] = None
        self.retriable = False

    def answer(self, error: Optional[str], retriable: bool = False) -> None:
        """Settle it: ``error`` None for accepted; ``retriable`` for a refusal a retry may outlive."""
        self.error = error
        self.retriable = error is not None and retriable
        self.done.set()

    def answered_by(self, error: Optional[KafkaError], partitions: List[KafkaTopicPartition]) -> bool:
        """Whether an ``on_commit`` answer (``error``, ``partitions``) answers this commit (it names each of
        its positions); if so, settle it."""
        answered = {(p.topic, p.partition): p for p in partitions}
        mine = [answered.get((tp.topic, tp.partition)) for tp in self.positions]
        if any(p is None or p.offset != self.positions[TopicPartition(p.topic, p.partition)] for p in mine):
            return False
        errors = [error] if error is not None else [p.error for p in mine if p is not None and p.error is not None]
        self.answer(errors[0].str() if errors else None,
                    retriable=all(e.code() in RETRIABLE_COMMIT_ERRORS for e in errors))
        return True


def commit_positions(
    consumer: Consumer, lock: Any, group_id: str, positions: Mapping[TopicPartition, int]
) -> bool:
    """Commit ``positions`` to ``group_id`` synchronously, under ``lock``.

    Returns whether it succeeded; a failure (for example after a rebalance) is
    logged and loses nothing: the positions are kept elsewhere.
    """
    if not positions:
        return True
    offsets = [KafkaTopicPartition(tp.topic, tp.partition, pos) for tp, pos in sorted(positions.items())]
    with lock:
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            logger.warning("committing offsets to group '%s' failed (nothing is lost): %s", group_id, exc)
            return False
    return True


class GroupOffsetCommitter:
    """Commits positions to a group without joining it (for ``assign`` with ``kafka.group.id``).

    Callers: Spark's planning calls and the SIGTERM handler, both on the runner's main thread.

    Kafka accepts such commits while the group has no active members; lag tools
    then show this query's progress under the group's name.
    """

    def __init__(self, client_config: Mapping[str, str], group_id: str) -> None:
        self.group_id = group_id
        # Reentrant: Spark's commit() calls commit() on the runner's main thread, and the
        # SIGTERM handler (leave_group_on_sigterm) runs close() on that same thread, possibly
        # between two bytecodes of commit()'s locked block; it must not wait on its own thread.
        self._lock = threading.RLock()
        # The connector's error callback: a refused login or a missing ACL raises its own error
        # (served by the poll() before each commit), not a commit "Waiting for coordinator".
        self._config = member_config(client_config, group_id)
        self._consumer = new_consumer(self._config, client="committer", group=group_id)

    def commit(self, positions: Mapping[TopicPartition, int], generation: Optional[int] = None) -> bool:
        """Commit ``positions``; a failure is logged and loses nothing. ``generation`` is ignored: this
        committer owns no assignment (``assign`` fixes the partitions)."""
        with self._lock:
            self._consumer.poll(0)  # serves the error callback: a refused login or ACL raises here
        done = commit_positions(self._consumer, self._lock, self.group_id, positions)
        if not done:  # a commit that waited for a coordinator it could not log in to: say why
            with self._lock:
                self._consumer.poll(0)
        return done

    def commit_and_wait(self, positions: Mapping[TopicPartition, int], generation: Optional[int],
                        timeout_s: float) -> None:
        """Commit ``positions`` synchronously (``timeout_s`` unused: the client bounds it).

        Raises
        ------
        GroupMembershipError
            The commit failed.
        """
        if not self.commit(positions):
            raise GroupMembershipError(f"group '{self.group_id}' refused the commit of {describe_positions(positions)}")

    def close(self) -> None:
        """Release the client."""
        with self._lock:
            try:
                self._consumer.close()
            except KafkaGroupError as exc:  # the error callback, served by close(): told at the commit already
                logger.debug("closing the committer of group '%s': %s", self.group_id, exc)
