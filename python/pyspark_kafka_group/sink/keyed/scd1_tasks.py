"""The keyed sink's SCD1 MERGE as Spark tasks, with deletion vectors (the default for new tables) or without.

The batch's change set stays a DataFrame (:func:`~pyspark_kafka_group.sink.keyed.changes.change_frame`:
the latest event per key computed on the executors) and is never collected to the driver. Per commit
attempt (:meth:`kafka_group.delta.keyed.commit.KeyedOffsetStore.merge_as_tasks`, on the table version
the commit must follow):

1. SCD1's tombstones: the tombstones' files are scanned by the executors and joined with the change
   set (an upsert below its key's tombstone is dropped, as :meth:`~kafka_group.delta.keyed.tombstones.Tombstones.apply`);
2. the driver lists the target's candidate files from the log (their statistics against the batch's
   key bounds) and ships paths and ``add`` actions, one row per file; the executors read their share
   of the files' key columns and ``__SEQUENCE`` and Spark joins them with the batch's keys;
3. the matches, repartitioned by file, go to tasks (:func:`~kafka_group.delta.keyed.task_merge.dv_writer`)
   that drop the fired rows from each touched file (:class:`~kafka_group.delta.keyed.task_rewrite.RowDropper`:
   a new deletion vector, or the file rewritten without them where deletion vectors are off) and
   return one row per touched file, the keys whose row is newer than the change, and with
   ``ignore_null_updates`` the replaced rows' values (:mod:`~pyspark_kafka_group.sink.keyed.scd1_columns`);
4. the new rows (upserts but the blocked ones) are written by the executors as append mode writes its
   files (:func:`~pyspark_kafka_group.sink.sink_files.write_files`);
5. the driver commits removes, re-adds with the new deletion vectors or the rewritten files, the new
   files and the offsets in one commit (:func:`~kafka_group.delta.keyed.own_merge.commit_merge`), or
   deletes them if another writer won the version (the next attempt plans again).

A batch holding a truncate (``apply_as_truncates``: its events after the truncate) skips 2 and 3: every
live file is removed in the commit.

What the driver holds: one row of the batch's statistics (count, NULL counts, key bounds), the
candidate files' ``add`` actions (the log's, not the data), one row per touched file, and one row per
tombstones' file: SCD1's tombstones are written by the executors and committed by the driver before
the batch's commit (:mod:`~pyspark_kafka_group.sink.keyed.tombstone_tasks`; :mod:`kafka_group.delta.keyed.tombstones`
says why in that order).

Caller: :func:`pyspark_kafka_group.sink.landing.land_changes` on the driver, one batch at a time.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from kafka_group.delta.files.commit_files import DataFile, delete_files
from kafka_group.delta.files.not_null_check import check_not_null
from kafka_group.delta.keyed.change_rules import DELETE_COLUMN, SEQ, KeyedSpec, quote
from kafka_group.delta.keyed.commit import NOTHING, KeyedOffsetStore
from kafka_group.delta.keyed.own_merge import commit_merge, pa_schema, remove_of, row_tracking_columns
from kafka_group.delta.keyed.task_merge import (
    FILE_ID,
    POSITION,
    RESULT_COLUMNS,
    ROW_ID,
    TARGET_SEQ,
    CandidateFile,
    candidate_files,
    dv_writer,
    key_scanner,
)
from kafka_group.delta.keyed.task_rewrite import (
    OLD_PREFIX,
    RowDropper,
    dropped_files,
    kept_columns,
    live_rows,
    refuse_task_merge,
)
from kafka_group.delta.keyed.tombstones import Tombstones
from kafka_group.delta.log.actions import TableState, row_tracking_on
from kafka_group.delta.storage.table_location import table_filesystem
from kafka_group.faults import crash_point
from kafka_group.offsets import OffsetRange
from pyspark_kafka_group.sink.keyed.batch import JOIN, arrow_schema, num_records, prepare_batch, shipped_files
from pyspark_kafka_group.sink.keyed.scd1_columns import written_columns
from pyspark_kafka_group.sink.sink_files import write_files

__all__ = ["merge_as_tasks"]

logger = logging.getLogger(__name__)


def merge_as_tasks(events: Any, stored: List[str], batch_id: int, ranges: Sequence[OffsetRange],
                   store: KeyedOffsetStore, spec: KeyedSpec, *, partition_by: Sequence[str],
                   storage_options: Mapping[str, str], tombstones: Optional[Tombstones],
                   metadata: Mapping[str, Any], table_properties: Optional[Mapping[str, str]],
                   truncate: bool = False) -> None:
    """MERGE ``events`` (:func:`~pyspark_kafka_group.sink.keyed.changes.change_frame`'s SCD1 change set)
    into ``store``'s table with ``ranges``, in one commit, the work on the executors (module docstring).
    ``truncate``: the batch held a truncate (``events`` are those after it): the table is emptied first."""
    from pyspark import StorageLevel

    events = events.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        facts = prepare_batch(events, stored, batch_id, ranges, store, spec, tombstones, truncate=truncate)
        if facts is None:
            return
        plan = _TaskMerge(events, stored, batch_id, store, spec, storage_options, tombstones, facts.bounds, facts.rows,
                          truncate)
        store.merge_as_tasks(facts.schema, ranges, plan.run, metadata=metadata, partition_by=partition_by,
                             table_properties=table_properties)
    finally:
        events.unpersist()


class _TaskMerge:
    """One batch's MERGE attempts: :meth:`run` is :meth:`KeyedOffsetStore.merge_as_tasks`'s ``run``."""

    def __init__(self, events: Any, stored: List[str], batch_id: int, store: KeyedOffsetStore, spec: KeyedSpec,
                 storage_options: Mapping[str, str], tombstones: Optional[Tombstones],
                 bounds: Mapping[str, Tuple[Any, Any]], count: int, truncate: bool) -> None:
        self.events, self.stored, self.batch_id, self.store = events, stored, batch_id, store
        self.keys = list(spec.keys)
        self.ignore_null_updates, self.truncate = spec.ignore_null_updates, truncate
        self.options = dict(storage_options)
        self.tombstones = tombstones
        self.bounds = bounds
        self.count = count

    def run(self, table: Any, txns: List[Tuple[str, int]], info: Dict[str, Any]) -> Optional[int]:
        """Plan on ``table``'s loaded version, have the executors write, commit (None: another writer won)."""
        import pyarrow as pa
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        path = self.store.table_path
        refuse_task_merge(table, path)
        if self.count == 0 and not self.truncate:  # no change: the offsets alone (no file read)
            return NOTHING
        changes = self._without_tombstoned(self.events)
        fs = table_filesystem(path, self.options)
        dropper = RowDropper.of(table, path, self.options, self.batch_id)
        # a truncate removes every live file; else the files whose statistics may hold a changed key
        files = candidate_files(table, fs, self.keys, {} if self.truncate else self.bounds)
        table_arrow = pa_schema(table)
        old = [] if self.truncate else kept_columns(table_arrow, self.stored, self.keys, self.ignore_null_updates)
        # Row tracking: updated rows keep their ids, written in the materialized column; their commit version
        # column is NULL, so they read the new file's defaultRowCommitVersion (PROTOCOL.md, "Row Tracking").
        config = dict(table.metadata().configuration or {})
        tracked = row_tracking_columns(config) if row_tracking_on(
            TableState(int(table.version()), frozenset(table.protocol().writer_features or []), config)) else None
        results: Any = None
        file_rows: List[Any] = []
        written: List[DataFile] = []
        try:
            if files and not self.truncate:
                matched = self._scan(path, table.table_uri, table_arrow, dropper.mapping, files,
                                     None if tracked is None else tracked[0]).hint(JOIN).join(
                    changes.select(*[quote(k) for k in self.keys], SEQ, DELETE_COLUMN), on=self.keys, how="inner")
                result_schema = self._result_schema(table_arrow, old)
                writer = dv_writer(dropper, {f.file_id: (f.path, f.add, f.num_records()) for f in files},
                                   self.keys, arrow_schema(result_schema), old_columns=old)
                results = matched.repartition(F.col(FILE_ID)).mapInArrow(writer, result_schema).persist(
                    StorageLevel.MEMORY_AND_DISK)
                file_rows = [r.asDict() for r in results.where("kind = 'file'").select(
                    FILE_ID, "dv", "dv_path", "dv_size", "all_deleted", "deleted", "updated", "rewritten").collect()]
            now_ms = int(time.time() * 1000)
            by_id = {f.file_id: f for f in files}
            removes, readds, rewritten, tasks_wrote = dropped_files(
                file_rows, {f.file_id: f.add for f in files}, now_ms, dropper.mapping,
                lambda file_id: num_records(by_id[file_id], fs))
            written += tasks_wrote  # deleted below unless the commit lands
            if files and not self.truncate:
                upserts = changes.where(~F.col(DELETE_COLUMN)).hint(JOIN).join(
                    results.where("kind = 'blocked'").select(*[quote(k) for k in self.keys]), on=self.keys,
                    how="left_anti")
                if tracked is not None or old:
                    upserts = upserts.hint(JOIN).join(results.where("kind = 'fired'").select(
                        *[quote(k) for k in self.keys], *([ROW_ID] if tracked else []),
                        *[quote(OLD_PREFIX + c) for c in old]), on=self.keys, how="left")
            else:
                upserts = changes.where(~F.col(DELETE_COLUMN))
                if tracked is not None:
                    upserts = upserts.withColumn(ROW_ID, F.lit(None).cast("long"))
            # no live file to join (a new table, a truncate): no row is replaced, nothing is kept
            columns = written_columns(table_arrow, self.stored, old if results is not None else [],
                                      self.ignore_null_updates)
            written_schema = table_arrow
            if tracked is not None:
                columns += [F.col(ROW_ID).alias(tracked[0]), F.lit(None).cast("long").alias(tracked[1])]
                written_schema = pa.schema(list(table_arrow) + [pa.field(c, pa.int64()) for c in tracked])
            rows = upserts.select(*columns)
            partition_by = list(table.metadata().partition_columns or [])
            contract = self.store.write_contract(list(table_arrow.names))
            new_files = write_files(rows, self.batch_id, written_schema, partition_by, self.store, path,
                                    self.options, contract)
            if dropper.mapping is not None:
                new_files = [DataFile(f.path, f.size, f.num_records, f.stats,
                                      dropper.mapping.physical_partition_values(f.partition_values), f.null_counts)
                             for f in new_files]
            written += new_files
            deleted = sum(int(r["deleted"]) for r in file_rows)
            if self.truncate:
                removes = [remove_of(f.add, now_ms) for f in files]
                deleted = sum(live_rows(f.add) for f in files)
            if not removes and not new_files:
                return NOTHING
            check_not_null(path, table, new_files, None)
            updated = sum(int(r["updated"]) for r in file_rows)
            inserted = sum(f.num_records for f in new_files) - updated
            crash_point("delta.before_merge")
            return commit_merge(table, path, self.options, fs, removes, readds, rewritten + new_files, written, txns,
                                info=info, counts=(deleted, updated, inserted), with_dvs=dropper.with_dvs)
        finally:
            if written:
                delete_files(path, self.options, written)
            if results is not None:
                results.unpersist()

    def _scan(self, root: str, uri: str, schema: Any, mapping: Any, files: Sequence[CandidateFile],
              row_id_column: Optional[str] = None) -> Any:
        """The live rows' keys and sequences of ``files`` (of the table at ``root``), and with
        ``row_id_column`` their row ids, read by the executors."""
        from pyspark.sql.types import LongType, StructField, StructType

        session = self.events.sparkSession
        out = StructType([StructField(FILE_ID, LongType()), StructField(POSITION, LongType())]
                         + [StructField(k, self.events.schema[k].dataType, True) for k in self.keys]
                         + [StructField(TARGET_SEQ, self.events.schema[SEQ].dataType, True)]
                         + ([StructField(ROW_ID, LongType(), True)] if row_id_column else []))
        shipped = shipped_files(session, files)
        scanner = key_scanner(root, uri, self.options, schema, self.keys, arrow_schema(out), mapping, row_id_column)
        return shipped.mapInArrow(scanner, out)

    def _without_tombstoned(self, changes: Any) -> Any:
        """``changes`` without the upserts below their key's tombstone (the tombstones' files scanned and
        joined by the executors, on the tombstones' latest version)."""
        from pyspark.sql import functions as F

        tombs = None if self.tombstones is None else self.tombstones.current()
        if tombs is None:
            return changes
        fs = table_filesystem(self.tombstones.path, self.options)  # type: ignore[union-attr]
        files = candidate_files(tombs, fs, self.keys, self.bounds)
        if not files:
            return changes
        known = self._scan(self.tombstones.path, tombs.table_uri, pa_schema(tombs), None,  # type: ignore[union-attr]
                           files).groupBy(*[quote(k) for k in self.keys]).agg(
            F.max(TARGET_SEQ).alias(TARGET_SEQ))
        joined = changes.hint(JOIN).join(known, on=self.keys, how="left")
        keep = F.col(TARGET_SEQ).isNull() | (F.col(SEQ) >= F.col(TARGET_SEQ)) | F.col(DELETE_COLUMN)
        return joined.where(keep).drop(TARGET_SEQ)

    def _result_schema(self, table_arrow: Any, old: Sequence[str]) -> Any:
        from pyspark.sql.pandas.types import from_arrow_type
        from pyspark.sql.types import StructField, StructType, _parse_datatype_string

        return StructType([StructField(name, _parse_datatype_string(kind), True) for name, kind in RESULT_COLUMNS]
                          + [StructField(k, self.events.schema[k].dataType, True) for k in self.keys]
                          + [StructField(OLD_PREFIX + c, from_arrow_type(table_arrow.field(c).type), True)
                             for c in old])
