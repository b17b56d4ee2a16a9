"""The source's offsets store when a query lands many tables: every table of a partition's route, read as one.

:class:`RoutedOffsetStore` offers what the source asks of one offsets table
(:class:`~kafka_group.collaborators.OffsetStore`, with the start counts of
:class:`~kafka_group.plan.durable_starts.StartStore`) over the tables of
:class:`~kafka_group.delta.offsets.table_routes.TableRoutes`: a partition's position is the lowest any table of
its route holds (:func:`~kafka_group.delta.offsets.table_routes.start_positions`), and what the source records
(starts, moves past lost offsets) goes to each table of the route. Each table is a
:class:`~kafka_group.delta.offsets.delta_offsets.DeltaOffsetStore`, opened at its first use.

Caller: the source's driver (planning thread, and the rebalance waits through :meth:`positions`).
"""

from __future__ import annotations

import threading
from typing import Dict, FrozenSet, Iterable, List, Mapping, Optional

from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
from kafka_group.delta.offsets.table_routes import TableRoutes, start_positions
from kafka_group.offsets import TopicPartition

__all__ = ["RoutedOffsetStore"]


class RoutedOffsetStore:
    """The positions kept in every table of a routed query, read and moved as one offsets table.

    Parameters
    ----------
    routes : TableRoutes
        Which tables hold each partition's positions.
    group : str
        The consumer group.
    storage_options : dict, optional
        delta-rs storage options of every table.
    """

    def __init__(self, routes: TableRoutes, group: str, storage_options: Optional[Mapping[str, str]] = None) -> None:
        self.routes = routes
        self.group = group
        self._storage_options = dict(storage_options or {})
        self._tables: Dict[str, DeltaOffsetStore] = {}
        self._lock = threading.Lock()

    def table(self, location: str) -> DeltaOffsetStore:
        """The offsets store of one table (opened once: a table of another group is refused here)."""
        with self._lock:
            found = self._tables.get(location)
            if found is None:
                found = self._tables[location] = DeltaOffsetStore(location, self.group, self._storage_options)
            return found

    def _by_table(self, partitions: Iterable[TopicPartition]) -> Dict[str, List[TopicPartition]]:
        by_table: Dict[str, List[TopicPartition]] = {}
        for tp in partitions:
            for location in self.routes.tables_of(tp):
                by_table.setdefault(location, []).append(tp)
        return by_table

    def held(self, partitions: Iterable[TopicPartition]) -> Dict[str, Dict[TopicPartition, int]]:
        """Each route table's positions of ``partitions`` (latest versions)."""
        return {location: self.table(location).positions(tps) for location, tps in self._by_table(partitions).items()}

    def positions(self, partitions: Iterable[TopicPartition]) -> Dict[TopicPartition, int]:
        """The lowest position of each partition in the tables of its route (those none of them saw left out)."""
        wanted = list(partitions)
        return start_positions(self.held(wanted), wanted, self.routes)

    def starts(self, partitions: Iterable[TopicPartition]) -> Dict[TopicPartition, int]:
        """The lowest start recorded for each partition in the tables of its route (as of their last reads)."""
        found: Dict[TopicPartition, int] = {}
        for location, tps in self._by_table(partitions).items():
            for tp, start in self.table(location).starts(tps).items():
                found[tp] = min(start, found.get(tp, start))
        return found

    def partition_counts(self, topics: Iterable[str]) -> Dict[str, int]:
        """The lowest partition count recorded for each topic in the tables of its partitions' routes."""
        found: Dict[str, int] = {}
        for location, tps in self._by_table(TopicPartition(t, 0) for t in topics).items():
            for topic, count in self.table(location).partition_counts({tp.topic for tp in tps}).items():
                found[topic] = min(count, found.get(topic, count))
        return found

    def hold_starts(self, starts: Mapping[TopicPartition, int], *, reason: str,
                    counts: Optional[Mapping[str, int]] = None) -> FrozenSet[TopicPartition]:
        """Record ``starts`` in every table of each partition's route (see
        :meth:`~kafka_group.delta.offsets.offset_moves.OffsetMoves.hold_starts`); the partitions that every table
        of their route now has a position for."""
        settled: Dict[TopicPartition, bool] = {tp: True for tp in starts}
        for location, tps in self._by_table(starts).items():
            topics = {tp.topic for tp in tps}
            held = self.table(location).hold_starts(
                {tp: starts[tp] for tp in tps}, reason=reason,
                counts=None if counts is None else {t: n for t, n in counts.items() if t in topics})
            for tp in tps:
                settled[tp] = settled[tp] and tp in held
        return frozenset(tp for tp, ok in settled.items() if ok)

    def move(self, tp: TopicPartition, expected: int, to: int, *, reason: str) -> bool:
        """Move ``tp`` from ``expected`` to ``to`` in each table of its route that has it at ``expected``;
        whether one did (a table ahead of ``expected`` is left where it is)."""
        moved = False
        for location in self.routes.tables_of(tp):
            moved = self.table(location).move(tp, expected, to, reason=reason) or moved
        return moved
