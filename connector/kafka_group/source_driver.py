"""The driver side of the source: decides the offset ranges of each micro-batch.

:class:`SourceDriver` orchestrates each planning call: position newly owned partitions
(:mod:`~kafka_group.plan.positioning`), follow the offsets table, check for data loss
(:mod:`~kafka_group.plan.data_loss`), plan (:mod:`~kafka_group.plan.planning`) within the flow rules
(:mod:`~kafka_group.flow.flow_control`), register the ranges a revoke waits for
(:mod:`~kafka_group.group.rebalance`), keep the group's committed offsets following what landed
(:mod:`~kafka_group.group.group_commits`); an AvailableNow run ends as :mod:`~kafka_group.plan.available_now`
decides. Created lazily (:func:`kafka_group.driver_factory.build_source_driver`) in the process that serves the
query's planning calls, never pickled. Threads: Spark's planning thread (the runner's main
thread), the SIGTERM handler's close thread, the member's poll thread, the control channel's thread.
"""

from __future__ import annotations

import functools
import logging
import threading
from typing import AbstractSet, Any, Dict, FrozenSet, List, Mapping, Optional

from kafka_group.collaborators import Cluster, Committer, Member
from kafka_group.config.source_options import SourceOptions
from kafka_group.delta.offsets.table_routes import routes_key
from kafka_group.faults import crash_point
from kafka_group.flow.event_time import EventTimeAlignment
from kafka_group.flow.flow_control import FlowControl
from kafka_group.flow.record_sizes import RecordSizes
from kafka_group.group.group_commits import GroupCommits
from kafka_group.group.rebalance import OwnedPartitions, finish_revoke, membership_report
from kafka_group.group.sigterm import CLOSE_BOUND_S
from kafka_group.offsets import BatchOffsets, TopicPartition
from kafka_group.plan.byte_budget import record_caps
from kafka_group.plan.available_now import Unfinished, await_end, find_unfinished, target_offsets, target_partitions
from kafka_group.plan.data_loss import checked_positions
from kafka_group.plan.durable_starts import DurableStarts, StartStore
from kafka_group.plan.planning import BatchPlan, plan_batch
from kafka_group.plan.positioning import (describe_positions, follow_table, is_resumed, log_group_overrides,
                                         position_new, stale_pauses, starting_spec)
from kafka_group.plan.trigger_gate import ENOUGH_RECORDS, TriggerGate, backlog
from kafka_group.rebalance_event import RebalanceEvent

__all__ = ["SourceDriver"]

logger = logging.getLogger(__name__)


class SourceDriver:
    """Plans micro-batches from the partitions this query owns.

    Parameters
    ----------
    options : SourceOptions
        The validated source options.
    cluster : Cluster
        The cluster's topics and offsets.
    member : Member or None
        The group member (None for ``assign``); the driver listens to its rebalances.
    store : StartStore or None
        The offsets table (None without ``offsets.table``), the source of truth for positions.
    committer : Committer, optional
        Lag-tool commits for ``assign`` with ``kafka.group.id`` (the member commits otherwise).
    alignment : EventTimeAlignment, optional
        Event-time alignment (``flow.alignment.maxDrift``).
    known_at_start : set of TopicPartition, optional
        Partitions existing at the query's start; later ones start at earliest. None for ``assign``.
    """

    #: Seconds between two plans while an AvailableNow run waits for its end.
    available_now_pause_s = 1.0

    def __init__(self, options: SourceOptions, cluster: Cluster, member: Optional[Member],
                 store: Optional[StartStore], *, committer: Optional[Committer] = None,
                 alignment: Optional[EventTimeAlignment] = None,
                 known_at_start: Optional[AbstractSet[TopicPartition]] = None) -> None:
        self._options, self._cluster, self._member, self._store = options, cluster, member, store
        self._committer, self._alignment = committer, alignment
        self._spec = functools.partial(starting_spec, known_at_start=known_at_start,
                                       starting_offsets=options.starting_offsets)
        self._commits = GroupCommits(member or committer, commit_starts=member is not None,
                                     start_timeout_s=options.connect_timeout_ms / 1000)
        self._book = OwnedPartitions()  # positions and running ranges, shared with the poll thread
        self._starts = DurableStarts(store, self.owned)  # planning thread only
        self._gate = (None if options.min_offsets_per_trigger is None
                      else TriggerGate(options.min_offsets_per_trigger, options.max_trigger_delay_ms))
        self._target: Optional[Dict[TopicPartition, int]] = None
        self._record_sizes: Optional[RecordSizes] = None  # maxBytesPerTrigger's sampler, made at the first plan
        self._latest: Dict[TopicPartition, int] = {}  # the last plan's latest offsets, for progress
        self._last_positions: Dict[TopicPartition, int] = {}  # planning thread only: AvailableNow's end check
        self._joined = member is None
        self._closed = self._overrides_logged = False
        self._close_once = threading.Lock()  # taken by the first close() for good
        self._close_done = threading.Event()
        self.flow = FlowControl(options, self.owned, lambda topic: cluster.topic_partitions([topic]).get(topic))
        if member is not None:
            member.add_listener(self._on_rebalance)

    def owned(self) -> FrozenSet[TopicPartition]:
        """The partitions this query may plan now. Caller: any thread."""
        return frozenset(self._options.assigned) if self._member is None else self._member.owned()

    def _generation(self) -> Optional[int]:  # the member's, tied to positions to commit (stale ones are dropped)
        return None if self._member is None else self._member.generation

    def _ensure_joined(self) -> None:
        if self._joined or self._member is None:
            return
        if not self._member.wait_for_assignment(self._options.group_join_timeout_ms / 1000):
            logger.warning("group '%s' assigned no partitions within %d ms (option 'groupJoinTimeoutMs'); planning "
                           "empty batches until it does", self._options.group_id, self._options.group_join_timeout_ms)
        self._joined = True

    def _on_rebalance(self, event: RebalanceEvent) -> None:
        """Forget the positions of partitions revoked or lost; a revoke waits for their running batch.
        Caller: the member's poll thread, inside the rebalance callback."""
        if event.kind not in ("revoke", "lost"):
            return
        # Pauses stay: an eager rebalance revokes every partition and may hand them
        # straight back. Planning drops those of partitions that went elsewhere.
        running, starts = self._book.forget(event.partitions), self._commits.revoked(event.partitions)
        if event.kind == "revoke" and self._member is not None:
            finish_revoke(self._store, self._member, event.partitions, running, starts=starts,
                          timeout_ms=self._options.revoke_timeout_ms, stopping=lambda: self._closed)

    # -- Spark's planning calls (Caller: Spark's planning thread, the runner's main thread) ---

    def initial_offsets(self) -> BatchOffsets:
        """Positions of the partitions owned when the query starts. Caller: Spark's planning thread."""
        self._ensure_joined()
        self._position_new_partitions(BatchOffsets.empty())
        return BatchOffsets(self._book.pending(), {}, *self._doc_metadata())

    def _doc_metadata(self) -> tuple[Optional[str], Optional[str]]:
        if self._store is None or self._options.offsets_table is None:
            return None, None
        return self._options.group_id, routes_key(self._options.offsets_table, self._options.offsets_table_shared)

    def prepare_available_now(self) -> None:
        """Fix the end of an AvailableNow run: the latest offsets of now. Caller: Spark's planning thread."""
        self._ensure_joined()
        self._target = target_offsets(self._cluster, target_partitions(self._options, self._cluster),
                                      timeout_ms=self._options.connect_timeout_ms, pause_s=self.available_now_pause_s)
        logger.info("AvailableNow run stops at %s", describe_positions(self._target))

    def next_offsets(self, start: BatchOffsets, max_records: Optional[int],
                     max_bytes: Optional[int] = None) -> Optional[BatchOffsets]:
        """Plan the next micro-batch after ``start`` (the previous batch's end) within ``max_records`` and
        ``max_bytes`` (Spark's read limit and ``maxBytesPerTrigger``; None for all available). None when there is
        nothing to read (Spark then gets ``start`` back); an AvailableNow run with nothing to plan waits for its end. Caller: Spark's planning thread."""
        end = self._plan_next(start, max_records, max_bytes)
        if end is not None or self._target is None:
            return end
        end = await_end(group_id=self._options.group_id, timeout_ms=self._options.available_now_timeout_ms,
                        find_unfinished=lambda: self._unfinished_target(start, self.owned()), owned=self.owned,
                        plan_again=lambda: self._plan_next(start, max_records, max_bytes), closed=lambda: self._closed,
                        pause_s=self.available_now_pause_s)
        if end is None and not self._closed:
            self._settle_group(start)
        return end

    def _settle_group(self, start: BatchOffsets) -> None:
        """The AvailableNow run ends with this call: what landed of the owned partitions reaches the group before
        it returns (:meth:`GroupCommits.settle`). Caller: Spark's planning thread."""
        generation = self._generation()  # before owned(): positions of partitions revoked in between are dropped
        _, plannable = self._book.plannable(start.positions, self.owned())
        pending = self._book.pending()
        landed = (self._store.positions(plannable) if self._store is not None
                  else {tp: pos for tp, pos in plannable.items() if tp not in pending})
        self._commits.settle(landed, generation)

    def _unfinished_target(self, start: BatchOffsets, owned: FrozenSet[TopicPartition]) -> Unfinished:
        assert self._target is not None
        return find_unfinished(self._target, resumed=is_resumed(start.positions), owned=owned,
                               paused=self.flow.paused_among(owned), own_positions=self._last_positions,
                               cluster=self._cluster, store=self._store, member=self._member,
                               timeout_s=self._options.connect_timeout_ms / 1000, spec=self._spec)

    def _plan_next(self, start: BatchOffsets, max_records: Optional[int],
                   max_bytes: Optional[int] = None) -> Optional[BatchOffsets]:
        self._ensure_joined()
        self.flow.restore_once(start.flow)
        self._position_new_partitions(start)
        generation = self._generation()  # before owned(): a partition revoked after it is left out of the commits
        owned = self.owned()
        self.flow.drop_gone(owned, self._member.events if self._member is not None else None)
        positions, plannable = self._book.plannable(start.positions, owned)
        in_table = self._commits.follow(plannable, self._store, self._book.pending(), generation)
        plannable = plannable if in_table is None else follow_table(plannable, in_table)
        latest = self._cluster.latest_offsets(plannable)
        self._latest = dict(latest)
        if self._target is not None:
            latest = {tp: min(end, self._target.get(tp, 0)) for tp, end in latest.items()}
        checked = checked_positions(plannable, latest, cluster=self._cluster, store=self._store,
                                    available_now=self._target is not None,
                                    fail_on_data_loss=self._options.fail_on_data_loss)
        limits = None
        if self._alignment is not None:
            takes = [n for n in (max_records, self._options.flow_policy.max_per_partition) if n is not None]
            limits = self._alignment.view(checked, latest, min(takes) if takes else None).limits
        paused, flow = self.flow.state_of(checked)
        caps = None if max_bytes is None else self._byte_caps(checked, latest, max_bytes, paused)
        plan = plan_batch(checked, latest, max_records, self._options.flow_policy, paused, limits, caps)
        self._last_positions = dict(checked)
        if self._gate is not None and self._target is None and not self._gate.admit(backlog(checked, latest, paused)):
            # minOffsetsPerTrigger: this trigger is skipped (an AvailableNow run must end: it is not gated).
            # The status shows the partitions it would have read as held by that rule.
            self.flow.planned(checked, self._latest, plan.held_for_records(ENOUGH_RECORDS), self._member)
            return None
        self.flow.planned(checked, self._latest, plan, self._member)
        if not plan.ranges and flow == dict(start.flow):
            return None
        ranges = self._book.start_batch(positions, checked, plan.ranges)
        group, table = self._doc_metadata()
        end = BatchOffsets.from_ranges(positions, ranges, group=group, offsets_table=table, flow=flow)
        logger.info("planned %s", BatchPlan(ranges, plan.held).describe())
        return end

    def _byte_caps(self, positions: Dict[TopicPartition, int], latest: Mapping[TopicPartition, int], max_bytes: int,
                   paused: AbstractSet[TopicPartition]) -> Dict[TopicPartition, int]:
        """``maxBytesPerTrigger`` as a record cap per partition (:func:`~kafka_group.plan.byte_budget.record_caps`),
        from record sizes sampled now (:class:`~kafka_group.flow.record_sizes.RecordSizes`)."""
        if self._record_sizes is None:
            self._record_sizes = RecordSizes(self._options.client_config, self._options.group_id,
                                             self._options.connect_timeout_ms)
        sizes = self._record_sizes.measure(positions, latest)
        return record_caps(positions, latest, sizes, max_bytes, paused)

    def latest_report(self) -> Dict[TopicPartition, int]:
        """The latest offsets seen by the last planning call, for query progress. Caller: Spark's planning thread."""
        return dict(self._latest)

    def membership_report(self) -> Dict[str, Any]:
        """The ``@member`` progress report (:func:`membership_report`). Caller: Spark's planning thread."""
        return membership_report(self.owned(), self._member)

    def flow_report(self) -> Dict[str, Any]:
        """The ``@flow`` progress report (:meth:`FlowControl.report`, and ``trigger``:
        :meth:`TriggerGate.report` with ``minOffsetsPerTrigger``). Caller: Spark's planning thread."""
        report = self.flow.report()
        if self._gate is not None:
            report["trigger"] = self._gate.report()
        return report

    def on_batch_running(self, end: BatchOffsets) -> None:
        """Spark is about to run the batch that ends at ``end`` (new, or replayed from its checkpoint after
        a restart): a revoke of its partitions waits for it to land. Caller: Spark's planning thread
        (``partitions``), after ``next_offsets`` for a new batch; the poll thread reads it in a revoke."""
        self._book.running(end.ranges)

    def on_batch_committed(self, end: BatchOffsets) -> None:
        """Spark completed the batch that ends at ``end``: its ranges stop running; what landed reaches the group
        (:meth:`GroupCommits.follow`; the plan after the batch did it already). Caller: Spark's planning thread."""
        generation = self._generation()
        mine = self._book.committed(end.ranges, end.positions, self.owned())
        crash_point("source.before_kafka_commit")
        if self._store is not None:  # without a table the plan after the batch committed its end already, and `mine`
            self._commits.follow(mine, self._store, self._book.pending(), generation)  # may predate a re-positioning

    def close(self) -> None:
        """Commit what has landed to the Kafka group (:meth:`GroupCommits.final`), leave the group and release
        clients. Caller: the SIGTERM handler's thread (:mod:`kafka_group.group.sigterm`), or Spark's ``stop()``
        (the runner's main thread), possibly both: the second call waits for the first (at most
        :data:`~kafka_group.group.sigterm.CLOSE_BOUND_S`, the process's own bound) and closes nothing twice."""
        if not self._close_once.acquire(blocking=False):
            if not self._close_done.wait(CLOSE_BOUND_S):
                logger.warning("the source's close under way on another thread did not finish within %g s",
                               CLOSE_BOUND_S)
            return
        try:
            self._close()
        finally:
            self._close_done.set()

    def _close(self) -> None:
        self._closed = True
        # Spark interrupts the running batch, which may never land: the revoke that closing the member fires must
        # not wait for it (the group waits for us); if it lands, the table's commit check keeps owners apart.
        self._book.stop_waiting()
        generation = self._generation()  # before owned(): positions of partitions revoked in between are dropped
        self._commits.final(self._store, self.owned(), generation)
        self.flow.close()
        for client in (self._alignment, self._record_sizes, self._member, self._committer):
            if client is not None:
                client.close()

    def _position_new_partitions(self, start: BatchOffsets) -> None:
        """Position the partitions that entered ownership since the last plan (:mod:`~kafka_group.plan.positioning`)
        and record in the table the starts it has not seen (:mod:`~kafka_group.plan.durable_starts`)."""
        new = self._book.unpositioned(self.owned())
        if new:
            self._position(new, start)
        self._starts.record()

    def _position(self, new: List[TopicPartition], start: BatchOffsets) -> None:
        generation = self._generation()  # after owned(): `new` was assigned by then, its positions are read after
        resolved, durable, overridden, in_table, counts = position_new(
            new, start.positions, cluster=self._cluster, store=self._store, member=self._member,
            timeout_s=self._options.connect_timeout_ms / 1000, spec=self._spec,
            on_no_match=self._options.starting_offsets.on_no_match)
        log_group_overrides(self._options.group_id or "", overridden, first=not self._overrides_logged)
        self._overrides_logged = self._overrides_logged or bool(overridden)
        self.flow.drop_stale(stale_pauses(resolved, start.positions))
        self._book.admit(resolved, self.owned)
        self._commits.positioned(resolved, durable, self.owned, generation)
        self._starts.positioned(resolved, in_table, counts)
        logger.info("positioned newly owned partitions: %s", describe_positions(resolved))
