"""SCD type 2 as Spark tasks (kafka_group.delta.keyed.scd2_tasks and file_deletes), without Spark.

The pure split of a key's history (what is deleted, what is written, which row id a rewritten version
keeps), the placer fed Arrow batches as ``mapInArrow`` feeds them (a key's rows across two batches), and
the row reader and the positions' deletion vector writer on tests/unit/data/dv_table (delta-spark wrote
it: ids 0-99, v = str(id), rows 3, 4, 7, 11, 18, 29 and 50 deleted by its deletion vectors).
"""

from __future__ import annotations

import json
import pathlib
import shutil
from typing import Any, Dict, List, Optional

import pyarrow as pa
from deltalake import DeltaTable

from kafka_group.delta.keyed.change_rules import DELETE_COLUMN, END_COLUMN, OFFSET, SEQ, START_COLUMN
from kafka_group.delta.keyed.file_deletes import DROP_RESULT_COLUMNS, positions_writer
from kafka_group.delta.keyed.task_rewrite import RowDropper
from kafka_group.delta.keyed.scd2_tasks import KIND, REWRITE, history_placer, row_reader, split_history
from kafka_group.delta.keyed.scd2_history import place_events
from kafka_group.delta.keyed.task_merge import FILE_ID, POSITION, ROW_ID, candidate_files
from kafka_group.delta.log.deletion_vectors import DeletionVector, read_deleted_rows
from kafka_group.delta.storage.table_location import table_filesystem

SOURCE = pathlib.Path(__file__).parent / "data" / "dv_table"
COLUMNS = ["id", "v"]


def old(v: Any, start: Any, end: Any, position: int, row_id: Optional[int] = None) -> Dict[str, Any]:
    return {"id": "a", "v": v, START_COLUMN: start, END_COLUMN: end, FILE_ID: 7, POSITION: position, ROW_ID: row_id}


def event(seq: int, v: Optional[int], offset: int = 0) -> Dict[str, Any]:
    return {"id": "a", "v": v, SEQ: seq, DELETE_COLUMN: v is None, OFFSET: offset}


def split(rows: List[Dict[str, Any]], events: List[Dict[str, Any]], tombstones: Any = ()) -> Any:
    deletes, written = split_history(rows, list(tombstones), events, columns=COLUMNS, keys=["id"])
    return sorted(deletes), [(w["v"], w[START_COLUMN], w[END_COLUMN], w[ROW_ID], w[REWRITE]) for w in written]


def test_a_new_latest_version_closes_the_open_one_and_leaves_the_closed_ones_alone() -> None:
    rows = [old(10, 1, 5, 0, 100), old(50, 5, None, 1, 101)]
    # the open version is closed (rewritten, its row id kept), the new one gets a fresh id; version 1-5 untouched
    assert split(rows, [event(9, 90)]) == ([(7, 1)], [(50, 5, 9, 101, True), (90, 9, None, None, False)])


def test_a_late_event_splits_the_version_it_falls_in_and_nothing_else() -> None:
    rows = [old(10, 1, 5, 0, 100), old(50, 5, 8, 1, 101), old(80, 8, None, 2, 102)]
    deletes, written = split(rows, [event(3, 30)])
    assert deletes == [(7, 0)]
    assert written == [(10, 1, 3, 100, True), (30, 3, 5, None, False)]
    # a late delete closes its version early
    assert split(rows, [event(6, None)]) == ([(7, 1)], [(50, 5, 6, 101, True)])
    # a delete at a version's start removes that version; the one before still ends there
    assert split(rows, [event(5, None)]) == ([(7, 1)], [])


def test_an_unchanged_history_is_neither_deleted_nor_written() -> None:
    rows = [old(10, 1, 5, 0), old(50, 5, None, 1)]
    assert split(rows, [event(5, 50)]) == ([], [])
    assert split(rows, [event(1, 10), event(5, 50)]) == ([], [])


def test_tombstones_close_late_upserts_and_a_new_key_writes_only() -> None:
    assert split([], [event(2, 20), event(4, 40)], tombstones=[3]) == ([], [(20, 2, 3, None, False),
                                                                        (40, 4, None, None, False)])


def test_the_split_agrees_with_place_events_on_every_version() -> None:
    rows = [old(10, 1, 5, 0), old(50, 5, 8, 1), old(80, 8, None, 2)]
    events = [event(3, 30), event(7, None, 1), event(12, 120, 2), event(12, 121, 3)]
    deletes, written = split_history(rows, [], events, columns=COLUMNS, keys=["id"])
    kept = [r for r in rows if (r[FILE_ID], r[POSITION]) not in set(deletes)]
    after = sorted((r["v"], r[START_COLUMN], r[END_COLUMN]) for r in kept + written)
    want = place_events(rows, [], events, columns=COLUMNS, keys=["id"]).rows
    assert after == sorted((r["v"], r[START_COLUMN], r[END_COLUMN]) for r in want)


def _union_schema() -> pa.Schema:
    return pa.schema([(KIND, pa.string()), (FILE_ID, pa.int64()), (POSITION, pa.int64()), (ROW_ID, pa.int64()),
                      ("id", pa.string()), ("v", pa.int64()), (START_COLUMN, pa.int64()), (END_COLUMN, pa.int64()),
                      (SEQ, pa.int64()), (DELETE_COLUMN, pa.bool_()), (OFFSET, pa.int64())])


def _out_schema() -> pa.Schema:
    return pa.schema([(KIND, pa.string()), (FILE_ID, pa.int64()), (POSITION, pa.int64()), (ROW_ID, pa.int64()),
                      ("id", pa.string()), ("v", pa.int64()), (START_COLUMN, pa.int64()), (END_COLUMN, pa.int64()),
                      (REWRITE, pa.bool_())])


def test_the_placer_groups_a_keys_rows_across_batches() -> None:
    def rec(kind: str, key: str, **values: Any) -> Dict[str, Any]:
        return {KIND: kind, "id": key, **values}

    # sorted by key, as Spark hands the partition: a's rows end in the second batch
    first = [rec("row", "a", **{FILE_ID: 1, POSITION: 4, ROW_ID: 40, "v": 10, START_COLUMN: 1}),
             rec("event", "a", **{"v": 20, SEQ: 2, DELETE_COLUMN: False, OFFSET: 0})]
    second = [rec("tomb", "a", **{SEQ: 3}),
              rec("row", "b", **{FILE_ID: 1, POSITION: 5, ROW_ID: 50, "v": 1, START_COLUMN: 1}),  # no event: kept
              rec("event", "c", **{"v": 7, SEQ: 9, DELETE_COLUMN: False, OFFSET: 1})]
    schema = _union_schema()
    batches = [pa.RecordBatch.from_pylist([{f.name: r.get(f.name) for f in schema} for r in part], schema=schema)
               for part in (first, second)]
    placer = history_placer(COLUMNS, ["id"], None, False, _out_schema())
    out = pa.Table.from_batches(list(placer(iter(batches))), schema=_out_schema()).to_pylist()
    deletes = [(r[FILE_ID], r[POSITION]) for r in out if r[KIND] == "delete"]
    written = sorted((r["id"], r["v"], r[START_COLUMN], r[END_COLUMN], r[ROW_ID]) for r in out if r[KIND] == "write")
    assert deletes == [(1, 4)]
    assert written == [("a", 10, 1, 2, 40), ("a", 20, 2, 3, None), ("c", 7, 9, None, None)]


def test_the_row_reader_and_the_positions_writer_on_a_delta_spark_table(tmp_path: pathlib.Path) -> None:
    table = tmp_path / "t"
    shutil.copytree(SOURCE, table)
    dt = DeltaTable(str(table))
    fs = table_filesystem(str(table), {})
    files = candidate_files(dt, fs, ["id"], {})
    schema = pa.schema(dt.schema().to_arrow())
    target = files[0]
    out_schema = pa.schema([(KIND, pa.string()), (FILE_ID, pa.int64()), (POSITION, pa.int64()),
                            (ROW_ID, pa.int64()), ("id", pa.int64()), ("v", pa.string()), (SEQ, pa.int64())])
    reader = row_reader(str(table), dt.table_uri, {}, schema, {f.file_id: (f.path, f.add) for f in files},
                        ["id", "v"], out_schema, None, None)
    wanted = pa.record_batch([pa.array([target.file_id] * 3, pa.int64()), pa.array([2, 0, 2], pa.int64())],
                             names=[FILE_ID, POSITION])
    rows = pa.Table.from_batches(list(reader(iter([wanted]))), schema=out_schema).to_pylist()
    assert [r[POSITION] for r in rows] == [0, 2] and all(r[KIND] == "row" and r[SEQ] is None for r in rows)
    assert all(r["v"] == str(r["id"]) for r in rows)

    result_schema = pa.schema([(name, {"string": pa.string(), "long": pa.int64(), "boolean": pa.bool_()}[kind])
                               for name, kind in DROP_RESULT_COLUMNS])
    dvs = {f.file_id: (f.path, f.add, f.num_records()) for f in files}
    writer = positions_writer(RowDropper.of(dt, str(table), {}, 0), dvs, result_schema)
    done = pa.Table.from_batches(list(writer(iter([wanted]))), schema=result_schema).to_pylist()
    assert len(done) == 1 and done[0]["deleted"] == 2 and not done[0]["all_deleted"]
    before = read_deleted_rows(DeletionVector.of(target.add.get("deletionVector")), fs, dt.table_uri,
                               num_records=target.num_records() or 0).tolist()
    after = read_deleted_rows(DeletionVector.of(json.loads(done[0]["dv"])), fs, dt.table_uri,
                              num_records=target.num_records() or 0).tolist()
    assert after == sorted(set(before) | {0, 2})
    assert (table / done[0]["dv_path"]).exists()
