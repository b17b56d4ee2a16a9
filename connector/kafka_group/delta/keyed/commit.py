"""The keyed (CDC) sink's commit: a batch's change set MERGEd into the table with its offsets, one Delta commit.

The change set (one event per key for SCD1, every event for SCD2, see
:mod:`kafka_group.delta.keyed.change_rules`) is in the driver's memory: a batch's changes, not the table.
delta-rs's ``DeltaTable.merge`` joins it with the target on the driver (DataFusion, streaming the
target's files) and prunes the target's files by the change set's key range and partition values;
only files holding a changed key are read and rewritten. The MERGE's ``add`` and ``remove`` actions,
the batch's positions (one application transaction per topic-partition, as for appends:
:mod:`kafka_group.delta.offsets.delta_offsets`) and the table's owner are ONE commit
(``CommitProperties(app_transactions=..., max_commit_retries=0)``): the MERGE is planned on one table
version and its commit must be the very next version, so a MERGE that read files another commit
removed (or any other commit in between) never lands; this store then checks the offsets on the
new version and merges again, at most
:data:`~kafka_group.delta.offsets.offsets_table.COMMIT_ATTEMPTS` times.

:meth:`KeyedOffsetStore.merge_as_tasks` is the same loop for the MERGE as Spark tasks (SCD1:
:mod:`pyspark_kafka_group.sink.keyed.scd1_tasks`, SCD2: :mod:`pyspark_kafka_group.sink.keyed.scd2_tasks`; deletion
vectors, or copy-on-write by the executors on a table without them): there the change set is never in the
driver's memory. A batch comes here only for the tables those tasks do not take
(:func:`~kafka_group.delta.keyed.task_rewrite.task_merge_refusal`: the change data feed enabled, a store the
connector does not commit to itself, legacy writer versions).

Caller: :class:`~pyspark_kafka_group.sink.delta_sink.DeltaSink` on the driver, one batch at a time.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
from kafka_group.delta.keyed.change_rules import (
    ACTION,
    END_COLUMN,
    OFFSET,
    SEQ,
    SEQUENCE_COLUMN,
    START_COLUMN,
    TRUNCATE_METADATA,
    KeyedSpec,
    MergeClauses,
    scd1_clauses,
    scd2_clauses,
)
from kafka_group.delta.keyed.create import create_with_deletion_vectors, wants_deletion_vectors
from kafka_group.delta.keyed.task_rewrite import refuse_task_merge, task_merge_refusal
from kafka_group.delta.log.commit import own_commit_refusal
from kafka_group.delta.keyed.scd2_history import group_by_key, place_events
from kafka_group.delta.keyed.key_rows import rows_of_keys
from kafka_group.delta.keyed.own_merge import needs_own_merge, own_merge
from kafka_group.delta.keyed.refusals import (
    refuse_null_keys,
    refuse_own_parameters,
    refuse_own_unmergeable,
    refuse_unmergeable,
)
from kafka_group.delta.offsets.offsets_table import COMMIT_ATTEMPTS, GROUP_METADATA_KEY
from kafka_group.delta.offsets.transaction_ids import OWNER_ID, owner_version, transaction_id
from kafka_group.delta.rules.schema_evolution import merge_or_raise
from kafka_group.errors import OffsetConflictError, OffsetStoreError
from kafka_group.faults import crash_point
from kafka_group.offsets import OffsetRange

__all__ = ["NOTHING", "KeyedOffsetStore", "table_schema"]

logger = logging.getLogger(__name__)

#: What a :meth:`KeyedOffsetStore.merge_as_tasks` run returns when the batch changes no row.
NOTHING = -1


def table_schema(changes_schema: Any, spec: KeyedSpec, stored: Sequence[str]) -> Any:
    """The table's Arrow schema: the stored columns, then the sink's (typed as the sequence)."""
    import pyarrow as pa

    seq_type = changes_schema.field(SEQ).type
    fields = [changes_schema.field(c) for c in stored]
    fields += [pa.field(c, seq_type, nullable=True) for c in spec.system_columns()]
    return pa.schema(fields)


class KeyedOffsetStore(DeltaOffsetStore):
    """:class:`~kafka_group.delta.offsets.delta_offsets.DeltaOffsetStore` with the keyed sink's MERGE commit."""

    def merge_changes(
        self,
        changes: Any,
        spec: KeyedSpec,
        stored: Sequence[str],
        ranges: Sequence[OffsetRange],
        *,
        metadata: Optional[Mapping[str, Any]] = None,
        partition_by: Sequence[str] = (),
        prepare: Optional[Callable[[Any], Any]] = None,
        deletes_of: Optional[Callable[[Any], Any]] = None,
        table_properties: Optional[Mapping[str, str]] = None,
    ) -> int:
        """Apply ``changes`` (a pyarrow Table: ``stored`` columns, ``__kg_seq``, ``__kg_delete``,
        ``__kg_offset``) and advance ``ranges`` to their ``until``, in one Delta commit.

        ``prepare`` (pyarrow Table in, pyarrow Table out: SCD1's tombstone filter,
        :meth:`kafka_group.delta.keyed.tombstones.Tombstones.apply`) runs on ``changes`` at each attempt,
        after the table version the MERGE commits on is loaded. ``deletes_of`` (SCD2: the change set in,
        every recorded delete of its keys out, keys and ``__SEQUENCE``:
        :meth:`kafka_group.delta.keyed.tombstones.Tombstones.all_of`) likewise. A change set whose schema
        metadata holds :data:`~kafka_group.delta.keyed.change_rules.TRUNCATE_METADATA` empties the table
        first, in the same commit. ``table_properties``: those of the table
        the first batch creates (:func:`~kafka_group.delta.keyed.create.created_properties`; None: delta-rs's
        defaults, no deletion vectors).

        Returns
        -------
        int
            The new table version.

        Raises
        ------
        OffsetConflictError
            A partition is no longer at its range's ``from``, or the table already holds exactly
            these ranges (checked on the version the MERGE runs on).
        SchemaMismatchError
            The stored columns do not fit the table's.
        UnsupportedTableFeatureError
            The table has column mapping, ``delta.appendOnly`` or another writer feature the MERGE
            is not known to honour (or one the append path refuses). A table with deletion vectors
            gets the connector's own MERGE (:mod:`kafka_group.delta.keyed.own_merge`, SCD1), which
            refuses what it does not honour, the reason named.
        OffsetStoreError
            A key column holds NULL (nothing lands; fix the transform), or delta-rs failed.
        """
        import pyarrow as pa

        refuse_null_keys(changes, spec, self.table_path)
        truncate = TRUNCATE_METADATA in (changes.schema.metadata or {})
        schema = table_schema(changes.schema, spec, stored)
        self.check_conditional_put()
        txns = self._transactions(ranges)
        custom = {GROUP_METADATA_KEY: self.group, **(metadata or {})}
        from deltalake.exceptions import CommitFailedError
        from deltalake.transaction import CommitProperties

        last_error: Optional[Exception] = None
        for attempt in range(1, COMMIT_ATTEMPTS + 2):
            table = self._table_to_merge_into(schema, partition_by, table_properties)
            if table is None:
                continue
            own = needs_own_merge(table)
            if own:  # deletion vectors: the connector's own MERGE and commit (kafka_group.delta.keyed.own_merge)
                refuse_own_unmergeable(self.table_path, table, spec.scd_type)
                refuse_own_parameters(self.table_path, spec, truncate)
            else:
                refuse_unmergeable(self.table_path, table)
            self._refuse_conflicts(table, ranges)
            merge_or_raise(self.table_path, table.schema(), schema, "the batch", False)
            self.check_partition_columns(partition_by, table)
            batch = changes if prepare is None else prepare(changes)
            if batch.num_rows == 0 and not truncate:
                return self.commit([], schema, ranges, metadata=metadata, partition_by=partition_by)
            if own:
                crash_point("delta.before_merge")
                done = own_merge(table, self.table_path, self._storage_options, batch.drop_columns([OFFSET]),
                                 spec.keys, stored, [(t.app_id, t.version) for t in txns], info=custom)
                if done is not None:
                    return done
                last_error = OffsetStoreError("another writer committed the version this MERGE was planned on")
                continue
            if spec.scd_type == 1:
                source = batch.drop_columns([OFFSET])
                clauses = scd1_clauses(spec.keys, stored, ignore_null_updates=spec.ignore_null_updates,
                                       truncate=truncate)
            else:
                source, columns = self._scd2_source(table, batch, spec, stored, deletes_of)
                clauses = scd2_clauses(spec.keys, columns)
            properties = CommitProperties(app_transactions=txns, custom_metadata=custom, max_commit_retries=0)
            crash_point("delta.before_merge")
            try:
                metrics = _merge(table, source, clauses, properties, truncate=truncate)
            except CommitFailedError as exc:
                last_error = exc
                logger.info("MERGE attempt %d into %s lost a race (%s); checking offsets again", attempt,
                            self.table_path, exc)
                continue
            except (pa.ArrowInvalid, ValueError, TypeError) as exc:
                raise OffsetStoreError(f"merging the batch into offsets.table '{self.table_path}' failed: {exc}. "
                                       "Nothing of it is visible and no offset moved") from exc
            merged = self._load(refresh=True)
            # Below the batch's: nothing committed. Above it (another owner landed later offsets since): the
            # MERGE did commit, and the next batch's check finds the table ahead.
            if ranges and any((merged.transaction_version(t.app_id) or -1) < t.version for t in txns[:-1]):
                # delta-rs commits nothing for a MERGE that changes no row (every event older than the
                # table's): the offsets alone, as for a batch the tombstones emptied
                logger.info("the MERGE into %s changed no row and committed nothing; committing the offsets",
                            self.table_path)
                return self.commit([], schema, ranges, metadata=metadata, partition_by=partition_by)
            version = int(merged.version())
            logger.info("merged version %d of %s: %s; %s", version, self.table_path,
                        {k: v for k, v in metrics.items() if k.startswith("num_")},
                        ", ".join(str(r) for r in ranges) or "no ranges")
            return version
        raise OffsetConflictError(
            f"refusing to merge into offsets.table '{self.table_path}' for group '{self.group}': concurrent "
            f"writers kept winning ({last_error})")

    def storage_options(self) -> Dict[str, str]:
        """The running batch's storage options (secrets: never logged)."""
        return dict(self._storage_options)

    def merges_as_tasks(self) -> bool:
        """Whether a batch (SCD type 1 or 2) goes to :meth:`merge_as_tasks`: the table is one the MERGE as
        Spark tasks takes (:func:`~kafka_group.delta.keyed.task_rewrite.task_merge_refusal`: with deletion
        vectors, or copy-on-write without), or the first batch creates it where the connector commits itself
        (with deletion vectors or without, as its properties say)."""
        table = self._load(refresh=True)
        if table is None:
            return own_commit_refusal(self.table_path) is None
        return task_merge_refusal(table, self.table_path) is None

    def merge_as_tasks(self, schema: Any, ranges: Sequence[OffsetRange],
                       run: Callable[[Any, List[Tuple[str, int]], Dict[str, Any]], Optional[int]], *,
                       metadata: Optional[Mapping[str, Any]] = None, partition_by: Sequence[str] = (),
                       table_properties: Optional[Mapping[str, str]] = None) -> int:
        """:meth:`merge_changes`'s commit loop for the MERGE as Spark tasks, SCD type 1 or 2
        (:mod:`kafka_group.delta.keyed.task_merge`, :mod:`kafka_group.delta.keyed.scd2_tasks`): the same
        checks on each attempt's table version (owner, conflicts, schema, partitioning, the own MERGE's
        refusals), then ``run(table, txns, info)``, which plans, has the executors write, and commits;
        it returns the new version, None when another writer won the version (the loop checks the
        offsets again), or :data:`NOTHING` when no row changes (the offsets alone are committed). ``schema``: the table's Arrow schema
        (:func:`table_schema`)."""
        self.check_conditional_put()
        txns = self._transactions(ranges)
        custom = {GROUP_METADATA_KEY: self.group, **(metadata or {})}
        for _ in range(1, COMMIT_ATTEMPTS + 2):
            table = self._table_to_merge_into(schema, partition_by, table_properties)
            if table is None:
                continue
            refuse_task_merge(table, self.table_path)
            self._refuse_conflicts(table, ranges)
            merge_or_raise(self.table_path, table.schema(), schema, "the batch", False)
            self.check_partition_columns(partition_by, table)
            done = run(table, [(t.app_id, t.version) for t in txns], custom)
            if done == NOTHING:
                return self.commit([], schema, ranges, metadata=metadata, partition_by=partition_by)
            if done is not None:
                return done
        raise OffsetConflictError(
            f"refusing to merge into offsets.table '{self.table_path}' for group '{self.group}': concurrent "
            "writers kept winning")

    def _table_to_merge_into(self, schema: Any, partition_by: Sequence[str],
                             table_properties: Optional[Mapping[str, str]]) -> Any:
        """The table at its latest version, its owner and appendability checked; None when it did not
        exist (it is created now, and the caller loads it again)."""
        table = self._load(refresh=True)
        if table is None:
            self._create(schema, partition_by, table_properties)
            return None
        self._check_owner(table)
        self._check_appendable(table)
        return table

    def _refuse_conflicts(self, table: Any, ranges: Sequence[OffsetRange]) -> None:
        check = self._check_in(table, ranges)
        if check.conflicts or check.already_committed:
            raise OffsetConflictError(
                f"refusing to merge into offsets.table '{self.table_path}' for group '{self.group}': "
                + (check.describe_conflicts(ranges) if check.conflicts
                   else "the table already holds exactly these ranges (committed before)")
                + ". Another member committed these partitions meanwhile, or their offsets were reset; the "
                "batch is not landed and the query replans from the table's offsets")

    def _transactions(self, ranges: Sequence[OffsetRange]) -> List[Any]:
        from deltalake.transaction import Transaction

        txns = [Transaction(transaction_id(self.group, r.topic_partition), r.until_offset) for r in ranges]
        txns.append(Transaction(OWNER_ID, owner_version(self.group)))
        return txns

    def _create(self, schema: Any, partition_by: Sequence[str],
                table_properties: Optional[Mapping[str, str]] = None) -> None:
        """Create the empty table, owned by this group (a MERGE needs a table; no offset moves), with
        ``table_properties`` (deletion vectors: :mod:`kafka_group.delta.keyed.create`)."""
        from deltalake import DeltaTable
        from deltalake.transaction import CommitProperties, Transaction

        info = {GROUP_METADATA_KEY: self.group, "kafkaGroup.operation": "createKeyedTable"}
        configuration = dict(table_properties or {})
        if wants_deletion_vectors(configuration, self.table_path):
            if not create_with_deletion_vectors(self.table_path, self._storage_options, schema, partition_by,
                                                configuration, (OWNER_ID, owner_version(self.group)), info):
                logger.info("another writer created %s first; merging into it", self.table_path)
            crash_point("delta.after_create")
            return
        configuration.pop("delta.enableDeletionVectors", None)
        properties = CommitProperties(app_transactions=[Transaction(OWNER_ID, owner_version(self.group))],
                                      custom_metadata=info)
        try:
            DeltaTable.create(self.table_path, schema, mode="error", partition_by=list(partition_by) or None,
                              storage_options=self._storage_options or None, commit_properties=properties,
                              configuration=configuration or None)
        except Exception as exc:  # another writer created it meanwhile: the caller loads it and checks again
            if self._load() is None:
                raise OffsetStoreError(f"creating offsets.table '{self.table_path}' failed: {exc}") from exc
        crash_point("delta.after_create")

    def _scd2_source(self, table: Any, changes: Any, spec: KeyedSpec, stored: Sequence[str],
                     deletes_of: Optional[Callable[[Any], Any]]) -> Any:
        """SCD2's MERGE source and its data columns: for each key whose versions the batch changes
        (:func:`~kafka_group.delta.keyed.scd2_history.place_events`, from the key's rows, read from the
        files holding the batch's keys only, and its recorded deletes), a 'drop' row and its versions."""
        import pyarrow as pa
        import pyarrow.compute as pc

        table_schema_ = pa.schema(table.schema().to_arrow())
        columns = [c for c in table_schema_.names if c not in (START_COLUMN, END_COLUMN)]
        columns += [c for c in stored if c not in columns]
        read = [c for c in columns if c in table_schema_.names] + [START_COLUMN, END_COLUMN]
        rows: List[Dict[str, Any]] = []
        for part in rows_of_keys(table, spec.keys[0], pc.unique(changes.column(spec.keys[0])), read):
            rows += part.to_pylist()
        rows_by_key = group_by_key(rows, spec.keys)
        deletes = group_by_key(deletes_of(changes).to_pylist() if deletes_of is not None else [], spec.keys)
        tracked = spec.tracked_columns(columns)
        seq_type = changes.schema.field(SEQ).type
        out: List[Dict[str, Any]] = []
        for key, events in group_by_key(changes.to_pylist(), spec.keys).items():
            history = place_events(rows_by_key.get(key, []), [d[SEQUENCE_COLUMN] for d in deletes.get(key, [])], events,
                                   columns=columns, keys=spec.keys, tracked=tracked,
                                   ignore_null_updates=spec.ignore_null_updates)
            if not history.changed:
                continue
            out.append({**{c: None for c in columns}, **dict(zip(spec.keys, key)), START_COLUMN: None,
                        END_COLUMN: None, ACTION: "drop"})
            out += [{**{c: row.get(c) for c in columns}, START_COLUMN: row[START_COLUMN],
                     END_COLUMN: row[END_COLUMN], ACTION: "insert"} for row in history.rows]
        field_of = {f.name: f for f in changes.schema} | {f.name: f for f in table_schema_}
        schema = pa.schema([field_of[c].with_nullable(True) for c in columns]
                           + [pa.field(START_COLUMN, seq_type), pa.field(END_COLUMN, seq_type),
                              pa.field(ACTION, pa.string())])
        return pa.Table.from_pylist(out, schema=schema), columns


def _merge(table: Any, source: Any, clauses: MergeClauses, properties: Any, *, truncate: bool = False) -> Dict[str, Any]:
    """Run one MERGE of ``source`` into ``table`` (not streamed: delta-rs then prunes the target's
    files by the source's key range) and commit it with ``properties``. ``truncate``: every target row
    no source row matches is deleted too (the table emptied before the batch's later events)."""
    merger = table.merge(source, clauses.predicate, source_alias="s", target_alias="t", streamed_exec=False,
                         commit_properties=properties)
    if clauses.delete_when is not None:
        merger = merger.when_matched_delete(predicate=clauses.delete_when)
    if clauses.update_when is not None:
        merger = merger.when_matched_update(updates=clauses.updates, predicate=clauses.update_when)
    elif clauses.updates:
        merger = merger.when_matched_update(updates=clauses.updates)
    merger = merger.when_not_matched_insert(updates=clauses.inserts, predicate=clauses.insert_when)
    if truncate:
        merger = merger.when_not_matched_by_source_delete()
    return dict(merger.execute())

