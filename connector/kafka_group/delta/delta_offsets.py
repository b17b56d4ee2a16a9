"""Kafka offsets stored in the Delta table, committed in the same transaction as the data.

This is the seeds' "offsets outside Kafka" pattern with the Delta log as the
store: the records of a micro-batch and the positions they advance to become
visible in one atomic Delta commit, or not at all.

Naming and convention
---------------------
Each topic-partition has one Delta *application transaction* (``txn`` action)
whose id is ``kafka-group:<group>:<topic>:<partition>`` and whose version is the
partition's **position**: the offset of the next record to read, i.e. one past
the last offset whose data the table holds. (Topic names cannot hold ``:``, so
the id is unambiguous read from the right.) A table also carries the marker
``kafka-group:<group>`` (version 1) from its first commit: it binds the table to
one consumer group.

The invariant
-------------
A batch that read ``[from, until)`` of a partition may commit only if the table
says that partition is at ``from`` (or has never seen it). Anything else means
another member committed that partition meanwhile, or its offsets were reset:
committing would duplicate or skip records, so the commit is refused with
:class:`~kafka_group.errors.OffsetConflictError`. A batch whose every partition
is already at ``until`` was committed before (a replay after a crash) and is
skipped. Two writers racing on the same partition from the same table version
are stopped by Delta's own conflict check on the transaction id.
"""

from __future__ import annotations

import json
import logging
import os
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

from kafka_group.errors import (
    OffsetConflictError,
    OffsetStoreError,
    SchemaMismatchError,
    UnsupportedTableFeatureError,
)
from kafka_group.faults import crash_point
from kafka_group.offsets import OffsetRange, TopicPartition
from kafka_group.delta.schema_evolution import SchemaMerge, merge_schemas, merged_columns
from kafka_group.delta.table_location import DATA_FOLDER, local_table_path, table_filesystem

__all__ = [
    "DeltaOffsetStore",
    "DataFile",
    "CommitCheck",
    "transaction_id",
    "group_marker_id",
]

logger = logging.getLogger(__name__)


_PREFIX = "kafka-group"
_GROUP_METADATA_KEY = "kafkaGroup.groupId"
_MARKER_VERSION = 1
_HISTORY_SCAN = 50
_COMMIT_ATTEMPTS = 10

#: Table features (``protocol`` reader and writer features) that an append of plain Parquet files,
#: as DeltaSink writes them, honours and that delta-rs commits (checked against deltalake 1.6.6).
#: ``columnMapping`` is allowed as a name only while ``delta.columnMapping.mode`` is ``none``;
#: ``invariants``, ``checkConstraints`` and ``generatedColumns`` only while none is defined
#: (the sink writes its files with pyarrow, which evaluates none of them).
_APPENDABLE_FEATURES = frozenset({
    "appendOnly", "changeDataFeed", "checkConstraints", "columnMapping", "deletionVectors", "generatedColumns",
    "invariants", "timestampNtz", "v2Checkpoint", "variantType",
})


def transaction_id(group: str, tp: TopicPartition) -> str:
    """The Delta application transaction id holding ``tp``'s position for ``group``."""
    return f"{_PREFIX}:{group}:{tp.topic}:{tp.partition}"


def group_marker_id(group: str) -> str:
    """The transaction id that binds a table to ``group``."""
    return f"{_PREFIX}:{group}"


@dataclass(frozen=True)
class DataFile:
    """A Parquet file written into the table folder, to be added by a commit."""

    path: str
    """The file's path relative to the table root, as on the store (not percent-encoded: delta-rs
    encodes it into the ``add`` action)."""
    size: int
    """Its size in bytes."""
    num_records: int
    """Its row count (Delta's ``numRecords`` statistic)."""
    stats: Optional[str] = None
    """Delta statistics (JSON: ``numRecords``, ``minValues``, ``maxValues``, ``nullCount``); None
    for ``numRecords`` alone."""
    partition_values: Mapping[str, Optional[str]] = field(default_factory=dict)
    """Serialized partition values, one per partition column of the table."""


@dataclass(frozen=True)
class CommitCheck:
    """What the table says about a batch's planned ranges."""

    already_committed: bool
    """Every range is at its ``until``: the batch was committed before."""
    committable: List[OffsetRange] = field(default_factory=list)
    """Ranges whose partitions the table has at their ``from`` (or never saw)."""
    conflicts: Dict[TopicPartition, int] = field(default_factory=dict)
    """Partitions whose table position is neither ``from`` nor ``until``, with that position."""

    def describe_conflicts(self, ranges: Sequence[OffsetRange]) -> str:
        """A message naming each conflicting partition, its planned range and the table's position."""
        by_tp = {r.topic_partition: r for r in ranges}
        return "; ".join(
            f"{tp} planned [{by_tp[tp].from_offset}, {by_tp[tp].until_offset}) but the table is at {pos}"
            for tp, pos in sorted(self.conflicts.items())
        )


class _CommitRefused(OffsetConflictError):
    """A refused commit, with what decides whether its files may be deleted."""

    def __init__(self, *, other_writer: bool, maybe_landed: bool, message: str) -> None:
        super().__init__(message)
        self.other_writer = other_writer
        """Another writer holds a partition at another position (not: these very ranges are committed)."""
        self.maybe_landed = maybe_landed
        """An earlier attempt of this commit failed in a way that may have committed it (its answer lost)."""


class DeltaOffsetStore:
    """Reads and commits Kafka positions kept in a Delta table.

    Parameters
    ----------
    table_path : str
        The Delta table (a local path or a URI delta-rs understands).
    group : str
        The consumer group whose positions this store holds.
    storage_options : dict, optional
        Passed to delta-rs for object stores.

    Raises
    ------
    OffsetStoreError
        The path exists but is not a Delta table, or the table belongs to another group.
    """

    def __init__(self, table_path: str, group: str, storage_options: Optional[Mapping[str, str]] = None) -> None:
        self.table_path = table_path
        self.group = group
        self._storage_options = dict(storage_options or {})
        self._table: Any = None
        self._check_location()
        table = self._load()
        if table is not None:
            self._check_group(table)

    # -- reading -----------------------------------------------------------------------

    def exists(self) -> bool:
        """Whether the Delta table exists yet (the first commit creates it)."""
        return self._load() is not None

    def positions(self, partitions: Iterable[TopicPartition]) -> Dict[TopicPartition, int]:
        """The committed position of each of ``partitions`` the table has seen (latest table version)."""
        table = self._load(refresh=True)
        if table is None:
            return {}
        return self._positions_in(table, partitions)

    def _positions_in(self, table: Any, partitions: Iterable[TopicPartition]) -> Dict[TopicPartition, int]:
        result: Dict[TopicPartition, int] = {}
        for tp in partitions:
            version = table.transaction_version(transaction_id(self.group, tp))
            if version is not None:
                result[tp] = int(version)
        return result

    def check(self, ranges: Sequence[OffsetRange]) -> CommitCheck:
        """Compare a batch's planned ranges with the latest table version (see the module docstring)."""
        table = self._load(refresh=True)
        return self._check_in(table, ranges)

    def _check_in(self, table: Any, ranges: Sequence[OffsetRange]) -> CommitCheck:
        if table is None:
            return CommitCheck(already_committed=False, committable=list(ranges))
        self._check_appendable(table)
        held = self._positions_in(table, [r.topic_partition for r in ranges])
        if ranges and all(held.get(r.topic_partition) == r.until_offset for r in ranges):
            return CommitCheck(already_committed=True)
        committable: List[OffsetRange] = []
        conflicts: Dict[TopicPartition, int] = {}
        for r in ranges:
            pos = held.get(r.topic_partition)
            if pos is None or pos == r.from_offset:
                committable.append(r)
            else:
                conflicts[r.topic_partition] = pos
        return CommitCheck(already_committed=False, committable=committable, conflicts=conflicts)

    def check_schema(self, arrow_schema: Any, *, batch: str = "this batch", merge_schema: bool = False) -> None:
        """Refuse a batch whose columns do not fit the table's (a new table takes any).

        Parameters
        ----------
        arrow_schema : pyarrow.Schema
            The batch's columns, as they will be written.
        batch : str
            How to name the batch in the error.
        merge_schema : bool
            Whether columns the batch adds are merged into the table's schema (by :meth:`commit`)
            and columns it lacks read as NULL, instead of refused (see
            :mod:`kafka_group.delta.schema_evolution`). A type change is refused either way.

        Raises
        ------
        SchemaMismatchError
            A column is missing, extra (without ``merge_schema``), of another type, or differs
            from a table column only in case.
        UnsupportedTableFeatureError
            The table uses a feature the sink cannot honour (see :meth:`_check_appendable`).
        """
        table = self._load(refresh=True)
        if table is not None:
            self._check_appendable(table)
            _merge_or_raise(self.table_path, table.schema(), arrow_schema, batch, merge_schema)

    # -- writing -----------------------------------------------------------------------

    def commit(
        self,
        files: Sequence[DataFile],
        arrow_schema: Any,
        ranges: Sequence[OffsetRange],
        *,
        metadata: Optional[Mapping[str, Any]] = None,
        partition_by: Sequence[str] = (),
        merge_schema: bool = False,
    ) -> int:
        """Add ``files`` and advance ``ranges``' partitions to their ``until``, in one Delta commit.

        With ``merge_schema``, columns the files add are first added to the table's schema in a
        commit of their own (``ADD COLUMN``, no data, no offset), right before the data commit and
        only once the offsets are found committable: delta-rs 1.6.6 cannot change the schema in the
        commit that appends files (``create_write_transaction`` ignores its ``schema`` argument in
        append mode, and ``overwrite`` removes every file of an unpartitioned table). A crash
        between the two leaves what ``ALTER TABLE ADD COLUMNS`` leaves: new nullable columns, no
        row of the batch and no offset moved; the batch's replay then fits the table and lands.
        Files never become visible under a schema that lacks their columns: the data commit
        checks the schema again on the version it commits on.

        Parameters
        ----------
        files : sequence of DataFile
            Parquet files already in the table folder, not yet in the log.
        arrow_schema : pyarrow.Schema
            The schema of the files (the table's schema when it is created).
        ranges : sequence of OffsetRange
            The planned ranges the files hold; each must be committable.
        metadata : mapping, optional
            Extra commit metadata (batch id, query id); never secrets.
        partition_by : sequence of str
            The partition columns the files were written for: the new table's, and what an
            existing table must have (checked on the very version committed on).
        merge_schema : bool
            Whether the columns the files add are merged into the table's schema (see above and
            :mod:`kafka_group.delta.schema_evolution`); a type change is refused either way.

        Returns
        -------
        int
            The new table version.

        Raises
        ------
        OffsetStoreError
            A file of a local table is not on this machine's disk at its size (executors
            on other machines wrote it on theirs), before anything is committed.
        OffsetConflictError
            A partition is no longer at its range's ``from`` (checked against the
            very version the commit is based on; a concurrent writer of the same
            partition makes Delta refuse the commit, and the check runs again).
            ``files`` are deleted only when another writer holds a partition at
            another position and no attempt of this call may have landed them (nor
            the latest table version references one); when the table already holds
            exactly these ranges (a commit whose answer was lost) they are kept: an
            older version may read them though a concurrent OPTIMIZE removed them
            from the latest. Files of another failure stay too, in no commit
            (invisible; VACUUM removes them).
        """
        try:
            return self._commit(files, arrow_schema, ranges, metadata, partition_by, merge_schema)
        except _CommitRefused as exc:
            if exc.other_writer and not exc.maybe_landed:
                self._delete_uncommitted(files)
            elif files:
                # Already committed (a commit whose answer was lost), or an attempt of this call
                # may have landed: an older table version may read these files even when the
                # latest does not (a concurrent OPTIMIZE removed them). VACUUM decides.
                logger.info("keeping the %d files of the refused commit to offsets.table '%s' (a table version "
                            "may reference them)", len(files), self.table_path)
            raise

    def _commit(
        self,
        files: Sequence[DataFile],
        arrow_schema: Any,
        ranges: Sequence[OffsetRange],
        metadata: Optional[Mapping[str, Any]],
        partition_by: Sequence[str],
        merge_schema: bool,
    ) -> int:
        from deltalake.exceptions import CommitFailedError
        from deltalake.schema import Schema
        from deltalake.transaction import AddAction, CommitProperties, Transaction, create_table_with_add_actions

        now_ms = int(time.time() * 1000)
        adds = [
            AddAction(f.path, f.size, dict(f.partition_values), now_ms, True,
                      f.stats if f.stats is not None else json.dumps({"numRecords": f.num_records}))
            for f in files
        ]
        txns = [Transaction(transaction_id(self.group, r.topic_partition), r.until_offset) for r in ranges]
        txns.append(Transaction(group_marker_id(self.group), _MARKER_VERSION))
        custom = {_GROUP_METADATA_KEY: self.group, **(metadata or {})}
        properties = CommitProperties(app_transactions=txns, custom_metadata=custom, max_commit_retries=0)
        last_error: Optional[Exception] = None
        for attempt in range(1, _COMMIT_ATTEMPTS + 1):
            table = self._load(refresh=True)
            check = self._check_in(table, ranges)
            if check.conflicts or check.already_committed:
                raise _CommitRefused(
                    other_writer=bool(check.conflicts), maybe_landed=last_error is not None,
                    message=
                    f"refusing to commit to offsets.table '{self.table_path}' for group '{self.group}': "
                    + (
                        check.describe_conflicts(ranges)
                        if check.conflicts
                        else "the table already holds exactly these ranges (committed before)"
                    )
                    + ". Another member committed these partitions meanwhile, or their offsets were reset; "
                    "the batch is not landed and the query replans from the table's offsets",
                )
            self._check_local_files(files)  # once the offsets are committable: a conflict says more
            if table is not None:
                # Delta would take the files under the table's schema whatever they hold.
                merge = _merge_or_raise(self.table_path, table.schema(), arrow_schema, "the batch", merge_schema)
                if merge.changes_table:
                    self._add_columns(table, merge, metadata)
                    crash_point("delta.after_schema_merge")
                    continue  # the data commit goes on top of the merged schema, checked again
                self.check_partition_columns(partition_by, table)
            try:
                if table is None:
                    create_table_with_add_actions(
                        self.table_path,
                        Schema.from_arrow(arrow_schema),
                        adds,
                        mode="append",
                        partition_by=list(partition_by) or None,
                        storage_options=self._storage_options or None,
                        commit_properties=properties,
                    )
                else:
                    table.create_write_transaction(
                        adds, mode="append", schema=table.schema(), commit_properties=properties
                    )
            except CommitFailedError as exc:
                last_error = exc
                logger.info("Delta commit attempt %d lost a race (%s); checking offsets again", attempt, exc)
                continue
            except Exception as exc:
                if table is None and self._load() is not None:
                    # Another writer created the table after this one found none (delta-rs
                    # 1.6.6 then says "SaveMode `append` is not allowed for create
                    # operation"): check the offsets again against the table it created.
                    last_error = exc
                    logger.info("offsets.table '%s' was created by another writer meanwhile; checking offsets "
                                "again", self.table_path)
                    continue
                raise OffsetStoreError(
                    f"committing to offsets.table '{self.table_path}' failed: {exc}. Nothing of this batch "
                    "is visible and no offset moved; the next run retries it"
                ) from exc
            # The cached table, brought up to date incrementally (not the whole log read again).
            version = int(self._load(refresh=True).version())
            logger.info(
                "committed version %d of %s: %d files, %s",
                version, self.table_path, len(files), ", ".join(str(r) for r in ranges) or "no ranges",
            )
            return version
        raise _CommitRefused(
            other_writer=True, maybe_landed=True,
            message=f"refusing to commit to offsets.table '{self.table_path}' for group '{self.group}': concurrent "
            f"writers kept winning ({last_error})",
        )

    def partition_columns(self) -> Optional[List[str]]:
        """The table's partition columns (as last loaded: :meth:`check` and :meth:`commit` refresh);
        None when the table does not exist yet."""
        table = self._load()
        return None if table is None else list(table.metadata().partition_columns)

    def configuration(self) -> Dict[str, Optional[str]]:
        """The table's properties (``delta.*``; as last loaded); empty when the table does not exist yet."""
        table = self._load()
        return {} if table is None else dict(table.metadata().configuration or {})

    def _check_local_files(self, files: Sequence[DataFile]) -> None:
        """Refuse, before committing, files of a local table that are not on this machine's disk at
        their size: on a multi-node cluster, executors write a local path on their own disks, and
        the committed table would reference files no reader finds."""
        root = local_table_path(self.table_path)
        if root is None:
            return
        for f in files:
            full = os.path.join(root, f.path)
            size = os.path.getsize(full) if os.path.isfile(full) else None
            if size != f.size:
                found = "is missing" if size is None else f"has {size} bytes"
                raise OffsetStoreError(
                    f"refusing to commit to offsets.table '{self.table_path}': the data file {full} {found} on the "
                    f"driver, where the executor wrote {f.size} bytes. Executors on other machines write a local "
                    "path on their own disks: a local table path needs a shared file system mounted at the same "
                    "path on every node, or use an object store (s3://, abfss://, gs://). Nothing was committed "
                    "and no offset moved"
                )

    def _delete_uncommitted(self, files: Sequence[DataFile]) -> None:
        """Delete the files of a refused commit, unless the table references one (a commit whose
        answer was lost, then refused as already committed): deleting those would lose data."""
        if not files:
            return
        if self.references_any([f.path for f in files]):
            logger.warning("offsets.table '%s' references files of the refused commit; keeping them", self.table_path)
            return
        filesystem = table_filesystem(self.table_path, self._storage_options)
        for f in files:
            try:
                filesystem.delete_file(f.path)
            except Exception as exc:  # invisible anyway; VACUUM removes what is left
                logger.warning("could not delete %s of a refused commit from offsets.table '%s' (in no commit, "
                               "invisible): %s", f.path, self.table_path, type(exc).__name__)

    def references_any(self, paths: Sequence[str]) -> bool:
        """Whether the latest table version adds any of ``paths`` (relative to the table root).

        The sink asks before it deletes the files of a refused commit: a commit whose answer
        was lost (then refused as already committed) references them."""
        import pyarrow as pa

        table = self._load(refresh=True)
        if table is None or not paths:
            return False
        # The log holds percent-encoded paths (URIs).
        committed = {urllib.parse.unquote(p) for p in pa.table(table.get_add_actions(flatten=False)).column("path")
                     .to_pylist()}
        return any(p in committed for p in paths)

    def check_partition_columns(self, partition_by: Sequence[str], table: Any = None) -> None:
        """Refuse files partitioned by ``partition_by`` for a table partitioned otherwise (a table
        not created yet takes any partitioning).

        Raises
        ------
        SchemaMismatchError
            The message names both partitionings and the fix.
        """
        table = self._load(refresh=True) if table is None else table
        if table is None:
            return
        existing = list(table.metadata().partition_columns)
        if existing != list(partition_by):
            raise SchemaMismatchError(
                f"DeltaSink partitions by {list(partition_by)} but Delta table '{self.table_path}' is partitioned "
                f"by {existing}: pass DeltaSink(..., partition_by={existing}) (or leave partition_by out to follow "
                "the table), or land into a new table. Nothing was written and no offset moved"
            )

    def _add_columns(self, table: Any, merge: SchemaMerge, metadata: Optional[Mapping[str, Any]]) -> None:
        """Commit ``merge``'s new columns to ``table``'s schema (no data, no offset); a commit that
        loses a race is left to the caller's next attempt, which checks everything again."""
        from deltalake.exceptions import CommitFailedError
        from deltalake.schema import Field
        from deltalake.transaction import CommitProperties

        before = json.loads(table.schema().to_json())
        fields = [Field.from_json(json.dumps(f)) for f in merged_columns(before, merge.schema)]
        properties = CommitProperties(
            custom_metadata={_GROUP_METADATA_KEY: self.group, "kafkaGroup.operation": "mergeSchema",
                             "kafkaGroup.added": ",".join(merge.added),
                             # the batch's id, not its ranges: this commit moves no offset
                             **{k: v for k, v in (metadata or {}).items() if k != "kafkaGroup.ranges"}},
            max_commit_retries=0,
        )
        try:
            table.alter.add_columns(fields, commit_properties=properties)
        except CommitFailedError as exc:
            logger.info("adding columns %s to %s lost a race (%s); checking again", ", ".join(merge.added),
                        self.table_path, exc)
            return
        except Exception as exc:
            raise OffsetStoreError(
                f"adding the batch's new column(s) {', '.join(merge.added)} to the schema of offsets.table "
                f"'{self.table_path}' failed: {exc}. No data of this batch is visible and no offset moved; "
                "the next run retries it"
            ) from exc
        logger.info("merged column(s) %s into the schema of %s (merge_schema=True)", ", ".join(merge.added),
                    self.table_path)

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
        for _ in range(_COMMIT_ATTEMPTS):
            table = self._load(refresh=True)
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
        for _ in range(_COMMIT_ATTEMPTS):
            table = self._load(refresh=True)
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

    def _try_move(self, table: Any, to: Mapping[TopicPartition, int], *, operation: str, reason: str) -> bool:
        """One data-less commit setting ``to`` on top of ``table`` (the caller checked what it
        expects there); False when another writer committed first and Delta refused it."""
        from deltalake.exceptions import CommitFailedError
        from deltalake.transaction import CommitProperties, Transaction

        properties = CommitProperties(
            app_transactions=[Transaction(transaction_id(self.group, tp), pos) for tp, pos in sorted(to.items())]
            + [Transaction(group_marker_id(self.group), _MARKER_VERSION)],
            custom_metadata={_GROUP_METADATA_KEY: self.group, "kafkaGroup.operation": operation,
                             "kafkaGroup.reason": reason},
            # No retry inside delta-rs: a concurrent commit makes the caller check again.
            max_commit_retries=0,
        )
        try:
            table.create_write_transaction([], mode="append", schema=table.schema(), commit_properties=properties)
        except CommitFailedError as exc:
            logger.info("%s of %s in %s lost a race (%s); checking again", operation,
                        ", ".join(map(str, sorted(to))), self.table_path, exc)
            return False
        return True

    def reset(self, positions: Mapping[TopicPartition, int], *, reason: str) -> int:
        """Set partitions' positions in a Delta commit of their own (no data).

        A running query picks the new positions up at its next batch.

        Returns
        -------
        int
            The new table version.
        """
        from deltalake.transaction import CommitProperties, Transaction

        table = self._load(refresh=True)
        if table is None:
            raise OffsetStoreError(
                f"offsets.table '{self.table_path}' does not exist yet: run the query once before resetting offsets"
            )
        txns = [Transaction(transaction_id(self.group, tp), pos) for tp, pos in sorted(positions.items())]
        txns.append(Transaction(group_marker_id(self.group), _MARKER_VERSION))
        table.create_write_transaction(
            [],
            mode="append",
            schema=table.schema(),
            commit_properties=CommitProperties(
                app_transactions=txns,
                custom_metadata={_GROUP_METADATA_KEY: self.group, "kafkaGroup.operation": "reset", "reason": reason},
            ),
        )
        table.update_incremental()
        return int(table.version())

    def _check_appendable(self, table: Any) -> None:
        """Refuse ``table`` when the sink's appends would corrupt it or delta-rs cannot commit to it
        (a table not created yet is not checked: the sink creates it).

        Caller: DeltaSink on the driver, through :meth:`check` and :meth:`check_schema` before it
        writes a batch's files, and :meth:`commit` again on the version it commits on.

        Raises
        ------
        UnsupportedTableFeatureError
            Column mapping (``delta.columnMapping.mode`` ``name`` or ``id``: the sink's files
            carry the logical column names, which such a table's readers do not look for),
            CHECK constraints, NOT NULL invariants, generated or identity columns (the sink's
            files are not checked against them), or a reader or writer feature outside the ones
            an append of plain Parquet files honours and delta-rs commits. The message names the
            feature and the fix.
        """
        problems = _unsupported_features(table)
        if problems:
            raise UnsupportedTableFeatureError(
                f"DeltaSink cannot write to offsets.table '{self.table_path}': " + "; ".join(problems)
                + ". Nothing was written and no offset moved. Land into a new table without it (let the first "
                "batch create the table, or CREATE TABLE ... USING DELTA without that feature), or remove it "
                "from this table with delta-spark (ALTER TABLE ... DROP FEATURE / DROP CONSTRAINT)"
            )

    # -- internals ---------------------------------------------------------------------

    def _check_location(self) -> None:
        local = local_table_path(self.table_path)
        if local is None:  # an object store or another file system: delta-rs finds the table there
            return
        if os.path.isfile(local):
            raise OffsetStoreError(
                f"offsets.table '{self.table_path}' is a file, not a Delta table folder: point it at a folder"
            )
        if os.path.isdir(local) and not os.path.isdir(os.path.join(local, "_delta_log")):
            visible = [n for n in os.listdir(local) if not n.startswith(".") and n != DATA_FOLDER]
            if visible:
                raise OffsetStoreError(
                    f"offsets.table '{self.table_path}' is not a Delta table (the folder has files but no "
                    "_delta_log): point it at a new folder or at the Delta table this query writes"
                )

    def _load(self, refresh: bool = False) -> Any:
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        if self._table is not None:
            if refresh:
                self._table.update_incremental()
            return self._table
        try:
            self._table = DeltaTable(self.table_path, storage_options=self._storage_options or None)
        except TableNotFoundError:
            return None
        return self._table

    def _check_group(self, table: Any) -> None:
        if table.transaction_version(group_marker_id(self.group)) is not None:
            return
        for entry in table.history(_HISTORY_SCAN):
            other = entry.get(_GROUP_METADATA_KEY)
            if other is not None and other != self.group:
                raise OffsetStoreError(
                    f"offsets.table '{self.table_path}' holds the offsets of consumer group '{other}', not "
                    f"'{self.group}': a table's offsets belong to one group. Use group '{other}', or another table"
                )


def _unsupported_features(table: Any) -> List[str]:
    """What in ``table``'s protocol, properties and schema an append of the sink's Parquet files
    would not honour (empty when the table takes them)."""
    protocol = table.protocol()
    configuration = dict(table.metadata().configuration or {})
    problems: List[str] = []
    mode = configuration.get("delta.columnMapping.mode", "none")
    if mode != "none":
        problems.append(f"column mapping is on (table property delta.columnMapping.mode='{mode}'): the sink "
                        "writes its Parquet files under the logical column names, which such a table's readers "
                        "(delta-spark) do not look for, so they would read NULLs")
    features = set(protocol.reader_features or []) | set(protocol.writer_features or [])
    unknown = sorted(features - _APPENDABLE_FEATURES)
    if unknown:
        problems.append(f"the table has the feature(s) {', '.join(unknown)}, which delta-rs (deltalake) cannot "
                        "commit to, or which an append of plain Parquet files would not honour")
    constraints = sorted(k for k in configuration if k.startswith("delta.constraints."))
    if constraints:
        problems.append(f"CHECK constraints ({', '.join(constraints)}) are defined: the sink's files are not "
                        "checked against them")
    for field in table.schema().fields:
        metadata = dict(field.metadata or {})
        if "delta.invariants" in metadata:
            problems.append(f"column '{field.name}' has a NOT NULL or CHECK invariant (delta.invariants): the "
                            "sink's files are not checked against it")
        if "delta.generationExpression" in metadata:
            problems.append(f"column '{field.name}' is generated (delta.generationExpression): the sink does not "
                            "compute it")
        if any(key.startswith("delta.identity.") for key in metadata):
            problems.append(f"column '{field.name}' is an identity column: the sink does not assign its values")
    return problems


def describe_schema_mismatch(table_schema: Any, arrow_schema: Any, *, merge_schema: bool = False) -> List[str]:
    """How a batch's Arrow schema differs from a Delta table's schema (empty when it fits);
    the rule is :func:`kafka_group.delta.schema_evolution.merge_schemas`."""
    return _merge(table_schema, arrow_schema, merge_schema).problems


def _merge(table_schema: Any, arrow_schema: Any, merge_schema: bool) -> SchemaMerge:
    from deltalake.schema import Schema

    try:
        batch = json.loads(Schema.from_arrow(arrow_schema).to_json())
    except Exception as exc:  # deltalake refuses names equal but for case, types Delta lacks
        raise SchemaMismatchError(f"the batch's columns cannot be a Delta schema: {exc}. Nothing was committed and "
                                  "no offset moved; rename or cast the columns in the transform") from exc
    return merge_schemas(json.loads(table_schema.to_json()), batch, merge_schema=merge_schema)


def _merge_or_raise(table_path: str, table_schema: Any, arrow_schema: Any, batch: str,
                    merge_schema: bool) -> SchemaMerge:
    merge = _merge(table_schema, arrow_schema, merge_schema)
    if merge.problems:
        raise SchemaMismatchError(
            f"{batch} does not fit the schema of Delta table '{table_path}': " + "; ".join(merge.problems)
            + ". Nothing was committed and no offset moved"
        )
    return merge
