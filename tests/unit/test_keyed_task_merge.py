"""The executors' side of the keyed MERGE as Spark tasks (kafka_group.delta.keyed.task_merge), without Spark.

The scan and the deletion vector writer are called as Spark would call them (``mapInArrow`` functions
fed Arrow batches), the join between them done with pyarrow, on tests/unit/data/dv_table (delta-spark
wrote it: ids 0-99, v = str(id), __SEQUENCE = id, rows 3, 4, 7, 11, 18, 29 and 50 deleted by its
deletion vectors). What they produce must be what the driver's own MERGE plans (own_plan.plan_scd1)
on the same changes: the same rows deleted per file, the same keys left alone. And the table the sink
creates with deletion vectors (kafka_group.delta.keyed.create) is one delta-rs reads.
"""

from __future__ import annotations

import json
import pathlib
import shutil
from typing import Any, Dict, List

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder

from kafka_group.delta.keyed.change_rules import KeyedSpec
from kafka_group.delta.keyed.create import created_properties, create_with_deletion_vectors
from kafka_group.delta.keyed.own_plan import plan_scd1
from kafka_group.delta.keyed.task_merge import (
    FILE_ID,
    POSITION,
    RESULT_COLUMNS,
    TARGET_SEQ,
    candidate_files,
    dv_writer,
    key_scanner,
)
from kafka_group.delta.keyed.task_rewrite import RowDropper
from kafka_group.delta.log.deletion_vectors import DeletionVector, read_deleted_rows
from kafka_group.delta.log.dv_bitmap import union_rows
from kafka_group.delta.storage.table_location import table_filesystem
from kafka_group.errors import ConfigError

SOURCE = pathlib.Path(__file__).parent / "data" / "dv_table"

SCD1 = KeyedSpec.build(["id"], None, None, None, None, 1)
SCD2 = KeyedSpec.build(["id"], None, None, None, None, 2)


def _changes() -> Any:
    # 5: newer upsert; 3: deleted by delta-spark, upsert; 8: newer delete; 9: older upsert (left alone);
    # 200: new key; 201: delete of an unknown key
    return pa.table({"id": pa.array([5, 3, 8, 9, 200, 201], pa.int64()),
                     "v": ["five", "three", None, "old", "200", None],
                     "__kg_seq": pa.array([1000, 1000, 1000, 1, 1000, 1000], pa.int64()),
                     "__kg_delete": [False, False, True, False, False, True]})


def test_the_tasks_delete_the_rows_the_drivers_own_merge_plans(tmp_path: pathlib.Path) -> None:
    table = tmp_path / "t"
    shutil.copytree(SOURCE, table)
    dt = DeltaTable(str(table))
    fs = table_filesystem(str(table), {})
    changes = _changes()
    files = candidate_files(dt, fs, ["id"], {"id": (3, 201)})
    assert files
    schema = pa.schema(dt.schema().to_arrow())
    scanned_schema = pa.schema([(FILE_ID, pa.int64()), (POSITION, pa.int64()), ("id", pa.int64()),
                                (TARGET_SEQ, pa.int64())])
    shipped = pa.record_batch([pa.array([f.file_id for f in files], pa.int64()), pa.array([f.path for f in files]),
                               pa.array([json.dumps(f.add) for f in files])], names=["file_id", "path", "add"])
    scanned = pa.Table.from_batches(list(key_scanner(str(table), dt.table_uri, {}, schema, ["id"], scanned_schema,
                                                     None)(iter([shipped]))), schema=scanned_schema)
    assert scanned.num_rows == 93  # 100 rows, 7 deleted by delta-spark
    matched = scanned.join(changes.select(["id", "__kg_seq", "__kg_delete"]), keys=["id"], join_type="inner")
    result_schema = pa.schema([(name, {"string": pa.string(), "long": pa.int64(), "boolean": pa.bool_()}[kind])
                               for name, kind in RESULT_COLUMNS] + [("id", pa.int64())])
    writer = dv_writer(RowDropper.of(dt, str(table), {}, 0), {f.file_id: (f.path, f.add, f.num_records())
                                                               for f in files}, ["id"], result_schema)
    results = pa.Table.from_batches(list(writer(iter(matched.to_batches()))), schema=result_schema).to_pylist()

    blocked = sorted(r["id"] for r in results if r["kind"] == "blocked")
    touched = {r[FILE_ID]: r for r in results if r["kind"] == "file"}
    assert blocked == [9]
    assert sum(r["deleted"] for r in touched.values()) == 1 and sum(r["updated"] for r in touched.values()) == 1

    plan = plan_scd1(dt, fs, dt.table_uri, changes, ["id"], ["id", "v"])
    by_path = {f.path: f for f in files}
    want: Dict[str, List[int]] = {p.add["path"]: union_rows(p.old_deleted, p.newly_deleted).tolist() for p in plan.files}
    got: Dict[str, List[int]] = {}
    for file_id, row in touched.items():
        f = next(c for c in by_path.values() if c.file_id == file_id)
        assert not row["all_deleted"]
        dv = DeletionVector.of(json.loads(row["dv"]))
        assert (table / row["dv_path"]).exists()
        got[f.add["path"]] = read_deleted_rows(dv, fs, dt.table_uri, num_records=f.num_records() or 0).tolist()
    assert got == want


def test_tables_the_keyed_sink_creates_get_deletion_vectors_unless_told_otherwise(tmp_path: pathlib.Path) -> None:
    assert created_properties(None, SCD1) == {"delta.enableDeletionVectors": "true"}
    assert created_properties({"delta.enableDeletionVectors": False}, SCD1) == {"delta.enableDeletionVectors": "false"}
    # SCD type 2 too (its MERGE as Spark tasks), overridable, with row tracking where asked
    assert created_properties(None, SCD2) == {"delta.enableDeletionVectors": "true"}
    assert created_properties({"delta.enableDeletionVectors": "false"}, SCD2) == {"delta.enableDeletionVectors": "false"}
    assert created_properties({"delta.enableRowTracking": "true"}, SCD2) == {
        "delta.enableDeletionVectors": "true", "delta.enableRowTracking": "true"}
    with pytest.raises(ConfigError, match="delta.enableChangeDataFeed"):
        created_properties({"delta.enableChangeDataFeed": "true"}, SCD1)

    table = tmp_path / "new"
    schema = pa.schema([("id", pa.int64()), ("__SEQUENCE", pa.int64())])
    assert create_with_deletion_vectors(str(table), {}, schema, [], created_properties(None, SCD1), ("owner", 3), {})
    assert not create_with_deletion_vectors(str(table), {}, schema, [], created_properties(None, SCD1), ("owner", 3), {})
    dt = DeltaTable(str(table))
    protocol = dt.protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (3, 7)
    assert protocol.reader_features == ["deletionVectors"] and protocol.writer_features == ["deletionVectors"]
    assert dt.metadata().configuration == {"delta.enableDeletionVectors": "true"}
    assert dt.transaction_version("owner") == 3
    assert pa.table(QueryBuilder().register("t", dt).execute("SELECT count(*) AS n FROM t").read_all()).to_pylist() == [
        {"n": 0}]


def test_a_created_table_with_row_tracking_lists_its_features_and_materialized_columns(tmp_path: pathlib.Path) -> None:
    properties = created_properties({"delta.enableRowTracking": "true"}, SCD1)
    with pytest.raises(ConfigError, match="row tracking"):
        created_properties({"delta.enableRowTracking": "true", "delta.enableDeletionVectors": "false"}, SCD1)
    table = tmp_path / "tracked"
    schema = pa.schema([("id", pa.int64()), ("__SEQUENCE", pa.int64())])
    assert create_with_deletion_vectors(str(table), {}, schema, [], properties, ("owner", 1), {})
    dt = DeltaTable(str(table))
    assert set(dt.protocol().writer_features or []) == {"deletionVectors", "domainMetadata", "rowTracking"}
    config = dt.metadata().configuration
    assert config["delta.enableRowTracking"] == "true"
    assert config["delta.rowTracking.materializedRowIdColumnName"].startswith("_row-id-col-")
    assert config["delta.rowTracking.materializedRowCommitVersionColumnName"].startswith("_row-commit-version-col-")
