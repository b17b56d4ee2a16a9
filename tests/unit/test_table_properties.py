"""The table properties that change how the sink writes, parsed from a table's configuration."""

from __future__ import annotations

import pyarrow as pa
import pytest

from kafka_group.delta.files.file_stats import FileStats
from kafka_group.delta.rules.table_properties import stats_columns, target_file_size
from kafka_group.errors import ConfigError


@pytest.mark.parametrize("raw, size", [("134217728", 134217728), ("128mb", 128 << 20), ("16KB", 16 << 10),
                                       (" 1g ", 1 << 30)])
def test_target_file_sizes_read_as_spark_reads_sizes(raw: str, size: int) -> None:
    assert target_file_size({"delta.targetFileSize": raw}) == size


@pytest.mark.parametrize("raw", ["0", "-5", "big", ""])
def test_a_target_file_size_that_is_no_size_is_refused_naming_the_property(raw: str) -> None:
    with pytest.raises(ConfigError, match="delta.targetFileSize"):
        target_file_size({"delta.targetFileSize": raw})


def test_unset_properties_change_nothing() -> None:
    assert target_file_size({}) is None and stats_columns({}) is None


def test_stats_columns_choose_the_columns_with_statistics() -> None:
    schema = pa.schema([("a", pa.int64()), ("b", pa.string()), ("c", pa.int64())])
    stats = FileStats(schema, indexed_columns=1, stats_columns=stats_columns({"delta.dataSkippingStatsColumns": "`C`, b"}))
    stats.update(pa.table({"a": [1, 2], "b": ["x", "y"], "c": [5, 6]}))
    assert '"minValues":{"b":"x","c":5}' in stats.to_json()


def test_the_first_indexed_columns_have_statistics_without_stats_columns() -> None:
    schema = pa.schema([("a", pa.int64()), ("s", pa.struct([("x", pa.int64()), ("y", pa.int64())])), ("c", pa.int64())])
    stats = FileStats(schema, indexed_columns=2)  # a, then the struct's two leaves would pass the budget
    stats.update(pa.table({"a": [1], "s": [{"x": 1, "y": 2}], "c": [5]}))
    assert '"minValues":{"a":1}' in stats.to_json()
