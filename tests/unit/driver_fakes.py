"""In-memory stand-ins for the source driver's collaborators (see ``kafka_group.collaborators``).

Plain dictionaries a test edits between calls: the cluster's earliest/latest
offsets, the group's assignment and committed offsets, the offsets table. They
run no process and no thread; a rebalance is fired by the test (``assign``,
``revoke``, ``lost``) and runs the listeners synchronously, as the member's poll
thread would.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Callable, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from kafka_group.config.options import parse_source_options
from kafka_group.config.source_options import SourceOptions
from kafka_group.offsets import BatchOffsets, TopicPartition
from kafka_group.rebalance_event import RebalanceEvent
from kafka_group.source_driver import SourceDriver

T0, T1, T2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)


class FakeCluster:
    """Topics with ``partitions`` each; offsets from 0 to ``latest`` (``earliest`` after retention)."""

    def __init__(self, topics: Mapping[str, int]) -> None:
        self.topics: Dict[str, int] = dict(topics)
        self.earliest: Dict[TopicPartition, int] = {}
        self.latest: Dict[TopicPartition, int] = {}
        self.high: Dict[TopicPartition, int] = {}
        #: Called at every latest_offsets (a test fires a rebalance in the middle of a plan with it).
        self.on_latest: Optional[Callable[[], None]] = None
        #: Partitions latest_offsets leaves out of its answer, as many times as each value says (the real
        #: ClusterView leaves out a partition whose leader did not answer, after one retry of its own).
        self.unanswered: Dict[TopicPartition, int] = {}
        #: The record timestamps (ms) of each partition, by offset, for offsets_at_times.
        self.timestamps: Dict[TopicPartition, List[int]] = {}

    def produce(self, tp: TopicPartition, records: int) -> None:
        self.latest[tp] = self.latest.get(tp, 0) + records

    def topic_partitions(self, topics: Optional[Iterable[str]] = None) -> Dict[str, int]:
        wanted = self.topics if topics is None else list(topics)
        return {t: self.topics[t] for t in wanted if t in self.topics}

    def matching_partitions(self, pattern: str) -> List[TopicPartition]:
        import re

        return [TopicPartition(t, p) for t, n in self.topics.items() if re.fullmatch(pattern, t) for p in range(n)]

    def partitions_of(self, topics: Sequence[str]) -> List[TopicPartition]:
        return [TopicPartition(t, p) for t in topics for p in range(self.topics.get(t, 0))]

    def earliest_offsets(self, partitions: Iterable[TopicPartition]) -> Dict[TopicPartition, int]:
        return {tp: self.earliest.get(tp, 0) for tp in partitions}

    def latest_offsets(self, partitions: Iterable[TopicPartition]) -> Dict[TopicPartition, int]:
        if self.on_latest is not None:
            hook, self.on_latest = self.on_latest, None
            hook()
        answer = {}
        for tp in partitions:
            if self.unanswered.get(tp, 0) > 0:
                self.unanswered[tp] -= 1
                continue
            answer[tp] = self.latest.get(tp, 0)
        return answer

    def high_watermarks(self, partitions: Iterable[TopicPartition]) -> Dict[TopicPartition, int]:
        return {tp: self.high.get(tp, self.latest.get(tp, 0)) for tp in partitions}

    def offsets_at_times(self, times: Mapping[TopicPartition, int]) -> Dict[TopicPartition, Optional[int]]:
        return {tp: next((offset for offset, ts in enumerate(self.timestamps.get(tp, [])) if ts >= stamp), None)
                for tp, stamp in times.items()}


class FakeMember:
    """A group member whose rebalances the test fires; commits are recorded in ``commits``.

    Unlike the real :class:`~kafka_group.group.membership.GroupMember`, a commit from the
    planning thread takes effect at once (the real one queues it for its poll thread,
    which sends it asynchronously and leaves out partitions revoked meanwhile); like it,
    a commit computed under an older ``generation`` of a partition is dropped; and
    listeners run on the thread that fires the event (a test that needs the poll
    thread's concurrency fires it from a thread of its own).
    """

    def __init__(self, group_id: str = "g") -> None:
        self.group_id = group_id
        self.member_id = "member-1"
        self.generation = 0
        self._owned: Set[TopicPartition] = set()
        self._events: List[RebalanceEvent] = []
        self._listeners: List[Callable[[RebalanceEvent], None]] = []
        #: The group's committed offsets (what ``committed`` answers).
        self.group_offsets: Dict[TopicPartition, int] = {}
        self.commits: List[Dict[TopicPartition, int]] = []
        self.closed = False
        #: The generation at which each partition was last assigned.
        self.assigned_at: Dict[TopicPartition, int] = {}
        #: Called once at the next events() (a rebalance landing while planning reads them).
        self.on_events: Optional[Callable[[], None]] = None

    def owned(self) -> FrozenSet[TopicPartition]:
        return frozenset(self._owned)

    def events(self) -> List[RebalanceEvent]:
        if self.on_events is not None:
            hook, self.on_events = self.on_events, None
            hook()
        return list(self._events)

    def add_listener(self, listener: Callable[[RebalanceEvent], None]) -> None:
        self._listeners.append(listener)

    def wait_for_assignment(self, timeout_s: float) -> bool:
        return True

    def committed(self, partitions: Iterable[TopicPartition], timeout_s: float) -> Dict[TopicPartition, int]:
        return {tp: self.group_offsets[tp] for tp in partitions if tp in self.group_offsets}

    def commit(self, positions: Mapping[TopicPartition, int], generation: Optional[int] = None) -> bool:
        if generation is not None:  # as the real member: positions computed before a revoke (and reassign) are stale
            positions = {tp: pos for tp, pos in positions.items()
                         if tp in self._owned and self.assigned_at.get(tp, 0) <= generation}
        self.commits.append(dict(positions))
        self.group_offsets.update(positions)
        return True

    def commit_and_wait(self, positions: Mapping[TopicPartition, int], generation: Optional[int],
                        timeout_s: float) -> None:
        self.commit(positions, generation)

    def close(self) -> None:
        """Leave the group: like the real member's ``consumer.close()``, revoke what it owns first."""
        if self._owned and not self.closed:
            self.revoke(*sorted(self._owned))
        self.closed = True

    def assign(self, *partitions: TopicPartition) -> None:
        self._owned.update(partitions)
        self.assigned_at.update((tp, self.generation + 1) for tp in partitions)
        self._fire("assign", partitions)

    def revoke(self, *partitions: TopicPartition) -> None:
        self._owned.difference_update(partitions)  # gone from owned() before the listeners run
        self._fire("revoke", partitions)

    def lost(self, *partitions: TopicPartition) -> None:
        self._owned.difference_update(partitions)
        self._fire("lost", partitions)

    def _fire(self, kind: str, partitions: Tuple[TopicPartition, ...]) -> None:
        self.generation += 1
        event = RebalanceEvent(kind, frozenset(partitions), self.generation, frozenset(self._owned), self.group_id,
                               self.member_id, time.time())
        self._events.append(event)
        for listener in list(self._listeners):
            listener(event)


class FakeStore:
    """The offsets table: ``table`` maps partitions to positions; ``reads`` counts ``positions`` calls."""

    def __init__(self, table: Optional[Mapping[TopicPartition, int]] = None) -> None:
        self.table: Dict[TopicPartition, int] = dict(table or {})
        self.reads = 0
        self.moves: List[Tuple[TopicPartition, int, int, str]] = []
        #: Called with the read count before each read answers (a batch lands from it).
        self.on_read: Optional[Callable[[int], None]] = None
        #: The starts recorded by hold_starts (a position equal to its start is not something the table read).
        self.recorded_starts: Dict[TopicPartition, int] = {}
        #: Each start hold_starts recorded, in order.
        self.holds: List[Tuple[TopicPartition, int]] = []
        #: Whether the table exists (False: hold_starts records nothing, as before the first batch).
        self.exists = True
        #: Each topic's partition count recorded with its first starts (review of issue 33's fix, finding 1).
        self.recorded_counts: Dict[str, int] = {}

    def positions(self, partitions: Iterable[TopicPartition]) -> Dict[TopicPartition, int]:
        self.reads += 1
        if self.on_read is not None:
            self.on_read(self.reads)
        return {tp: self.table[tp] for tp in partitions if tp in self.table}

    def move(self, tp: TopicPartition, expected: int, to: int, *, reason: str) -> bool:
        if self.table.get(tp) != expected:
            return False
        self.table[tp] = to
        self.moves.append((tp, expected, to, reason))
        return True

    def starts(self, partitions: Iterable[TopicPartition]) -> Dict[TopicPartition, int]:
        return {tp: self.recorded_starts[tp] for tp in partitions if tp in self.recorded_starts}

    def partition_counts(self, topics: Iterable[str]) -> Dict[str, int]:
        return {t: self.recorded_counts[t] for t in topics if t in self.recorded_counts}

    def hold_starts(self, starts: Mapping[TopicPartition, int], *, reason: str,
                    counts: Optional[Mapping[str, int]] = None) -> FrozenSet[TopicPartition]:
        """As the real store: records the starts of partitions the table has not seen, unless the table
        does not exist yet (``exists`` False: nothing recorded, nothing settled); with them, the ``counts`` of
        topics the table has no count for."""
        if not self.exists:
            return frozenset()
        for topic, count in (counts or {}).items():
            self.recorded_counts.setdefault(topic, count)
        for tp, pos in starts.items():
            if tp not in self.table:
                self.table[tp] = self.recorded_starts[tp] = pos
                self.holds.append((tp, pos))
        return frozenset(starts)

    def land(self, batch: BatchOffsets) -> None:
        """The sink landed ``batch``: its ranges' ends are the table's positions."""
        for tp, r in batch.ranges.items():
            self.table[tp] = r.until_offset


def options(**settings: str) -> SourceOptions:
    """Source options of topic ``t`` and group ``g``; ``settings`` use the options' spelling."""
    raw = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t", "kafka.group.id": "g",
           "startingOffsets": "earliest", **settings}
    return parse_source_options({k.lower(): v for k, v in raw.items() if v})


def with_table(**settings: str) -> SourceOptions:
    return options(**{"offsets.table": "/tmp/not-opened-by-the-fakes", **settings})


def driver(opts: SourceOptions, cluster: FakeCluster, member: Optional[FakeMember],
           store: Optional[FakeStore] = None,
           known_at_start: Optional[Set[TopicPartition]] = None) -> SourceDriver:
    """A driver over the fakes; ``known_at_start`` defaults to the cluster's partitions (None for assign)."""
    if known_at_start is None and member is not None:
        known_at_start = {TopicPartition(t, p) for t, n in cluster.topics.items() for p in range(n)}
    d = SourceDriver(opts, cluster, member, store, known_at_start=known_at_start)
    d.available_now_pause_s = 0.0
    return d


def quick(opts: SourceOptions, **changes: Any) -> SourceOptions:
    """``opts`` with numeric fields changed (``revoke_timeout_ms``, ``available_now_timeout_ms``...)."""
    return replace(opts, **changes)


def one_partition(records: int, opts: SourceOptions,
                  store: Optional[FakeStore] = None) -> Tuple[FakeCluster, FakeMember, SourceDriver]:
    """Topic ``t`` of one partition holding ``records``, a member that owns it, and a driver over them."""
    cluster, member = FakeCluster({"t": 1}), FakeMember()
    cluster.produce(T0, records)
    d = driver(opts, cluster, member, store)
    member.assign(T0)
    return cluster, member, d
