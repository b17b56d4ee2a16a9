"""Kafka offsets stored in the Delta table, committed in the same transaction as the data.

This is the "storing offsets outside Kafka" pattern of Kafka's consumer documentation, with the Delta log as the
store: the records of a micro-batch and the positions they advance to become
visible in one atomic Delta commit, or not at all.

Naming and convention
---------------------
Each topic-partition has one Delta *application transaction* (``txn`` action)
whose id is ``kafka-group.v2:<group>:<topic>:<partition>``, the group and the topic
percent-encoded (``:`` is ``%3A``, ``%`` is ``%25``), and whose version is the
partition's **position**: the offset of the next record to read, i.e. one past
the last offset whose data the table holds. A table also carries, from its first
commit, the owner ``kafka-group.v2:owner``, whose version is a hash of the group
id (:func:`~kafka_group.delta.offsets.transaction_ids.owner_version`; the group's name is in
each commit's metadata, ``kafkaGroup.groupId``): it binds the table to one consumer
group, and a table owned by another group is refused at once, however long ago that
group committed. No component holds a ``:``, so every id names one group, topic and
partition (:mod:`kafka_group.delta.offsets.transaction_ids`).

Tables written before (issue 26) have ``kafka-group:<group>:<topic>:<partition>``
positions and a ``kafka-group:<group>`` marker, which are ambiguous when a group
id holds ``:`` (the marker of group ``x:orders:0`` is group ``x``'s position of
``orders-0``). They are still read: a partition with no position of the current
form is read at its old-form position, once the table's history shows it is this
group's (``OffsetsTable._check_group``, over the whole history while the table has
no owner); every commit writes the current form only.

The invariant
-------------
A batch that read ``[from, until)`` of a partition may commit only if the table
says that partition is at ``from`` (or has never seen it). Anything else means
another member committed that partition meanwhile, or its offsets were reset:
committing would duplicate or skip records, so the commit is refused with
:class:`~kafka_group.errors.OffsetConflictError`. A batch whose every partition
is already at ``until`` was committed before (a replay after a crash) and is
skipped. Two writers racing on the same partition from the same table version
are stopped by Delta's own conflict check on the transaction id. A table with a
feature delta-rs cannot commit to (row tracking, in-commit timestamps, liquid
clustering...) gets the same actions from the connector's own commit
(:mod:`kafka_group.delta.log.commit`): a writer that loses the version checks
everything again on the winner's.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from typing import Any, Mapping, Optional, Sequence

from kafka_group.delta.files.commit_files import DataFile, check_local_files, delete_files
from kafka_group.delta.files.not_null_check import check_not_null
from kafka_group.delta.log.actions import needs_own_commit
from kafka_group.delta.log.commit import commit_own
from kafka_group.delta.offsets.batch_schema import BatchSchema
from kafka_group.delta.offsets.offset_check import CommitCheck, check_ranges
from kafka_group.delta.offsets.offset_moves import OffsetMoves
from kafka_group.delta.offsets.offsets_table import COMMIT_ATTEMPTS, GROUP_METADATA_KEY
from kafka_group.delta.offsets.transaction_ids import OWNER_ID, owner_version, transaction_id
from kafka_group.delta.rules.schema_evolution import merge_or_raise
from kafka_group.delta.rules.write_contract import WriteContract, check_contract
from kafka_group.errors import NotNullViolationError, OffsetConflictError, OffsetStoreError
from kafka_group.faults import crash_point
from kafka_group.offsets import OffsetRange

__all__ = ["DeltaOffsetStore"]

logger = logging.getLogger(__name__)


class _CommitRefused(OffsetConflictError):
    """A refused commit, with what decides whether its files may be deleted."""

    def __init__(self, *, other_writer: bool, maybe_landed: bool, message: str) -> None:
        super().__init__(message)
        self.other_writer = other_writer
        """Another writer holds a partition at another position (not: these very ranges are committed)."""
        self.maybe_landed = maybe_landed
        """An earlier attempt of this commit failed in a way that may have committed it (its answer lost)."""


class DeltaOffsetStore(BatchSchema, OffsetMoves):
    """Reads and commits Kafka positions kept in a Delta table.

    The commit with the data and its offset check are here; table access is
    :class:`~kafka_group.delta.offsets.offsets_table.OffsetsTable`'s, a batch's columns against the table
    :class:`~kafka_group.delta.offsets.batch_schema.BatchSchema`'s, the data-less commits
    :class:`~kafka_group.delta.offsets.offset_moves.OffsetMoves`'.

    Parameters and errors: :class:`~kafka_group.delta.offsets.offsets_table.OffsetsTable`'s (the table, its
    group, delta-rs storage options).
    """

    # -- the offset check --------------------------------------------------------------

    def check(self, ranges: Sequence[OffsetRange]) -> CommitCheck:
        """Compare a batch's planned ranges with the latest table version (see the module docstring)."""
        table = self._load(refresh=True)
        return self._check_in(table, ranges)

    def _check_in(self, table: Any, ranges: Sequence[OffsetRange]) -> CommitCheck:
        if table is None:
            return CommitCheck(already_committed=False, committable=list(ranges))
        self._check_appendable(table)
        held = self._positions_in(table, [r.topic_partition for r in ranges])
        return check_ranges(held, ranges)

    # -- the commit --------------------------------------------------------------------

    def commit(
        self,
        files: Sequence[DataFile],
        arrow_schema: Any,
        ranges: Sequence[OffsetRange],
        *,
        metadata: Optional[Mapping[str, Any]] = None,
        partition_by: Sequence[str] = (),
        merge_schema: bool = False,
        contract: Optional[WriteContract] = None,
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
            :mod:`kafka_group.delta.rules.schema_evolution`); a type change is refused either way.
        contract : WriteContract, optional
            The column mapping the files were written under and the rules their rows were checked
            against (:meth:`write_contract`); None: no column mapping, no rule. The version committed
            on must have the same mapping and no other rule, or the commit is refused
            (:func:`~kafka_group.delta.rules.write_contract.check_contract`).

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
        NotNullViolationError
            A file holds NULLs in a column the table declares NOT NULL (see
            :func:`~kafka_group.delta.files.not_null_check.check_not_null`); ``files`` are deleted.
        """
        try:
            return self._commit(files, arrow_schema, ranges, metadata, partition_by, merge_schema, contract)
        except NotNullViolationError:
            self._delete_uncommitted(files)  # in no commit; the replay writes its own
            raise
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
        contract: Optional[WriteContract] = None,
    ) -> int:
        from deltalake.exceptions import CommitFailedError
        from deltalake.schema import Schema
        from deltalake.transaction import AddAction, CommitProperties, Transaction, create_table_with_add_actions

        now_ms = int(time.time() * 1000)
        adds = [
            AddAction(f.path, f.size, (contract or WriteContract()).physical_partition_values(f.partition_values),
                      now_ms, True,
                      f.stats if f.stats is not None else json.dumps({"numRecords": f.num_records}))
            for f in files
        ]
        txns = [Transaction(transaction_id(self.group, r.topic_partition), r.until_offset) for r in ranges]
        txns.append(Transaction(OWNER_ID, owner_version(self.group)))
        custom = {GROUP_METADATA_KEY: self.group, **(metadata or {})}
        properties = CommitProperties(app_transactions=txns, custom_metadata=custom, max_commit_retries=0)
        self.check_conditional_put()  # before the first commit: a store without it loses commits of two writers
        last_error: Optional[Exception] = None
        for attempt in range(1, COMMIT_ATTEMPTS + 1):
            table = self._load(refresh=True)
            if table is not None:
                # Another group may have taken a table it found unowned meanwhile (a race on the
                # owner id makes Delta refuse one of the commits; the loser finds the winner here).
                self._check_owner(table)
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
            check_local_files(self.table_path, files)  # once the offsets are committable: a conflict says more
            if table is not None:
                # Delta would take the files under the table's schema whatever they hold.
                merge = merge_or_raise(self.table_path, table.schema(), arrow_schema, "the batch", merge_schema)
                if merge.changes_table:
                    self._refuse_own_merge(table, merge)
                    self._refuse_new_mapped_columns(table, merge)
                    self._add_columns(table, merge, metadata)
                    crash_point("delta.after_schema_merge")
                    continue  # the data commit goes on top of the merged schema, checked again
                self.check_partition_columns(partition_by, table)
                # Delta takes NULLs into a NOT NULL column, and its readers then cannot read the table.
                check_not_null(self.table_path, table, files, metadata)
                # Files under another mapping, or rows not checked against a rule the table now has.
                check_contract(self.table_path, table, contract, list(arrow_schema.names))
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
                elif needs_own_commit(table.protocol().writer_features or []):
                    # delta-rs refuses these tables: the connector writes the commit itself (same txns).
                    mapped = [dataclasses.replace(f, partition_values=(contract or WriteContract())
                                                  .physical_partition_values(f.partition_values)) for f in files]
                    own = commit_own(table, self.table_path, self._storage_options, mapped,
                                     [(t.app_id, t.version) for t in txns], operation="WRITE", info=custom)
                    if own is None:
                        last_error = OffsetStoreError(f"version {int(table.version()) + 1} was taken by another writer")
                        continue
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

    def _delete_uncommitted(self, files: Sequence[DataFile]) -> None:
        """Delete the files of a refused commit, unless the table references one (a commit whose
        answer was lost, then refused as already committed): deleting those would lose data."""
        if not files:
            return
        if self.references_any([f.path for f in files]):
            logger.warning("offsets.table '%s' references files of the refused commit; keeping them", self.table_path)
            return
        delete_files(self.table_path, self._storage_options, files)
