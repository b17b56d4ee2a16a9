"""The sink's compaction run on real delta-rs tables in this process: which engine, what the commits hold, and
that nothing it meets fails the batch that has already landed."""

from __future__ import annotations

import json
import pathlib

from collections import Counter
from typing import Callable, Iterator

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from kafka_group import faults
from kafka_group.delta.compaction.auto_compact import auto_compact, engine_for

SESSION = {"spark.databricks.delta.autoCompact.minNumFiles": "3"}


def small_appends(path: pathlib.Path, batches: int, **configuration: str) -> None:
    for i in range(batches):
        write_deltalake(str(path), pa.table({"n": pa.array([2 * i, 2 * i + 1], pa.int64()),
                                             "day": ["a" if i % 2 else "b"] * 2}),
                        mode="append", partition_by=["day"], configuration=configuration or None,
                        commit_properties=CommitProperties(app_transactions=[Transaction("offsets", i)]))


def test_engines_by_table_features() -> None:
    assert engine_for([], [], 1, 2, "/lake/t") == ("own", None)
    assert engine_for([], ["checkConstraints", "appendOnly", "invariants"], 1, 7, "/lake/t") == ("own", None)
    assert engine_for(["columnMapping"], ["columnMapping"], 3, 7, "/lake/t") == ("own", None)
    assert engine_for(["deletionVectors"], ["deletionVectors"], 3, 7, "s3://b/t") == ("own", None)
    engine, why = engine_for(["columnMapping"], ["columnMapping"], 3, 7, "gs://b/t")
    assert engine == "" and why is not None and "gs://" in why
    engine, why = engine_for([], ["rowTracking", "domainMetadata"], 1, 7, "/lake/t")
    assert engine == "" and why is not None and "row tracking" in why


def test_small_files_are_compacted_per_partition_without_moving_offsets(tmp_path: pathlib.Path) -> None:
    small_appends(tmp_path, 8)
    before = DeltaTable(str(tmp_path))
    rows = sorted(before.to_pyarrow_dataset().to_table().column("n").to_pylist())
    outcome = auto_compact(str(tmp_path), {}, SESSION, batch_id=8)
    assert (outcome.engine, outcome.files_removed, outcome.files_added) == ("own", 8, 2)
    after = DeltaTable(str(tmp_path))
    assert len(after.file_uris()) == 2
    assert sorted(after.to_pyarrow_dataset().to_table().column("n").to_pylist()) == rows
    assert after.transaction_version("offsets") == 7
    for version in outcome.versions:
        actions = [json.loads(line) for line in
                   (tmp_path / "_delta_log" / f"{version:020d}.json").read_text().splitlines()]
        assert not any("txn" in a for a in actions)
        assert all(a[k]["dataChange"] is False for a in actions for k in ("add", "remove") if k in a)
    assert auto_compact(str(tmp_path), {}, SESSION, batch_id=9).versions == []  # nothing small left to pack


def test_below_the_threshold_and_when_turned_off_nothing_changes(tmp_path: pathlib.Path) -> None:
    small_appends(tmp_path / "few", 4)  # two small files per partition, threshold three
    assert auto_compact(str(tmp_path / "few"), {}, SESSION, batch_id=4).versions == []
    small_appends(tmp_path / "off", 8, **{"delta.autoOptimize.autoCompact": "false"})
    outcome = auto_compact(str(tmp_path / "off"), {}, SESSION, batch_id=8)
    assert outcome.versions == [] and outcome.skipped == "off (delta.autoOptimize.autoCompact=false)"


def test_what_it_cannot_read_is_logged_and_never_fails_the_landed_batch(tmp_path: pathlib.Path) -> None:
    small_appends(tmp_path / "bad", 8, **{"delta.autoOptimize.autoCompact": "sometimes"})
    outcome = auto_compact(str(tmp_path / "bad"), {}, SESSION, batch_id=8)
    assert outcome.versions == [] and outcome.skipped is not None and "sometimes" in outcome.skipped
    outcome = auto_compact(str(tmp_path / "missing"), {}, SESSION, batch_id=0)
    assert outcome.versions == [] and outcome.skipped is not None


@pytest.fixture()
def at_written(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Callable[[], None]], None]]:
    """Run a function once when a compaction has written its file and not committed it (another writer's
    commit in that window: the crash point's hook, which the crash tests use to kill)."""

    def install(action: Callable[[], None]) -> None:
        pending = [action]

        def hook(name: str) -> None:
            if name == "compaction.written" and pending:
                pending.pop()()

        monkeypatch.setattr(faults, "_looked_up", True)
        monkeypatch.setattr(faults, "_hook", hook)

    yield install


def rows(path: pathlib.Path) -> Counter[int]:
    return Counter(DeltaTable(str(path)).to_pyarrow_dataset().to_table().column("n").to_pylist())


def test_a_concurrent_append_is_committed_over_not_lost(tmp_path: pathlib.Path,
                                                        at_written: Callable[[Callable[[], None]], None]) -> None:
    small_appends(tmp_path, 8)
    at_written(lambda: write_deltalake(str(tmp_path), pa.table({"n": pa.array([100], pa.int64()), "day": ["a"]}),
                                       mode="append"))
    outcome = auto_compact(str(tmp_path), {}, SESSION, batch_id=8)
    assert outcome.files_removed == 8 and outcome.versions[0] == 9  # version 8 is the append: rebased over it
    assert rows(tmp_path) == Counter(list(range(16)) + [100])


def test_two_compactions_of_the_same_files_never_duplicate_rows(
        tmp_path: pathlib.Path, at_written: Callable[[Callable[[], None]], None]) -> None:
    """What delta-rs 1.6.6's optimize.compact does here (two DeltaTable objects of one table of six one-row
    files, both compacting): both commits land and every row is in the table twice."""
    small_appends(tmp_path, 8)
    other: list[object] = []
    at_written(lambda: other.append(auto_compact(str(tmp_path), {}, SESSION, batch_id=100)))
    outcome = auto_compact(str(tmp_path), {}, SESSION, batch_id=8)
    assert rows(tmp_path) == Counter(range(16))
    assert len(DeltaTable(str(tmp_path)).file_uris()) == 2
    assert other and outcome.skipped is None


def test_a_file_removed_after_the_plan_makes_its_bin_planned_again(
        tmp_path: pathlib.Path, at_written: Callable[[Callable[[], None]], None]) -> None:
    """Another writer deletes a row of the second bin's partition while the first bin is being written: the
    first bin commits over it, the second bin's files are no longer all live, and it is planned again on the
    new version (not given up for the batch)."""
    small_appends(tmp_path, 8)

    def delete_a_row() -> None:  # n=5 is of day "b", the second bin
        DeltaTable(str(tmp_path)).delete("n = 5")

    at_written(delete_a_row)
    outcome = auto_compact(str(tmp_path), {}, SESSION, batch_id=8)
    assert outcome.skipped is None
    assert rows(tmp_path) == Counter(n for n in range(16) if n != 5)
    assert len(DeltaTable(str(tmp_path)).file_uris()) == 2


def test_settings_changed_between_two_bins_are_honoured_by_the_next_bin(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bins are planned on one version; another writer that turns compaction off (a metadata commit) after
    the first bin's commit and before the second bin is read makes the run plan again, which sees it off."""
    from kafka_group.delta.compaction import auto_compact as module

    small_appends(tmp_path, 8)
    original, calls = module._adds, []

    def adds_after_another_writer(table: DeltaTable, *args: object) -> object:
        calls.append(1)
        if len(calls) == 2:  # the second bin: the first one has committed
            DeltaTable(str(tmp_path)).alter.set_table_properties({"delta.autoOptimize.autoCompact": "false"})
            table.update_incremental()
        return original(table, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(module, "_adds", adds_after_another_writer)
    outcome = auto_compact(str(tmp_path), {}, SESSION, batch_id=8)
    assert (outcome.files_removed, outcome.files_added) == (4, 1)
    assert outcome.skipped == "off (delta.autoOptimize.autoCompact=false)"
    assert rows(tmp_path) == Counter(range(16))


def test_the_rebase_check_refuses_a_commit_that_touched_a_file_of_the_bin() -> None:
    """Another writer's commit at the bin's version: a deletion vector added to one of its files (remove and
    add of the same path), a remove of one, or a protocol or metadata change make the bin plan again; an
    append of other files does not. Paths compare decoded (the log percent-encodes them)."""
    from kafka_group.delta.compaction.rewrite import rebase_conflict

    bin_files = {"day=a b/part-1.parquet", "day=a b/part-2.parquet"}
    dv = {"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^", "offset": 1, "sizeInBytes": 36,
          "cardinality": 1}
    new_dv = [{"remove": {"path": "day=a%20b/part-2.parquet", "dataChange": True}},
              {"add": {"path": "day=a%20b/part-2.parquet", "dataChange": True, "deletionVector": dv}}]
    assert rebase_conflict(new_dv, bin_files) is not None
    assert rebase_conflict([{"remove": {"path": "day=a%20b/part-1.parquet"}}], bin_files) is not None
    assert rebase_conflict([{"metaData": {"id": "x"}}], bin_files) is not None
    assert rebase_conflict([{"protocol": {"minReaderVersion": 3}}], bin_files) is not None
    assert rebase_conflict([{"commitInfo": {}}, {"add": {"path": "day=a%20b/part-3.parquet"}},
                            {"txn": {"appId": "a", "version": 1}}], bin_files) is None
