"""Manual pauses of a query's partitions: what is paused, since when, and how it is kept.

Pauses are this query's, not the group's: the group member keeps every paused
partition (no rebalance, no lost membership), the planner gives it an empty
range, and it resumes exactly at its position. A pause of a whole topic also
covers partitions of it assigned later. A partition that moves to another
member loses its pause (the new owner knows nothing of it), which is logged;
one that an eager rebalance revokes and hands straight back keeps it, and a pause
restored from the checkpoint is dropped when another member read the partition
meanwhile.

The state travels in the source's offset document (key ``@flow``), so Spark's
checkpoint keeps it and a restarted query resumes paused.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Dict, FrozenSet, Iterable, List, Mapping, Optional, Set

from kafka_group.offsets import TopicPartition, partitions_by_topic

__all__ = ["PauseState"]

logger = logging.getLogger(__name__)


class PauseState:
    """Paused topics and partitions of one query, with the time each pause began."""

    def __init__(self) -> None:
        self._topics: Dict[str, float] = {}
        self._partitions: Dict[TopicPartition, float] = {}

    def pause(self, topic: str, partitions: Optional[Iterable[int]]) -> List[str]:
        """Pause ``partitions`` of ``topic`` (all of it, now and later, when None); return what changed."""
        now = time.time()
        if partitions is None:
            changed = [] if topic in self._topics else [topic]
            self._topics.setdefault(topic, now)
            return changed
        changed = []
        for partition in partitions:
            tp = TopicPartition(topic, partition)
            if tp not in self._partitions and topic not in self._topics:
                self._partitions[tp] = now
                changed.append(str(tp))
        return changed

    def resume(self, topic: str, partitions: Optional[Iterable[int]], owned: FrozenSet[TopicPartition]) -> List[str]:
        """Resume ``partitions`` of ``topic`` (every pause of it when None); return what changed.

        Resuming some partitions of a paused topic keeps the others of it that this
        query owns paused.
        """
        changed: List[str] = []
        if partitions is None:
            if self._topics.pop(topic, None) is not None:
                changed.append(topic)
            for tp in [tp for tp in self._partitions if tp.topic == topic]:
                del self._partitions[tp]
                changed.append(str(tp))
            return changed
        wanted = {TopicPartition(topic, p) for p in partitions}
        since = self._topics.pop(topic, None)
        if since is not None:
            for tp in owned:
                if tp.topic == topic and tp not in wanted:
                    self._partitions.setdefault(tp, since)
        for tp in sorted(wanted):
            if self._partitions.pop(tp, None) is not None or since is not None:
                changed.append(str(tp))
        return changed

    def paused_since(self, tp: TopicPartition) -> Optional[float]:
        """When the pause covering ``tp`` began, or None if it is not paused."""
        return self._partitions.get(tp, self._topics.get(tp.topic))

    def paused_among(self, partitions: Iterable[TopicPartition]) -> Set[TopicPartition]:
        """Which of ``partitions`` are paused."""
        return {tp for tp in partitions if tp in self._partitions or tp.topic in self._topics}

    def drop(self, partitions: Iterable[TopicPartition], why: str) -> None:
        """Forget the partition pauses of ``partitions`` (they left this query), logging it."""
        for tp in sorted(partitions):
            if self._partitions.pop(tp, None) is not None:
                logger.info("pause of %s dropped: %s", tp, why)

    def keep_only(self, owned: FrozenSet[TopicPartition], why: str) -> List[TopicPartition]:
        """Drop the partition pauses of partitions outside ``owned``, logging each; return them."""
        gone = sorted(tp for tp in self._partitions if tp not in owned)
        self.drop(gone, why)
        return gone

    def to_doc(self) -> Dict[str, Any]:
        """The ``@flow`` entry of the offset document (empty when nothing is paused)."""
        doc: Dict[str, Any] = {}
        if self._topics:
            doc["pausedTopics"] = sorted(self._topics)
        if self._partitions:
            doc["paused"] = partitions_by_topic(self._partitions)
        return doc

    def restore(self, doc: Mapping[str, Any]) -> None:
        """Take the pauses of an offset document's ``@flow`` entry (from Spark's checkpoint)."""
        now = time.time()
        for topic in doc.get("pausedTopics", []) or []:
            self._topics.setdefault(str(topic), now)
        for topic, partitions in (doc.get("paused", {}) or {}).items():
            for partition in partitions:
                self._partitions.setdefault(TopicPartition(str(topic), int(partition)), now)
        if self._topics or self._partitions:
            logger.info("restored pauses from the checkpoint: %s", self.to_doc())
