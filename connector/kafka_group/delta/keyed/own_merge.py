"""The keyed sink's own SCD1 MERGE, for tables with deletion vectors, committed by the connector itself.

delta-rs 1.6.6's MERGE writes no deletion vectors; a table with the ``deletionVectors`` feature
(delta-spark and Databricks enable it by default) gets its keyed batches from here instead. The
rows it leaves are those of the delta-rs path's :func:`~kafka_group.delta.keyed.change_rules.scd1_clauses`
(tests/integration/test_cdc_deletion_vectors.py compares both on the same change batches):

- a change's key matches a live target row when every key column is equal (NULL matches nothing);
- a matched row whose ``__SEQUENCE`` is NULL, below or equal to the change's sequence (a tie: the
  change is the later event) is deleted (a delete event) or replaced (an upsert: the stored columns
  and ``__SEQUENCE`` from the change, the table's other columns kept); a row with a newer one is left
  as it is;
- an upsert whose key matches no live row is inserted.

Plan (:func:`~kafka_group.delta.keyed.own_plan.plan_scd1`): the change set (one event per key, in memory) against the target's files
whose key statistics (``minValues``/``maxValues`` of each key column delta-rs lists) can hold a
changed key; only those files are read, first their key and ``__SEQUENCE`` columns, the whole row
only for the rows an upsert replaces. Each file is read honouring its existing deletion vector
(:mod:`kafka_group.delta.log.deletion_vectors`), positions being the rows' physical indexes.

Write (:func:`own_merge`), PROTOCOL.md "Deletion Vectors" and "Add File and Remove File":
where ``delta.enableDeletionVectors`` is ``true``, each touched file gets a NEW deletion vector
(its old one united with the rows matched now) in a DV file, and the commit holds a ``remove`` of
the old logical file (path with its old DV) and an ``add`` of the same path with the new one
(``stats.tightBounds`` false, "Per-file Statistics"); a file whose rows are all deleted is removed.
Without it, a touched file is copied without its deleted rows (copy-on-write). Replaced and
inserted rows go into new files by the append path's writer
(:func:`~kafka_group.delta.files.parquet_writer.write_partitioned`: statistics included).

Commit: the actions of :func:`~kafka_group.delta.log.actions.commit_actions` (commitInfo with the
in-commit timestamp where enabled, the new files, the ``txn`` of every topic-partition and of the
owner: data and offsets in ONE commit), plus the removes and DV re-adds, put in
``_delta_log/<version + 1>.json`` if absent (:func:`~kafka_group.delta.log.commit.put_if_absent`).
A lost race returns None: the caller checks the offsets on the new version and plans again.

Column mapping (``name`` and ``id``, top-level primitive columns): the target's files are read and
the new files written under the physical names (with field ids), partition values and statistics
keyed by them (:mod:`kafka_group.delta.rules.column_mapping`, as the append path writes them).

Refused here (:func:`own_merge_refusal`, with the reason): SCD2 and row tracking (but on the MERGE as
Spark tasks, :mod:`kafka_group.delta.keyed.task_merge` and :mod:`kafka_group.delta.keyed.scd2_tasks`, which
write SCD2 and keep updated rows' ids), column mapping with
nested columns, the change data feed enabled, legacy invariants at any depth (nested fields'
included: :func:`invariant_columns`), and any feature outside
:data:`_OWN_MERGE_FEATURES`.

Caller: :class:`~kafka_group.delta.keyed.commit.KeyedOffsetStore` on the driver, one batch at a time.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
import urllib.parse
import uuid
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from kafka_group.delta.files.commit_files import DataFile, delete_files
from kafka_group.delta.keyed.own_plan import FilePlan, plan_scd1, read_file
from kafka_group.delta.log.actions import TableState, commit_actions, encode_actions, protocol_refusal, row_tracking_on
from kafka_group.delta.log.checkpoints import checkpoint_if_due
from kafka_group.delta.log.commit import holds_body, own_commit_refusal, put_if_absent
from kafka_group.delta.log.deletion_vectors import dv_file_bytes, new_file_descriptor
from kafka_group.delta.log.dv_bitmap import serialize_bitmap, union_rows
from kafka_group.delta.log.snapshot import commit_path, last_in_commit_timestamp, row_id_high_water_mark
from kafka_group.delta.rules.column_mapping import column_mapping_of
from kafka_group.delta.storage.table_location import table_filesystem
from kafka_group.errors import OffsetStoreError, UnsupportedTableFeatureError
from kafka_group.faults import crash_point

__all__ = ["commit_merge", "invariant_columns", "needs_own_merge", "own_merge", "own_merge_refusal", "readd_with_dv",
           "refuse_own_merge", "remove_of", "row_tracking_columns"]

logger = logging.getLogger(__name__)

#: The table features this MERGE honours (``appendOnly`` and ``invariants`` as delta-spark lists
#: them on every table-features protocol; their properties are checked in :func:`own_merge_refusal`).
_OWN_MERGE_FEATURES = frozenset({"deletionVectors", "appendOnly", "invariants", "timestampNtz", "changeDataFeed",
                                  "columnMapping"})
#: What the MERGE as Spark tasks honours beside: row tracking (updated rows keep their ids).
_ROW_TRACKING_FEATURES = frozenset({"rowTracking", "domainMetadata"})
_DEFAULT_INDEXED_COLUMNS = 32


def needs_own_merge(table: Any) -> bool:
    """Whether a keyed batch into ``table`` (a delta-rs ``DeltaTable``) goes through this module."""
    protocol = table.protocol()
    return "deletionVectors" in set(protocol.reader_features or []) | set(protocol.writer_features or [])


def own_merge_refusal(table: Any, scd_type: int, *, row_tracking: bool = False) -> Optional[str]:
    """Why this module may not merge into ``table`` (None: it may). ``row_tracking``: the MERGE as Spark
    tasks, which keeps updated rows' ids (:func:`row_tracking_columns`) and writes SCD2 too, asks."""
    protocol = table.protocol()
    config = table.metadata().configuration or {}
    features = set(protocol.reader_features or []) | set(protocol.writer_features or [])
    honoured = _OWN_MERGE_FEATURES | (_ROW_TRACKING_FEATURES if row_tracking else frozenset())
    problems = [f"the '{f}' table feature" for f in sorted(features - honoured)]
    if row_tracking and "rowTracking" in features and row_tracking_columns(config) is None:
        problems.append("row tracking without its materialized column names in the table's properties")
    if row_tracking and "rowTracking" in features and "columnMapping" in features:
        problems.append("row tracking with column mapping (together not written yet)")
    if scd_type != 1 and not row_tracking:
        problems.append("stored_as_scd_type=2 (the own MERGE applies SCD1 only so far)")
    if str(config.get("delta.columnMapping.mode", "none")).lower() != "none" and any(
            type(f.type).__name__ != "PrimitiveType" for f in table.schema().fields):
        problems.append("column mapping with a nested (struct, array or map) column")
    if str(config.get("delta.appendOnly", "false")).lower() == "true":
        problems.append("delta.appendOnly = true")
    if str(config.get("delta.enableChangeDataFeed", "false")).lower() == "true":
        problems.append("the change data feed enabled (the own MERGE writes no _change_data files)")
    invariants = invariant_columns(json.loads(table.schema().to_json()))
    if invariants:  # legacy invariants, at any depth: this MERGE does not evaluate them
        problems.append(f"legacy invariants (delta.invariants) on {', '.join(invariants)}")
    return ", ".join(problems) or None


def row_tracking_columns(config: Mapping[str, Optional[str]]) -> Optional[Tuple[str, str]]:
    """The materialized row id and row commit version columns of a table with row tracking (PROTOCOL.md,
    "Row Tracking": ``delta.rowTracking.materializedRowIdColumnName`` and
    ``...materializedRowCommitVersionColumnName``); None when either is missing."""
    row_id = config.get("delta.rowTracking.materializedRowIdColumnName")
    version = config.get("delta.rowTracking.materializedRowCommitVersionColumnName")
    return (row_id, version) if row_id and version else None


def invariant_columns(schema_json: Mapping[str, Any]) -> List[str]:
    """The columns of a Delta schema (its JSON as a dict) that carry a legacy invariant
    (``delta.invariants`` in the field's metadata), at any depth: ``n``, ``s.x``, ``items[].x``,
    ``m{}.x``."""
    found: List[str] = []

    def walk(kind: Any, path: str) -> None:
        if not isinstance(kind, Mapping):
            return
        if kind.get("type") == "struct":
            for f in kind.get("fields") or []:
                if not isinstance(f, Mapping):
                    continue
                here = f"{path}.{f.get('name')}" if path else str(f.get("name"))
                if isinstance(f.get("metadata"), Mapping) and "delta.invariants" in f["metadata"]:
                    found.append(here)
                walk(f.get("type"), here)
        elif kind.get("type") == "array":
            walk(kind.get("elementType"), path + "[]")
        elif kind.get("type") == "map":
            walk(kind.get("keyType"), path + "{key}")
            walk(kind.get("valueType"), path + "{}")

    walk(schema_json, "")
    return found


def refuse_own_merge(table: Any, table_path: str, *, row_tracking: bool = False) -> None:
    """Raise :class:`~kafka_group.errors.UnsupportedTableFeatureError` unless the connector may merge into
    ``table`` and commit itself (:func:`own_merge_refusal`, the store, the protocol)."""
    protocol = table.protocol()
    why = own_merge_refusal(table, 1, row_tracking=row_tracking) or own_commit_refusal(table_path) or protocol_refusal(
        int(protocol.min_reader_version), int(protocol.min_writer_version), protocol.reader_features or [],
        protocol.writer_features or [])
    if why is not None:
        raise UnsupportedTableFeatureError(
            f"DeltaSink(keys=...) cannot merge into offsets.table '{table_path}': it has {why}. Nothing was "
            "written and no offset moved. Land into a new table (the first batch creates one without them)")


def own_merge(
    table: Any,
    table_path: str,
    storage_options: Mapping[str, str],
    changes: Any,
    keys: Sequence[str],
    stored: Sequence[str],
    txns: Sequence[Tuple[str, int]],
    *,
    info: Mapping[str, Any],
) -> Optional[int]:
    """Merge ``changes`` (SCD1) into ``table``'s loaded version and commit it with ``txns``.

    Returns
    -------
    int or None
        The version created (a conditional PUT that the S3 client retried after its first attempt
        landed counts: the commit read back is this one); None when another writer created it first
        (nothing of this attempt is visible; its files are deleted; the caller checks the offsets
        again and replans), or when that commit could not be read back (its files are kept).

    Raises
    ------
    UnsupportedTableFeatureError
        The table has what this MERGE does not honour (:func:`own_merge_refusal`).
    OffsetStoreError
        A file or deletion vector could not be read or written (nothing is committed), or the
        store failed the commit's PUT, which may have landed: the files are kept, and the next
        run's offset check lands the batch or skips it.
    """
    from kafka_group.delta.files.parquet_writer import write_partitioned

    refuse_own_merge(table, table_path)
    fs = table_filesystem(table_path, storage_options)
    version = int(table.version())
    config = dict(table.metadata().configuration or {})
    partition_by = list(table.metadata().partition_columns or [])
    mapping = column_mapping_of(json.loads(table.schema().to_json()), config, table_path)
    plan = plan_scd1(table, fs, table.table_uri, changes, keys, stored, mapping)
    with_dvs = str(config.get("delta.enableDeletionVectors", "false")).lower() == "true"
    now_ms = int(time.time() * 1000)
    written: List[DataFile] = []
    try:
        schema = plan.new_rows.schema
        rows = [plan.new_rows]
        removes, readds = [], []
        for f in plan.files:
            removes.append(remove_of(f.add, now_ms))
            remaining = f.num_records - len(_deleted_after(f))
            if remaining == 0:
                continue
            if with_dvs:
                readd, dv_file, body = _with_new_dv(f)
                # False: a UUID collision, or the S3 client's retry of this PUT found its first attempt
                if not (put_if_absent(table_path, storage_options, dv_file.path, body)
                        or holds_body(fs, dv_file.path, body)):  # never another's to delete
                    raise OffsetStoreError(f"the deletion vector file {dv_file.path} exists already (a UUID collision); "
                                           "nothing was committed, the next attempt names another")
                written.append(dv_file)
                readds.append(readd)
            else:  # copy-on-write: the file's live rows that this MERGE does not touch
                import numpy as np
                import pyarrow as pa
                import pyarrow.compute as pc

                path = urllib.parse.unquote(f.add["path"])
                whole = read_file(fs, path, schema, f.add, None, mapping)
                mask = pc.invert(pc.is_in(pa.array(np.arange(whole.num_rows, dtype=np.int64)),
                                          value_set=pa.array(_deleted_after(f))))
                rows.append(whole.filter(mask).cast(schema))
        _refuse_nulls(table_path, plan.new_rows, pa_schema(table))
        try:
            indexed = int(config.get("delta.dataSkippingNumIndexedCols") or _DEFAULT_INDEXED_COLUMNS)
        except ValueError:
            indexed = _DEFAULT_INDEXED_COLUMNS
        stats = [c.strip() for c in (config.get("delta.dataSkippingStatsColumns") or "").split(",") if c.strip()]
        import pyarrow as pa

        new_files = [DataFile(w.path, w.size, w.num_records, w.stats, w.partition_values if mapping is None
                              else mapping.physical_partition_values(w.partition_values))
                     for w in write_partitioned(
                         pa.concat_tables(rows).to_batches(), filesystem=fs, schema=pa_schema(table),
                         batch_id=version + 1, partition_by=partition_by, indexed_columns=indexed,
                         stats_columns=stats or None, mapping=mapping)]
        written += new_files
        return commit_merge(table, table_path, storage_options, fs, removes, readds, new_files, written, txns,
                            info=info, counts=(plan.deleted, plan.updated, plan.inserted), with_dvs=with_dvs)
    finally:
        if written:
            delete_files(table_path, storage_options, written)


def commit_merge(table: Any, table_path: str, storage_options: Mapping[str, str], fs: Any,
                 removes: Sequence[Mapping[str, Any]], readds: Sequence[Mapping[str, Any]],
                 new_files: Sequence[DataFile], written: List[DataFile], txns: Sequence[Tuple[str, int]], *,
                 info: Mapping[str, Any], counts: Tuple[int, int, int], with_dvs: bool) -> Optional[int]:
    """Commit a MERGE planned on ``table``'s loaded version: the ``removes``, the re-``add``s with their
    new deletion vectors, the ``new_files`` and the ``txns``, as version + 1 if absent (:func:`own_merge`'s
    commit, shared with the MERGE as Spark tasks). ``counts``: rows deleted, updated and inserted.

    ``written`` are the files this attempt wrote (DV files and data files): emptied when they must stay
    (the commit landed, or may have); what is left in it the caller deletes.
    """
    version = int(table.version())
    protocol = table.protocol()
    config = dict(table.metadata().configuration or {})
    now_ms = int(time.time() * 1000)
    deleted, updated, inserted = counts
    state = TableState(version, frozenset(protocol.writer_features or []), config,
                       last_in_commit_timestamp=last_in_commit_timestamp(fs, version))
    if row_tracking_on(state):  # new files get fresh row ids past the mark (updated rows carry theirs materialized)
        state = dataclasses.replace(state, row_id_high_water_mark=row_id_high_water_mark(fs, version))
    actions = commit_actions(state, new_files, txns, now_ms=now_ms, operation="MERGE", info=info)
    actions[0]["commitInfo"].update({"isBlindAppend": False, "operationParameters": {
        "kafkaGroup.engine": "own", "deletedRows": str(deleted), "updatedRows": str(updated),
        "insertedRows": str(inserted)}})
    actions[1:1] = [{"remove": r} for r in removes] + [{"add": a} for a in readds]
    crash_point("delta.own_merge_written")
    body = encode_actions(actions)
    try:
        landed = put_if_absent(table_path, storage_options, commit_path(version + 1), body)
    except OffsetStoreError:
        written.clear()  # the commit may have landed and reference them: kept (VACUUM removes them if not)
        raise
    # False is another writer's commit, or this one's: the S3 client retries a PUT whose answer it lost,
    # and the retry's If-None-Match then finds the first attempt's object
    ours = landed or holds_body(fs, commit_path(version + 1), body)
    if ours is None:  # unreadable: it may be this commit, whose files must stay
        logger.warning("could not read version %d of %s to tell whose commit it is; keeping this MERGE's %d "
                       "files (VACUUM removes them if no version references them)", version + 1, table_path,
                       len(written))
        written.clear()
        return None
    if ours:
        written.clear()
        checkpoint_if_due(table, table_path, config, version + 1)
        logger.info("merged version %d of %s (own MERGE%s): %d deleted, %d updated, %d inserted", version + 1,
                    table_path, " with deletion vectors" if with_dvs else ", copy-on-write", deleted,
                    updated, inserted)
        return version + 1
    logger.info("own MERGE into %s lost version %d to another writer; checking offsets again", table_path,
                version + 1)
    return None


def pa_schema(table: Any) -> Any:
    """The table's logical Arrow schema (pyarrow)."""
    import pyarrow as pa

    return pa.schema(table.schema().to_arrow())


def _refuse_nulls(table_path: str, rows: Any, schema: Any) -> None:
    """Refuse NULLs in the table's NOT NULL top-level columns among the rows to write (an insert
    leaves the columns the change set does not store NULL; delta-rs's MERGE refuses those too)."""
    for f in schema:
        if not f.nullable and rows.column(f.name).null_count:
            raise OffsetStoreError(
                f"DeltaSink(keys=...): {rows.column(f.name).null_count} row(s) this batch writes into offsets.table "
                f"'{table_path}' have a NULL '{f.name}', which the table declares NOT NULL. Nothing of the batch "
                "landed and no offset moved: store the column (column_list) and fill it in the transform")


def _deleted_after(f: FilePlan) -> Any:
    """The rows of ``f`` deleted after this MERGE: its old deletion vector's and this MERGE's (a sorted
    numpy ``int64`` array)."""
    return union_rows(f.old_deleted, f.newly_deleted)


def remove_of(add: Mapping[str, Any], now_ms: int) -> Dict[str, Any]:
    """The ``remove`` of a live logical file: its path, partition values, size, DV and row ids kept."""
    remove: Dict[str, Any] = {"path": add["path"], "deletionTimestamp": now_ms, "dataChange": True,
                              "extendedFileMetadata": True, "partitionValues": add.get("partitionValues") or {},
                              "size": add.get("size")}
    for key in ("deletionVector", "baseRowId", "defaultRowCommitVersion", "tags", "stats"):
        if add.get(key) is not None:
            remove[key] = add[key]
    return remove


def _with_new_dv(f: FilePlan) -> Tuple[Dict[str, Any], DataFile, bytes]:
    """The re-``add`` of ``f`` with its new DV (old rows and this MERGE's), and the DV file to write
    (its description and bytes)."""
    rows = _deleted_after(f)
    bitmap = serialize_bitmap(rows)
    dv = new_file_descriptor(uuid.uuid4(), bitmap, len(rows))
    body = dv_file_bytes(bitmap)
    return readd_with_dv(f.add, dv.to_json(), f.num_records), DataFile(dv.relative_path(), len(body), 0), body


def readd_with_dv(add: Mapping[str, Any], dv: Mapping[str, Any], num_records: int) -> Dict[str, Any]:
    """The re-``add`` of a live file with its new deletion vector ``dv`` (its descriptor's JSON): the
    statistics' bounds loosened (``tightBounds`` false: PROTOCOL.md, "Per-file Statistics")."""
    readd = dict(add)
    readd["deletionVector"] = dict(dv)
    readd["dataChange"] = True
    try:
        stats = json.loads(readd.get("stats") or "{}")
    except ValueError:
        stats = {}
    stats["numRecords"] = num_records
    stats["tightBounds"] = False
    readd["stats"] = json.dumps(stats, separators=(",", ":"))
    return readd

