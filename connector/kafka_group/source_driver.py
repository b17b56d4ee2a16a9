"""The driver side of the source: decides the offset ranges of each micro-batch.

:class:`SourceDriver` holds the query's group member (or its fixed ``assign``
partitions) and answers Spark's planning calls in Kafka terms. It is created
lazily, in the one process that serves a query's planning calls, and never
pickled.

Positioning: a partition that enters this member's ownership (first assignment,
a rebalance, a restart) is positioned before it enters a plan.

- With ``offsets.table`` the Delta table is the source of truth: a partition the
  table has seen starts at the table's position, at every batch (so a reset made
  with the offsets tool is picked up at the next batch, and a batch the sink
  refused is read again). Spark's checkpoint and Kafka's committed offsets are
  not consulted for it.
- Without it, the position is the furthest of what the query's own offsets say
  and what the group has committed (another member may have read it meanwhile).

A partition none of these has seen starts where ``startingOffsets`` says. While
the member keeps a partition, its position is the end of the previous batch.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Any, Dict, FrozenSet, List, Mapping, Optional, Set, Tuple

from kafka_group.cluster_metadata import ClusterView
from kafka_group.delta_offsets import DeltaOffsetStore
from kafka_group.errors import AvailableNowIncompleteError, DataLossError, FlowControlError
from kafka_group.event_time import EventTimeAlignment
from kafka_group.flow_channel import ControlChannel
from kafka_group.flow_control import PauseState
from kafka_group.faults import crash_point
from kafka_group.membership import GroupMember, GroupOffsetCommitter, RebalanceEvent
from kafka_group.offsets import EARLIEST, LATEST, BatchOffsets, OffsetRange, TopicPartition, partitions_by_topic
from kafka_group.options import SourceOptions, SubscriptionKind
from kafka_group.planning import BatchPlan, plan_batch
from kafka_group.rebalance_listener import load_rebalance_listener

__all__ = ["SourceDriver"]

logger = logging.getLogger(__name__)


class SourceDriver:
    """Plans micro-batches from the partitions this query owns.

    Parameters
    ----------
    options : SourceOptions
        The validated source options.

    Raises
    ------
    BrokerUnavailableError
        The cluster did not answer within ``kafkaConsumer.connectTimeoutMs``.
    UnknownTopicOrPartitionError
        ``assign`` names a topic or partition that does not exist.
    """

    def __init__(self, options: SourceOptions) -> None:
        self._options = options
        self._cluster = ClusterView(options.client_config, options.connect_timeout_ms)
        # Reentrant: the SIGTERM handler runs close() on the runner's main thread, which may be
        # inside a locked block of a planning call at that moment.
        self._lock = threading.RLock()
        self._positioned: Set[TopicPartition] = set()
        self._pending_positions: Dict[TopicPartition, int] = {}
        self._target: Optional[Dict[TopicPartition, int]] = None
        self._latest: Dict[TopicPartition, int] = {}
        self._in_flight: Dict[TopicPartition, OffsetRange] = {}
        self._joined = False
        self._closed = False
        # Planning thread only: the positions the last plan started from (AvailableNow's end check).
        self._last_positions: Dict[TopicPartition, int] = {}
        self._member: Optional[GroupMember] = None
        self._store: Optional[DeltaOffsetStore] = None
        if options.offsets_table is not None:
            assert options.group_id is not None
            self._store = DeltaOffsetStore(options.offsets_table, options.group_id)
        self._committer: Optional[GroupOffsetCommitter] = None
        self._known_at_start: Optional[Set[TopicPartition]] = None
        self._pauses = PauseState()
        self._pauses_restored = False
        self._held: Dict[TopicPartition, str] = {}
        self._alignment: Optional[EventTimeAlignment] = None
        if options.max_drift_ms is not None:
            self._alignment = EventTimeAlignment(options.client_config, options.group_id,
                                                 options.max_drift_ms, options.connect_timeout_ms)
        self._channel: Optional[ControlChannel] = None
        if options.subscription_kind == SubscriptionKind.ASSIGN:
            self._cluster.check_partitions_exist(options.assigned, "assign")
            self._joined = True
            if options.group_id is not None:
                self._committer = GroupOffsetCommitter(options.client_config, options.group_id)
            self._open_control_channel()
            return
        existing = self._cluster.topic_partitions(options.topics or None)
        self._known_at_start = {TopicPartition(t, p) for t, n in existing.items() for p in range(n)}
        if options.subscription_kind == SubscriptionKind.SUBSCRIBE:
            missing = [t for t in options.topics if t not in existing]
            if missing:
                logger.warning(
                    "subscribed topics %s do not exist yet on '%s'; their partitions are planned once "
                    "they are created", ",".join(missing), options.bootstrap_servers,
                )
        assert options.group_id is not None
        user_listener = (load_rebalance_listener(options.rebalance_listener)
                         if options.rebalance_listener is not None else None)
        self._member = GroupMember(options.client_config, options.group_id, options.topics, options.pattern)
        self._member.add_listener(self._on_rebalance)
        if user_listener is not None:
            self._member.add_listener(user_listener)
        self._open_control_channel()

    def _open_control_channel(self) -> None:
        self._channel = ControlChannel(
            self._options.control_dir, self._options.group_id or "assign",
            {"subscription": self._options.describe_subscription()}, self._handle_flow_request,
        )

    # -- what this query owns ---------------------------------------------------------

    def owned(self) -> FrozenSet[TopicPartition]:
        """The partitions this query may plan now."""
        if self._member is None:
            return frozenset(self._options.assigned)
        return self._member.owned()

    @property
    def member(self) -> Optional[GroupMember]:
        """The group member, or None for ``assign``."""
        return self._member

    def _ensure_joined(self) -> None:
        if self._joined or self._member is None:
            return
        if not self._member.wait_for_assignment(self._options.group_join_timeout_ms / 1000):
            logger.warning(
                "group '%s' assigned no partitions within %d ms (option 'groupJoinTimeoutMs'); "
                "planning empty batches until it does", self._options.group_id, self._options.group_join_timeout_ms,
            )
        self._joined = True

    def _on_rebalance(self, event: RebalanceEvent) -> None:
        if event.kind in ("revoke", "lost"):
            # Pauses stay: an eager rebalance revokes every partition and may hand them
            # straight back. Planning drops those of partitions that went elsewhere.
            with self._lock:
                self._positioned.difference_update(event.partitions)
                for tp in event.partitions:
                    self._pending_positions.pop(tp, None)
                running = {tp: self._in_flight.pop(tp) for tp in event.partitions if tp in self._in_flight}
            if event.kind == "revoke":
                self._finish_revoked(event.partitions, running)

    def _finish_revoked(self, revoked: FrozenSet[TopicPartition], running: Dict[TopicPartition, OffsetRange]) -> None:
        """Hold a revoke until the running batch of its partitions has landed, then commit them.

        The seeds' rebalance listener: commit on revoke, so the next owner starts
        exactly where this one stopped. Only the offsets table can tell that a batch
        landed (Spark reports completion to the source only at the next plan), so
        without ``offsets.table`` the revoke does not wait. Lost partitions never
        wait: the table's commit check keeps a late commit of theirs out.
        """
        if self._store is None or self._member is None:
            return
        deadline = time.monotonic() + self._options.revoke_timeout_ms / 1000
        pending = dict(running)
        while pending:
            held = self._store.positions(pending)
            pending = {tp: r for tp, r in pending.items() if held.get(tp, r.from_offset) == r.from_offset}
            if not pending:
                break
            if time.monotonic() > deadline:
                logger.warning(
                    "revoking %s: the running batch (%s) did not land within %d ms (option 'revokeTimeoutMs'); the "
                    "next owner may plan the same offsets, and whichever commits second is refused",
                    ",".join(str(tp) for tp in sorted(pending)), ", ".join(str(r) for r in pending.values()),
                    self._options.revoke_timeout_ms,
                )
                break
            time.sleep(0.2)
        positions = self._store.positions(revoked)
        self._member.commit(positions)
        logger.info("revoke of %s complete; committed %s", ",".join(str(tp) for tp in sorted(revoked)),
                    _describe(positions))

    # -- Spark's planning calls ------------------------------------------------------------

    def initial_offsets(self) -> BatchOffsets:
        """Positions of the partitions owned when the query starts (no range planned)."""
        self._ensure_joined()
        self._position_new_partitions(BatchOffsets.empty())
        with self._lock:
            return BatchOffsets(dict(self._pending_positions), {}, *self._doc_metadata())

    def _doc_metadata(self) -> tuple[Optional[str], Optional[str]]:
        if self._store is None:
            return None, None
        return self._options.group_id, self._options.offsets_table

    def prepare_available_now(self) -> None:
        """Fix the end of an ``Trigger.AvailableNow`` run: the latest offsets of now."""
        self._ensure_joined()
        if self._options.subscription_kind == SubscriptionKind.ASSIGN:
            partitions = list(self._options.assigned)
        elif self._options.subscription_kind == SubscriptionKind.PATTERN:
            assert self._options.pattern is not None
            partitions = self._cluster.matching_partitions(self._options.pattern)
        else:
            partitions = self._cluster.partitions_of(self._options.topics)
        self._target = self._cluster.latest_offsets(partitions)
        logger.info("AvailableNow run stops at %s", _describe(self._target))

    def next_offsets(self, start: BatchOffsets, max_records: Optional[int]) -> Optional[BatchOffsets]:
        """Plan the next micro-batch after ``start``.

        Parameters
        ----------
        start : BatchOffsets
            The end of the previous batch.
        max_records : int or None
            The batch budget (Spark's read limit), or None for all available.

        Returns
        -------
        BatchOffsets or None
            The end of the next batch, or None when there is nothing to read (Spark
            then gets its ``start`` back unchanged).
        """
        end = self._plan_next(start, max_records)
        if end is not None or self._target is None:
            return end
        return self._await_available_now_end(start, max_records)

    def _await_available_now_end(self, start: BatchOffsets, max_records: Optional[int]) -> Optional[BatchOffsets]:
        """An AvailableNow run with nothing to plan ends only when every partition of its target
        has reached its end offset, or can never be read (see ``_unfinished_target``). Until
        then it waits, planning again each second (the group may hand it partitions), and
        fails after ``availableNowTimeoutMs`` during which nothing changed.

        Caller: Spark's planning thread (the runner's main thread); the group's poll thread
        keeps serving rebalances meanwhile, and a SIGTERM's close ends the wait.
        """
        wait_s = self._options.available_now_timeout_ms / 1000
        last_state: Any = None
        changed_at = time.monotonic()
        logged = False
        while True:
            unfinished = self._unfinished_target(start)
            if not unfinished:
                return None
            owned = self.owned()
            state = (owned, tuple(sorted(unfinished.items())))
            if state != last_state:
                last_state, changed_at = state, time.monotonic()
            elif time.monotonic() - changed_at > wait_s:
                elsewhere = {tp: v for tp, v in unfinished.items() if tp not in owned}
                here = {tp: v for tp, v in unfinished.items() if tp in owned}
                raise AvailableNowIncompleteError(
                    f"the AvailableNow run of group '{self._options.group_id}' cannot reach its end offsets: "
                    + "; ".join(part for part in (
                        f"{_describe_unfinished(elsewhere)} owned elsewhere (another query of the group still "
                        "running, or a crashed one until its session times out)" if elsewhere else "",
                        f"{_describe_unfinished(here)} owned here but held back by a flow rule" if here else "",
                    ) if part)
                    + f", and nothing moved for {self._options.available_now_timeout_ms} ms (option "
                    "'availableNowTimeoutMs'). Run again later (it continues from what landed), or raise "
                    "'availableNowTimeoutMs'"
                )
            if not logged:
                logger.info("AvailableNow run waits for partitions to reach the run's end: %s",
                            _describe_unfinished(unfinished))
                logged = True
            if self._closed:
                return None
            time.sleep(1.0)
            end = self._plan_next(start, max_records)
            if end is not None:
                return end

    def _unfinished_target(self, start: BatchOffsets) -> Dict[TopicPartition, Tuple[Optional[int], int]]:
        """Partitions of the AvailableNow target short of their end offset, with their position
        (None: never read) and that end.

        Owned partitions are judged by this query's own positions from its last plan (a
        partition just assigned and not positioned yet is short); paused ones count as done,
        as they do in every trigger. Partitions owned elsewhere are judged by the offsets
        table. Without one, by the group's committed offsets, and only while this member
        owns nothing (the run after a crash): a live member's last batch reaches the group
        only when it plans the next one, so its committed offsets may trail for ever.
        Partitions whose records below the end are all gone from the broker are done, and
        so are never-read ones whose owner starts them at the latest offset.
        """
        assert self._target is not None
        owned = self.owned()
        with self._lock:
            paused = self._pauses.paused_among(owned)
        others = [tp for tp in self._target if tp not in owned]
        kept: Mapping[TopicPartition, int] = {}
        resumed = bool(start.positions)
        if self._store is not None:
            in_table = self._store.positions(self._target)  # one table read for both uses
            kept = {tp: pos for tp, pos in in_table.items() if tp not in owned}
            resumed = resumed or bool(in_table)
        elif self._member is not None and not owned:
            kept = self._member.committed(others, self._options.connect_timeout_ms / 1000)
        else:
            others = []
        short: Dict[TopicPartition, Tuple[Optional[int], int]] = {}
        for tp, end in self._target.items():
            if end <= 0 or tp in paused or (tp not in owned and tp not in others):
                continue
            pos = self._last_positions.get(tp) if tp in owned else kept.get(tp)
            if pos is None or pos < end:
                short[tp] = (pos, end)
        earliest = self._cluster.earliest_offsets(short)
        return {
            tp: (pos, end) for tp, (pos, end) in short.items()
            if earliest.get(tp, -1) < end  # records below the end are still on the broker
            and not (pos is None and tp not in owned and self._starting_spec(tp, resumed) == LATEST)
        }

    def _plan_next(self, start: BatchOffsets, max_records: Optional[int]) -> Optional[BatchOffsets]:
        self._ensure_joined()
        with self._lock:
            if not self._pauses_restored:
                self._pauses.restore(start.flow)
                self._pauses_restored = True
        self._position_new_partitions(start)
        owned = self.owned()
        self._drop_pauses_of_partitions_gone(owned)
        with self._lock:
            positions = dict(start.positions)
            positions.update(self._pending_positions)
            plannable = {tp: positions[tp] for tp in owned if tp in self._positioned and tp in positions}
        if self._store is not None:
            self._follow_table(plannable)
        latest = self._cluster.latest_offsets(plannable)
        self._latest = dict(latest)
        if self._target is not None:
            latest = {tp: min(end, self._target.get(tp, 0)) for tp, end in latest.items()}
        checked = self._check_data_loss(plannable, latest)
        if self._store is not None:
            self._move_table_past_loss(plannable, checked)
        limits = None
        if self._alignment is not None:
            takes = [n for n in (max_records, self._options.flow_policy.max_per_partition) if n is not None]
            limits = self._alignment.view(checked, latest, min(takes) if takes else None).limits
        with self._lock:
            paused = self._pauses.paused_among(checked)
            flow = self._pauses.to_doc()
        plan = plan_batch(checked, latest, max_records, self._options.flow_policy, paused, limits)
        self._last_positions = dict(checked)
        self._held = dict(plan.held)
        self._publish_status(checked, plan)
        if not plan.ranges and flow == dict(start.flow):
            return None
        with self._lock:
            positions.update(checked)
            self._pending_positions.clear()
        group, table = self._doc_metadata()
        with self._lock:
            # A revoke that ran while this plan was made (the poll thread, between the
            # ownership read above and here) found no running range for its partitions
            # and let them go at once: keep them out of this batch. A revoke after this
            # block finds the ranges in flight and waits for the batch to land.
            ranges = [r for r in plan.ranges if r.topic_partition in self._positioned]
            for dropped in plan.ranges:
                if dropped.topic_partition not in self._positioned:
                    logger.info("%s was revoked while the batch was planned: left out of it", dropped.topic_partition)
            self._in_flight = {r.topic_partition: r for r in ranges}
        end = BatchOffsets.from_ranges(positions, ranges, group=group, offsets_table=table, flow=flow)
        logger.info("planned %d records: %s%s", sum(r.size for r in ranges),
                    ", ".join(str(r) for r in ranges) or "nothing",
                    "; held back: " + _describe_held(plan.held) if plan.held else "")
        return end

    def latest_report(self) -> Dict[TopicPartition, int]:
        """The latest offsets seen by the last planning call, for query progress."""
        return dict(self._latest)

    def membership_report(self) -> Dict[str, Any]:
        """This query's place in its group, for query progress (key ``@member`` of ``latestOffset``).

        ``generation`` counts the member's rebalance events; ``owned`` lists its
        partitions per topic; ``lastRebalance`` says what changed last and why.
        """
        owned = self.owned()
        report: Dict[str, Any] = {"owned": partitions_by_topic(owned)}
        if self._member is None:
            report["assign"] = True
            return report
        events = self._member.events()
        report.update(group=self._member.group_id, memberId=self._member.member_id,
                      generation=self._member.generation)
        if events:
            last = events[-1]
            report["lastRebalance"] = {
                "kind": last.kind, "partitions": partitions_by_topic(last.partitions), "cause": last.cause,
                "at": _iso(last.at),
            }
        return report

    def flow_report(self) -> Dict[str, Any]:
        """Flow control for query progress (key ``@flow`` of ``latestOffset``): the control
        channel's folder, the pauses, and the partitions the last plan held back, by rule."""
        with self._lock:
            report: Dict[str, Any] = self._pauses.to_doc()
        if self._channel is not None:
            report["control"] = self._channel.path
        held: Dict[str, Dict[str, str]] = {}
        for tp, reason in sorted(self._held.items()):
            held.setdefault(tp.topic, {})[str(tp.partition)] = reason
        if held:
            report["held"] = held
        return report

    # -- flow control requests (from the control channel's thread) ---------------------------

    def _handle_flow_request(self, request: Mapping[str, Any]) -> Dict[str, Any]:
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
        self._check_flow_target(op, topic, partitions)
        owned = self.owned()
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
            state = self._pauses.to_doc()
        logger.info("flow control: %s %s%s -> %s; paused now: %s", op, topic,
                    f" partitions {partitions}" if partitions is not None else " (whole topic)",
                    ",".join(changed) or "no change", state or "nothing")
        return {"ok": True, "changed": changed, "paused": state}

    def _check_flow_target(self, op: str, topic: str, partitions: Optional[List[int]]) -> None:
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
        count = self._cluster.topic_partitions([topic]).get(topic)
        if count is None:
            raise FlowControlError(f"{op}: topic '{topic}' does not exist on the cluster")
        bad = [p for p in partitions if not 0 <= p < count]
        if bad:
            raise FlowControlError(
                f"{op}: topic '{topic}' has partitions 0 to {count - 1}; there is no partition "
                f"{', '.join(str(p) for p in bad)}"
            )

    def _publish_status(self, positions: Mapping[TopicPartition, int], plan: BatchPlan) -> None:
        if self._channel is None:
            return
        planned = {r.topic_partition: r for r in plan.ranges}
        rows = []
        owned = self.owned()
        with self._lock:
            pauses = {tp: self._pauses.paused_since(tp) for tp in owned}
        for tp in sorted(owned):
            position = positions.get(tp)
            latest = self._latest.get(tp)
            since = pauses.get(tp)
            r = planned.get(tp)
            rows.append({
                "topic": tp.topic, "partition": tp.partition, "position": position, "latest": latest,
                "lag": latest - position if latest is not None and position is not None else None,
                "planned": [r.from_offset, r.until_offset] if r is not None else None,
                "paused": since is not None,
                "pausedSince": _iso(since) if since is not None else None,
                "heldBy": plan.held.get(tp),
            })
        status: Dict[str, Any] = {"updated": _iso(time.time()), "group": self._options.group_id,
                                  "subscription": self._options.describe_subscription(), "partitions": rows}
        if self._member is not None:
            status.update(memberId=self._member.member_id, generation=self._member.generation)
        self._channel.publish_status(status)

    def on_batch_running(self, end: BatchOffsets) -> None:
        """Spark is about to run the batch that ends at ``end`` (a new one, or one it replays
        from its checkpoint after a restart): a revoke of its partitions waits for it to land.

        Caller: Spark's planning thread (``partitions``), after ``next_offsets`` for a new
        batch; the member's poll thread reads the result in a revoke.
        """
        with self._lock:
            # Every range, owned or not yet: a batch Spark replays after a restart runs before
            # this member has positioned anything, and a revoke of its partitions must wait too.
            self._in_flight = dict(end.ranges)

    def on_batch_committed(self, end: BatchOffsets) -> None:
        """Commit the positions of the partitions still owned to the Kafka group, for lag tools.

        With ``offsets.table`` these are the table's positions (what has landed),
        else the batch's end positions.
        """
        committer = self._member or self._committer
        if committer is None:
            return
        owned = self.owned()
        with self._lock:
            # Spark commits batch N-1 after it planned batch N: drop only N-1's own ranges,
            # never the running batch's ranges of the same partitions.
            for tp, committed in end.ranges.items():
                if self._in_flight.get(tp) == committed:
                    del self._in_flight[tp]
            mine = {tp: pos for tp, pos in end.positions.items() if tp in owned and tp in self._positioned}
        if self._store is not None:
            mine = self._store.positions(mine)
        crash_point("source.before_kafka_commit")
        committer.commit(mine)

    def close(self) -> None:
        """Commit what has landed to the Kafka group, leave the group and release clients.

        Caller: the SIGTERM handler on the runner's main thread, or Spark's ``stop()``.

        Spark commits a batch to its source only when it plans the next one, so the
        last batch of a run reaches the Kafka group here (from the offsets table;
        without one nothing more is committed, as Spark may not have finished it).
        """
        self._closed = True
        # The query is stopping: Spark interrupts the running batch, which may never land.
        # The revoke that closing the member fires must not wait for it (up to
        # revokeTimeoutMs, while the group waits for this member to leave); if it does
        # land, the table's commit check still keeps the next owner's batch apart.
        with self._lock:
            self._in_flight.clear()
        committer = self._member or self._committer
        if self._store is not None and committer is not None:
            try:
                committer.commit(self._store.positions(self.owned()))
            except Exception:  # leaving the group matters more than lag reporting
                logger.exception("committing the final positions to the Kafka group failed")
        if self._channel is not None:
            self._channel.close()
        if self._alignment is not None:
            self._alignment.close()
        if self._member is not None:
            self._member.close()
        if self._committer is not None:
            self._committer.close()

    # -- internals -------------------------------------------------------------------------

    def _position_new_partitions(self, start: BatchOffsets) -> None:
        owned = self.owned()
        with self._lock:
            new = sorted(owned - self._positioned)
        if not new:
            return
        checkpointed = dict(start.positions)
        # Resuming: Spark's checkpoint has positions (``start`` is a previous batch's end), or
        # the offsets table holds positions of this group (it landed before; the checkpoint may
        # be new). Decided before the table's partitions are taken out of ``start``: a restart
        # whose checkpointed partitions are all in the table is still a restart, and a partition
        # none of them knows was created since (CreatePartitions, a new topic of the pattern).
        resumed = bool(start.positions)
        committed: Mapping[TopicPartition, int] = {}
        if self._store is not None:
            committed = self._store.positions(new)
            resumed = resumed or bool(committed)
            start = BatchOffsets({tp: p for tp, p in start.positions.items() if tp not in committed}, {})
        elif self._member is not None:
            committed = self._member.committed(new, self._options.connect_timeout_ms / 1000)
        unseen = [tp for tp in new if tp not in start.positions and tp not in committed]
        wants_earliest = [tp for tp in unseen if self._starting_spec(tp, resumed) == EARLIEST]
        wants_latest = [tp for tp in unseen if self._starting_spec(tp, resumed) == LATEST]
        earliest = self._cluster.earliest_offsets(wants_earliest)
        latest = self._cluster.latest_offsets(wants_latest)
        resolved: Dict[TopicPartition, int] = {}
        for tp in new:
            known = [p for p in (start.positions.get(tp), committed.get(tp)) if p is not None]
            if known:
                resolved[tp] = max(known)
                continue
            spec = self._starting_spec(tp, resumed)
            source = earliest if spec == EARLIEST else latest if spec == LATEST else None
            if source is None:
                resolved[tp] = spec
            elif tp in source:
                resolved[tp] = source[tp]
        read_elsewhere = sorted(tp for tp, pos in resolved.items()
                                if tp in checkpointed and pos > checkpointed[tp])
        with self._lock:
            # A pause kept in the checkpoint (or from before a revoke) is stale for a
            # partition another member read meanwhile: its owner knew nothing of it.
            self._pauses.drop(read_elsewhere, "another member of the group read it meanwhile")
            # A rebalance may have taken some away meanwhile.
            still_owned = self.owned()
            for tp, pos in resolved.items():
                if tp in still_owned:
                    self._pending_positions[tp] = pos
                    self._positioned.add(tp)
        logger.info("positioned newly owned partitions: %s", _describe(resolved))

    def _drop_pauses_of_partitions_gone(self, owned: FrozenSet[TopicPartition]) -> None:
        """Forget the pauses of partitions the group gave to another member.

        Only once the member's last rebalance event is an assignment: in the middle
        of an eager rebalance (everything revoked, nothing assigned yet) the
        partitions may be about to come back.
        """
        if self._member is not None:
            events = self._member.events()
            if not events or events[-1].kind != "assign":
                return
        with self._lock:
            self._pauses.keep_only(owned, "the group gave the partition to another member")

    def _starting_spec(self, tp: TopicPartition, resumed: bool) -> int:
        """Where a partition the query never read starts: ``startingOffsets`` for the
        partitions of a new query; the earliest offset for partitions that appeared
        later (new topics of a pattern, added partitions, or any partition first seen
        by a query resuming from its checkpoint or from its offsets table), as in
        Spark's Kafka source."""
        if resumed or (self._known_at_start is not None and tp not in self._known_at_start):
            return EARLIEST
        return self._options.starting_offsets.for_partition(tp)

    def _follow_table(self, plannable: Dict[TopicPartition, int]) -> None:
        """Take the table's positions for owned partitions: it is the source of truth."""
        assert self._store is not None
        for tp, pos in self._store.positions(plannable).items():
            if pos != plannable[tp]:
                logger.warning(
                    "offsets.table has %s at %d, the query's offsets at %d (a reset, or a batch that was not "
                    "committed): continuing from the table", tp, pos, plannable[tp],
                )
                plannable[tp] = pos

    def _check_data_loss(
        self, positions: Dict[TopicPartition, int], latest: Mapping[TopicPartition, int]
    ) -> Dict[TopicPartition, int]:
        earliest = self._cluster.earliest_offsets(positions)
        checked = dict(positions)
        # With read_committed, ``latest`` is the last stable offset: a position past it (read
        # with read_uncommitted before a restart, or committed by a member that did) is not
        # loss while the partition's high watermark is still at or past it: it waits there
        # for the open transaction (plan_batch plans nothing for it meanwhile).
        past_end = [tp for tp, pos in positions.items() if tp in latest and pos > latest[tp]]
        high = self._cluster.high_watermarks(past_end) if past_end and self._target is None else {}
        for tp, pos in positions.items():
            first = earliest.get(tp)
            end = latest.get(tp)
            if end is not None and tp in high and end < pos <= high[tp]:
                logger.info("%s: position %d is past the last stable offset %d; waiting for the open "
                            "transaction there to end", tp, pos, end)
                continue
            if first is not None and pos < first:
                self._report_loss(
                    f"data loss in {tp}: offsets [{pos}, {first}) were removed from the broker (retention or "
                    "deleted records) before this query read them"
                )
                checked[tp] = first
            elif end is not None and self._target is None and pos > end:
                self._report_loss(
                    f"data loss in {tp}: the query is at offset {pos} but the partition now ends at {end} "
                    "(was the topic deleted and recreated?)"
                )
                checked[tp] = first if first is not None else 0
        return checked

    def _move_table_past_loss(self, planned_from: Mapping[TopicPartition, int], checked: Dict[TopicPartition, int]) -> None:
        """With ``offsets.table``: move the table's position of each partition whose lost offsets
        were skipped (``failOnDataLoss=false``) to where its next range starts.

        Runs in Spark's planning thread (``latestOffset``), before the batch is planned. The
        sink lands a range only when the table is at its first offset; without this move the
        table would stay at the old position and refuse every later batch of the partition,
        so it would never advance again. A partition the table has not seen needs no move; one
        whose table position changed meanwhile (another member, a reset) is left out of this
        batch and follows the table at the next.
        """
        assert self._store is not None
        moved = [tp for tp, pos in checked.items() if pos != planned_from[tp]]
        if not moved:
            return
        held = self._store.positions(moved)
        for tp in moved:
            if tp not in held:
                continue
            old, new = planned_from[tp], checked[tp]
            reason = (f"failOnDataLoss=false: offsets [{old}, {new}) of {tp} are no longer on the broker"
                      if new > old else f"failOnDataLoss=false: {tp} ends before position {old}; restarting at {new}")
            if not self._store.move(tp, old, new, reason=reason):
                logger.warning("offsets.table no longer has %s at %d; not planning it in this batch", tp, old)
                del checked[tp]

    def _report_loss(self, text: str) -> None:
        if self._options.fail_on_data_loss:
            raise DataLossError(text + ". Set option 'failOnDataLoss' to 'false' to skip them and go on")
        logger.warning("%s; skipping them because failOnDataLoss is false", text)


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _describe_unfinished(unfinished: Mapping[TopicPartition, Tuple[Optional[int], int]]) -> str:
    return ", ".join(f"{tp} at {'nothing read' if pos is None else pos} of {end}"
                     for tp, (pos, end) in sorted(unfinished.items()))


def _describe_held(held: Mapping[TopicPartition, str]) -> str:
    return ", ".join(f"{tp} ({reason})" for tp, reason in sorted(held.items()))


def _describe(positions: Mapping[TopicPartition, int]) -> str:
    return ", ".join(f"{tp}@{pos}" for tp, pos in sorted(positions.items())) or "nothing"

