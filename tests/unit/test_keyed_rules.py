"""The keyed sink's pure rules: parameters, the SCD1 MERGE clauses, SCD2 versions (no process)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import pytest

from kafka_group.delta.keyed.change_rules import (
    DELETE_COLUMN,
    OFFSET,
    SEQ,
    KeyedSpec,
    KeyLatest,
    latest_sequences,
    quote,
    scd1_clauses,
    scd2_changes,
    scd2_clauses,
)
from kafka_group.errors import ConfigError


def spec(**kw: Any) -> KeyedSpec:
    args: Dict[str, Any] = {"keys": ["id"], "sequence_by": None, "apply_as_deletes": None, "column_list": None,
                            "except_column_list": None, "stored_as_scd_type": 1}
    args.update(kw)
    return KeyedSpec.build(args["keys"], args["sequence_by"], args["apply_as_deletes"], args["column_list"],
                           args["except_column_list"], args["stored_as_scd_type"])


@pytest.mark.parametrize("kw, message", [
    ({"keys": "id"}, r"keys=\.\.\.\) takes a list of column names"),
    ({"keys": []}, "at least one column"),
    ({"stored_as_scd_type": 3}, "is 1 or 2"),
    ({"stored_as_scd_type": True}, "is 1 or 2"),
    ({"column_list": ["v"]}, "key column\\(s\\) id must be stored"),
    ({"except_column_list": ["id"]}, "key column\\(s\\) id must be stored"),
    ({"column_list": ["id"], "except_column_list": ["v"]}, "not both"),
    ({"keys": ["__SEQUENCE"]}, "is the sink's own"),
    ({"sequence_by": ""}, "sequence_by=...\\) takes a SQL expression"),
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


def test_scd2_versions_close_in_sequence_order_and_ignore_what_the_table_has_seen() -> None:
    events = [event("a", 5, 50, 0), event("a", 3, 30, 1), event("a", 9, None, 2), event("a", 12, 120, 3),
              event("b", 1, 10, 4),  # older than the table's latest of b: ignored
              event("c", 7, 70, 5), event("c", 7, 71, 6)]  # one sequence twice: the later offset wins
    latest = latest_sequences([{"id": "a", "__START_AT": 1, "__END_AT": None},
                               {"id": "b", "__START_AT": 2, "__END_AT": 4},
                               {"id": "b", "__START_AT": 0, "__END_AT": 2}], ["id"])
    assert latest == {("a",): KeyLatest(1, True), ("b",): KeyLatest(4, False)}
    changes = scd2_changes(events, ["id"], ["id", "v"], latest)
    assert sorted(changes.inserts, key=lambda r: (r["id"], r["__START_AT"])) == [
        {"id": "a", "v": 30, "__START_AT": 3, "__END_AT": 5},
        {"id": "a", "v": 50, "__START_AT": 5, "__END_AT": 9},  # closed by the delete
        {"id": "a", "v": 120, "__START_AT": 12, "__END_AT": None},
        {"id": "c", "v": 71, "__START_AT": 7, "__END_AT": None},
    ]
    assert sorted(changes.closes) == [(("a",), 3), (("c",), 7)]


def test_scd2_an_event_at_the_keys_latest_sequence_replaces_what_made_it() -> None:
    """A tie with the table: the table's event came in an earlier batch (an earlier offset), so the
    batch's event wins, as it would within one batch."""
    rows: List[Dict[str, Any]] = [{"id": "open", "__START_AT": 1, "__END_AT": 5},
                                  {"id": "open", "__START_AT": 5, "__END_AT": None},
                                  {"id": "gone", "__START_AT": 1, "__END_AT": 5},  # deleted at 5
                                  {"id": "snap", "__START_AT": None, "__END_AT": None}]  # no sequence
    latest = latest_sequences(rows, ["id"])
    assert latest == {("open",): KeyLatest(5, True), ("gone",): KeyLatest(5, False)}
    events = [event("open", 5, 51, 10), event("open", 4, 40, 11),  # below the latest: ignored
              event("gone", 5, 52, 12), event("gone", 7, None, 13),
              event("snap", 3, 30, 14)]
    changes = scd2_changes(events, ["id"], ["id", "v"], latest)
    assert sorted(changes.inserts, key=lambda r: (r["id"], r["__START_AT"])) == [
        {"id": "gone", "v": 52, "__START_AT": 5, "__END_AT": 7},
        {"id": "open", "v": 51, "__START_AT": 5, "__END_AT": None},
        {"id": "snap", "v": 30, "__START_AT": 3, "__END_AT": None},
    ]
    assert changes.drops == [(("open",), 5)]  # the version the earlier event opened at 5
    assert sorted(changes.closes) == [(("gone",), 5), (("snap",), 3)]  # 'gone' has none to close; 'open''s goes
    deleted = scd2_changes([event("open", 5, None, 10)], ["id"], ["id", "v"], latest)
    assert (deleted.inserts, deleted.closes, deleted.drops) == ([], [], [(("open",), 5)])
    clauses = scd2_clauses(["id"], ["id", "v"])
    assert clauses.delete_when == "s.__kg_action = 'drop'" and clauses.update_when == "s.__kg_action = 'close'"
    assert "t.`__START_AT` = s.`__START_AT`" in clauses.predicate


def test_tables_a_merge_could_corrupt_are_refused_before_anything_is_written(tmp_path: Any) -> None:
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from kafka_group.delta.keyed.commit import _refuse_unmergeable
    from kafka_group.errors import UnsupportedTableFeatureError

    write_deltalake(str(tmp_path / "plain"), pa.table({"id": [1], "t": pa.array([1], pa.timestamp("us"))}))
    _refuse_unmergeable("plain", DeltaTable(str(tmp_path / "plain")))  # timestampNtz: merged as any column
    write_deltalake(str(tmp_path / "ao"), pa.table({"id": [1]}), configuration={"delta.appendOnly": "true"})
    with pytest.raises(UnsupportedTableFeatureError, match="delta.appendOnly = true.*no offset moved"):
        _refuse_unmergeable("ao", DeltaTable(str(tmp_path / "ao")))
