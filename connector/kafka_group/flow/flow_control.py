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

:class:`FlowControl` is the driver's side of it: the pause/resume requests of the
control channel, the status rows published to the channel after each plan, the
``@flow`` progress report and the partitions the last plan held back.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from kafka_group.config.source_options import SourceOptions, SubscriptionKind
from kafka_group.errors import FlowControlError
from kafka_group.flow.flow_channel import ControlChannel
from kafka_group.formats.offset_document import read_flow_pauses
from kafka_group.offsets import TopicPartition, partitions_by_topic
from kafka_group.plan.planning import BatchPlan

if TYPE_CHECKING:
    from kafka_group.collaborators import Member
    from kafka_group.rebalance_event import RebalanceEvent

__all__ = ["FlowControl", "PauseState"]

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
        """Take the pauses of an offset document's ``@flow`` entry (from Spark's checkpoint).

        Raises
        ------
        FormatError
            The entry is malformed (:func:`~kafka_group.formats.read_flow_pauses`).
        """
        now = time.time()
        topics, partitions = read_flow_pauses(doc, what="the checkpoint's offset document")
        for topic in sorted(topics):
            self._topics.setdefault(topic, now)
        for tp in sorted(partitions):
            self._partitions.setdefault(tp, now)
        if self._topics or self._partitions:
            logger.info("restored pauses from the checkpoint: %s", self.to_doc())


class FlowControl:
    """A query's manual pauses and what its flow rules held back, with the control channel's requests.

    Parameters
    ----------
    options : SourceOptions
        The validated source options (subscription, group, control folder).
    owned : callable
        The partitions the query owns now (the group member's, or ``assign``'s).
    partition_count : callable
        The number of partitions of a topic on the cluster, None if it does not exist.

    Every method may be called from several threads: Spark's planning thread, the
    control channel's thread (:meth:`handle_request`) and the SIGTERM handler's thread
    (:meth:`close`). The state is guarded by one reentrant lock.
    """

    def __init__(self, options: SourceOptions, owned: Callable[[], FrozenSet[TopicPartition]],
                 partition_count: Callable[[str], Optional[int]]) -> None:
        self._options = options
        self._owned = owned
        self._partition_count = partition_count
        self._lock = threading.RLock()
        self._pauses = PauseState()
        self._restored = False
        #: Requests taken before the checkpoint's pauses were restored, in order: applied again
        #: on top of the restored pauses, so that the restore does not undo them.
        self._before_restore: List[Tuple[str, str, Optional[List[int]]]] = []
        self._held: Dict[TopicPartition, str] = {}
        self._channel: Optional[ControlChannel] = None

    def open_channel(self, root: str) -> None:
        """Open the control channel that serves :meth:`handle_request` under ``root`` (``flow.controlDir``,
        or the default root :func:`~kafka_group.flow.flow_channel.check_root` chose).

        Caller: the driver's factory, once, on the runner's main thread.
        """
        self._channel = ControlChannel(
            root, self._options.group_id or "assign",
            {"subscription": self._options.describe_subscription()}, self.handle_request,
        )

    # -- pauses, as planning sees them -------------------------------------------------

    def restore_once(self, doc: Mapping[str, Any]) -> None:
        """Take the pauses of the first planned batch's ``@flow`` entry (Spark's checkpoint).

        A restarted query plans its first batch once the group assigned it partitions;
        ``flow.pause`` and ``flow.resume`` requests the control channel took before that
        were applied to the pauses of the time, which the checkpoint's would override: they
        are applied again, in the order they came, on top of the restored pauses (the
        last word is the user's).

        Caller: Spark's planning thread, at each plan; only the first call restores.
        """
        if self._restored:  # read without the lock: set once, under it, and never reset
            return
        owned = self._owned()  # before the lock, as handle_request does (the member has its own)
        with self._lock:
            if self._restored:
                return
            self._pauses.restore(doc)
            for op, topic, partitions in self._before_restore:
                if op == "pause":
                    self._pauses.pause(topic, partitions)
                else:
                    self._pauses.resume(topic, partitions, owned)
            if self._before_restore:
                logger.info("flow control: %d request(s) taken before the checkpoint's pauses were restored "
                            "applied again after them; paused now: %s", len(self._before_restore),
                            self._pauses.to_doc() or "nothing")
            self._before_restore.clear()
            self._restored = True

    def drop_stale(self, partitions: Sequence[TopicPartition]) -> None:
        """Forget the pauses of ``partitions``: another member read them meanwhile (see
        :func:`kafka_group.plan.positioning.stale_pauses`). Caller: Spark's planning thread."""
        with self._lock:
            self._pauses.drop(partitions, "another member of the group read it meanwhile")

    def drop_gone(self, owned: FrozenSet[TopicPartition],
                  events: Optional[Callable[[], Sequence["RebalanceEvent"]]]) -> None:
        """Forget the pauses of partitions the group gave to another member.

        ``events`` reads the member's rebalance events (None for ``assign``, which has
        no member: ``owned`` is then its fixed partitions). Pauses are judged only once
        the member's last event is an assignment, and against what that event says the
        member owns, not against ``owned`` read earlier: in the middle of an eager
        rebalance (everything revoked, nothing assigned yet) the partitions may be about
        to come back, and an assignment landing after the caller read ``owned`` brings
        them back. The events are read under this lock, so a pause the control thread
        accepted for a partition it saw owned is judged by an event at least as new.

        Caller: Spark's planning thread.
        """
        with self._lock:
            if events is not None:
                history = events()
                if not history or history[-1].kind != "assign":
                    return
                owned = history[-1].owned
            self._pauses.keep_only(owned, "the group gave the partition to another member")

    def paused_among(self, partitions: Iterable[TopicPartition]) -> Set[TopicPartition]:
        """Which of ``partitions`` are paused. Caller: Spark's planning thread."""
        with self._lock:
            return self._pauses.paused_among(partitions)

    def state_of(self, partitions: Iterable[TopicPartition]) -> Tuple[Set[TopicPartition], Dict[str, Any]]:
        """Which of ``partitions`` are paused, and the ``@flow`` document, read together (a request
        between the two cannot split them). Caller: Spark's planning thread."""
        with self._lock:
            return self._pauses.paused_among(partitions), self._pauses.to_doc()

    def to_doc(self) -> Dict[str, Any]:
        """The ``@flow`` entry of the next offset document. Caller: Spark's planning thread."""
        with self._lock:
            return self._pauses.to_doc()

    # -- after each plan ----------------------------------------------------------------

    def planned(self, positions: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
                plan: BatchPlan, member: Optional["Member"]) -> None:
        """Record what the plan held back and publish the status rows to the control channel.

        The status names the ``member``'s id and generation (None for ``assign``).

        Caller: Spark's planning thread, after each plan.
        """
        with self._lock:
            self._held = dict(plan.held)
        if self._channel is None:
            return
        planned = {r.topic_partition: r for r in plan.ranges}
        rows = []
        owned = self._owned()
        with self._lock:
            pauses = {tp: self._pauses.paused_since(tp) for tp in owned}
        for tp in sorted(owned):
            position = positions.get(tp)
            end = latest.get(tp)
            since = pauses.get(tp)
            r = planned.get(tp)
            rows.append({
                "topic": tp.topic, "partition": tp.partition, "position": position, "latest": end,
                "lag": end - position if end is not None and position is not None else None,
                "planned": [r.from_offset, r.until_offset] if r is not None else None,
                "paused": since is not None,
                "pausedSince": iso(since) if since is not None else None,
                "heldBy": plan.held.get(tp),
            })
        status: Dict[str, Any] = {"updated": iso(time.time()), "group": self._options.group_id,
                                  "subscription": self._options.describe_subscription(), "partitions": rows}
        if member is not None:
            status.update(memberId=member.member_id, generation=member.generation)
        self._channel.publish_status(status)

    def report(self) -> Dict[str, Any]:
        """Flow control for query progress (key ``@flow`` of ``latestOffset``): the control
        channel's folder, the pauses, and the partitions the last plan held back, by rule.

        Caller: Spark's planning thread (``reportLatestOffset``).
        """
        with self._lock:
            report: Dict[str, Any] = self._pauses.to_doc()
            held_now = dict(self._held)
        if self._channel is not None:
            report["control"] = self._channel.path
        held: Dict[str, Dict[str, str]] = {}
        for tp, reason in sorted(held_now.items()):
            held.setdefault(tp.topic, {})[str(tp.partition)] = reason
        if held:
            report["held"] = held
        return report

    def close(self) -> None:
        """Close the control channel. Caller: the SIGTERM handler, or Spark's ``stop()``."""
        if self._channel is not None:
            self._channel.close()

    # -- requests from the control channel ------------------------------------------------

    def handle_request(self, request: Mapping[str, Any]) -> Dict[str, Any]:
        """Pause or resume partitions: ``{"op": "pause"|"resume", "topic": ..., "partitions": [...]|None}``.

        Caller: the control channel's thread.

        Returns
        -------
        dict
            ``{"ok": True, "changed": [...], "paused": <the @flow document>}``.

        Raises
        ------
        FlowControlError
            The request is malformed, names a topic this query does not read, a
            partition that does not exist, or pauses a partition another member owns.
        """
        op, topic, partitions = request.get("op"), request.get("topic"), request.get("partitions")
        if op not in ("pause", "resume"):
            raise FlowControlError(f"unknown flow-control operation {op!r}: use 'pause' or 'resume'")
        if not isinstance(topic, str) or not topic:
            raise FlowControlError(f"{op}: name a topic, got {topic!r}")
        if partitions is not None and (
            not isinstance(partitions, list) or not all(isinstance(p, int) and not isinstance(p, bool)
                                                        for p in partitions)
        ):
            raise FlowControlError(f"{op}: partitions must be a list of partition numbers, got {partitions!r}")
        self._check_target(op, topic, partitions)
        owned = self._owned()
        if op == "pause" and partitions is not None:
            foreign = sorted(TopicPartition(topic, p) for p in partitions if TopicPartition(topic, p) not in owned)
            if foreign:
                mine = ",".join(str(tp) for tp in sorted(owned) if tp.topic == topic) or "none of it"
                raise FlowControlError(
                    f"pause: {','.join(str(tp) for tp in foreign)} not owned by this query (group "
                    f"'{self._options.group_id}' assigned them to another member; this query owns {mine}). "
                    "Pause them in the query that owns them"
                )
        with self._lock:
            if op == "pause":
                changed = self._pauses.pause(topic, partitions)
            else:
                changed = self._pauses.resume(topic, partitions, owned)
            if not self._restored:
                self._before_restore.append((op, topic, None if partitions is None else list(partitions)))
            state = self._pauses.to_doc()
        logger.info("flow control: %s %s%s -> %s; paused now: %s", op, topic,
                    f" partitions {partitions}" if partitions is not None else " (whole topic)",
                    ",".join(changed) or "no change", state or "nothing")
        return {"ok": True, "changed": changed, "paused": state}

    def _check_target(self, op: str, topic: str, partitions: Optional[List[int]]) -> None:
        options = self._options
        if options.subscription_kind == SubscriptionKind.SUBSCRIBE:
            reads = topic in options.topics
        elif options.subscription_kind == SubscriptionKind.PATTERN:
            assert options.pattern is not None
            reads = re.fullmatch(options.pattern, topic) is not None
        else:
            reads = any(tp.topic == topic for tp in options.assigned)
        if not reads:
            raise FlowControlError(
                f"{op}: topic '{topic}' is not read by this query ({options.describe_subscription()})"
            )
        if partitions is None:
            return
        count = self._partition_count(topic)
        if count is None:
            raise FlowControlError(f"{op}: topic '{topic}' does not exist on the cluster")
        bad = [p for p in partitions if not 0 <= p < count]
        if bad:
            raise FlowControlError(
                f"{op}: topic '{topic}' has partitions 0 to {count - 1}; there is no partition "
                f"{', '.join(str(p) for p in bad)}"
            )


def iso(seconds: float) -> str:
    """``seconds`` since the epoch as an ISO 8601 UTC time, to the second."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))
