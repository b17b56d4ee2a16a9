"""The keyed sink's pure rules: parameters, the SCD1 MERGE clauses, SCD2 versions (no process)."""

from __future__ import annotations

from typing import Any, Dict, Optional

import pytest

from kafka_group.delta.keyed_rules import (
    DELETE_COLUMN,
    OFFSET,
    SEQ,
    KeyedSpec,
    latest_sequences,
    quote,
    scd1_clauses,
    scd2_changes,
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


def test_scd1_merge_applies_only_newer_events_and_quotes_names() -> None:
    clauses = scd1_clauses(["id", "we`ird"], ["id", "we`ird", "v"])
    assert clauses.predicate == "t.`id` = s.`id` AND t.`we``ird` = s.`we``ird`"
    assert clauses.delete_when == f"s.{DELETE_COLUMN} AND s.{SEQ} > t.`__SEQUENCE`"
    assert clauses.update_when == f"NOT s.{DELETE_COLUMN} AND s.{SEQ} > t.`__SEQUENCE`"
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
    assert latest == {("a",): 1, ("b",): 4}
    changes = scd2_changes(events, ["id"], ["id", "v"], latest)
    assert sorted(changes.inserts, key=lambda r: (r["id"], r["__START_AT"])) == [
        {"id": "a", "v": 30, "__START_AT": 3, "__END_AT": 5},
        {"id": "a", "v": 50, "__START_AT": 5, "__END_AT": 9},  # closed by the delete
        {"id": "a", "v": 120, "__START_AT": 12, "__END_AT": None},
        {"id": "c", "v": 71, "__START_AT": 7, "__END_AT": None},
    ]
    assert sorted(changes.closes) == [(("a",), 3), (("c",), 7)]
