"""How a task drops rows from a touched file (kafka_group.delta.keyed.task_rewrite), without Spark.

On tests/unit/data/dv_table (delta-spark wrote it: ids 0-99, v = str(id), __SEQUENCE = id, rows 3, 4,
7, 11, 18, 29 and 50 deleted by its deletion vector): copy-on-write leaves exactly the live rows but the
dropped ones, in a file delta-rs reads once committed; the old values an upsert keeps are the rows at
the positions asked; which tables the MERGE as Spark tasks takes.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from kafka_group.delta.keyed.task_merge import candidate_files
from kafka_group.delta.keyed.task_rewrite import (
    FILE_ID,
    OLD_PREFIX,
    RowDropper,
    dropped_files,
    kept_columns,
    live_rows,
    task_merge_refusal,
)
from kafka_group.delta.storage.table_location import table_filesystem

SOURCE = pathlib.Path(__file__).parent / "data" / "dv_table"
DELETED_BY_DELTA_SPARK = [3, 4, 7, 11, 18, 29, 50]


def _table(tmp_path: pathlib.Path) -> pathlib.Path:
    table = tmp_path / "t"
    shutil.copytree(SOURCE, table)
    return table


def test_copy_on_write_keeps_the_live_rows_but_the_dropped_ones(tmp_path: pathlib.Path) -> None:
    table = _table(tmp_path)
    dt = DeltaTable(str(table))
    fs = table_filesystem(str(table), {})
    dropper = dataclasses.replace(RowDropper.of(dt, str(table), {}, 9), with_dvs=False)
    [f] = candidate_files(dt, fs, ["id"], {})
    result = dropper.drop(fs, f.path, f.add, f.num_records() or 0, np.array([5, 60, 4], dtype=np.int64))
    assert not result["all_deleted"] and "dv" not in result
    [written] = json.loads(result["rewritten"])
    assert written["num_records"] == 100 - 7 - 2
    rows = pq.read_table(table / written["path"])
    assert sorted(rows.column("id").to_pylist()) == [i for i in range(100) if i not in DELETED_BY_DELTA_SPARK + [5, 60]]
    stats = json.loads(written["stats"])
    assert stats["numRecords"] == 91 and stats["minValues"]["id"] == 0 and stats["maxValues"]["id"] == 99

    # committed (the remove and the new file), delta-rs reads the table as the rows kept
    removes, readds, rewritten, wrote = dropped_files([{FILE_ID: f.file_id, **result}], {f.file_id: f.add}, 1, None,
                                                      lambda _: 100)
    assert [r["path"] for r in removes] == [f.add["path"]] and readds == [] and wrote == rewritten
    assert [(r.path, r.num_records) for r in rewritten] == [(written["path"], 91)]


def test_a_file_whose_every_row_is_dropped_is_only_removed(tmp_path: pathlib.Path) -> None:
    table = _table(tmp_path)
    dt = DeltaTable(str(table))
    fs = table_filesystem(str(table), {})
    [f] = candidate_files(dt, fs, ["id"], {})
    for with_dvs in (True, False):
        dropper = dataclasses.replace(RowDropper.of(dt, str(table), {}, 9), with_dvs=with_dvs)
        everything = np.array([i for i in range(100) if i not in DELETED_BY_DELTA_SPARK], dtype=np.int64)
        assert dropper.drop(fs, f.path, f.add, 100, everything) == {"all_deleted": True}
    assert live_rows(f.add) == 93


def test_the_old_values_are_the_rows_at_the_positions_asked(tmp_path: pathlib.Path) -> None:
    table = _table(tmp_path)
    dt = DeltaTable(str(table))
    fs = table_filesystem(str(table), {})
    [f] = candidate_files(dt, fs, ["id"], {})
    dropper = RowDropper.of(dt, str(table), {}, 9)
    old = dropper.old_rows(fs, f.path, f.add, pa.array([9, 2], pa.int64()), ["v"])
    assert old.column_names == [OLD_PREFIX + "v"] and old.column(0).to_pylist() == ["9", "2"]


def test_the_columns_an_upsert_keeps_from_the_row_it_replaces() -> None:
    schema = pa.schema([("id", pa.int64()), ("v", pa.string()), ("extra", pa.string()), ("__SEQUENCE", pa.int64())])
    assert kept_columns(schema, ["id", "v", "extra"], ["id"], False) == []
    assert kept_columns(schema, ["id", "v"], ["id"], False) == ["extra"]
    assert kept_columns(schema, ["id", "v"], ["id"], True) == ["v", "extra"]


def test_which_tables_the_merge_as_tasks_takes(tmp_path: pathlib.Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("__SEQUENCE", pa.int64())])
    plain = tmp_path / "plain"
    DeltaTable.create(str(plain), schema)
    assert task_merge_refusal(DeltaTable(str(plain)), str(plain)) is None
    assert task_merge_refusal(DeltaTable(str(_table(tmp_path))), str(tmp_path / "t")) is None
    feed = tmp_path / "feed"
    DeltaTable.create(str(feed), schema, configuration={"delta.enableChangeDataFeed": "true"})
    assert "change data feed" in (task_merge_refusal(DeltaTable(str(feed)), str(feed)) or "")
    assert "'abfss://'" in (task_merge_refusal(DeltaTable(str(plain)), "abfss://c@a.dfs.core.windows.net/t") or "")


def test_copy_on_write_keeps_a_files_partition_values(tmp_path: pathlib.Path) -> None:
    from deltalake import write_deltalake

    table = tmp_path / "parted"
    write_deltalake(str(table), pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "p": ["a", "a", "b", "b"],
                                          "__SEQUENCE": pa.array([1, 1, 1, 1], pa.int64())}), partition_by=["p"])
    dt = DeltaTable(str(table))
    fs = table_filesystem(str(table), {})
    dropper = RowDropper.of(dt, str(table), {}, 3)
    assert not dropper.with_dvs and dropper.partition_by == ("p",)
    f = next(c for c in candidate_files(dt, fs, ["id"], {}) if c.add["partitionValues"] == {"p": "b"})
    result = dropper.drop(fs, f.path, f.add, 2, np.array([0], dtype=np.int64))
    [written] = json.loads(result["rewritten"])
    assert written["partition_values"] == {"p": "b"} and written["num_records"] == 1
    assert "p" not in pq.read_table(table / written["path"]).column_names  # as appends write it: in the path


@pytest.mark.parametrize("with_dvs", [True, False], ids=["deletion-vectors", "copy-on-write"])
def test_statistics_that_understate_a_files_rows_never_remove_its_other_rows(tmp_path: pathlib.Path,
                                                                           with_dvs: bool) -> None:
    """A table log whose ``numRecords`` says 1 for a file of 100 rows (hostile, buggy or corrupt): a change
    firing on one row must not take the file for wholly deleted and remove the 99 others."""
    from pyarrow import fs as pafs

    from kafka_group.errors import OffsetStoreError

    schema = pa.schema([("k", pa.int64()), ("v", pa.string())])
    pq.write_table(pa.table({"k": list(range(100)), "v": [str(i) for i in range(100)]}, schema=schema),
                   tmp_path / "f.parquet")
    fs = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    add = {"path": "f.parquet", "size": 1, "partitionValues": {}, "stats": json.dumps({"numRecords": 1})}
    dropper = RowDropper(str(tmp_path), tmp_path.as_uri(), {}, with_dvs, schema, None, (), 32, None, None, 7)
    with pytest.raises(OffsetStoreError, match="holds 100 rows.*statistics say 1"):
        dropper.drop(fs, "f.parquet", add, 1, np.array([0], dtype=np.int64))


def test_a_droppers_repr_never_shows_the_storage_options() -> None:
    dropper = RowDropper("s3://b/t", "s3://b/t", {"aws_secret_access_key": "S3CR3T-KEY"}, True, None, None, (), 32,
                         None, None, 1)
    assert "S3CR3T-KEY" not in repr(dropper) and "S3CR3T-KEY" not in str(dropper)
