"""The keyed sink's pure rules: parameters, the SCD1 MERGE clauses, SCD2 versions (no process)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import pytest

from kafka_group.delta.keyed.change_rules import (
    DELETE_COLUMN,
    OFFSET,
    SEQ,
    KeyedSpec,
    quote,
    scd1_clauses,
    scd2_clauses,
)
from kafka_group.delta.keyed.scd2_history import order_key, place_events
from kafka_group.errors import ConfigError


def spec(**kw: Any) -> KeyedSpec:
    args: Dict[str, Any] = {"keys": ["id"], "sequence_by": None, "apply_as_deletes": None, "column_list": None,
                            "except_column_list": None, "stored_as_scd_type": 1}
    args.update(kw)
    return KeyedSpec.build(args.pop("keys"), args.pop("sequence_by"), args.pop("apply_as_deletes"),
                           args.pop("column_list"), args.pop("except_column_list"), args.pop("stored_as_scd_type"),
                           **args)


@pytest.mark.parametrize("given, scd", [(1, 1), (2, 2), ("1", 1), ("2", 2)])
def test_stored_as_scd_type_takes_auto_cdcs_spellings(given: Any, scd: int) -> None:
    assert spec(stored_as_scd_type=given).scd_type == scd


def test_track_history_lists_name_stored_columns_and_give_the_tracked_ones() -> None:
    batch = ["__kafka", "id", "v", "w", "op"]
    assert spec(stored_as_scd_type=2).tracked_columns(["id", "v", "w"]) is None  # every upsert: a version
    assert spec(stored_as_scd_type=2, track_history_column_list=["v"]).tracked_columns(["id", "v", "w"]) == ("v",)
    assert spec(stored_as_scd_type=2, track_history_except_column_list=["w"]).tracked_columns(
        ["id", "v", "w"]) == ("v",)
    with pytest.raises(ConfigError, match="track_history_column_list=...\\) names x, which the table does not "
                                          "store \\(it stores id, v\\)"):
        spec(stored_as_scd_type=2, track_history_column_list=["x"], column_list=["id", "v"]).stored_columns(batch)


@pytest.mark.parametrize("kw, message", [
    ({"keys": "id"}, r"keys=\.\.\.\) takes a list of column names"),
    ({"keys": []}, "at least one column"),
    ({"stored_as_scd_type": 3}, "is 1, 2, '1' or '2'.*got 3"),
    ({"stored_as_scd_type": "3"}, "is 1, 2, '1' or '2'.*got '3'"),
    ({"stored_as_scd_type": "scd2"}, "got 'scd2'"),
    ({"stored_as_scd_type": True}, "got True"),
    ({"apply_as_truncates": "op = 't'", "stored_as_scd_type": 2}, "apply_as_truncates=...\\) belongs to stored_as_scd_type=1"),
    ({"track_history_column_list": ["v"]}, "belong to stored_as_scd_type=2"),
    ({"track_history_except_column_list": ["v"]}, "belong to stored_as_scd_type=2"),
    ({"track_history_column_list": ["v"], "track_history_except_column_list": ["w"], "stored_as_scd_type": 2},
     "not both"),
    ({"ignore_null_updates": "yes"}, "ignore_null_updates=...\\) is True or False"),
    ({"apply_as_truncates": ""}, "apply_as_truncates=...\\) takes a SQL expression"),
    ({"column_list": ["v"]}, "key column\\(s\\) id must be stored"),
    ({"except_column_list": ["id"]}, "key column\\(s\\) id must be stored"),
    ({"column_list": ["id"], "except_column_list": ["v"]}, "not both"),
    ({"keys": ["__SEQUENCE"]}, "is the sink's own"),
    ({"sequence_by": ""}, "sequence_by=...\\) takes a SQL expression string or a Column"),
])
def test_parameters_are_refused_with_the_fix(kw: Dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        spec(**kw)


def test_stored_columns_follow_column_list_or_except_column_list_and_never_the_sinks() -> None:
    batch = ["__kafka", "id", "v", "op", SEQ, DELETE_COLUMN, OFFSET]
    assert spec().stored_columns(batch) == ["id", "v", "op"]
    assert spec(column_list=["v", "id"]).stored_columns(batch) == ["id", "v"]
    assert spec(except_column_list=["op"]).stored_columns(batch) == ["id", "v"]
    with pytest.raises(ConfigError, match="names w, which the transform's rows do not have"):
        spec(column_list=["id", "w"]).stored_columns(batch)
    assert spec(stored_as_scd_type=2).system_columns() == ("__START_AT", "__END_AT")


def test_scd1_merge_applies_events_not_older_than_the_row_and_quotes_names() -> None:
    clauses = scd1_clauses(["id", "we`ird"], ["id", "we`ird", "v"])
    assert clauses.predicate == "t.`id` = s.`id` AND t.`we``ird` = s.`we``ird`"
    # a tie goes to the change (the later event); a row without a sequence takes any event
    newer = f"(s.{SEQ} >= t.`__SEQUENCE` OR t.`__SEQUENCE` IS NULL)"
    assert clauses.delete_when == f"s.{DELETE_COLUMN} AND {newer}"
    assert clauses.update_when == f"NOT s.{DELETE_COLUMN} AND {newer}"
    assert clauses.updates == {"`v`": "s.`v`", "`__SEQUENCE`": f"s.{SEQ}"}  # keys are never updated
    assert clauses.inserts == {"`id`": "s.`id`", "`we``ird`": "s.`we``ird`", "`v`": "s.`v`",
                               "`__SEQUENCE`": f"s.{SEQ}"}
    assert quote("a") == "`a`"


def event(key: str, seq: int, v: Optional[int], offset: int) -> Dict[str, Any]:
    return {"id": key, "v": v, SEQ: seq, DELETE_COLUMN: v is None, OFFSET: offset}


def row(key: str, v: Any, start: Any, end: Any) -> Dict[str, Any]:
    return {"id": key, "v": v, "__START_AT": start, "__END_AT": end}


def history(rows: List[Dict[str, Any]], events: List[Dict[str, Any]], tombstones: Any = (),
            **kw: Any) -> List[Any]:
    out = place_events(rows, tombstones, events, columns=["id", "v"], keys=["id"], **kw)
    return sorted(((r["v"], r["__START_AT"], r["__END_AT"]) for r in out.rows), key=lambda r: order_key(r[1]))


def test_scd2_events_in_one_batch_make_versions_in_sequence_order() -> None:
    events = [event("a", 5, 50, 0), event("a", 3, 30, 1), event("a", 9, None, 2), event("a", 12, 120, 3),
              event("a", 7, 70, 4), event("a", 7, 71, 5)]  # one sequence twice: the later offset wins
    assert history([], events) == [(30, 3, 5), (50, 5, 7), (71, 7, 9), (120, 12, None)]


def test_scd2_a_late_event_splits_the_version_it_falls_in() -> None:
    rows = [row("a", 10, 1, 5), row("a", 50, 5, None)]
    assert history(rows, [event("a", 3, 30, 9)]) == [(10, 1, 3), (30, 3, 5), (50, 5, None)]
    assert history(rows, [event("a", 0, 0, 9)]) == [(0, 0, 1), (10, 1, 5), (50, 5, None)]  # before them all
    assert history(rows, [event("a", 3, None, 9)]) == [(10, 1, 3), (50, 5, None)]  # a late delete closes it early
    # a late upsert after a delete that closed the key: open until the next event only
    assert history([row("a", 10, 1, 5), row("a", 60, 8, None)], [event("a", 6, 66, 9)]) == [
        (10, 1, 5), (66, 6, 8), (60, 8, None)]


def test_scd2_deletes_that_closed_nothing_are_remembered_by_their_tombstones() -> None:
    """Upsert 1, delete 5, delete 7 (the key already closed), then a late upsert at 6: valid until 7."""
    assert history([row("a", 10, 1, 5)], [event("a", 6, 60, 9)], tombstones=[5, 7]) == [(10, 1, 5), (60, 6, 7)]
    assert history([], [event("a", 2, 20, 9)], tombstones=[4]) == [(20, 2, 4)]  # a delete of a key never seen


def test_scd2_equal_sequences_the_batchs_event_wins_over_the_tables() -> None:
    """The table's event came in an earlier batch (an earlier offset): the batch's wins, as within a batch."""
    assert history([row("a", 10, 1, 5), row("a", 50, 5, None)], [event("a", 5, 51, 9)]) == [(10, 1, 5), (51, 5, None)]
    assert history([row("a", 10, 1, 5), row("a", 50, 5, None)], [event("a", 5, None, 9)]) == [(10, 1, 5)]
    # a version at a tombstone's sequence is a later upsert of that sequence: it stays
    assert history([row("a", 10, 1, 5), row("a", 50, 5, None)], [event("a", 9, 90, 9)], tombstones=[5]) == [
        (10, 1, 5), (50, 5, 9), (90, 9, None)]
    # a snapshot row (no sequence) is before every event
    assert history([row("a", 7, None, None)], [event("a", 3, 30, 9)]) == [(7, None, 3), (30, 3, None)]


def test_scd2_an_unchanged_history_is_not_rewritten() -> None:
    rows = [row("a", 10, 1, 5), row("a", 50, 5, None)]
    assert not place_events(rows, [], [event("a", 5, 50, 9)], columns=["id", "v"], keys=["id"]).changed
    assert place_events(rows, [], [event("a", 6, 50, 9)], columns=["id", "v"], keys=["id"]).changed


def test_scd2_tracked_columns_and_ignored_nulls() -> None:
    cols = ["id", "v", "w"]

    def ev(seq: int, v: Any, w: Any, offset: int = 0) -> Dict[str, Any]:
        return {"id": "a", "v": v, "w": w, SEQ: seq, DELETE_COLUMN: False, OFFSET: offset}

    def run(events: List[Dict[str, Any]], **kw: Any) -> List[Any]:
        out = place_events([], [], events, columns=cols, keys=["id"], **kw).rows
        return [(r["v"], r["w"], r["__START_AT"], r["__END_AT"]) for r in out]

    events = [ev(1, 1, "x"), ev(2, 1, "y"), ev(3, 2, "y"), ev(4, 2, "z")]
    assert run(events, tracked=("v",)) == [(1, "y", 1, 3), (2, "z", 3, None)]  # w updated in place
    assert run(events) == [(1, "x", 1, 2), (1, "y", 2, 3), (2, "y", 3, 4), (2, "z", 4, None)]
    assert run([ev(1, 1, "x"), ev(2, None, "y")], ignore_null_updates=True) == [(1, "x", 1, 2), (1, "y", 2, None)]
    assert run([ev(1, 1, "x"), ev(2, None, "y")]) == [(1, "x", 1, 2), (None, "y", 2, None)]


def test_struct_sequences_order_field_by_field_nulls_first() -> None:
    seqs = [{"ts": 2, "lsn": 1}, {"ts": 1, "lsn": 9}, {"ts": 1, "lsn": None}, {"ts": 1, "lsn": 3}]
    assert sorted(seqs, key=order_key) == [{"ts": 1, "lsn": None}, {"ts": 1, "lsn": 3}, {"ts": 1, "lsn": 9},
                                           {"ts": 2, "lsn": 1}]
    assert order_key(None) < order_key({"ts": 0, "lsn": 0})


def test_scd2_merge_drops_a_changed_keys_versions_and_inserts_them_again() -> None:
    clauses = scd2_clauses(["id"], ["id", "v"])
    assert clauses.predicate == "t.`id` = s.`id` AND s.__kg_action = 'drop'"
    assert clauses.delete_when == "s.__kg_action = 'drop'" and clauses.update_when is None
    assert clauses.insert_when == "s.__kg_action = 'insert'"


def test_scd1_ignore_null_updates_and_truncates() -> None:
    clauses = scd1_clauses(["id"], ["id", "v"], ignore_null_updates=True)
    assert clauses.updates == {"`v`": "coalesce(s.`v`, t.`v`)", "`__SEQUENCE`": f"s.{SEQ}"}
    truncated = scd1_clauses(["id"], ["id", "v"], truncate=True)
    assert truncated.update_when == f"NOT s.{DELETE_COLUMN} AND TRUE"  # the row was truncated: any event


def test_tables_a_merge_could_corrupt_are_refused_before_anything_is_written(tmp_path: Any) -> None:
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from kafka_group.delta.keyed.refusals import refuse_unmergeable as _refuse_unmergeable
    from kafka_group.errors import UnsupportedTableFeatureError

    write_deltalake(str(tmp_path / "plain"), pa.table({"id": [1], "t": pa.array([1], pa.timestamp("us"))}))
    _refuse_unmergeable("plain", DeltaTable(str(tmp_path / "plain")))  # timestampNtz: merged as any column
    write_deltalake(str(tmp_path / "ao"), pa.table({"id": [1]}), configuration={"delta.appendOnly": "true"})
    with pytest.raises(UnsupportedTableFeatureError, match="delta.appendOnly = true.*no offset moved"):
        _refuse_unmergeable("ao", DeltaTable(str(tmp_path / "ao")))


@pytest.mark.parametrize("kw, message", [
    ({"ignore_null_updates": True}, "belong to the keyed mode"),
    ({"keys": ["id"], "stored_as_scd_type": "two"}, "stored_as_scd_type=...\\) is 1, 2, '1' or '2'.*got 'two'"),
    ({"keys": ["id"], "sequence_by": 5}, "sequence_by=...\\) takes a SQL expression string or a Column.*got int"),
    ({"keys": ["id"], "apply_as_truncates": "op = 't'", "stored_as_scd_type": "2"}, "belongs to stored_as_scd_type=1"),
    ({"keys": ["id"], "merge_schema": True}, "does not merge schemas"),
])
def test_delta_sink_checks_the_auto_cdc_parameters_when_made(kw: Dict[str, Any], message: str) -> None:
    from pyspark_kafka_group import DeltaSink

    with pytest.raises(ConfigError, match=message):
        DeltaSink("/lake/t", **kw)


def test_delta_sink_takes_the_auto_cdc_parameters() -> None:
    from pyspark_kafka_group import DeltaSink

    sink = DeltaSink("/lake/t", keys=["id"], stored_as_scd_type="2", ignore_null_updates=True,
                     track_history_except_column_list=["updated"], sequence_by="ts")
    assert sink.keyed is not None
    assert (sink.keyed.scd_type, sink.keyed.ignore_null_updates, sink.keyed.track_history_except_column_list) == (
        2, True, ("updated",))
    truncating = DeltaSink("/lake/t", keys=["id"], apply_as_truncates="op = 'TRUNCATE'")
    assert truncating.keyed is not None and truncating.keyed.apply_as_truncates == "op = 'TRUNCATE'"
