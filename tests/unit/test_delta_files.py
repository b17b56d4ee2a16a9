"""The sink's data files without Spark: statistics as safe bounds, partition values and folder names
per the Delta protocol, files written through delta-rs's object store and committed by delta-rs."""

from __future__ import annotations

import datetime
import json
import pathlib
from typing import Any, Dict

import pyarrow as pa
import pytest

from kafka_group.delta.files.file_stats import FileStats
from kafka_group.delta.files.parquet_writer import write_partitioned
from kafka_group.delta.files.partition_values import (
    check_partition_columns,
    data_file_path,
    escape_path_name,
    partition_value,
)
from kafka_group.delta.storage.table_location import table_filesystem
from kafka_group.errors import ConfigError

UTC = datetime.timezone.utc


def stats_of(table: pa.Table, indexed: int = 32) -> Dict[str, Any]:
    stats = FileStats(table.schema, indexed)
    for batch in table.to_batches(max_chunksize=2):  # accumulated over several batches
        stats.update(batch)
    doc: Dict[str, Any] = json.loads(stats.to_json())
    return doc


def test_integer_and_date_bounds_are_exact_and_null_counts_are_counted() -> None:
    doc = stats_of(pa.table({
        "offset": pa.array([7, None, 3, 12], pa.int64()),
        "day": pa.array([datetime.date(2026, 1, 2), datetime.date(2025, 12, 31), None, None]),
    }))
    assert doc["numRecords"] == 4
    assert doc["minValues"] == {"offset": 3, "day": "2025-12-31"}
    assert doc["maxValues"] == {"offset": 12, "day": "2026-01-02"}
    assert doc["nullCount"] == {"offset": 1, "day": 2}


def test_timestamps_are_millisecond_bounds_rounded_outwards() -> None:
    low = datetime.datetime(2026, 11, 24, 12, 0, 0, 123456, tzinfo=UTC)
    high = datetime.datetime(2026, 11, 24, 13, 0, 0, 987001, tzinfo=UTC)
    exact = datetime.datetime(2026, 11, 24, 14, 0, 0, 5000, tzinfo=UTC)
    doc = stats_of(pa.table({"ts": pa.array([high, low], pa.timestamp("us", tz="UTC")),
                             "ms": pa.array([exact, exact], pa.timestamp("us", tz="Europe/Paris"))}))
    assert doc["minValues"]["ts"] == "2026-11-24T12:00:00.123Z"  # rounded down
    assert doc["maxValues"]["ts"] == "2026-11-24T13:00:00.988Z"  # rounded up
    assert doc["minValues"]["ms"] == doc["maxValues"]["ms"] == "2026-11-24T14:00:00.005Z"  # UTC, whatever the zone
    before_epoch = pa.array([-1], pa.timestamp("us", tz="UTC"))  # 1969-12-31T23:59:59.999999
    doc = stats_of(pa.table({"ts": before_epoch}))
    assert doc["minValues"]["ts"] == "1969-12-31T23:59:59.999Z" and doc["maxValues"]["ts"] == "1970-01-01T00:00:00.000Z"


def test_long_strings_are_cut_to_prefixes_that_still_bound_them() -> None:
    long_low, long_high = "a" * 40, "b" * 31 + "zzzzz"
    doc = stats_of(pa.table({"s": [long_high, long_low, "b"]}))
    assert doc["minValues"]["s"] == "a" * 32
    assert doc["maxValues"]["s"] == "b" * 31 + "{"  # 'z' + 1: above every string starting 'b'*31 + 'z'
    assert doc["maxValues"]["s"] > long_high
    top = chr(0x10FFFF)
    doc = stats_of(pa.table({"s": ["c" + top * 40]}))
    assert doc["maxValues"]["s"] == "d"  # the last characters cannot be incremented: carry left
    doc = stats_of(pa.table({"s": [top * 40]}))
    assert "s" not in doc["maxValues"] and doc["minValues"]["s"] == top * 32  # no bound: left out
    assert stats_of(pa.table({"s": ["é" * 33]}))["maxValues"]["s"] == "é" * 31 + "ê"  # characters, not bytes


def test_unsafe_or_unordered_columns_get_null_counts_only() -> None:
    doc = stats_of(pa.table({
        "f": pa.array([1.5, float("nan"), -2.0]),
        "g": pa.array([1.5, None, -2.0]),
        "b": pa.array([b"x", None, b"y"]),
        "flag": pa.array([True, False, None]),
        "ntz": pa.array([datetime.datetime(2026, 1, 1)] * 3, pa.timestamp("us")),
        "nested": pa.array([{"x": 1}] * 3),
    }))
    assert doc["minValues"] == {"g": -2.0} and doc["maxValues"] == {"g": 1.5}
    assert doc["nullCount"] == {"f": 0, "g": 1, "b": 1, "flag": 1, "ntz": 0}


def test_only_the_first_indexed_leaf_columns_get_statistics() -> None:
    table = pa.table({"a": [1], "nested": pa.array([{"x": 1, "y": 2}]), "c": [3], "d": [4]})
    assert set(stats_of(table, indexed=3)["nullCount"]) == {"a"}  # the struct takes two of the three
    assert set(stats_of(table, indexed=4)["nullCount"]) == {"a", "c"}
    assert set(stats_of(table, indexed=-1)["nullCount"]) == {"a", "c", "d"}


def test_all_null_column_has_a_null_count_and_no_bounds() -> None:
    doc = stats_of(pa.table({"x": pa.array([None, None], pa.int64())}))
    assert doc["minValues"] == {} and doc["nullCount"] == {"x": 2}


def test_partition_values_follow_the_delta_protocol() -> None:
    assert partition_value("orders", pa.string(), "topic") == "orders"
    assert partition_value("", pa.string(), "topic") is None  # Spark's convention: empty is null
    assert partition_value(None, pa.int32(), "partition") is None
    assert partition_value(-3, pa.int32(), "partition") == "-3"
    assert partition_value(True, pa.bool_(), "flag") == "true"
    assert partition_value(datetime.date(2026, 1, 2), pa.date32(), "day") == "2026-01-02"
    with pytest.raises(ConfigError, match="column 'ts'.*to_date"):
        partition_value(datetime.datetime(2026, 1, 1), pa.timestamp("us", tz="UTC"), "ts")


def test_folder_names_are_escaped_like_spark() -> None:
    assert escape_path_name("a b:c%/d=e") == "a b%3Ac%25%2Fd%3De"
    path = data_file_path(7, [("p", "a b:c"), ("n", None)])
    assert path.startswith("data/p=a b%3Ac/n=__HIVE_DEFAULT_PARTITION__/part-00000007-")


def test_partition_columns_are_checked_before_writing() -> None:
    schema = pa.schema([("topic", pa.string()), ("value", pa.binary()), ("ts", pa.timestamp("us", tz="UTC"))])
    check_partition_columns(schema, ["topic"], table="t")
    with pytest.raises(ConfigError, match="column 'missing'.*topic, value, ts"):
        check_partition_columns(schema, ["missing"], table="t")
    with pytest.raises(ConfigError, match="'topic' twice"):
        check_partition_columns(schema, ["topic", "topic"], table="t")
    with pytest.raises(ConfigError, match="column 'value' of type binary"):
        check_partition_columns(schema, ["value"], table="t")


def test_files_written_per_partition_are_committed_and_read_back_by_delta_rs(tmp_path: pathlib.Path) -> None:
    from deltalake import DeltaTable
    from deltalake.schema import Schema
    from deltalake.transaction import AddAction, create_table_with_add_actions

    schema = pa.schema([("topic", pa.string()), ("offset", pa.int64()), ("ts", pa.timestamp("us", tz="UTC"))])
    instant = datetime.datetime(2026, 11, 24, tzinfo=UTC)
    batch = pa.record_batch([pa.array(["a:b", "c", "a:b", None]), pa.array([1, 2, 3, 4]),
                             pa.array([instant] * 4, pa.timestamp("ns", tz="Etc/UTC"))], schema=pa.schema(
        [("topic", pa.string()), ("offset", pa.int64()), ("ts", pa.timestamp("ns", tz="Etc/UTC"))]))
    root = tmp_path / "table"
    files = write_partitioned([batch, batch.slice(0, 0)], filesystem=table_filesystem(str(root)), schema=schema,
                              batch_id=1, partition_by=["topic"])
    assert sorted(f.partition_values["topic"] or "" for f in files) == ["", "a:b", "c"]
    assert sum(f.num_records for f in files) == 4
    create_table_with_add_actions(
        str(root), Schema.from_arrow(schema),
        [AddAction(f.path, f.size, f.partition_values, 0, True, f.stats) for f in files],
        mode="append", partition_by=["topic"])
    table = DeltaTable(str(root))
    assert table.metadata().partition_columns == ["topic"]
    rows = table.to_pyarrow_dataset().to_table().sort_by("offset").to_pylist()
    assert [(r["topic"], r["offset"]) for r in rows] == [("a:b", 1), ("c", 2), ("a:b", 3), (None, 4)]
    assert rows[0]["ts"] == instant  # microsecond UTC instants
    assert write_partitioned([], filesystem=table_filesystem(str(root)), schema=schema, batch_id=2) == []


# -- values outside years 1-9999 (Spark's CAST(epoch millis AS TIMESTAMP) gives year ~57000) --

FAR_MS = 1_732_406_400_000 * 1000  # epoch milliseconds read as seconds: year ~56866


@pytest.mark.parametrize("unit,per_second", [("s", 1), ("ms", 1000), ("us", 1_000_000)])
def test_timestamps_beyond_year_9999_get_no_bounds_instead_of_failing(unit: str, per_second: int) -> None:
    far = pa.array([FAR_MS // 1000 * per_second, 0], pa.int64()).cast(pa.timestamp(unit, tz="UTC"))
    doc = stats_of(pa.table({"ts": far, "n": [1, 2]}))
    assert "ts" not in doc["maxValues"]  # no bound: safe for data skipping
    assert doc["minValues"]["ts"] == "1970-01-01T00:00:00.000Z" and doc["nullCount"]["ts"] == 0 and doc["minValues"]["n"] == 1
    early = pa.array([-62135596800 * per_second - per_second], pa.int64()).cast(pa.timestamp(unit, tz="UTC"))
    doc = stats_of(pa.table({"ts": early}))  # 0000-12-31T23:59:59Z: before year 1
    assert "ts" not in doc["minValues"] and "ts" not in doc["maxValues"]


def test_nanosecond_timestamps_keep_their_bounds() -> None:
    ts = pa.array([1_000_000_001, 2_999_999_999], pa.int64()).cast(pa.timestamp("ns", tz="UTC"))
    doc = stats_of(pa.table({"ts": ts}))
    assert doc["minValues"]["ts"] == "1970-01-01T00:00:01.000Z" and doc["maxValues"]["ts"] == "1970-01-01T00:00:03.000Z"


def test_dates_beyond_year_9999_get_no_bounds_instead_of_failing() -> None:
    far_days = FAR_MS // 1000 // 86400
    doc = stats_of(pa.table({"day": pa.array([far_days, 0], pa.int32()).cast(pa.date32())}))
    assert "day" not in doc["maxValues"] and doc["minValues"]["day"] == "1970-01-01"
    assert doc["nullCount"] == {"day": 0}
    doc = stats_of(pa.table({"day": pa.array([far_days * 86_400_000, 0], pa.int64()).cast(pa.date64())}))
    assert "day" not in doc["maxValues"]


def test_years_before_1000_are_zero_padded() -> None:
    instant = datetime.datetime(999, 3, 4, 5, 6, 7, 8000, tzinfo=UTC)
    doc = stats_of(pa.table({"ts": pa.array([instant], pa.timestamp("us", tz="UTC")),
                             "day": pa.array([datetime.date(999, 3, 4)])}))
    assert doc["minValues"] == {"ts": "0999-03-04T05:06:07.008Z", "day": "0999-03-04"}
    assert doc["maxValues"] == {"ts": "0999-03-04T05:06:07.008Z", "day": "0999-03-04"}


def test_date_partition_values_beyond_year_9999_are_refused_naming_the_column(tmp_path: pathlib.Path) -> None:
    schema = pa.schema([("day", pa.date32()), ("n", pa.int64())])
    far = pa.array([FAR_MS // 1000 // 86400], pa.int32()).cast(pa.date32())
    batch = pa.record_batch([far, pa.array([1])], schema=schema)
    with pytest.raises(ConfigError, match="column 'day'.*years 1 to 9999"):
        write_partitioned([batch], filesystem=table_filesystem(str(tmp_path / "t")), schema=schema, batch_id=1,
                          partition_by=["day"])
    assert not list((tmp_path / "t").rglob("*.parquet"))  # refused before any file is written
    ok = pa.record_batch([pa.array([datetime.date(999, 1, 2), None]), pa.array([1, 2])], schema=schema)
    files = write_partitioned([ok], filesystem=table_filesystem(str(tmp_path / "t")), schema=schema, batch_id=2,
                              partition_by=["day"])
    assert sorted(str(f.partition_values["day"]) for f in files) == ["0999-01-02", "None"]


# -- file layout: few row groups, one file open at a time ------------------------------


class CountingFileSystem:
    """A file system rooted at ``root`` that records, at every file it opens, how many were open."""

    def __init__(self, root: pathlib.Path) -> None:
        import pyarrow.fs as pafs

        self.inner = pafs.SubTreeFileSystem(str(root), pafs.LocalFileSystem())
        root.mkdir(parents=True, exist_ok=True)
        self.streams: list[Any] = []
        self.open_at_each_open: list[int] = []

    def open_output_stream(self, path: str) -> Any:
        self.open_at_each_open.append(sum(not s.closed for s in self.streams))
        self.inner.create_dir(path.rsplit("/", 1)[0], recursive=True)
        stream = self.inner.open_output_stream(path)
        self.streams.append(stream)
        return stream

    def get_file_info(self, path: str) -> Any:
        return self.inner.get_file_info(path)


def read_file(root: pathlib.Path, relative: str) -> Any:
    import pyarrow.parquet as pq

    return pq.ParquetFile(str(root / relative))


def test_many_small_batches_give_few_row_groups(tmp_path: pathlib.Path) -> None:
    schema = pa.schema([("offset", pa.int64()), ("value", pa.string())])
    batches = [pa.record_batch([pa.array(range(i * 10, i * 10 + 10)), pa.array(["v"] * 10)], schema=schema)
               for i in range(500)]
    [written] = write_partitioned(batches, filesystem=table_filesystem(str(tmp_path)), schema=schema, batch_id=3)
    parquet = read_file(tmp_path, written.path)
    assert parquet.metadata.num_row_groups == 1 and parquet.metadata.num_rows == written.num_records == 5000
    assert parquet.read().column("offset").to_pylist() == list(range(5000))  # order kept


def test_keys_arriving_sorted_open_one_file_at_a_time(tmp_path: pathlib.Path) -> None:
    schema = pa.schema([("topic", pa.string()), ("offset", pa.int64())])
    keys = [None, "a", "b", "c"]
    rows = [(k, i) for k in keys for i in range(25)]  # sorted by key, as the sink's sortWithinPartitions hands them
    batches = [pa.record_batch([pa.array([t for t, _ in rows[i:i + 7]], pa.string()),
                                pa.array([o for _, o in rows[i:i + 7]], pa.int64())], schema=schema)
               for i in range(0, len(rows), 7)]  # batch edges fall inside keys
    fs = CountingFileSystem(tmp_path)
    files = write_partitioned(batches, filesystem=fs, schema=schema, batch_id=4, partition_by=["topic"])
    assert fs.open_at_each_open == [0, 0, 0, 0]  # the previous key's file was closed before the next opened
    assert len(files) == len(keys)
    for f in files:
        parquet = read_file(tmp_path, f.path)
        assert parquet.metadata.num_row_groups == 1
        assert parquet.read().column("offset").to_pylist() == list(range(25)) and f.num_records == 25
    assert sorted(str(f.partition_values["topic"]) for f in files) == ["None", "a", "b", "c"]


def test_unsorted_keys_still_land_every_row_under_its_partition(tmp_path: pathlib.Path) -> None:
    schema = pa.schema([("topic", pa.string()), ("day", pa.date32()), ("offset", pa.int64())])
    day = datetime.date(2026, 11, 24)
    rows = [(["b", "a", None, "", "a"][i % 5], day if i % 3 else None, i) for i in range(60)]
    batches = [pa.record_batch([pa.array([r[0] for r in rows[i:i + 20]], pa.string()),
                                pa.array([r[1] for r in rows[i:i + 20]], pa.date32()),
                                pa.array([r[2] for r in rows[i:i + 20]], pa.int64())], schema=schema)
               for i in range(0, 60, 20)]
    files = write_partitioned(batches, filesystem=table_filesystem(str(tmp_path)), schema=schema, batch_id=5,
                              partition_by=["topic", "day"])
    landed = []
    for f in files:
        for offset in read_file(tmp_path, f.path).read().column("offset").to_pylist():
            landed.append(offset)
            topic, when, _ = rows[offset]
            assert f.partition_values == {"topic": topic or None, "day": None if when is None else "2026-11-24"}
        assert json.loads(f.stats)["numRecords"] == f.num_records
    assert sorted(landed) == list(range(60))
    assert len(files) <= 3 * 6  # at most one file per key per incoming batch
