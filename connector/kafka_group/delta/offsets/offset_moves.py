"""Data-less commits to the offsets table: move a partition past lost offsets, hold the
start of partitions a refused batch read or positioning chose, reset positions (the offsets tool).

Each is a Delta commit of application transactions only (no ``add`` action), made on top of
the version the caller checked; a race lost to another writer is checked again. The check and the
commit use a table object of their own (:meth:`OffsetMoves._snapshot`), never the store's shared one:
other threads (the poll thread's revoke, the SIGTERM handler's close) refresh that in place, and a
commit made on it after such a refresh lands on a version the check never saw (it moved a landed
position back; review of issue 33's fix, finding 2).
"""

from __future__ import annotations

import logging
from typing import Any, Dict, FrozenSet, List, Mapping, Optional, Sequence

from kafka_group.delta.log.actions import needs_own_commit
from kafka_group.delta.log.commit import commit_own
from kafka_group.delta.offsets.offsets_table import COMMIT_ATTEMPTS, GROUP_METADATA_KEY, OffsetsTable
from kafka_group.delta.offsets.transaction_ids import OWNER_ID, owner_version, partitions_transaction_id, start_transaction_id
from kafka_group.delta.offsets.transaction_ids import transaction_id
from kafka_group.errors import OffsetStoreError, UnsupportedTableFeatureError
from kafka_group.offsets import OffsetRange, TopicPartition

__all__ = ["OffsetMoves"]

logger = logging.getLogger(__name__)

#: Kafka numbers partitions with an int32.
_INT32_MAX = (1 << 31) - 1


class OffsetMoves(OffsetsTable):
    """The offsets table with its data-less commits (see the module docstring; parameters as
    :class:`~kafka_group.delta.offsets.offsets_table.OffsetsTable`)."""

    def move(self, tp: TopicPartition, expected: int, to: int, *, reason: str) -> bool:
        """Move one partition from ``expected`` to ``to`` in a commit of its own (no data), only
        if the table still has it at ``expected``.

        The source calls this from its planning thread when it skips offsets the broker no
        longer has (``failOnDataLoss=false``): the batch's range then starts at ``to``, and a
        table left at ``expected`` would refuse every commit of the partition.

        Parameters
        ----------
        tp : TopicPartition
            The partition.
        expected : int
            Its position the caller planned from.
        to : int
            The new position.
        reason : str
            Recorded in the commit's metadata (``kafkaGroup.reason``) and the log.

        Returns
        -------
        bool
            Whether the table moved; False when its position is no longer ``expected``
            (another member or a reset moved it) or it has never seen the partition.
        """
        for _ in range(COMMIT_ATTEMPTS):
            table = self._snapshot()
            if table is None or self._positions_in(table, [tp]).get(tp) != expected:
                return False
            if self._try_move(table, {tp: to}, operation="skip", reason=reason):
                logger.warning("offsets.table '%s': moved %s from %d to %d (%s)", self.table_path, tp, expected, to,
                               reason)
                return True
        return False

    def hold_unseen(self, ranges: Sequence[OffsetRange], *, reason: str) -> List[TopicPartition]:
        """Record each range's ``from`` as the position of its partition, for the partitions
        the table has never seen, in a commit of its own (no data).

        The sink calls this for a batch that lands nothing (its offsets conflict and its
        rows cannot be told apart by partition): the source's next batch, and any other
        member of the group, then plans those partitions from where this batch started
        instead of applying ``startingOffsets`` to them as to partitions never read.

        Parameters
        ----------
        ranges : sequence of OffsetRange
            The batch's ranges; only those of partitions the table has never seen are
            recorded (conflicting and already committed ones have a position).
        reason : str
            Recorded in the commit's metadata (``kafkaGroup.reason``) and the log.

        Returns
        -------
        list of TopicPartition
            The partitions whose position this recorded; none when the table does not exist,
            already knows every partition, or another writer recorded them first.
        """
        for _ in range(COMMIT_ATTEMPTS):
            table = self._snapshot()
            if table is None:
                return []
            # Checked again on every attempt: a writer that won a race may have recorded some
            # of them (its commit then holds them), and the others must still be recorded.
            known = self._positions_in(table, [r.topic_partition for r in ranges])
            unseen = {r.topic_partition: r.from_offset for r in ranges if r.topic_partition not in known}
            if not unseen:
                return []
            if self._try_move(table, unseen, operation="hold", reason=reason):
                logger.info("offsets.table '%s': recorded %s (%s)", self.table_path,
                            ", ".join(f"{tp} at {pos}" for tp, pos in sorted(unseen.items())), reason)
                return sorted(unseen)
        raise OffsetStoreError(
            f"could not record where the partitions of a batch that landed nothing start in offsets.table "
            f"'{self.table_path}': concurrent writers kept winning ({reason}). Nothing was landed; the batch is "
            "retried when the query restarts"
        )

    def hold_starts(self, starts: Mapping[TopicPartition, int], *, reason: str,
                    counts: Optional[Mapping[str, int]] = None) -> FrozenSet[TopicPartition]:
        """Record ``starts`` (where positioning started partitions) for the partitions the table has never
        seen, as their positions and their recorded starts (:meth:`starts`), in a commit of its own (no data);
        with them ``counts``, for the topics the table has no count for (:meth:`partition_counts`): the caller
        passes a topic's partition count taken while the table held nothing of the topic, so that a partition
        numbered from it on was added since and starts at the earliest offset (review of issue 33's fix,
        finding 1). Counts are recorded even when every start is seen already (a batch landed them).

        The source calls this from its planning thread for the partitions it positioned where the table had
        no position, so that a start chosen by ``startingOffsets`` (or taken from the group's offsets or the
        checkpoint) outlives the checkpoint and the group's offsets (issue 33, finding 4). A partition the
        table has seen meanwhile (a batch landed it, another member held it) keeps its position.

        Returns
        -------
        frozenset of TopicPartition
            The partitions of ``starts`` the table now has a position for (held by this call or before);
            empty when the table does not exist yet (the first batch creates it; the caller holds again).

        Raises
        ------
        OffsetStoreError
            Concurrent writers kept winning the race for this commit (the caller holds again later).
        """
        for _ in range(COMMIT_ATTEMPTS):
            table = self._snapshot()
            if table is None or not self._appendable(table):
                return frozenset()  # no table yet; or one DeltaSink refuses, naming why, before writing anything
            # Checked again on every attempt: a writer that won a race may have landed or held some.
            known = self._positions_in(table, starts)
            unseen = {tp: pos for tp, pos in starts.items() if tp not in known}
            first = self._new_counts(table, counts or {})
            if not unseen and not first:
                return frozenset(starts)
            try:
                moved = self._try_move(table, unseen, operation="start", reason=reason, record_starts=True,
                                       counts=first)
            except OffsetStoreError:
                raise
            except Exception as exc:  # the store's own failure (I/O, permissions): retried at the next plan
                raise OffsetStoreError(f"recording where {', '.join(map(str, sorted(starts)))} start in "
                                       f"offsets.table '{self.table_path}' failed: {exc}") from exc
            if moved:
                logger.info("offsets.table '%s': recorded the start of %s; partition counts %s (%s)", self.table_path,
                            ", ".join(f"{tp} at {pos}" for tp, pos in sorted(unseen.items())) or "nothing",
                            ", ".join(f"{topic}: {n}" for topic, n in sorted(first.items())) or "none", reason)
                return frozenset(starts)
        raise OffsetStoreError(
            f"could not record where {', '.join(map(str, sorted(starts)))} start in offsets.table "
            f"'{self.table_path}': concurrent writers kept winning ({reason}). The starts are still in the "
            "checkpoint and the group's committed offsets; the next plan records them again"
        )

    def _snapshot(self) -> Any:
        """The table at its latest version in an object of the caller's alone (None: no table yet), for a check
        and the commit made on top of it: delta-rs commits on the version the object has loaded, and the
        store's shared object is refreshed in place by other threads."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        if self._load() is None:
            return None
        try:
            return DeltaTable(self.table_path, storage_options=self._storage_options or None)
        except TableNotFoundError:
            return None

    def _new_counts(self, table: Any, counts: Mapping[str, int]) -> Dict[str, int]:
        """The ``counts`` of topics ``table`` has no count for (a recorded count is never changed)."""
        recorded = self._counts_in(table, counts)
        return {topic: n for topic, n in counts.items() if topic not in recorded and 1 <= n <= _INT32_MAX}

    def _appendable(self, table: Any) -> bool:
        """Whether DeltaSink may append to ``table`` (it refuses the others at its first batch)."""
        try:
            self._check_appendable(table)
        except UnsupportedTableFeatureError:
            return False
        return True

    def _try_move(self, table: Any, to: Mapping[TopicPartition, int], *, operation: str, reason: str,
                  record_starts: bool = False, counts: Optional[Mapping[str, int]] = None) -> bool:
        """One data-less commit setting ``to`` on top of ``table`` (the caller checked what it
        expects there), with ``record_starts`` also as each partition's recorded start, and ``counts`` as
        topics' partition counts; False when another writer committed first and Delta refused it."""
        from deltalake.exceptions import CommitFailedError
        from deltalake.transaction import CommitProperties, Transaction

        self._check_owner(table)  # the table may have been created by another group since this store checked
        self.check_conditional_put()
        properties = CommitProperties(
            app_transactions=[Transaction(transaction_id(self.group, tp), pos) for tp, pos in sorted(to.items())]
            + [Transaction(start_transaction_id(self.group, tp), pos)
               for tp, pos in (sorted(to.items()) if record_starts else [])]
            + [Transaction(partitions_transaction_id(self.group, topic), n)
               for topic, n in sorted((counts or {}).items())]
            + [Transaction(OWNER_ID, owner_version(self.group))],
            custom_metadata={GROUP_METADATA_KEY: self.group, "kafkaGroup.operation": operation,
                             "kafkaGroup.reason": reason},
            # No retry inside delta-rs: a concurrent commit makes the caller check again.
            max_commit_retries=0,
        )
        if needs_own_commit(table.protocol().writer_features or []):  # delta-rs cannot commit to it
            return commit_own(table, self.table_path, self._storage_options, [],
                              [(t.app_id, t.version) for t in properties.app_transactions or []],
                              operation=operation, info=properties.custom_metadata or {}) is not None
        try:
            table.create_write_transaction([], mode="append", schema=table.schema(), commit_properties=properties)
        except CommitFailedError as exc:
            logger.info("%s of %s in %s lost a race (%s); checking again", operation,
                        ", ".join(map(str, sorted(to))), self.table_path, exc)
            return False
        return True

    def positions_before_reset(self, partitions: Sequence[TopicPartition]) -> Dict[TopicPartition, Optional[int]]:
        """The table's position of each of ``partitions`` (None: never seen), checked as :meth:`reset`
        checks the table; writes nothing (the offsets tool's dry run; the conditional-put probe,
        which writes, waits for the reset itself).

        Raises
        ------
        OffsetStoreError
            The table does not exist yet, or belongs to another group.
        """
        known = self._positions_in(self._resettable(), partitions)
        return {tp: known.get(tp) for tp in partitions}

    def _resettable(self) -> Any:
        """The table at its latest version, which exists and is this group's (or this raises)."""
        table = self._load(refresh=True)
        if table is None:
            raise OffsetStoreError(
                f"offsets.table '{self.table_path}' does not exist yet: run the query once before resetting offsets"
            )
        self._check_owner(table)
        return table

    def reset(self, positions: Mapping[TopicPartition, int], *, reason: str) -> int:
        """Set partitions' positions in a Delta commit of their own (no data).

        A running query picks the new positions up at its next batch.

        Returns
        -------
        int
            The new table version.
        """
        from deltalake.transaction import CommitProperties, Transaction

        table = self._resettable()
        self.check_conditional_put()
        txns = [Transaction(transaction_id(self.group, tp), pos) for tp, pos in sorted(positions.items())]
        txns.append(Transaction(OWNER_ID, owner_version(self.group)))
        custom = {GROUP_METADATA_KEY: self.group, "kafkaGroup.operation": "reset", "reason": reason}
        if needs_own_commit(table.protocol().writer_features or []):  # delta-rs cannot commit to it
            if commit_own(table, self.table_path, self._storage_options, [], [(t.app_id, t.version) for t in txns],
                          operation="reset", info=custom) is None:
                raise OffsetStoreError(f"resetting offsets in offsets.table '{self.table_path}' lost a race to "
                                       "another writer; nothing was reset. Run the reset again")
        else:
            table.create_write_transaction(
                [], mode="append", schema=table.schema(),
                commit_properties=CommitProperties(app_transactions=txns, custom_metadata=custom),
            )
        table.update_incremental()
        return int(table.version())
