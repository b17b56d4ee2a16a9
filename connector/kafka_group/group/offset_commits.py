"""Commits of positions to the Kafka group, for lag tools: the member's own, and a committer
that does not join (``assign`` with ``kafka.group.id``)."""

from __future__ import annotations

import logging
import threading
from typing import Any, Mapping

from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kafka_group.config.client_config import member_config
from kafka_group.offsets import TopicPartition

__all__ = ["GroupOffsetCommitter", "commit_positions"]

logger = logging.getLogger(__name__)


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
        self._consumer = Consumer(member_config(client_config, group_id))

    def commit(self, positions: Mapping[TopicPartition, int]) -> bool:
        """Commit ``positions``; a failure is logged and loses nothing."""
        return commit_positions(self._consumer, self._lock, self.group_id, positions)

    def close(self) -> None:
        """Release the client."""
        with self._lock:
            self._consumer.close()
