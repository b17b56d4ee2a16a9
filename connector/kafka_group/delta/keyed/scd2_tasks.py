"""SCD type 2 as Spark tasks: the functions the executors run (:mod:`pyspark_kafka_group.sink.keyed.scd2_tasks`
builds the Spark jobs from them; the driver's SCD2 is :meth:`~kafka_group.delta.keyed.commit.KeyedOffsetStore._scd2_source`).

The rules are :func:`~kafka_group.delta.keyed.scd2_history.place_events`'s: a key's rows in the table,
its recorded deletes (tombstones) and the batch's events of the key give its new versions. Where the
driver's MERGE replaces every version of a changed key, the tasks keep what did not change:

- :func:`split_history` (pure): an old version equal to a new one (every column, ``__START_AT`` and
  ``__END_AT``) stays where it is, untouched (its row id and commit version with it); every other old
  version is deleted (its file and position), every other new version written. A written version
  that replaces a deleted one at the same ``__START_AT`` (its content changed: closed by a later
  event, split by a late one, updated in place) carries that row's id (row tracking: PROTOCOL.md,
  "Row Tracking"; a new version gets a fresh one);
- :func:`row_reader` (``mapInArrow``, partitioned by file): the full rows at the positions the key scan
  matched with the batch's keys (:func:`~kafka_group.delta.keyed.task_merge.key_scanner` without a
  sequence), honouring column mapping and partition values, with their row ids;
- :func:`history_placer` (``mapInArrow`` over partitions sorted by key): a key's old rows,
  tombstones and events (:data:`KIND` 'row', 'tomb', 'event') in, :func:`split_history`'s output out
  (:data:`KIND` 'delete': a file and position; 'write': a version to write).

The deletes per file then become deletion vectors (:func:`~kafka_group.delta.keyed.file_deletes.positions_dv_writer`).
Memory: a reader task holds one file's rows at a time; a placer task one key's rows and events, and
a buffer of output rows. Nothing here imports pyspark.
"""

from __future__ import annotations

from typing import Any, Callable, Collection, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from kafka_group.delta.keyed.change_rules import END_COLUMN, SEQ, START_COLUMN
from kafka_group.delta.keyed.file_deletes import matches_by_file
from kafka_group.delta.keyed.own_plan import read_file
from kafka_group.delta.keyed.scd2_history import order_key, place_events
from kafka_group.delta.keyed.task_merge import FILE_ID, POSITION, ROW_ID, row_ids
from kafka_group.delta.log.dv_bitmap import union_rows
from kafka_group.delta.rules.column_mapping import ColumnMapping
from kafka_group.delta.storage.table_location import table_filesystem

__all__ = ["KIND", "REWRITE", "history_placer", "row_reader", "split_history"]

#: What a row of the placer's input is ('row': the table's, 'tomb': a recorded delete, its sequence in
#: ``__kg_seq``; 'event': the batch's) and of its output ('delete', 'write').
KIND = "__kg_kind"
#: A written version replaces a deleted one at its ``__START_AT`` (counted as an update).
REWRITE = "__kg_rewrite"
#: Output rows buffered by the placer before it hands Spark a batch.
_OUT_BATCH = 8192


def split_history(rows: Sequence[Mapping[str, Any]], tombstones: Sequence[Any], events: Sequence[Mapping[str, Any]],
                  *, columns: Sequence[str], keys: Sequence[str], tracked: Optional[Collection[str]] = None,
                  ignore_null_updates: bool = False) -> Tuple[List[Tuple[int, int]], List[Dict[str, Any]]]:
    """One key's ``(file, position)`` to delete and versions to write (see the module docstring).

    ``rows``: the key's live rows (``columns``, ``__START_AT``, ``__END_AT``, :data:`FILE_ID`,
    :data:`POSITION`, and :data:`ROW_ID` where the table tracks rows); ``tombstones``, ``events`` and the
    rest as :func:`~kafka_group.delta.keyed.scd2_history.place_events`. A written version has ``columns``,
    ``__START_AT``, ``__END_AT``, :data:`ROW_ID` (the replaced row's, else None) and :data:`REWRITE`.
    """
    history = place_events(rows, tombstones, events, columns=columns, keys=keys, tracked=tracked,
                           ignore_null_updates=ignore_null_updates)
    if not history.changed:
        return [], []
    old: Dict[str, List[Mapping[str, Any]]] = {}
    for r in rows:
        old.setdefault(_content(r, columns), []).append(r)
    fresh = []
    for version in history.rows:
        same = old.get(_content(version, columns))
        if same:
            same.pop()  # unchanged: left where it is
        else:
            fresh.append(version)
    deleted = [r for left in old.values() for r in left]
    by_start = {repr(order_key(r[START_COLUMN])): r for r in deleted}
    written = []
    for version in fresh:
        replaced = by_start.pop(repr(order_key(version[START_COLUMN])), None)
        written.append({**{c: version[c] for c in columns}, START_COLUMN: version[START_COLUMN],
                        END_COLUMN: version[END_COLUMN], ROW_ID: None if replaced is None else replaced.get(ROW_ID),
                        REWRITE: replaced is not None})
    return [(int(r[FILE_ID]), int(r[POSITION])) for r in deleted], written


def _content(row: Mapping[str, Any], columns: Sequence[str]) -> str:
    """A version's content as a comparable text (a struct sequence is a dict: not hashable)."""
    return repr(tuple(row[c] for c in columns) + (order_key(row[START_COLUMN]), order_key(row[END_COLUMN])))


def history_placer(columns: Sequence[str], keys: Sequence[str], tracked: Optional[Collection[str]],
                   ignore_null_updates: bool, out_schema: Any) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The ``mapInArrow`` function of the placement: the union of old rows, tombstones and events
    (:data:`KIND`; rows of one key adjacent: the partition sorted by the keys), ``out_schema``'s rows
    out (:data:`KIND` 'delete' with :data:`FILE_ID` and :data:`POSITION`, or 'write' with the version's
    columns, :data:`ROW_ID` and :data:`REWRITE`). Caller: Spark tasks."""
    columns, keys = list(columns), list(keys)
    names = [f.name for f in out_schema]

    def place(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        out: List[Dict[str, Any]] = []

        def settle(group: List[Dict[str, Any]]) -> None:
            rows = [r for r in group if r[KIND] == "row"]
            tombs = [r[SEQ] for r in group if r[KIND] == "tomb"]
            events = [r for r in group if r[KIND] == "event"]
            if not events:
                return
            deletes, written = split_history(rows, tombs, events, columns=columns, keys=keys, tracked=tracked,
                                             ignore_null_updates=ignore_null_updates)
            out.extend({KIND: "delete", FILE_ID: f, POSITION: p} for f, p in deletes)
            out.extend({KIND: "write", **w} for w in written)

        def flush() -> Any:
            batch = pa.RecordBatch.from_pylist([{n: r.get(n) for n in names} for r in out], schema=out_schema)
            out.clear()
            return batch

        group: List[Dict[str, Any]] = []
        current: Any = None
        for batch in batches:
            for record in batch.to_pylist():
                key = tuple(record[k] for k in keys)
                if group and key != current:
                    settle(group)
                    group = []
                    if len(out) >= _OUT_BATCH:
                        yield flush()
                current = key
                group.append(record)
        if group:
            settle(group)
        if out:
            yield flush()

    return place


def row_reader(table_path: str, table_uri: str, storage_options: Mapping[str, str], schema: Any,
               files: Mapping[int, Tuple[str, Dict[str, Any]]], columns: Sequence[str], out_schema: Any,
               mapping: Optional[ColumnMapping], row_id_column: Optional[str]) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The ``mapInArrow`` function of the second read: ``(FILE_ID, POSITION)`` rows in (every match of a
    file in one task: repartition by file), the rows at those positions out in ``out_schema`` (its
    columns: :data:`KIND` 'row', :data:`FILE_ID`, :data:`POSITION`, :data:`ROW_ID` (with ``row_id_column``,
    else NULL), ``columns`` with ``__START_AT`` and ``__END_AT``, any other NULL).

    ``files``: file id -> (path, its live ``add``); ``schema``: the table's Arrow schema. Caller: Spark tasks."""
    options = dict(storage_options)
    wanted = list(columns) + [c for c in (START_COLUMN, END_COLUMN) if c in schema.names]

    def read(batches: Iterator[Any]) -> Iterator[Any]:
        import numpy as np
        import pyarrow as pa

        fs = table_filesystem(table_path, options)
        for file_id, mine in matches_by_file(batches, FILE_ID):
            positions = pa.array(union_rows(mine.column(POSITION).to_numpy()))
            path, add = files[file_id]
            whole = read_file(fs, path, schema, add, wanted, mapping)
            rows = whole.take(positions)
            n = rows.num_rows
            data = {KIND: pa.repeat(pa.scalar("row"), n), FILE_ID: pa.repeat(pa.scalar(file_id, pa.int64()), n),
                    POSITION: positions}
            if row_id_column is not None:
                every = pa.array(np.arange(whole.num_rows, dtype=np.int64))
                data[ROW_ID] = row_ids(fs, path, row_id_column, add, every).take(positions)
            data.update({c: rows.column(c) for c in wanted})
            out = [data[f.name].cast(f.type) if f.name in data else pa.nulls(n, f.type) for f in out_schema]
            yield from pa.table(out, schema=out_schema).to_batches(max_chunksize=65536)

    return read
