"""The keyed sink's SCD1 tombstones: deletes remembered, so an older event of a later batch stays ignored.

SCD1 removes a deleted key's row, and with it the row's sequence (``__SEQUENCE``); an event *older*
than the delete arriving in a later batch (out-of-order sequences across partitions, a producer that
sends again) would insert the key again. Like Databricks' AUTO CDC
(``pipelines.cdc.tombstoneGCThresholdInSeconds``), the sink keeps each delete as a *tombstone*: the
key's columns, the delete's sequence (:data:`~kafka_group.delta.keyed.change_rules.SEQUENCE_COLUMN`) and
when it was recorded (:data:`RECORDED_AT`), in a small Delta table of its own inside the table's
folder, :data:`TOMBSTONES_FOLDER`. There it shares the table's location, credentials (a catalog's
vended credentials are scoped to the table's prefix) and lifecycle; readers of the table never see
it (they read the table's log), and delta-spark's and delta-rs's ``VACUUM`` skip folders whose name
starts with ``_`` (tested).

:meth:`Tombstones.record` appends a batch's deletes (one per key: SCD1's change set holds each
key's latest event) before anything else of the batch is committed: a blind append, which never
conflicts with another writer's; a key's tombstone is the highest sequence of its rows, so recording
one twice changes nothing. The MERGE as Spark tasks does the same without the deletes on the driver:
the executors write the files (:mod:`kafka_group.delta.keyed.tombstone_files`) and
:meth:`Tombstones.commit_files` appends them. :meth:`Tombstones.apply` is then a step on the change set (pyarrow Table
in, pyarrow Table out) that every MERGE engine runs at each commit attempt, on the table version it
commits on: it reads the tombstones of the batch's keys only (files chosen by their statistics, rows
filtered in pyarrow: no key value reaches SQL) and drops the upserts whose sequence is below
their key's tombstone. Reading them after that version is loaded closes a race: a query whose
delete committed in between recorded its tombstone before its commit, so the MERGE that follows it
sees the tombstone (and one planned before it never commits: the commit must be the next version).

Why the tombstones are written BEFORE the batch's data-and-offsets commit, in a commit of their own:

- a tombstone is a fact of the stream: "the topic holds a delete of this key at this sequence". It
  stays true whatever happens to the batch: a crash after it and before the commit replays the same
  events (the offsets did not move), which record the same tombstone again (idempotent); the batch's
  own deletes pass the filter (a delete is never dropped), and its upserts are dropped only by a
  delete above their sequence, which the oracle (the last event per key by sequence, deletes
  applied) says wins anyway;
- a batch refused at the commit (another member committed its partitions meanwhile; a stale owner)
  recorded deletes that are still events of the topic, at the offsets the new owner lands: they
  change nothing the new owner's own tombstones would not;
- the other order would lose one: a crash after the commit and before the tombstone leaves a deleted
  key, its offsets past, and no tombstone.

The data and the offsets stay one commit (:mod:`kafka_group.delta.keyed.commit`).

Garbage collection (:meth:`Tombstones.collect_garbage`, now and then, not every batch): tombstones
recorded more than ``retention_seconds`` ago are deleted, the table is compacted and its obsolete
files vacuumed. An event older than a delete whose tombstone was collected inserts the key again
(docs/cdc.md).

Caller: :class:`~pyspark_kafka_group.sink.delta_sink.DeltaSink` on the driver, one batch at a time
(:func:`pyspark_kafka_group.sink.keyed.tombstone_tasks.record_tombstones` for the MERGE as Spark tasks).
"""

from __future__ import annotations

import datetime
import json
import logging
import time
from typing import Any, Mapping, Optional, Sequence

from kafka_group.delta.files.commit_files import DataFile, check_local_files, delete_files
from kafka_group.delta.keyed.change_rules import DELETE_COLUMN, SEQ, SEQUENCE_COLUMN, KeyedSpec
from kafka_group.delta.keyed.key_rows import rows_of_keys
from kafka_group.delta.keyed.tombstone_files import RECORDED_AT
from kafka_group.delta.storage.table_location import TOMBSTONES_FOLDER
from kafka_group.errors import ConfigError, OffsetStoreError
from kafka_group.faults import crash_point

__all__ = [
    "DEFAULT_RETENTION_SECONDS",
    "RECORDED_AT",
    "TOMBSTONES_FOLDER",
    "Tombstones",
    "retention_seconds",
    "tombstones_location",
]

logger = logging.getLogger(__name__)

#: Seven days: Kafka's default ``retention.ms``. An event older than a delete reaches a later batch
#: while it is still in a topic (a partition lagging behind another, a producer sending again); a
#: query can lag by up to the topic's retention, so the default covers the default topic.
DEFAULT_RETENTION_SECONDS = 7 * 24 * 3600
#: How often (seconds, per sink) garbage collection runs at most; also at a sink's first batch.
GC_INTERVAL_SECONDS = 600
#: Obsolete files of the tombstones' table (removed by compaction or collection) kept this long for
#: a reader of an older version (another query's batch reading its tombstones), then vacuumed; so are
#: files in no commit (a task attempt that failed, a batch refused): one younger may be a running batch's.
_VACUUM_HOURS = 24
_APPEND_ATTEMPTS = 3


def tombstones_location(table_path: str) -> str:
    """The tombstones' table of the keyed table at ``table_path`` (a path or a URI)."""
    return table_path.rstrip("/") + "/" + TOMBSTONES_FOLDER


def retention_seconds(value: Any) -> float:
    """``DeltaSink(tombstone_retention=...)`` checked: seconds (a number) or a ``timedelta``, above 0."""
    if isinstance(value, datetime.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise ConfigError(f"DeltaSink(tombstone_retention=...) takes seconds or a datetime.timedelta, such as "
                          f"timedelta(days=7), got {value!r}")
    if not seconds > 0 or seconds == float("inf"):
        raise ConfigError(f"DeltaSink(tombstone_retention=...) must be a positive duration, got {value!r}")
    return seconds


class Tombstones:
    """The tombstones of one keyed SCD1 table (see the module docstring).

    Parameters
    ----------
    table_path : str
        The keyed table's location; the tombstones are in :func:`tombstones_location` of it.
    storage_options : mapping
        delta-rs storage options (the table's: the same credentials reach the tombstones).
    spec : KeyedSpec
        The sink's keyed parameters (its ``keys``).
    retention : float
        Seconds a tombstone is kept (:func:`retention_seconds`).
    """

    def __init__(self, table_path: str, storage_options: Mapping[str, str], spec: KeyedSpec,
                 retention: float) -> None:
        if RECORDED_AT in spec.keys:
            raise ConfigError(f"DeltaSink(keys=...): {RECORDED_AT!r} is a column of the sink's tombstones; "
                              "rename the key in the transform")
        self.path = tombstones_location(table_path)
        self.keys = spec.keys
        self.retention = retention
        self._storage_options = dict(storage_options)
        self._last_gc: Optional[float] = None
        self._loaded: Any = None

    @property
    def storage_options(self) -> Mapping[str, str]:
        """The running batch's storage options (the executors writing tombstones get them; never logged)."""
        return dict(self._storage_options)

    def use_storage_options(self, storage_options: Mapping[str, str]) -> None:
        """The running batch's storage options (a catalog's credentials are fetched again before they expire)."""
        if dict(storage_options) != self._storage_options:
            self._storage_options = dict(storage_options)
            self._loaded = None

    def _table(self) -> Any:
        """The tombstones' table at its latest version (None: none recorded yet)."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        if self._loaded is not None:
            self._loaded.update_incremental()
            return self._loaded
        try:
            self._loaded = DeltaTable(self.path, storage_options=self._storage_options or None)
        except TableNotFoundError:
            return None
        return self._loaded

    def current(self) -> Any:
        """The tombstones' delta-rs table at its latest version (None: none recorded yet): the MERGE as
        Spark tasks scans its files on the executors (:mod:`pyspark_kafka_group.sink.keyed.scd1_tasks`)."""
        return self._table()

    def deletes(self, changes: Any) -> Any:
        """The change set's deletes as tombstones (keys, ``__SEQUENCE``), for :meth:`record`.

        ``changes`` is a change set (SCD1's: one event per key; SCD2's: every event) (keys, :data:`~kafka_group.delta.keyed.change_rules.SEQ`,
        :data:`~kafka_group.delta.keyed.change_rules.DELETE_COLUMN`, other columns); no key is NULL.
        """
        deletes = changes.filter(changes.column(DELETE_COLUMN))
        return deletes.select(list(self.keys) + [SEQ]).rename_columns(list(self.keys) + [SEQUENCE_COLUMN])

    def apply(self, changes: Any) -> Any:
        """The change set without the upserts a tombstone outdates (pyarrow Table in, pyarrow Table out).

        An upsert whose sequence is below its key's tombstone is dropped (one equal to it is the later
        event of a tie, which wins, as in :func:`~kafka_group.delta.keyed.change_rules.scd1_clauses`); deletes
        are kept (one at or below the tombstone changes nothing the tombstone's own delete does not). Run
        on the table version
        the MERGE commits on top of (:meth:`~kafka_group.delta.keyed.commit.KeyedOffsetStore.merge_changes`
        calls it at each attempt): every tombstone of an earlier commit was recorded before that commit, so
        it is read here, whichever query recorded it.

        Parameters
        ----------
        changes : pyarrow.Table
            SCD1's change set (as for :meth:`deletes`).

        Returns
        -------
        pyarrow.Table
            The kept changes, in their order and schema.
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        known = self._read(changes)
        if known is None or known.num_rows == 0:
            return changes
        # A mask over the change set (joined by keys and row numbers only: the stored columns may be of
        # types pyarrow's join cannot carry, and the change set keeps its order and schema).
        index = changes.select(list(self.keys)).append_column(_ROW, pa.array(range(changes.num_rows), pa.int64()))
        joined = index.join(known, list(self.keys), join_type="left outer").sort_by(_ROW)
        tomb = joined.column(_TOMB_SEQ)
        keep = pc.or_kleene(pc.or_kleene(pc.is_null(tomb), pc.greater_equal(changes.column(SEQ), tomb)),
                            changes.column(DELETE_COLUMN))
        keep = pc.fill_null(keep, True)
        dropped = changes.num_rows - pc.sum(pc.cast(keep, pa.int64())).as_py()
        if not dropped:
            return changes
        logger.info("%d upsert(s) of this batch are older than their key's tombstone in %s: ignored",
                    dropped, self.path)
        return changes.filter(keep)

    def all_of(self, changes: Any) -> Any:
        """SCD2: every tombstone of ``changes``' keys (keys, ``__SEQUENCE``; a delete recorded twice twice),
        typed as ``changes``; read as :meth:`apply` reads them."""
        import pyarrow as pa

        rows = self._rows(changes)
        if rows is None:
            return pa.table({**{c: pa.array([], changes.schema.field(c).type) for c in self.keys},
                             SEQUENCE_COLUMN: pa.array([], changes.schema.field(SEQ).type)})
        return rows.rename_columns(list(self.keys) + [SEQUENCE_COLUMN])

    def _read(self, changes: Any) -> Optional[Any]:
        """The highest tombstone sequence of each of ``changes``' keys (keys, :data:`_TOMB_SEQ`), typed as
        ``changes``; only the files whose statistics may hold one of the keys are read."""
        rows = self._rows(changes)
        if rows is None:
            return None
        return rows.group_by(list(self.keys)).aggregate([(_TOMB_SEQ, "max")]).rename_columns(
            list(self.keys) + [_TOMB_SEQ])

    def _rows(self, changes: Any) -> Optional[Any]:
        """Every tombstone of ``changes``' keys (keys, :data:`_TOMB_SEQ`), typed as ``changes``."""
        import pyarrow as pa
        import pyarrow.compute as pc

        table = self._table()
        if table is None or changes.num_rows == 0:
            return None
        first = self.keys[0]
        try:
            parts = []
            for part in rows_of_keys(table, first, pc.unique(changes.column(first)),
                                     list(self.keys) + [SEQUENCE_COLUMN]):
                parts.append(pa.table({c: part.column(c).cast(changes.schema.field(c).type) for c in self.keys}
                                      | {_TOMB_SEQ: part.column(SEQUENCE_COLUMN).cast(changes.schema.field(SEQ).type)}))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, KeyError) as exc:
            raise ConfigError(
                f"the tombstones of DeltaSink(keys={list(self.keys)}) at '{self.path}' do not fit this batch's keys "
                f"and sequence ({exc}): the keys or the type of sequence_by changed. Give them back, or land into "
                "a new table") from exc
        if not parts:
            return None
        return pa.concat_tables(parts)

    def record(self, tombstones: Any) -> None:
        """Append ``tombstones`` (keys, ``__SEQUENCE``: :meth:`apply`'s second table) with the time now.

        Called before the batch's data-and-offsets commit (the module docstring says why). A blind
        append: concurrent writers (two queries of one group) never conflict; only the table's
        creation can race, and the loser appends again.
        """
        import pyarrow as pa
        from deltalake import write_deltalake

        if tombstones.num_rows == 0:
            return
        now = pa.array([datetime.datetime.now(datetime.timezone.utc)] * tombstones.num_rows,
                       pa.timestamp("us", tz="UTC"))
        rows = tombstones.append_column(RECORDED_AT, now)
        last: Optional[Exception] = None
        for _ in range(_APPEND_ATTEMPTS):
            try:
                write_deltalake(self.path, rows, mode="append", storage_options=self._storage_options or None)
                break
            except Exception as exc:  # noqa: BLE001 - a lost creation race is retried; the rest reported below
                last = exc
        else:
            raise OffsetStoreError(
                f"recording {rows.num_rows} delete(s) in the tombstones of DeltaSink(keys={list(self.keys)}) at "
                f"'{self.path}' failed: {last}. Nothing of the batch landed and no offset moved")
        crash_point("keyed.after_tombstones")

    def commit_files(self, files: Sequence[DataFile], schema: Any) -> None:
        """Add ``files`` to the tombstones' table in one blind append: :meth:`record` for deletes the
        executors wrote (:func:`~kafka_group.delta.keyed.tombstone_files.tombstone_writer`, under ``schema``:
        :func:`~kafka_group.delta.keyed.tombstone_files.tombstone_schema`). Called before the batch's
        data-and-offsets commit, as :meth:`record`.

        The commit is delta-rs's, as :meth:`record`'s: an append of new files reads nothing, so two
        writers' appends never conflict (delta-rs retries on the next version), and the sink creates this
        table with delta-rs's protocol, which delta-rs commits to (the connector's own commit,
        :mod:`kafka_group.delta.log.commit`, is for tables whose features delta-rs refuses); the store's
        conditional put was proved before the batch, on the table the tombstones live in. An attempt that
        failed yet landed, appended again, adds the same paths again: a path's later ``add`` replaces its
        earlier one, and a key's tombstone is its highest sequence either way.

        Raises
        ------
        ConfigError
            The table holds tombstones of other key columns or types (the keys or ``sequence_by``
            changed); ``files`` are deleted (in no commit).
        OffsetStoreError
            The commit failed (nothing of the batch landed, no offset moved); ``files`` stay, in no
            commit (garbage collection vacuums them).
        """
        from deltalake.schema import Schema
        from deltalake.transaction import AddAction, create_table_with_add_actions

        if not files:
            return
        check_local_files(self.path, files)
        now_ms = int(time.time() * 1000)
        adds = [AddAction(f.path, f.size, {}, now_ms, True, f.stats or json.dumps({"numRecords": f.num_records}))
                for f in files]
        last: Optional[Exception] = None
        for _ in range(_APPEND_ATTEMPTS):
            table = self._table()
            if table is not None:
                self._refuse_other_columns(table, schema, files)
            try:
                if table is None:
                    create_table_with_add_actions(self.path, Schema.from_arrow(schema), adds, mode="append",
                                                  storage_options=self._storage_options or None)
                else:
                    table.create_write_transaction(adds, mode="append", schema=table.schema())
                break
            except Exception as exc:  # noqa: BLE001 - a lost creation race is retried; the rest reported below
                last = exc
                self._loaded = None  # loaded again: the table another writer created, or the latest version
        else:
            raise OffsetStoreError(
                f"recording {sum(f.num_records for f in files)} delete(s) in the tombstones of DeltaSink(keys="
                f"{list(self.keys)}) at '{self.path}' failed: {last}. Nothing of the batch landed and no offset moved")
        crash_point("keyed.after_tombstones")

    def _refuse_other_columns(self, table: Any, schema: Any, files: Sequence[DataFile]) -> None:
        """Refuse ``files`` (deleted) when the table's columns are not ``schema``'s (Delta types)."""
        from deltalake.schema import Schema

        def columns(delta_schema: Any) -> Any:
            return [(f["name"], f["type"]) for f in json.loads(delta_schema.to_json())["fields"]]

        have, want = columns(table.schema()), columns(Schema.from_arrow(schema))
        if have != want:
            delete_files(self.path, self._storage_options, files)
            raise ConfigError(
                f"the tombstones of DeltaSink(keys={list(self.keys)}) at '{self.path}' hold columns {have}, this "
                f"batch's deletes {want}: the keys or the type of sequence_by changed. Give them back, or land into "
                "a new table")

    def collect_garbage(self, now: Optional[float] = None) -> None:
        """Now and then (at a sink's first batch, then every :data:`GC_INTERVAL_SECONDS` at most): delete
        the tombstones recorded more than the retention ago, compact the table and vacuum its obsolete
        files. Best effort: a failure is logged and tried again next time (tombstones kept longer
        change nothing)."""
        clock = time.monotonic()
        if self._last_gc is not None and clock - self._last_gc < GC_INTERVAL_SECONDS:
            return
        self._last_gc = clock
        try:
            cutoff = datetime.datetime.fromtimestamp((time.time() if now is None else now) - self.retention,
                                                     datetime.timezone.utc)
        except (OverflowError, ValueError, OSError):  # a retention longer than the calendar: nothing is old
            return
        # The predicate is built from this sink's own column name and a time it formats: no data in it.
        predicate = f"`{RECORDED_AT}` < '{cutoff.strftime('%Y-%m-%dT%H:%M:%S.%fZ')}'"
        try:
            table = self._table()
            if table is None:
                return
            deleted = table.delete(predicate).get("num_deleted_rows", 0)
            table.optimize.compact()
            # full: also the files of task attempts that failed or lost (in no commit), once older than the retention
            table.vacuum(retention_hours=_VACUUM_HOURS, enforce_retention_duration=False, dry_run=False, full=True)
        except Exception as exc:  # noqa: BLE001 - best effort, see above
            logger.warning("collecting the tombstones of %s older than %s failed (tried again later): %s",
                           self.path, cutoff.isoformat(), exc)
            return
        logger.info("collected %s tombstone(s) of %s recorded before %s", deleted, self.path, cutoff.isoformat())


#: The joined tombstone sequence (a name no change set column has).
_TOMB_SEQ = "__kg_tombstone_seq"
_ROW = "__kg_row"
