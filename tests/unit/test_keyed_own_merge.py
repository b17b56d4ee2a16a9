"""The keyed sink's own SCD1 MERGE (kafka_group.delta.keyed.own_merge) on a table delta-spark wrote.

tests/unit/data/dv_table (see tests/unit/test_deletion_vectors.py): ids 0-99 with v = str(id) and
__SEQUENCE = id, rows 3, 4, 7, 11, 18, 29 and 50 deleted by delta-spark's deletion vectors. The
table is read back with delta-rs's own deletion vector reader (``DeltaTable.deletion_vectors``),
not this connector's.
"""

from __future__ import annotations

import json
import pathlib
import shutil
from typing import Any, Dict, List, Tuple

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)
import pyarrow.parquet as pq
from deltalake import DeltaTable

from kafka_group.delta.keyed.own_merge import own_merge

SOURCE = pathlib.Path(__file__).parent / "data" / "dv_table"
Row = Tuple[int, str, int]


def _copy(tmp_path: pathlib.Path) -> pathlib.Path:
    table = tmp_path / "t"
    shutil.copytree(SOURCE, table)
    return table


def _rows(table: pathlib.Path) -> List[Row]:
    """The live rows, deletion vectors applied by delta-rs (its keep masks)."""
    dt = DeltaTable(str(table))
    keep: Dict[str, List[bool]] = {}
    for batch in dt.deletion_vectors():
        for path, mask in zip(pa.record_batch(batch).column("filepath").to_pylist(),
                              pa.record_batch(batch).column("selection_vector").to_pylist()):
            keep[path.rsplit("/", 1)[-1]] = mask
    out: List[Row] = []
    for path in pa.table(dt.get_add_actions()).column("path").to_pylist():
        data = pq.read_table(table / path).to_pylist()
        mask = keep.get(path.rsplit("/", 1)[-1], [])
        out += [(r["id"], r["v"], r["__SEQUENCE"]) for i, r in enumerate(data) if i >= len(mask) or mask[i]]
    return sorted(out)


def _changes() -> Any:
    # 5: newer upsert (replaced); 3: deleted by delta-spark, upsert (inserted again); 8: newer delete;
    # 9: older upsert (ignored); 200: new key (inserted); 201: delete of an unknown key (nothing)
    return pa.table({"id": pa.array([5, 3, 8, 9, 200, 201], pa.int64()),
                     "v": ["five", "three", None, "old", "200", None],
                     "__kg_seq": pa.array([1000, 1000, 1000, 1, 1000, 1000], pa.int64()),
                     "__kg_delete": [False, False, True, False, False, True]})


def _expected() -> List[Row]:
    rows = {i: (i, str(i), i) for i in range(100) if i not in (3, 4, 7, 11, 18, 29, 50)}
    rows[5] = (5, "five", 1000)
    rows[3] = (3, "three", 1000)
    del rows[8]
    rows[200] = (200, "200", 1000)
    return sorted(rows.values())


def _last_commit(table: pathlib.Path) -> List[Dict[str, Any]]:
    last = sorted((table / "_delta_log").glob("[0-9]" * 20 + ".json"))[-1]
    return [json.loads(line) for line in last.read_text().splitlines()]


def test_marks_matched_rows_in_a_new_deletion_vector(tmp_path: pathlib.Path) -> None:
    table = _copy(tmp_path)
    version = own_merge(DeltaTable(str(table)), str(table), {}, _changes(), ["id"], ["id", "v"], [("app", 7)],
                        info={"kafkaGroup.group": "g"})
    assert version == 4
    assert _rows(table) == _expected()
    actions = _last_commit(table)
    remove = next(a["remove"] for a in actions if "remove" in a)
    readd = next(a["add"] for a in actions if "add" in a and a["add"]["path"] == remove["path"])
    assert remove["deletionVector"]["cardinality"] == 7  # the old logical file, its DV named
    assert readd["deletionVector"]["cardinality"] == 9 and json.loads(readd["stats"])["tightBounds"] is False
    assert {"txn": {"appId": "app", "version": 7, "lastUpdated": actions[0]["commitInfo"]["timestamp"]}} in actions
    assert DeltaTable(str(table)).transaction_version("app") == 7


def test_copies_touched_files_when_deletion_vectors_are_disabled(tmp_path: pathlib.Path) -> None:
    table = _copy(tmp_path)
    first = json.loads((table / "_delta_log" / f"{0:020d}.json").read_text().splitlines()[1])
    first["metaData"]["configuration"]["delta.enableDeletionVectors"] = "false"
    (table / "_delta_log" / f"{4:020d}.json").write_text(json.dumps({"commitInfo": {}}) + "\n" + json.dumps(first) + "\n")
    assert own_merge(DeltaTable(str(table)), str(table), {}, _changes(), ["id"], ["id", "v"], [("app", 1)],
                     info={}) == 5
    assert _rows(table) == _expected()
    assert not any("add" in a and a["add"].get("deletionVector") for a in _last_commit(table))


def test_a_lost_race_commits_nothing_and_leaves_no_file(tmp_path: pathlib.Path) -> None:
    table = _copy(tmp_path)
    loaded = DeltaTable(str(table))
    before = sorted(p.name for p in table.rglob("*") if p.is_file())
    (table / "_delta_log" / f"{4:020d}.json").write_text(json.dumps({"commitInfo": {}}) + "\n")  # another writer
    before.append(f"{4:020d}.json")
    assert own_merge(loaded, str(table), {}, _changes(), ["id"], ["id", "v"], [("app", 1)], info={}) is None
    assert sorted(p.name for p in table.rglob("*") if p.is_file()) == sorted(before)


def test_a_batch_that_changes_no_row_still_moves_the_offsets(tmp_path: pathlib.Path) -> None:
    table = _copy(tmp_path)
    stale = pa.table({"id": pa.array([9], pa.int64()), "v": ["old"], "__kg_seq": pa.array([1], pa.int64()),
                      "__kg_delete": [False]})
    assert own_merge(DeltaTable(str(table)), str(table), {}, stale, ["id"], ["id", "v"], [("app", 3)], info={}) == 4
    assert [a for a in _last_commit(table) if "add" in a or "remove" in a] == []
    assert DeltaTable(str(table)).transaction_version("app") == 3


def test_an_event_of_the_rows_own_sequence_replaces_it(tmp_path: pathlib.Path) -> None:
    """A tie: the row's event came in an earlier batch (an earlier offset of the key's partition), so
    the change is the later event and wins, as within a batch (change_rules.scd1_clauses)."""
    table = _copy(tmp_path)
    ties = pa.table({"id": pa.array([6, 9, 10], pa.int64()), "v": ["six", "old", None],
                     "__kg_seq": pa.array([6, 8, 10], pa.int64()), "__kg_delete": [False, False, True]})
    assert own_merge(DeltaTable(str(table)), str(table), {}, ties, ["id"], ["id", "v"], [("app", 1)], info={}) == 4
    rows = {r[0]: r for r in _rows(table)}
    assert rows[6] == (6, "six", 6) and rows[9] == (9, "9", 9) and 10 not in rows


def _with(table: pathlib.Path, protocol: Dict[str, Any], configuration: Dict[str, str]) -> DeltaTable:
    """``table`` with one more commit setting ``protocol`` and ``configuration``."""
    meta = json.loads((table / "_delta_log" / f"{0:020d}.json").read_text().splitlines()[1])
    meta["metaData"]["configuration"].update(configuration)
    lines = [{"commitInfo": {}}, meta, {"protocol": protocol}]
    (table / "_delta_log" / f"{4:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in lines))
    return DeltaTable(str(table))


def test_refuses_what_it_does_not_honour_yet_with_the_reason(tmp_path: pathlib.Path) -> None:
    import pytest

    from kafka_group.delta.keyed.own_merge import needs_own_merge, own_merge_refusal
    from kafka_group.errors import UnsupportedTableFeatureError

    table = _copy(tmp_path)
    loaded = DeltaTable(str(table))
    assert needs_own_merge(loaded) and own_merge_refusal(loaded, 1) is None
    assert "stored_as_scd_type=2" in (own_merge_refusal(loaded, 2) or "")
    assert own_merge_refusal(loaded, 2, row_tracking=True) is None  # the MERGE as Spark tasks writes SCD2
    tracked = _with(table, {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                            "writerFeatures": ["deletionVectors", "rowTracking", "domainMetadata"]},
                    {"delta.enableRowTracking": "true"})
    assert "'rowTracking'" in (own_merge_refusal(tracked, 1) or "")
    with pytest.raises(UnsupportedTableFeatureError, match="rowTracking.*Nothing was written"):
        own_merge(tracked, str(table), {}, _changes(), ["id"], ["id", "v"], [("app", 1)], info={})
    assert not (table / "data").exists()


def test_legacy_invariants_are_found_at_any_depth() -> None:
    from kafka_group.delta.keyed.own_merge import invariant_columns

    def f(name: str, kind: Any, invariant: bool = False) -> Dict[str, Any]:
        meta = {"delta.invariants": json.dumps({"expression": {"expression": "true"}})} if invariant else {}
        return {"name": name, "type": kind, "nullable": True, "metadata": meta}

    inner = {"type": "struct", "fields": [f("x", "long", True), f("y", "long")]}
    schema = {"type": "struct", "fields": [
        f("n", "long", True), f("s", inner), f("plain", "string"),
        f("items", {"type": "array", "elementType": inner, "containsNull": True}),
        f("m", {"type": "map", "keyType": "string", "valueType": inner, "valueContainsNull": True})]}
    assert invariant_columns(schema) == ["n", "s.x", "items[].x", "m{}.x"]
    assert invariant_columns({"type": "struct", "fields": [f("s", {"type": "struct", "fields": [f("y", "long")]})]}) == []


def test_finds_the_live_add_in_a_checkpoint(tmp_path: pathlib.Path) -> None:
    """delta-spark checkpoints every 10 commits: the DV descriptor of a file added before the
    checkpoint comes from its ``add`` row (the commits before it may be gone)."""
    table = _copy(tmp_path)
    DeltaTable(str(table)).create_checkpoint()
    for version in range(3):  # cleaned-up history: only the checkpoint knows the file
        (table / "_delta_log" / f"{version:020d}.json").unlink()
    assert own_merge(DeltaTable(str(table)), str(table), {}, _changes(), ["id"], ["id", "v"], [("app", 1)],
                     info={}) == 4
    assert _rows(table) == _expected()
    remove = next(a["remove"] for a in _last_commit(table) if "remove" in a)
    assert remove["deletionVector"]["cardinality"] == 7


def test_the_sinks_prepare_step_filters_the_changes_the_own_merge_applies(tmp_path: pathlib.Path) -> None:
    """The keyed store hands the own MERGE the change set after ``prepare`` (SCD1's tombstone filter),
    as it hands it to delta-rs's: here ``prepare`` keeps only key 200, so 5, 3 and 8 stay as they were."""
    from kafka_group.delta.keyed.change_rules import KeyedSpec
    from kafka_group.delta.keyed.commit import KeyedOffsetStore
    from kafka_group.offsets import OffsetRange, TopicPartition

    table = _copy(tmp_path)
    store = KeyedOffsetStore(str(table), "g")
    spec = KeyedSpec.build(["id"], "seq", None, None, None, 1)
    changes = _changes().append_column("__kg_offset", pa.array(range(6), pa.int64()))
    store.merge_changes(changes, spec, ["id", "v"], [OffsetRange(TopicPartition("t", 0), 0, 6)],
                        prepare=lambda c: c.filter(pa.compute.equal(c.column("id"), 200)))
    expected = sorted([(i, str(i), i) for i in range(100) if i not in (3, 4, 7, 11, 18, 29, 50)] + [(200, "200", 1000)])
    assert _rows(table) == expected


def _commit_put(monkeypatch: Any, after: Any) -> None:
    """The commit's conditional PUT lands, then ``after`` says what its caller hears (an S3 answer lost on the
    way back, or a PUT the S3 client retried after its first attempt had landed); other PUTs are untouched."""
    import kafka_group.delta.keyed.own_merge as module
    from kafka_group.delta.log.commit import put_if_absent as real
    from kafka_group.delta.log.snapshot import commit_path

    def put(table_path: str, storage_options: Any, path: str, body: bytes) -> bool:
        created = real(table_path, storage_options, path, body)
        return after() if created and path == commit_path(4) else created

    monkeypatch.setattr(module, "put_if_absent", put)


def test_a_commit_whose_answer_was_lost_keeps_the_files_it_references(tmp_path: pathlib.Path,
                                                                      monkeypatch: Any) -> None:
    from kafka_group.errors import OffsetStoreError

    def lost() -> bool:
        raise OffsetStoreError("the store could not be reached. The commit may or may not have landed")

    table = _copy(tmp_path)
    _commit_put(monkeypatch, lost)
    try:
        own_merge(DeltaTable(str(table)), str(table), {}, _changes(), ["id"], ["id", "v"], [("app", 7)], info={})
    except OffsetStoreError:
        pass
    else:
        raise AssertionError("the lost answer was not reported")
    assert DeltaTable(str(table)).version() == 4
    assert _rows(table) == _expected()  # every file version 4 references is still there


def test_a_retried_commit_put_that_finds_its_own_first_attempt_has_landed(tmp_path: pathlib.Path,
                                                                         monkeypatch: Any) -> None:
    table = _copy(tmp_path)
    _commit_put(monkeypatch, lambda: False)  # the retry's If-None-Match answered 412: the object exists
    assert own_merge(DeltaTable(str(table)), str(table), {}, _changes(), ["id"], ["id", "v"], [("app", 7)],
                     info={}) == 4
    assert _rows(table) == _expected()
    assert DeltaTable(str(table)).transaction_version("app") == 7


def test_a_string_maximum_delta_spark_may_have_truncated_never_prunes_a_file() -> None:
    """delta-spark keeps 32 characters of a string statistic; some of its releases cut a maximum before a
    character outside the BMP without widening it, leaving it below the file's real maximum."""
    from kafka_group.delta.keyed.own_plan import _candidates

    key = "k" * 32 + "\U0001F600"  # in the file; its maximum was written as the bare 32-character prefix
    adds = pa.table({"min.id": ["k" * 32, "a"], "max.id": ["k" * 32, "b"]})
    source = pa.table({"id": [key]})
    assert _candidates(adds, source, ["id"], []) == [True, False]
    emoji = "\U0001F600" * 16  # 32 UTF-16 units in 16 characters: a prefix as long as delta-spark keeps
    adds = pa.table({"min.id": [emoji], "max.id": [emoji]})
    assert _candidates(adds, pa.table({"id": [emoji + "z"]}), ["id"], []) == [True]


def test_a_retried_deletion_vector_put_that_finds_its_own_first_attempt_goes_on(tmp_path: pathlib.Path,
                                                                               monkeypatch: Any) -> None:
    import kafka_group.delta.keyed.own_merge as module
    from kafka_group.delta.log.commit import put_if_absent as real

    def put(table_path: str, storage_options: Any, path: str, body: bytes) -> bool:
        created = real(table_path, storage_options, path, body)
        return False if created and path.startswith("deletion_vector_") else created  # the retry answered 412

    monkeypatch.setattr(module, "put_if_absent", put)
    table = _copy(tmp_path)
    assert own_merge(DeltaTable(str(table)), str(table), {}, _changes(), ["id"], ["id", "v"], [("app", 7)],
                     info={}) == 4
    assert _rows(table) == _expected()


def test_a_deletion_vector_of_more_rows_than_its_file_holds_is_refused(tmp_path: pathlib.Path) -> None:
    """A table log's deletion vector is checked against the file before its rows are expanded: 16
    run containers (1,048,576 rows in a vector of 246 bytes) for the 100-row file."""
    import uuid

    import numpy as np
    import pytest

    from kafka_group.delta.log.deletion_vectors import dv_file_bytes, new_file_descriptor
    from kafka_group.delta.log.dv_bitmap import serialize_bitmap
    from kafka_group.errors import OffsetStoreError

    table = _copy(tmp_path)
    bitmap = serialize_bitmap(np.arange(16 * 65536, dtype=np.int64))
    assert len(bitmap) < 300
    dv = new_file_descriptor(uuid.uuid4(), bitmap, 16 * 65536)
    (table / dv.relative_path()).write_bytes(dv_file_bytes(bitmap))
    log = table / "_delta_log" / f"{3:020d}.json"
    actions = [json.loads(line) for line in log.read_text().splitlines()]
    for action in actions:
        if "add" in action:
            action["add"]["deletionVector"] = dv.to_json()
    log.write_text("".join(json.dumps(a) + "\n" for a in actions))
    with pytest.raises(OffsetStoreError, match="deletion vector's bucket 0 holds rows from 983040 on, past the file's last row 99"):
        own_merge(DeltaTable(str(table)), str(table), {}, _changes(), ["id"], ["id", "v"], [("app", 7)], info={})
    assert not (table / "_delta_log" / f"{4:020d}.json").exists()


def test_a_delta_rs_merge_that_changes_no_row_still_moves_the_offsets(tmp_path: pathlib.Path) -> None:
    """The twin of the own MERGE's test above, on a plain table (delta-rs's MERGE): a batch whose events
    are all older than the table's rows changes nothing, and its offsets move all the same."""
    from deltalake import write_deltalake

    from kafka_group.delta.keyed.change_rules import KeyedSpec
    from kafka_group.delta.keyed.commit import KeyedOffsetStore
    from kafka_group.delta.offsets.offsets_table import transaction_id
    from kafka_group.offsets import OffsetRange, TopicPartition

    table = tmp_path / "plain"
    write_deltalake(str(table), pa.table({"id": pa.array([1], pa.int64()), "v": ["one"],
                                          "__SEQUENCE": pa.array([5], pa.int64())}))
    store = KeyedOffsetStore(str(table), "g")
    spec = KeyedSpec.build(["id"], "seq", None, None, None, 1)
    stale = pa.table({"id": pa.array([1], pa.int64()), "v": ["old"], "__kg_seq": pa.array([3], pa.int64()),
                      "__kg_delete": [False], "__kg_offset": pa.array([0], pa.int64())})
    store.merge_changes(stale, spec, ["id", "v"], [OffsetRange(TopicPartition("t", 0), 0, 1)])
    loaded = DeltaTable(str(table))
    assert loaded.transaction_version(transaction_id("g", TopicPartition("t", 0))) == 1
    assert loaded.to_pyarrow_dataset().to_table().to_pylist() == [{"id": 1, "v": "one", "__SEQUENCE": 5}]


def test_the_drivers_own_merge_refuses_what_it_does_not_apply(tmp_path: pathlib.Path) -> None:
    """A batch reaches the driver's own MERGE only when the table changed after the batch chose its MERGE
    (the tasks refused it, then another writer's commit made it one the own MERGE takes): that MERGE
    applies neither ``ignore_null_updates`` nor a truncate, and refuses them rather than land other rows."""
    import pytest

    from kafka_group.delta.keyed.change_rules import TRUNCATE_METADATA, KeyedSpec
    from kafka_group.delta.keyed.commit import KeyedOffsetStore
    from kafka_group.errors import UnsupportedTableFeatureError
    from kafka_group.offsets import OffsetRange, TopicPartition

    table = _copy(tmp_path)
    changes = _changes().append_column("__kg_offset", pa.array(range(6), pa.int64()))
    truncated = changes.replace_schema_metadata({TRUNCATE_METADATA: b"1"})
    for spec, batch in ((KeyedSpec.build(["id"], "seq", None, None, None, 1, ignore_null_updates=True), changes),
                        (KeyedSpec.build(["id"], "seq", None, None, None, 1, apply_as_truncates="v = 't'"), truncated)):
        with pytest.raises(UnsupportedTableFeatureError, match="does not apply"):
            KeyedOffsetStore(str(table), "g").merge_changes(batch, spec, ["id", "v"],
                                                             [OffsetRange(TopicPartition("t", 0), 0, 6)])
    assert DeltaTable(str(table)).version() == 3  # nothing committed
