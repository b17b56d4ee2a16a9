"""How a Spark task drops rows from one touched target file: a new deletion vector, or a rewritten file.

The keyed MERGE as Spark tasks (:mod:`kafka_group.delta.keyed.task_merge`) ends, per touched file, with the
physical positions of the rows the batch replaces or deletes. :class:`RowDropper` turns those into the
file's new state, in the task that holds the file's matches:

- on a table whose deletion vectors are enabled (``delta.enableDeletionVectors`` true and the
  ``deletionVectors`` feature: what delta-spark checks before writing one), a new deletion vector
  (the file's old one united with the positions) in a DV file; the driver commits a ``remove`` of the
  old logical file and an ``add`` of the same path with the new DV;
- otherwise copy-on-write: the file's live rows (its old deletion vector honoured) but the dropped
  ones, read under the column mapping's physical names, written as new files by the append path's
  writer (:func:`~kafka_group.delta.files.parquet_writer.write_partitioned`: same partition values,
  statistics as appends write them, the table's ``dataSkippingNumIndexedCols`` /
  ``dataSkippingStatsColumns`` / ``targetFileSize``); the driver commits a ``remove`` of the old file
  and an ``add`` of each new one;
- either way, a file all of whose rows are then deleted is only removed.

:meth:`RowDropper.old_rows` reads the rows at given positions (the live rows an upsert replaces): the
columns the upsert keeps from them (``ignore_null_updates``, columns the batch does not store).

Which tables the MERGE as Spark tasks takes (:func:`task_merge_refusal`): a table with the
``deletionVectors`` feature as the driver's own MERGE does (row tracking only where deletion
vectors are written: copy-on-write would have to materialize every copied row's id); a table without
it only where delta-rs's MERGE, its driver path, would take it too
(:func:`~kafka_group.delta.keyed.refusals.refuse_unmergeable`), and not with the change data feed
enabled (no ``_change_data`` files are written here: such a table stays with delta-rs's MERGE on the
driver), nor with the legacy writer versions 3 and 4 (CHECK constraints, generated columns, the
change data feed, which delta-rs's MERGE enforces), nor on a store the connector does not commit to
itself. Nothing here imports pyspark; the dropper is pickled into the tasks.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from kafka_group.delta.files.commit_files import DataFile
from kafka_group.delta.keyed.change_rules import SEQUENCE_COLUMN
from kafka_group.delta.keyed.own_merge import needs_own_merge, own_merge_refusal, readd_with_dv, remove_of
from kafka_group.delta.keyed.own_plan import read_file
from kafka_group.delta.keyed.refusals import refuse_unmergeable
from kafka_group.delta.log.actions import protocol_refusal
from kafka_group.delta.log.commit import holds_body, own_commit_refusal, put_if_absent
from kafka_group.delta.log.deletion_vectors import DeletionVector, dv_file_bytes, new_file_descriptor, read_deleted_rows
from kafka_group.delta.log.dv_bitmap import serialize_bitmap, union_rows
from kafka_group.delta.rules.column_mapping import ColumnMapping, column_mapping_of
from kafka_group.delta.rules.table_properties import stats_columns, target_file_size
from kafka_group.errors import OffsetStoreError, UnsupportedTableFeatureError

__all__ = ["FILE_ID", "OLD_PREFIX", "RowDropper", "deletion_vectors_enabled", "dropped_files", "kept_columns",
           "live_rows", "refuse_task_merge", "task_merge_refusal"]

#: The tasks' column of a candidate file's number (:mod:`kafka_group.delta.keyed.task_merge`).
FILE_ID = "__kg_file"
#: The prefix of the result columns that carry a replaced row's old value of a column.
OLD_PREFIX = "__kg_old_"
_DEFAULT_INDEXED_COLUMNS = 32


def deletion_vectors_enabled(table: Any) -> bool:
    """Whether a writer may write deletion vectors into ``table``: the feature and the property."""
    config = table.metadata().configuration or {}
    return needs_own_merge(table) and str(config.get("delta.enableDeletionVectors", "false")).lower() == "true"


def task_merge_refusal(table: Any, table_path: str) -> Optional[str]:
    """Why the SCD1 MERGE as Spark tasks does not take ``table`` at ``table_path`` (None: it does)."""
    protocol = table.protocol()
    why = own_merge_refusal(table, 1, row_tracking=deletion_vectors_enabled(table))
    if why is None and not needs_own_merge(table):  # only what delta-rs's MERGE, its driver path, takes too
        try:
            refuse_unmergeable(table_path, table)
        except UnsupportedTableFeatureError:
            why = "without deletion vectors, what delta-rs's MERGE refuses too"
        if int(protocol.min_writer_version) in (3, 4):
            why = f"writer version {protocol.min_writer_version} without deletion vectors"
    return why or own_commit_refusal(table_path) or protocol_refusal(
        int(protocol.min_reader_version), int(protocol.min_writer_version), protocol.reader_features or [],
        protocol.writer_features or [])


def refuse_task_merge(table: Any, table_path: str) -> None:
    """Raise :class:`~kafka_group.errors.UnsupportedTableFeatureError` unless :func:`task_merge_refusal` is None
    (the table changed since the batch chose the tasks)."""
    why = task_merge_refusal(table, table_path)
    if why is not None:
        raise UnsupportedTableFeatureError(
            f"DeltaSink(keys=...) cannot merge into offsets.table '{table_path}' as Spark tasks: it has {why}. "
            "Nothing was written and no offset moved; the query's next run merges on the driver where it can")


@dataclass(frozen=True)
class RowDropper:
    """What a task needs to drop rows from a touched file of one table version (pickled into the tasks:
    storage options included, never logged)."""

    table_path: str
    table_uri: str
    storage_options: Mapping[str, str] = field(repr=False)  # secrets: never in a repr, a log or an error
    with_dvs: bool
    schema: Any
    """The table's logical Arrow schema."""
    mapping: Optional[ColumnMapping]
    partition_by: Tuple[str, ...]
    indexed_columns: int
    stats_columns: Optional[Tuple[str, ...]]
    target_file_size: Optional[int]
    batch_id: int

    @classmethod
    def of(cls, table: Any, table_path: str, storage_options: Mapping[str, str], batch_id: int) -> "RowDropper":
        """The dropper for ``table``'s loaded version (a delta-rs ``DeltaTable``). Caller: the driver."""
        import pyarrow as pa

        config = dict(table.metadata().configuration or {})
        try:
            indexed = int(config.get("delta.dataSkippingNumIndexedCols") or _DEFAULT_INDEXED_COLUMNS)
        except ValueError:
            indexed = _DEFAULT_INDEXED_COLUMNS
        stats = stats_columns(config)
        return cls(table_path, table.table_uri, dict(storage_options), deletion_vectors_enabled(table),
                   pa.schema(table.schema().to_arrow()),
                   column_mapping_of(json.loads(table.schema().to_json()), config, table_path),
                   tuple(table.metadata().partition_columns or []), indexed, None if stats is None else tuple(stats),
                   target_file_size(config), batch_id)

    def drop(self, fs: Any, path: str, add: Mapping[str, Any], num_records: Optional[int], positions: Any,
             whole: Optional[Any] = None) -> Dict[str, Any]:
        """Drop the rows at ``positions`` (physical, a numpy ``int64`` array) from the file ``path`` (its
        live ``add``; ``num_records``: its statistics' row count, None when they have none, checked against
        the file's own); ``whole``: the file read by :meth:`read` already.

        Returns ``all_deleted`` (the file is only removed), else with deletion vectors ``dv`` (the new
        descriptor's JSON), ``dv_path`` and ``dv_size``, without them ``rewritten`` (a JSON list of the
        new files: ``path``, ``size``, ``num_records``, ``stats``, ``partition_values``, logical names).
        """
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        if whole is None and not self.with_dvs:  # copy-on-write reads the whole file anyway
            whole = self.read(fs, path, add)
        # the file's own row count, not the log's statistics: a log that understates it would have every
        # row taken for deleted, and the file removed with rows no change touched
        physical = whole.num_rows if whole is not None else physical_rows(fs, path)
        if num_records is not None and physical != num_records:
            raise OffsetStoreError(f"the table's file {path!r} holds {physical} rows, but its statistics say "
                                   f"{num_records} (numRecords): the table's log does not describe its file. Nothing "
                                   "was committed and no offset moved; repair the table (delta-spark: FSCK REPAIR "
                                   "TABLE, or rewrite the file) before the query runs again")
        old = read_deleted_rows(DeletionVector.of(add.get("deletionVector")), fs, self.table_uri,
                                num_records=physical)
        rows = union_rows(old, positions)
        if len(rows) >= physical:
            return {"all_deleted": True}
        if self.with_dvs:
            bitmap = serialize_bitmap(rows)
            dv = new_file_descriptor(uuid.uuid4(), bitmap, len(rows))
            body = dv_file_bytes(bitmap)
            # False: a UUID collision, or the S3 client's retry of this PUT found its first attempt
            if not (put_if_absent(self.table_path, self.storage_options, dv.relative_path(), body)
                    or holds_body(fs, dv.relative_path(), body)):
                raise OffsetStoreError(f"the deletion vector file {dv.relative_path()} exists already (a UUID "
                                       "collision); nothing was committed, the next attempt names another")
            return {"all_deleted": False, "dv": json.dumps(dv.to_json()), "dv_path": dv.relative_path(),
                    "dv_size": len(body)}
        from kafka_group.delta.files.parquet_writer import write_partitioned

        assert whole is not None  # read above (copy-on-write)
        kept = whole.filter(pc.invert(pc.is_in(pa.array(np.arange(whole.num_rows, dtype=np.int64)),
                                               value_set=pa.array(rows))))
        written = write_partitioned(kept.cast(self.schema).to_batches(), filesystem=fs, schema=self.schema,
                                    batch_id=self.batch_id, partition_by=list(self.partition_by),
                                    indexed_columns=self.indexed_columns, mapping=self.mapping,
                                    target_file_size=self.target_file_size,
                                    stats_columns=None if self.stats_columns is None else list(self.stats_columns))
        return {"all_deleted": False, "rewritten": json.dumps([
            {"path": w.path, "size": w.size, "num_records": w.num_records, "stats": w.stats,
             "partition_values": w.partition_values} for w in written])}

    def read(self, fs: Any, path: str, add: Mapping[str, Any], columns: Optional[Sequence[str]] = None) -> Any:
        """The file's rows (``columns``, else all), every physical row, in the table's logical types."""
        return read_file(fs, path, self.schema, add, columns, self.mapping)

    def old_rows(self, fs: Any, path: str, add: Mapping[str, Any], positions: Any, columns: Sequence[str],
                 whole: Optional[Any] = None) -> Any:
        """The ``columns`` of the file's rows at ``positions`` (in that order), named :data:`OLD_PREFIX` + column."""
        import pyarrow as pa

        rows = (self.read(fs, path, add, columns) if whole is None else whole.select(list(columns)))
        taken = rows.take(pa.array(positions, pa.int64()))
        return taken.rename_columns([OLD_PREFIX + c for c in columns])

    def needs_whole_file(self) -> bool:
        """Whether dropping rows reads the whole file anyway (copy-on-write)."""
        return not self.with_dvs


def physical_rows(fs: Any, path: str) -> int:
    """The rows the Parquet file at ``path`` holds (its footer's count; one small read)."""
    import pyarrow.parquet as pq

    with fs.open_input_file(path) as handle:
        return int(pq.ParquetFile(handle).metadata.num_rows)


def dropped_files(rows: Sequence[Mapping[str, Any]], adds: Mapping[int, Mapping[str, Any]], now_ms: int,
                  mapping: Optional[ColumnMapping], num_records: Callable[[int], int]
                  ) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]], List[DataFile], List[DataFile]]:
    """The commit's actions of the touched files, from the tasks' 'file' rows (:meth:`RowDropper.drop`'s
    values with :data:`FILE_ID`): the ``remove`` of each, the re-``add`` with its new deletion vector, the
    rewritten files (``partitionValues`` under ``mapping``'s physical names), and every file the tasks
    wrote (to delete if nothing commits). ``adds``: file id -> its live ``add``; ``num_records(file_id)``:
    its physical row count. Caller: the driver."""
    removes: List[Dict[str, Any]] = []
    readds: List[Dict[str, Any]] = []
    rewritten: List[DataFile] = []
    written: List[DataFile] = []
    for row in rows:
        add = adds[int(row[FILE_ID])]
        removes.append(remove_of(add, now_ms))
        if row.get("dv_path"):
            written.append(DataFile(row["dv_path"], int(row["dv_size"]), 0))
            if not row.get("all_deleted"):
                readds.append(readd_with_dv(add, json.loads(row["dv"]), num_records(int(row[FILE_ID]))))
        for f in json.loads(row.get("rewritten") or "[]"):
            values = f["partition_values"] if mapping is None else mapping.physical_partition_values(f["partition_values"])
            rewritten.append(DataFile(f["path"], int(f["size"]), int(f["num_records"]), f["stats"], values))
    return removes, readds, rewritten, written + rewritten


def kept_columns(schema: Any, stored: Sequence[str], keys: Sequence[str], ignore_null_updates: bool) -> List[str]:
    """The table columns (of the Arrow ``schema``) whose value an upsert may keep from the row it replaces:
    those the batch does not store, and with ``ignore_null_updates`` the stored ones but the keys (a
    NULL takes the row's value). ``__SEQUENCE`` is always the change's."""
    return [c for c in schema.names if c != SEQUENCE_COLUMN and c not in keys
            and (c not in stored or ignore_null_updates)]


def live_rows(add: Mapping[str, Any]) -> int:
    """A live file's rows (its ``numRecords`` less its deletion vector's cardinality; 0 unknown)."""
    try:
        records = int(json.loads(add.get("stats") or "{}")["numRecords"])
    except (KeyError, TypeError, ValueError):
        return 0
    return records - int((add.get("deletionVector") or {}).get("cardinality") or 0)
