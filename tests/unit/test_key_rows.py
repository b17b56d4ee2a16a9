"""kafka_group.delta.keyed.key_rows: the rows of a batch's keys, files chosen by their statistics."""

from __future__ import annotations

import json
import pathlib

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from kafka_group.delta.keyed.key_rows import rows_of_keys

KEY = "k" * 32 + "\U0001F600"


def _cut_maximum(table: pathlib.Path, to: str) -> None:
    """Rewrite the first commit's string maximum of ``id`` as ``to``, as some delta-spark releases wrote it
    (32 UTF-16 units kept, cut before a character outside the BMP, not widened)."""
    log = table / "_delta_log" / f"{0:020d}.json"
    actions = [json.loads(line) for line in log.read_text().splitlines()]
    for action in actions:
        if "add" in action:
            stats = json.loads(action["add"]["stats"])
            stats["maxValues"]["id"] = to
            action["add"]["stats"] = json.dumps(stats)
    log.write_text("".join(json.dumps(a) + "\n" for a in actions))


def test_finds_the_rows_of_keys_in_the_files_their_statistics_allow(tmp_path: pathlib.Path) -> None:
    write_deltalake(str(tmp_path / "t"), pa.table({"id": ["a", "b"], "v": [1, 2]}))
    write_deltalake(str(tmp_path / "t"), pa.table({"id": ["c", "d"], "v": [3, 4]}), mode="append")
    parts = rows_of_keys(DeltaTable(str(tmp_path / "t")), "id", pa.array(["b", "d", "z"]), ["id", "v"])
    assert sorted((r["id"], r["v"]) for p in parts for r in p.to_pylist()) == [("b", 2), ("d", 4)]
    assert len(parts) == 2  # one per file that holds some


def test_a_string_maximum_delta_spark_may_have_cut_short_still_finds_the_key(tmp_path: pathlib.Path) -> None:
    write_deltalake(str(tmp_path / "t"), pa.table({"id": ["k", KEY], "v": [1, 2]}))
    _cut_maximum(tmp_path / "t", "k" * 32)
    parts = rows_of_keys(DeltaTable(str(tmp_path / "t")), "id", pa.array([KEY]), ["id", "v"])
    assert [r for p in parts for r in p.to_pylist()] == [{"id": KEY, "v": 2}]
