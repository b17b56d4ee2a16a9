"""The keyed sink's SCD type 2 MERGE as Spark tasks, for tables with deletion vectors (the default for new ones).

SCD2 needs every event of the batch (:func:`~pyspark_kafka_group.sink.keyed.changes.change_frame`); they
stay a DataFrame and never reach the driver. Per commit attempt
(:meth:`kafka_group.delta.keyed.commit.KeyedOffsetStore.merge_as_tasks`, on the table version the commit
must follow):

1. the driver lists the candidate files from the log (their key statistics against the batch's key
   bounds, :func:`~kafka_group.delta.keyed.task_merge.candidate_files`); the executors read their key
   columns and row positions and Spark joins them with the batch's distinct keys;
2. the matched positions, repartitioned by file, are read in full by the executors
   (:func:`~kafka_group.delta.keyed.scd2_tasks.row_reader`), with their row ids where the table tracks
   rows; the tombstones' files are scanned likewise and joined with the batch's keys (every recorded
   delete of a batch key: SCD2 reads them as deletes of the history);
3. old rows, tombstones and events, repartitioned by key and sorted, go to
   :func:`~kafka_group.delta.keyed.scd2_tasks.history_placer`: per key, the versions
   :func:`~kafka_group.delta.keyed.scd2_history.place_events` gives, split into the old rows to delete
   and the versions to write (an unchanged version is neither);
4. the deletes, repartitioned by file, become new deletion vectors written by the executors
   (:func:`~kafka_group.delta.keyed.file_deletes.positions_dv_writer`: one row per touched file to the
   driver); the versions are written by the executors as append mode writes its files (a rewritten
   version with its old row id in the materialized row id column);
5. the driver commits removes, re-adds with the new deletion vectors, the new files and the offsets in
   one commit (:func:`~kafka_group.delta.keyed.own_merge.commit_merge`), or deletes them if another
   writer won the version (the next attempt plans again).

What the driver holds: one row of the batch's statistics, the candidate files' ``add`` actions, one row
per touched file, and one row per tombstones' file (the batch's deletes are written as tombstones by the
executors before the commit, as SCD1's tasks path writes them: :mod:`~pyspark_kafka_group.sink.keyed.tombstone_tasks`).

Caller: :func:`pyspark_kafka_group.sink.landing.land_changes` on the driver, one batch at a time.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from kafka_group.delta.files.commit_files import DataFile, delete_files
from kafka_group.delta.files.not_null_check import check_not_null
from kafka_group.delta.keyed.change_rules import (
    DELETE_COLUMN,
    END_COLUMN,
    OFFSET,
    SEQ,
    START_COLUMN,
    KeyedSpec,
    quote,
)
from kafka_group.delta.keyed.commit import NOTHING, KeyedOffsetStore
from kafka_group.delta.keyed.file_deletes import DROP_RESULT_COLUMNS, positions_writer
from kafka_group.delta.keyed.own_merge import commit_merge, pa_schema, row_tracking_columns
from kafka_group.delta.keyed.scd2_tasks import KIND, REWRITE, history_placer, row_reader
from kafka_group.delta.keyed.task_merge import FILE_ID, POSITION, ROW_ID, TARGET_SEQ, CandidateFile, candidate_files, key_scanner
from kafka_group.delta.keyed.task_rewrite import RowDropper, dropped_files, refuse_task_merge
from kafka_group.delta.keyed.tombstones import Tombstones
from kafka_group.delta.log.actions import TableState, row_tracking_on
from kafka_group.delta.storage.table_location import table_filesystem
from kafka_group.faults import crash_point
from kafka_group.offsets import OffsetRange
from pyspark_kafka_group.sink.keyed.batch import JOIN, arrow_schema, num_records, prepare_batch, shipped_files
from pyspark_kafka_group.sink.sink_files import write_files

__all__ = ["merge_scd2_as_tasks"]

logger = logging.getLogger(__name__)


def merge_scd2_as_tasks(events: Any, stored: List[str], batch_id: int, ranges: Sequence[OffsetRange],
                        store: KeyedOffsetStore, spec: KeyedSpec, *, partition_by: Sequence[str],
                        storage_options: Mapping[str, str], tombstones: Optional[Tombstones],
                        metadata: Mapping[str, Any], table_properties: Optional[Mapping[str, str]]) -> None:
    """MERGE ``events`` (every event of the batch: SCD2's change set) into ``store``'s table with
    ``ranges``, in one commit, the work on the executors (module docstring)."""
    from pyspark import StorageLevel

    events = events.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        facts = prepare_batch(events, stored, batch_id, ranges, store, spec, tombstones)
        if facts is None:
            return
        plan = _Scd2TaskMerge(events, stored, batch_id, store, spec, storage_options, tombstones, facts.bounds,
                              facts.rows)
        store.merge_as_tasks(facts.schema, ranges, plan.run, metadata=metadata, partition_by=partition_by,
                             table_properties=table_properties)
    finally:
        events.unpersist()


class _Scd2TaskMerge:
    """One batch's SCD2 MERGE attempts: :meth:`run` is :meth:`KeyedOffsetStore.merge_as_tasks`'s ``run``."""

    def __init__(self, events: Any, stored: List[str], batch_id: int, store: KeyedOffsetStore, spec: KeyedSpec,
                 storage_options: Mapping[str, str], tombstones: Optional[Tombstones],
                 bounds: Mapping[str, Tuple[Any, Any]], count: int) -> None:
        self.events, self.stored, self.batch_id, self.store, self.spec = events, stored, batch_id, store, spec
        self.keys = list(spec.keys)
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
        if self.count == 0:
            return NOTHING
        fs = table_filesystem(path, self.options)
        config = dict(table.metadata().configuration or {})
        dropper = RowDropper.of(table, path, self.options, self.batch_id)
        mapping = dropper.mapping
        table_arrow = pa_schema(table)
        tracked = row_tracking_columns(config) if row_tracking_on(
            TableState(int(table.version()), frozenset(table.protocol().writer_features or []), config)) else None
        columns = [c for c in table_arrow.names if c not in (START_COLUMN, END_COLUMN)]
        union = self._union_schema(columns, table_arrow)
        batch_keys = self.events.select(*[quote(k) for k in self.keys]).distinct()
        files = candidate_files(table, fs, self.keys, self.bounds)
        parts = [self._events(union, columns)]
        if files:
            parts.append(self._old_rows(table, table_arrow, mapping, files, batch_keys, union, columns,
                                        None if tracked is None else tracked[0]))
        tombs = self._tombstones(batch_keys, union)
        if tombs is not None:
            parts.append(tombs)
        combined = parts[0]
        for part in parts[1:]:
            combined = combined.unionByName(part)
        out = self._out_schema(union, columns)
        placer = history_placer(columns, self.keys, self.spec.tracked_columns(columns), self.spec.ignore_null_updates,
                                arrow_schema(out))
        key_columns = [F.col(quote(k)) for k in self.keys]
        results = combined.repartition(*key_columns).sortWithinPartitions(*key_columns).mapInArrow(
            placer, out).persist(StorageLevel.MEMORY_AND_DISK)
        written: List[DataFile] = []
        try:
            file_rows: List[Any] = []
            by_id = {f.file_id: f for f in files}
            if files:
                writer = positions_writer(dropper, {f.file_id: (f.path, f.add, f.num_records()) for f in files},
                                          arrow_schema(_struct(DROP_RESULT_COLUMNS)))
                file_rows = [r.asDict() for r in results.where(F.col(KIND) == "delete").select(
                    FILE_ID, POSITION).repartition(F.col(FILE_ID)).mapInArrow(
                    writer, _struct(DROP_RESULT_COLUMNS)).collect()]
            removes, readds, rewritten_files, tasks_wrote = dropped_files(
                file_rows, {f.file_id: f.add for f in files}, int(time.time() * 1000), mapping,
                lambda file_id: num_records(by_id[file_id], fs))
            written += tasks_wrote  # deleted below unless the commit lands
            versions = results.where(F.col(KIND) == "write")
            rewritten = versions.where(F.col(REWRITE)).count()
            selected = [F.col(quote(f.name)) for f in table_arrow]
            written_schema = table_arrow
            if tracked is not None:  # PROTOCOL.md "Row Tracking": NULL commit version -> the new file's default
                selected += [F.col(ROW_ID).alias(tracked[0]), F.lit(None).cast("long").alias(tracked[1])]
                written_schema = pa.schema(list(table_arrow) + [pa.field(c, pa.int64()) for c in tracked])
            partition_by = list(table.metadata().partition_columns or [])
            contract = self.store.write_contract(list(table_arrow.names))
            new_files = write_files(versions.select(*selected), self.batch_id, written_schema, partition_by,
                                    self.store, path, self.options, contract)
            if mapping is not None:
                new_files = [DataFile(f.path, f.size, f.num_records, f.stats,
                                      mapping.physical_partition_values(f.partition_values), f.null_counts)
                             for f in new_files]
            written += new_files
            if not file_rows and not new_files:
                return NOTHING
            check_not_null(path, table, new_files, None)
            deleted = sum(int(r["deleted"]) for r in file_rows)
            inserted = sum(f.num_records for f in new_files)
            crash_point("delta.before_merge")
            return commit_merge(table, path, self.options, fs, removes, readds, rewritten_files + new_files, written,
                                txns, info=info, counts=(deleted - rewritten, rewritten, inserted - rewritten),
                                with_dvs=dropper.with_dvs)
        finally:
            if written:
                delete_files(path, self.options, written)
            results.unpersist()

    def _union_schema(self, columns: Sequence[str], table_arrow: Any) -> Any:
        """The placer's input: :data:`KIND`, file, position, row id, the data columns (the batch's types
        where it stores them, else the table's), ``__START_AT``/``__END_AT``, the event's columns."""
        from pyspark.sql.pandas.types import from_arrow_type
        from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType

        seq = self.events.schema[SEQ].dataType
        data = [StructField(c, self.events.schema[c].dataType if c in self.stored
                            else from_arrow_type(table_arrow.field(c).type), True) for c in columns]
        return StructType([StructField(KIND, StringType()), StructField(FILE_ID, LongType()),
                           StructField(POSITION, LongType()), StructField(ROW_ID, LongType())] + data
                          + [StructField(START_COLUMN, seq), StructField(END_COLUMN, seq), StructField(SEQ, seq),
                             StructField(DELETE_COLUMN, BooleanType()), StructField(OFFSET, LongType())])

    def _out_schema(self, union: Any, columns: Sequence[str]) -> Any:
        from pyspark.sql.types import BooleanType, StructField, StructType

        names = [KIND, FILE_ID, POSITION, ROW_ID] + list(columns) + [START_COLUMN, END_COLUMN]
        return StructType([union[n] for n in names] + [StructField(REWRITE, BooleanType())])

    def _events(self, union: Any, columns: Sequence[str]) -> Any:
        """The batch's events in the placer's input schema."""
        from pyspark.sql import functions as F

        present = set(self.events.columns)
        return self.events.select(*[
            F.lit("event").alias(f.name) if f.name == KIND
            else F.col(quote(f.name)).cast(f.dataType).alias(f.name) if f.name in present
            else F.lit(None).cast(f.dataType).alias(f.name) for f in union])

    def _old_rows(self, table: Any, table_arrow: Any, mapping: Any, files: Sequence[CandidateFile], batch_keys: Any,
                  union: Any, columns: Sequence[str], row_id_column: Optional[str]) -> Any:
        """The live rows of the batch's keys (two reads by the executors: key columns, then matched rows)."""
        from pyspark.sql.types import LongType, StructField, StructType

        path = self.store.table_path
        key_out = StructType([StructField(FILE_ID, LongType()), StructField(POSITION, LongType())]
                             + [StructField(k, self.events.schema[k].dataType, True) for k in self.keys])
        scanner = key_scanner(path, table.table_uri, self.options, table_arrow, self.keys, arrow_schema(key_out), mapping,
                              with_sequence=False)
        matched = self._shipped(files).mapInArrow(scanner, key_out).hint(JOIN).join(
            batch_keys, on=self.keys, how="left_semi").select(FILE_ID, POSITION)
        reader = row_reader(path, table.table_uri, self.options, table_arrow, {f.file_id: (f.path, f.add) for f in files},
                            columns, arrow_schema(union), mapping, row_id_column)
        return matched.repartition(FILE_ID).mapInArrow(reader, union)

    def _tombstones(self, batch_keys: Any, union: Any) -> Any:
        """Every recorded delete of the batch's keys ('tomb', its sequence in ``__kg_seq``), scanned by the
        executors on the tombstones' latest version; None when there are none to read."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import LongType, StructField, StructType

        tombs = None if self.tombstones is None else self.tombstones.current()
        if tombs is None:
            return None
        fs = table_filesystem(self.tombstones.path, self.options)  # type: ignore[union-attr]
        files = candidate_files(tombs, fs, self.keys, self.bounds)
        if not files:
            return None
        out = StructType([StructField(FILE_ID, LongType()), StructField(POSITION, LongType())]
                         + [StructField(k, self.events.schema[k].dataType, True) for k in self.keys]
                         + [StructField(TARGET_SEQ, self.events.schema[SEQ].dataType, True)])
        scanner = key_scanner(self.tombstones.path, tombs.table_uri, self.options,  # type: ignore[union-attr]
                              pa_schema(tombs), self.keys, arrow_schema(out), None)
        found = self._shipped(files).mapInArrow(scanner, out).hint(JOIN).join(batch_keys, on=self.keys,
                                                                               how="left_semi")
        return found.select(*[
            F.lit("tomb").alias(f.name) if f.name == KIND
            else F.col(quote(f.name)).alias(f.name) if f.name in self.keys
            else F.col(TARGET_SEQ).alias(f.name) if f.name == SEQ
            else F.lit(None).cast(f.dataType).alias(f.name) for f in union])

    def _shipped(self, files: Sequence[CandidateFile]) -> Any:
        """``files`` as a DataFrame of ``(file_id, path, add)``, a few files per task."""
        return shipped_files(self.events.sparkSession, files)


def _struct(columns: Sequence[Tuple[str, str]]) -> Any:
    from pyspark.sql.types import StructField, StructType, _parse_datatype_string

    return StructType([StructField(name, _parse_datatype_string(kind), True) for name, kind in columns])
