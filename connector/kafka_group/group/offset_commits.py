"""Commits of positions to the Kafka group, for lag tools: the member's own, and a committer
that does not join (``assign`` with ``kafka.group.id``)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, List, Mapping, Optional, Set, Tuple

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kafka_group.auth.clients import new_consumer
from kafka_group.config.client_config import member_config
from kafka_group.errors import GroupMembershipError, KafkaGroupError
from kafka_group.faults import crash_point
from kafka_group.offsets import TopicPartition

__all__ = ["AwaitedCommit", "CLIENT_CLOSE_TIMEOUT_S", "COMMITTER_TIMEOUT_S", "GroupOffsetCommitter",
           "RETRIABLE_COMMIT_ERRORS", "close_within", "commit_positions", "describe_positions"]

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


#: Seconds a group client may take to close (a member leaves the group then) before its owner goes on without it.
CLIENT_CLOSE_TIMEOUT_S = 10.0

#: An ``on_commit`` answer: the error of the whole commit, if any, and the partitions with their own.
_Answer = Tuple[Optional[KafkaError], List[KafkaTopicPartition]]

#: Seconds a :class:`GroupOffsetCommitter` waits for the coordinator's answer to one commit.
COMMITTER_TIMEOUT_S = 10.0


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

    Callers: Spark's planning calls (the runner's main thread) and the SIGTERM handler's close thread.

    Kafka accepts such commits while the group has no active members; lag tools
    then show this query's progress under the group's name. Each commit waits for
    the coordinator's answer at most :data:`COMMITTER_TIMEOUT_S` (librdkafka's
    synchronous commit has no bound: with the coordinator gone it could wait for
    ever, in the SIGTERM handler too).
    """

    def __init__(self, client_config: Mapping[str, str], group_id: str) -> None:
        self.group_id = group_id
        # Spark's commit() calls commit() on the runner's main thread; the SIGTERM handler
        # (leave_group_on_sigterm) closes on a thread of its own, which waits here until that
        # locked block is done (within the commit's bound). Reentrant all the same.
        self._lock = threading.RLock()
        # The answers to this committer's commits (on_commit, served by poll() under the lock).
        self._answers: List[_Answer] = []
        # The connector's error callback: a refused login or a missing ACL raises its own error
        # (served by the poll() before each commit), not a commit "Waiting for coordinator".
        self._config = member_config(client_config, group_id)
        self._consumer = new_consumer(self._config, client="committer", group=group_id, on_commit=self._on_commit)

    def commit(self, positions: Mapping[TopicPartition, int], generation: Optional[int] = None,
               timeout_s: float = COMMITTER_TIMEOUT_S) -> bool:
        """Commit ``positions`` and wait for the answer, at most ``timeout_s``; a failure, or no answer in
        time, is logged and loses nothing. ``generation`` is ignored: this committer owns no assignment
        (``assign`` fixes the partitions)."""
        with self._lock:
            self._consumer.poll(0)  # serves the error callback: a refused login or ACL raises here
            if not positions:
                return True
            offsets = [KafkaTopicPartition(tp.topic, tp.partition, pos) for tp, pos in sorted(positions.items())]
            self._answers.clear()
            try:
                self._consumer.commit(offsets=offsets, asynchronous=True)
            except KafkaException as exc:
                logger.warning("committing offsets to group '%s' failed (nothing is lost): %s", self.group_id, exc)
                return False
            deadline = time.monotonic() + timeout_s
            mine = {(o.topic, o.partition, o.offset) for o in offsets}
            while not self._answered(mine):  # the poll also serves the error callback: a refused login raises here
                left = deadline - time.monotonic()
                if left <= 0:
                    logger.warning("group '%s' did not answer the commit of %s within %g s (the group coordinator "
                                   "is unreachable; nothing is lost)", self.group_id, describe_positions(positions),
                                   timeout_s)
                    return False
                self._consumer.poll(min(left, 0.1))
            error, answered = self._answered(mine)[0]
        errors = [error] if error is not None else [p.error for p in answered if p.error is not None]
        if errors:
            logger.warning("committing offsets to group '%s' failed (nothing is lost): %s", self.group_id,
                           errors[0].str())
            return False
        return True

    def _answered(self, offsets: Set[Tuple[str, int, int]]) -> List[_Answer]:
        """The answers to the commit of ``offsets`` (an earlier commit given up on may answer meanwhile)."""
        return [(error, answered) for error, answered in self._answers
                if {(p.topic, p.partition, p.offset) for p in answered} == offsets]

    def _on_commit(self, error: Optional[KafkaError], partitions: List[KafkaTopicPartition]) -> None:
        # Inside poll(), under the lock, on the thread that commits.
        self._answers.append((error, partitions))

    def commit_and_wait(self, positions: Mapping[TopicPartition, int], generation: Optional[int],
                        timeout_s: float) -> None:
        """Commit ``positions``, waiting for the answer at most ``timeout_s``.

        Raises
        ------
        GroupMembershipError
            The commit failed or was not answered in time.
        """
        if not self.commit(positions, timeout_s=timeout_s):
            raise GroupMembershipError(f"group '{self.group_id}' refused the commit of {describe_positions(positions)} "
                                       f"or did not answer it within {int(timeout_s * 1000)} ms")

    def close(self, timeout_s: float = CLIENT_CLOSE_TIMEOUT_S) -> None:
        """Release the client, within ``timeout_s`` (with a commit the coordinator never answered, librdkafka's
        close waited for the group's session timeout, 45 s by default)."""
        with self._lock:
            close_within(self._consumer, timeout_s, f"the committer of group '{self.group_id}'")


def close_within(client: Any, timeout_s: float, what: str, fault_point: Optional[str] = None) -> bool:
    """``client.close()``, given at most ``timeout_s``: it runs on a daemon thread of its own, left behind when
    the bound passes (the process is ending: see :mod:`kafka_group.group.sigterm`). Returns whether it
    finished; a failure or the bound passing is logged. ``fault_point``: the :mod:`kafka_group.faults` point
    that thread reaches before the close. Caller: the thread closing ``what``."""
    def run() -> None:
        try:
            if fault_point is not None:
                crash_point(fault_point)
            client.close()
            logger.debug("closed %s", what)
        except KafkaGroupError as exc:  # the error callback, served by close(): told at a commit already
            logger.debug("closing %s: %s", what, exc)
        except (KafkaException, RuntimeError) as exc:
            logger.warning("closing %s failed: %s", what, exc)

    closing = threading.Thread(target=run, name="kafka-group-client-close", daemon=True)
    closing.start()
    closing.join(timeout_s)
    if closing.is_alive():
        logger.warning("closing %s did not finish within %g s (the Kafka cluster does not answer): going on "
                       "without it; the group drops this member when its session times out", what, timeout_s)
        return False
    return True
