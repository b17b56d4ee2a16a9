"""The sink's compaction plan (pure): which tables compact, which files are small, and how they are packed."""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

import pytest

from kafka_group.delta.compaction.bins import (
    DEFAULT_MIN_NUM_FILES,
    DEFAULT_TARGET_SIZE,
    CompactionSettings,
    FileEntry,
    plan_bins,
    settings_of,
)
from kafka_group.errors import ConfigError

MB = 1024 * 1024


def files(sizes: Sequence[int], partition: Tuple[Tuple[str, Optional[str]], ...] = (),
          start: int = 0) -> list[FileEntry]:
    return [FileEntry(f"p{partition}-{start + i}.parquet", size, 10, partition, order=start + i)
            for i, size in enumerate(sizes)]


def on(target: int = 100, min_size: int = 50, count: int = 3) -> CompactionSettings:
    return CompactionSettings(True, target, min_size, count)


def test_defaults_are_delta_sparks_auto_compaction_and_on_without_the_property() -> None:
    s = settings_of({}, {})
    assert (s.enabled, s.target_size, s.min_file_size, s.min_num_files) == (
        True, DEFAULT_TARGET_SIZE, DEFAULT_TARGET_SIZE // 2, DEFAULT_MIN_NUM_FILES)
    assert (DEFAULT_TARGET_SIZE, DEFAULT_MIN_NUM_FILES) == (128 * MB, 50)


@pytest.mark.parametrize("value, enabled", [("true", True), ("TRUE", True), ("legacy", True), ("auto", True),
                                            ("false", False), (" False ", False)])
def test_the_table_property_takes_databricks_values(value: str, enabled: bool) -> None:
    assert settings_of({"delta.autoOptimize.autoCompact": value}, {}).enabled is enabled


def test_the_table_property_wins_over_the_session() -> None:
    session = {"spark.databricks.delta.autoCompact.enabled": "false"}
    assert settings_of({}, session).enabled is False
    assert settings_of({"delta.autoOptimize.autoCompact": "auto"}, session).enabled is True
    assert settings_of({"delta.autoOptimize.autoCompact": "false"},
                       {"spark.databricks.delta.autoCompact.enabled": "true"}).enabled is False


def test_an_unknown_property_value_is_refused_naming_it() -> None:
    with pytest.raises(ConfigError, match="delta.autoOptimize.autoCompact is 'sometimes'"):
        settings_of({"delta.autoOptimize.autoCompact": "sometimes"}, {})


def test_target_size_comes_from_the_table_then_true_then_the_session() -> None:
    session = {"spark.databricks.delta.autoCompact.maxFileSize": "32mb"}
    assert settings_of({"delta.targetFileSize": "64mb"}, session).target_size == 64 * MB
    assert settings_of({"delta.autoOptimize.autoCompact": "true"}, session).target_size == 128 * MB
    assert settings_of({}, session).target_size == 32 * MB
    assert settings_of({}, session).min_file_size == 16 * MB


def test_session_overrides_of_the_threshold_and_small_size() -> None:
    s = settings_of({}, {"spark.databricks.delta.autoCompact.minNumFiles": "5",
                         "spark.databricks.delta.autoCompact.minFileSize": "1mb"})
    assert (s.min_num_files, s.min_file_size) == (5, MB)
    with pytest.raises(ConfigError, match="minNumFiles"):
        settings_of({}, {"spark.databricks.delta.autoCompact.minNumFiles": "1"})
    with pytest.raises(ConfigError, match="maxFileSize"):
        settings_of({}, {"spark.databricks.delta.autoCompact.maxFileSize": "lots"})


def test_below_the_threshold_nothing_is_compacted() -> None:
    assert plan_bins(files([10, 10]), on(count=3)) == []


def test_off_plans_nothing() -> None:
    assert plan_bins(files([10] * 100), CompactionSettings(False, 100, 50, 2)) == []


def test_small_files_are_packed_in_commit_order_up_to_the_target() -> None:
    bins = plan_bins(files([30, 30, 30, 30, 30, 30, 30]), on(target=100, count=3))
    assert [[f.order for f in b.files] for b in bins] == [[0, 1, 2], [3, 4, 5]]  # the last alone: dropped
    assert all(b.size <= 100 for b in bins)


def test_large_files_are_never_rewritten_and_do_not_count() -> None:
    entries = files([10, 60, 10, 80, 10])
    bins = plan_bins(entries, on(target=100, min_size=50, count=3))
    assert [[f.size for f in b.files] for b in bins] == [[10, 10, 10]]
    assert plan_bins(entries, on(target=100, min_size=50, count=4)) == []


def test_partitions_are_planned_apart_and_only_those_over_the_threshold() -> None:
    a = (("day", "2026-12-01"),)
    b = (("day", "2026-12-02"),)
    nulls = (("day", None),)
    entries = files([10] * 4, b) + files([10] * 2, a, start=10) + files([10] * 3, nulls, start=20)
    bins = plan_bins(entries, on(count=3))
    assert [b_.partition for b_ in bins] == [nulls, b]
    assert all(len({f.partition for f in b_.files}) == 1 for b_ in bins)


def test_commit_order_wins_over_input_order() -> None:
    entries = list(reversed(files([10, 10, 10])))
    assert [f.order for f in plan_bins(entries, on())[0].files] == [0, 1, 2]


def test_deleted_rows_are_left_out_of_the_rows_a_bin_writes_and_wholly_deleted_files_are_not_candidates() -> None:
    entries = [FileEntry("a", 10, 10, deleted_rows=3, order=0), FileEntry("b", 10, 10, order=1),
               FileEntry("c", 10, 5, deleted_rows=5, order=2), FileEntry("d", 10, 10, order=3)]
    (only,) = plan_bins(entries, on())
    assert [f.path for f in only.files] == ["a", "b", "d"]
    assert only.live_rows == 27


def test_every_small_file_of_a_compacted_partition_is_in_exactly_one_bin_or_left_alone() -> None:
    entries = files([7, 23, 41, 5, 49, 12, 33, 1, 48, 2] * 5)
    settings = on(target=100, min_size=50, count=3)
    bins = plan_bins(entries, settings)
    paths = [f.path for b in bins for f in b.files]
    assert len(paths) == len(set(paths))
    assert all(b.size <= settings.target_size for b in bins)
    assert len(entries) - len(paths) <= 1  # at most the tail's single file is left
