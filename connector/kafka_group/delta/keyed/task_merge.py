"""The keyed sink's SCD1 MERGE as Spark tasks: the functions the executors run, and the driver's plan.

The MERGE of :mod:`kafka_group.delta.keyed.own_merge` (same rules: :mod:`kafka_group.delta.keyed.own_plan`),
with its work on the executors instead of the driver
(:mod:`pyspark_kafka_group.sink.keyed.scd1_tasks` builds the Spark jobs from these):

1. the driver lists the target's candidate files from the log (:func:`candidate_files`: their ``add``
   actions, pruned by the batch's key bounds against each file's ``minValues``/``maxValues``) and ships
   only those, one row per file;
2. each task reads its share of the files' key columns and ``__SEQUENCE`` (:func:`key_scanner`:
   honouring the file's deletion vector, column mapping and partition values) and yields
   ``(file, row position, keys, sequence)``; Spark joins those rows with the batch's keys;
3. the matches, grouped by file, go to :func:`dv_writer`: per file, the rows a change fires on (its
   sequence at or above the row's, or the row has none) are dropped by the task
   (:class:`~kafka_group.delta.keyed.task_rewrite.RowDropper`: united with the file's old deletion
   vector in a new one, or the file rewritten without them where deletion vectors are off), which
   returns one row per touched file, the keys whose live row is newer than the change ("blocked":
   not written), and the upserted keys with the old columns they keep ("fired");
4. the new rows (the batch's upserts but the blocked ones) are written by the executors as the append
   path writes its files, and the driver commits removes, re-adds with the new deletion vectors, the
   new files and the offsets in one commit (:func:`~kafka_group.delta.keyed.own_merge.commit_merge`).

Memory: a scan task holds one file's key columns at a time; a DV task the matches of its files (a
batch's changes, spread over the tasks), and one file's deletion vector. Nothing here imports pyspark.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from kafka_group.delta.keyed.change_rules import DELETE_COLUMN, SEQ, SEQUENCE_COLUMN
from kafka_group.delta.keyed.key_rows import maximum_may_be_cut
from kafka_group.delta.keyed.own_plan import read_file
from kafka_group.delta.keyed.task_rewrite import FILE_ID, OLD_PREFIX, RowDropper
from kafka_group.delta.log.deletion_vectors import DeletionVector, read_deleted_rows
from kafka_group.delta.log.live_adds import live_adds
from kafka_group.delta.rules.column_mapping import ColumnMapping
from kafka_group.delta.storage.table_location import table_filesystem
from kafka_group.errors import OffsetStoreError

__all__ = ["FILE_ID", "POSITION", "ROW_ID", "TARGET_SEQ", "RESULT_COLUMNS", "CandidateFile", "candidate_files", "dv_writer",
           "key_scanner", "row_ids"]

#: The scan's columns beside the keys: the candidate file's number, the row's physical position, its sequence.
POSITION = "__kg_pos"
TARGET_SEQ = "__kg_target_seq"
#: Row tracking: a live row's stable row id (its materialized one, else its file's ``baseRowId`` + position).
ROW_ID = "__kg_row_id"
#: :func:`dv_writer`'s columns before the keys: ``kind`` is 'file' (a touched file), 'blocked' (a key whose
#: row is newer than its change) or 'fired' (an upserted key, its row's id under row tracking, and the old
#: columns it keeps); ``rewritten``: copy-on-write's new files (:mod:`kafka_group.delta.keyed.task_rewrite`).
RESULT_COLUMNS = (("kind", "string"), (FILE_ID, "long"), ("dv", "string"), ("dv_path", "string"),
                  ("dv_size", "long"), ("all_deleted", "boolean"), ("deleted", "long"), ("updated", "long"),
                  (ROW_ID, "long"), ("rewritten", "string"))


@dataclass(frozen=True)
class CandidateFile:
    """A target file the batch's keys may be in (as the driver ships it to the tasks)."""

    file_id: int
    path: str
    """Decoded, relative to the table."""
    add: Dict[str, Any]
    """Its live ``add`` action."""

    def num_records(self) -> Optional[int]:
        try:
            return int(json.loads(self.add.get("stats") or "{}")["numRecords"])
        except (KeyError, TypeError, ValueError):
            return None


def candidate_files(table: Any, fs: Any, keys: Sequence[str], bounds: Mapping[str, Tuple[Any, Any]]) -> List[CandidateFile]:
    """The live files of ``table``'s loaded version whose key statistics overlap the batch's ``bounds``
    (per key column: the batch's lowest and highest value); no statistics, or a key that is a partition
    column: kept. Pruned on integer, date and string keys (exact bounds, a possibly cut string maximum
    aside: :func:`~kafka_group.delta.keyed.key_rows.maximum_may_be_cut`). Caller: the driver."""
    import datetime

    import pyarrow as pa

    adds = pa.table(table.get_add_actions(flatten=True))
    partition_columns = set(table.metadata().partition_columns or [])
    keep = [True] * adds.num_rows
    for k in keys:
        low_high = bounds.get(k)
        if (low_high is None or k in partition_columns or f"min.{k}" not in adds.column_names
                or not isinstance(low_high[0], (int, str, datetime.date)) or isinstance(low_high[0], bool)
                or isinstance(low_high[0], datetime.datetime)):
            continue
        lowest, highest = low_high
        for i, (low, high) in enumerate(zip(adds.column(f"min.{k}").to_pylist(),
                                            adds.column(f"max.{k}").to_pylist())):
            if not keep[i] or low is None or high is None or type(low) is not type(lowest):
                continue
            keep[i] = not (highest < low or (lowest > high and not maximum_may_be_cut(high)))
    paths = [p for p, k in zip(adds.column("path").to_pylist(), keep) if k]
    live = live_adds(fs, int(table.version()), paths)
    out = []
    for i, path in enumerate(paths):
        if "://" in path or path.startswith("/") or ".." in path.split("/"):
            raise OffsetStoreError(f"the table's file {path!r} is not inside the table's folder (a shallow clone?): "
                                   "the keyed sink merges only into files of the table itself")
        out.append(CandidateFile(i, path, live[path]))
    return out


def key_scanner(table_path: str, table_uri: str, storage_options: Mapping[str, str], schema: Any,
                keys: Sequence[str], out_schema: Any, mapping: Optional[ColumnMapping],
                row_id_column: Optional[str] = None, *,
                with_sequence: bool = True) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The ``mapInArrow`` function of the scan: rows ``(file_id, path, add)`` in (one per candidate
    file), ``(FILE_ID, POSITION, keys..., TARGET_SEQ)`` out (``out_schema``), one row per live row;
    with ``row_id_column`` (the table's materialized row id column: row tracking) also :data:`ROW_ID`;
    without ``with_sequence`` (an SCD2 table has no ``__SEQUENCE``) no ``TARGET_SEQ``.

    ``schema``: the table's Arrow schema (a tombstones' table has ``__SEQUENCE`` too). Caller: Spark
    tasks (the closure is pickled, storage options included; never logged)."""
    options = dict(storage_options)
    wanted = list(keys) + ([SEQUENCE_COLUMN] if with_sequence else [])

    def scan(batches: Iterator[Any]) -> Iterator[Any]:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        fs = table_filesystem(table_path, options)
        for batch in batches:
            for file_id, path, add_json in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(),
                                               batch.column(2).to_pylist()):
                add = json.loads(add_json)
                rows = read_file(fs, path, schema, add, wanted, mapping)
                physical = rows.num_rows
                old = read_deleted_rows(DeletionVector.of(add.get("deletionVector")), fs, table_uri,
                                        num_records=physical)
                positions = pa.array(np.arange(physical, dtype=np.int64))
                columns = [pa.repeat(pa.scalar(file_id, pa.int64()), physical), positions]
                columns += [rows.column(c) for c in wanted]
                names = [FILE_ID, POSITION] + list(keys) + ([TARGET_SEQ] if with_sequence else [])
                if row_id_column is not None:
                    columns.append(row_ids(fs, path, row_id_column, add, positions))
                    names.append(ROW_ID)
                out = pa.table(columns, names=names)
                if len(old):
                    out = out.filter(pc.invert(pc.is_in(positions, value_set=pa.array(old))))
                yield from out.cast(out_schema).to_batches(max_chunksize=65536)

    return scan


def dv_writer(dropper: RowDropper, files: Mapping[int, Tuple[str, Mapping[str, Any], Optional[int]]],
              keys: Sequence[str], out_schema: Any, *,
              old_columns: Sequence[str] = ()) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The ``mapInArrow`` function that drops the replaced and deleted rows from the touched files: the
    matches in (``FILE_ID``, ``POSITION``, keys, ``TARGET_SEQ``, :data:`SEQ`, :data:`DELETE_COLUMN`; all
    of a file's in one task), :data:`RESULT_COLUMNS`, the keys and the old columns out.

    ``files``: file id -> (path, its live ``add``, its row count or None). Per touched file the task hands
    the positions a change fires on to ``dropper``
    (:meth:`~kafka_group.delta.keyed.task_rewrite.RowDropper.drop`: a new deletion vector, or the file
    rewritten without them). ``old_columns``: the columns an upsert keeps from the row it replaces,
    returned with its key in a 'fired' row (:data:`~kafka_group.delta.keyed.task_rewrite.OLD_PREFIX`
    + column). Caller: Spark tasks."""
    fired_names = list(keys) + [ROW_ID] + [OLD_PREFIX + c for c in old_columns]

    def write(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        import pyarrow.compute as pc

        parts = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
        if not parts:
            return
        matches = pa.concat_tables(parts)
        fs = table_filesystem(dropper.table_path, dropper.storage_options)
        for file_id in pc.unique(matches.column(FILE_ID)).to_pylist():
            mine = matches.filter(pc.equal(matches.column(FILE_ID), file_id))
            fired = pc.fill_null(pc.greater_equal(mine.column(SEQ), mine.column(TARGET_SEQ)), True)
            blocked = mine.filter(pc.invert(fired))
            if blocked.num_rows:
                yield _result(out_schema, keys, blocked, kind="blocked")
            hit = mine.filter(fired)
            if hit.num_rows == 0:
                continue
            path, add, num_records = files[file_id]
            whole = dropper.read(fs, path, add) if dropper.needs_whole_file() else None
            upserted = hit.filter(pc.invert(hit.column(DELETE_COLUMN)))
            # row tracking (an updated row keeps its id) or old columns: the upserted keys and what they keep
            if (ROW_ID in mine.column_names or old_columns) and upserted.num_rows:
                if old_columns:
                    old = dropper.old_rows(fs, path, add, upserted.column(POSITION), old_columns, whole)
                    for name in old.column_names:
                        upserted = upserted.append_column(name, old.column(name))
                yield _result(out_schema, fired_names, upserted, kind="fired")
            deletes = int(pc.sum(pc.cast(hit.column(DELETE_COLUMN), pa.int64())).as_py() or 0)
            counts = {"kind": "file", FILE_ID: file_id, "deleted": deletes, "updated": hit.num_rows - deletes}
            yield _row(out_schema, {**counts, **dropper.drop(fs, path, add, num_records,
                                                           hit.column(POSITION).to_numpy(), whole)})

    return write


def row_ids(fs: Any, path: str, column: str, add: Mapping[str, Any], positions: Any) -> Any:
    """Each row's stable row id (PROTOCOL.md, "Row Tracking"): the materialized ``column`` where the file
    has it and it is not NULL, else the file's ``baseRowId`` plus the row's position."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    base = add.get("baseRowId")
    if base is None:
        raise OffsetStoreError(f"the table's file {path!r} has no baseRowId, though the table tracks row ids: "
                               "the keyed sink wrote nothing and moved no offset")
    fresh = pc.add(positions, pa.scalar(int(base), pa.int64()))
    with fs.open_input_file(path) as handle:
        parquet = pq.ParquetFile(handle)
        if column not in parquet.schema_arrow.names:
            return fresh
        stored = parquet.read(columns=[column]).column(column).cast(pa.int64())
    return pc.coalesce(stored, fresh)


def _row(schema: Any, values: Mapping[str, Any]) -> Any:
    import pyarrow as pa

    return pa.RecordBatch.from_pydict({f.name: [values.get(f.name)] for f in schema}, schema=schema)


def _result(schema: Any, keys: Sequence[str], rows: Any, *, kind: str) -> Any:
    """``rows``' keys as result rows of ``kind`` (the other columns NULL)."""
    import pyarrow as pa

    n = rows.num_rows
    columns = [pa.array([kind] * n, pa.string())]
    columns += [rows.column(f.name).cast(f.type) if f.name in keys and f.name in rows.column_names
                else pa.nulls(n, f.type) for f in schema][1:]
    return pa.RecordBatch.from_arrays([c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in columns],
                                      schema=schema)

