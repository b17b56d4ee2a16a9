"""SCD1's tombstones written as the executors write them (the ``mapInArrow`` function run here on record
batches, no Spark) and committed by the driver: they filter as delta-rs's appends do, carry key
statistics the lookups prune by, mix with the driver's ``record``, are collected, and refuse other keys."""

from __future__ import annotations

import datetime
import os
import pathlib
import time
from typing import Any, List, Sequence, Tuple

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from kafka_group.delta.files.commit_files import DataFile
from kafka_group.delta.keyed.change_rules import SEQUENCE_COLUMN
from kafka_group.delta.keyed.task_merge import candidate_files
from kafka_group.delta.keyed.tombstone_files import RECORDED_AT, tombstone_schema, tombstone_writer
from kafka_group.delta.keyed.tombstones import Tombstones
from kafka_group.delta.storage.table_location import table_filesystem
from kafka_group.errors import ConfigError
from tests.unit.test_keyed_tombstones import changes, keys_and_seqs, spec

NOW = datetime.datetime.now(datetime.timezone.utc)


def task_files(t: Tombstones, rows: Sequence[Tuple[Any, int]], key_type: pa.DataType = pa.large_string(),
               batch_id: int = 7, recorded_at: datetime.datetime = NOW) -> Tuple[List[DataFile], Any]:
    """What the executors return for ``rows`` (key, sequence) written by one task, and the files' schema.
    The key arrives as Spark's Arrow gives it (a large string by default)."""
    deletes = pa.table({"id": pa.array([r[0] for r in rows], key_type),
                        SEQUENCE_COLUMN: pa.array([r[1] for r in rows], pa.int64())})
    schema = tombstone_schema(deletes.schema)
    write = tombstone_writer(t.path, {}, schema, batch_id, recorded_at)
    out = [row for batch in write(iter(deletes.to_batches(max_chunksize=2))) for row in batch.to_pylist()]
    return [DataFile(r["path"], r["size"], r["num_records"], r["stats"]) for r in out], schema


def test_tombstones_written_by_tasks_filter_and_carry_key_statistics(tmp_path: pathlib.Path) -> None:
    t = Tombstones(str(tmp_path / "t"), {}, spec(), 3600)
    low, schema = task_files(t, [("a1", 10), ("a2", 10), ("a3", 3)])
    high, _ = task_files(t, [("z1", 10), ("z2", 10)])
    assert [f.num_records for f in low + high] == [3, 2]  # one file per task, rows batched
    t.commit_files(low + high, schema)
    table = DeltaTable(t.path)
    assert table.schema().to_arrow().names == ["id", SEQUENCE_COLUMN, RECORDED_AT]
    assert table.to_pyarrow_dataset().to_table().column(RECORDED_AT).to_pylist() == [NOW] * 5
    kept = t.apply(changes([("a1", 9, False), ("a3", 3, False), ("z2", 11, False), ("b", 1, False)]))
    assert keys_and_seqs(kept) == [("a3", 3), ("b", 1), ("z2", 11)]
    # the lookups' pruning by key statistics: a batch of keys 'z...' reads one file of the two
    chosen = candidate_files(table, table_filesystem(t.path), ["id"], {"id": ("z0", "z9")})
    assert [c.num_records() for c in chosen] == [2]


def test_recording_again_by_tasks_changes_nothing_and_mixes_with_the_drivers_record(tmp_path: pathlib.Path) -> None:
    t = Tombstones(str(tmp_path / "t"), {}, spec(), 3600)
    t.record(t.deletes(changes([("k", 10, True)])))  # the driver's path created the table
    for _ in range(2):  # a replay after a crash writes and records the same deletes again
        files, schema = task_files(t, [("k", 10), ("m", 5)])
        t.commit_files(files, schema)
    assert keys_and_seqs(t.apply(changes([("k", 9, False), ("m", 5, False), ("m", 4, False)]))) == [("m", 5)]
    other = Tombstones(str(tmp_path / "u"), {}, spec(), 3600)
    files, schema = task_files(other, [("k", 10)], pa.string())  # the tasks created the table
    other.commit_files(files, schema)
    other.record(other.deletes(changes([("m", 2, True)])))
    assert keys_and_seqs(other.apply(changes([("k", 1, False), ("m", 1, False), ("n", 1, False)]))) == [("n", 1)]


def test_no_delete_no_commit_and_an_empty_task_writes_no_file(tmp_path: pathlib.Path) -> None:
    t = Tombstones(str(tmp_path / "t"), {}, spec(), 3600)
    files, schema = task_files(t, [])
    assert files == []
    t.commit_files(files, schema)
    assert t.current() is None


def test_tombstones_of_other_key_types_are_refused_and_their_files_deleted(tmp_path: pathlib.Path) -> None:
    t = Tombstones(str(tmp_path / "t"), {}, spec(), 3600)
    t.record(t.deletes(changes([("k", 10, True)])))
    files, schema = task_files(t, [(1, 10)], pa.int64())
    with pytest.raises(ConfigError, match="the keys or the type of sequence_by changed"):
        t.commit_files(files, schema)
    assert not any((pathlib.Path(t.path) / f.path).exists() for f in files)
    assert DeltaTable(t.path).version() == 0


def test_garbage_collection_removes_old_tombstones_the_tasks_wrote(tmp_path: pathlib.Path) -> None:
    t = Tombstones(str(tmp_path / "t"), {}, spec(), 3600)
    now = datetime.datetime.now(datetime.timezone.utc)
    old, schema = task_files(t, [("old", 10)], recorded_at=now - datetime.timedelta(hours=2))
    young, _ = task_files(t, [("young", 10)], recorded_at=now)
    t.commit_files(old, schema)
    t.commit_files(young, schema)
    t.collect_garbage()
    assert DeltaTable(t.path).to_pyarrow_dataset().to_table().column("id").to_pylist() == ["young"]


def test_garbage_collection_vacuums_files_of_failed_task_attempts_once_a_day_old(tmp_path: pathlib.Path) -> None:
    """Files a task attempt wrote that no commit holds (it failed, or its batch did): the full vacuum removes
    them past the retention; a younger one may be a running batch's, and stays."""
    t = Tombstones(str(tmp_path / "t"), {}, spec(), 3600)
    kept, schema = task_files(t, [("k", 10)])
    t.commit_files(kept, schema)
    (stale,), _ = task_files(t, [("k", 10)])
    (young,), _ = task_files(t, [("k", 10)])
    day_ago = time.time() - 25 * 3600
    os.utime(pathlib.Path(t.path) / stale.path, (day_ago, day_ago))
    t.collect_garbage()
    assert not (pathlib.Path(t.path) / stale.path).exists()
    assert (pathlib.Path(t.path) / young.path).exists() and (pathlib.Path(t.path) / kept[0].path).exists()
    assert keys_and_seqs(t.apply(changes([("k", 9, False)]))) == []
