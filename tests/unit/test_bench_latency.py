"""The pure parts of ``bench.latency``: percentiles, records mapped to the Delta version that added them,
the exactly-once check and the breakdown of batches by phase."""

from __future__ import annotations

import json
import os
import pathlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.latency import (
    Landed,
    batch_phases,
    check_exactly_once,
    commit_versions,
    percentile,
    record_latencies,
    summarize,
)


def test_percentile_is_the_nearest_rank() -> None:
    values = list(range(1, 101))  # 1..100
    assert percentile(values, 50) == 50
    assert percentile(values, 99) == 99
    assert percentile(values, 100) == 100
    assert percentile(values, 0) == 1
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) != percentile([], 50)  # NaN


def test_percentile_refuses_out_of_range() -> None:
    with pytest.raises(ValueError):
        percentile([1, 2], 101)


def test_summarize_sorts_first() -> None:
    assert summarize([5, 1, 3]) == {"count": 3, "median": 3.0, "p90": 5.0, "p99": 5.0, "max": 5.0}


def _file(table: pathlib.Path, name: str, partition: int, offsets: list[int], produced_ms: list[int]) -> None:
    rows = pa.table({
        "partition": pa.array([partition] * len(offsets), pa.int32()),
        "offset": pa.array(offsets, pa.int64()),
        "timestamp": pa.array(produced_ms, pa.timestamp("ms", tz="UTC")).cast(pa.timestamp("us", tz="UTC")),
    })
    os.makedirs((table / name).parent, exist_ok=True)
    pq.write_table(rows, table / name)


def _commit(table: pathlib.Path, version: int, info: dict[str, int], adds: list[str]) -> None:
    log = table / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    actions = [{"commitInfo": info}] + [{"add": {"path": a, "size": 1, "dataChange": True}} for a in adds]
    (log / f"{version:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")


def test_records_map_to_the_version_that_added_their_file(tmp_path: pathlib.Path) -> None:
    _commit(tmp_path, 0, {"timestamp": 900}, [])  # the table's creation: no file
    _file(tmp_path, "a.parquet", 0, [0, 1], [1000, 1010])
    _file(tmp_path, "p=x y/b.parquet", 1, [0], [1020])
    _commit(tmp_path, 1, {"timestamp": 1500}, ["a.parquet", "p=x%20y/b.parquet"])  # paths are URI-encoded
    _file(tmp_path, "c.parquet", 0, [2], [1600])
    # an in-commit timestamp wins over the commit's wall-clock timestamp
    _commit(tmp_path, 2, {"timestamp": 9999, "inCommitTimestamp": 1700}, ["c.parquet"])
    versions = commit_versions(str(tmp_path))
    assert [(v.version, v.timestamp_ms, v.in_commit_timestamp) for v in versions] == [
        (0, 900, False), (1, 1500, False), (2, 1700, True)]
    landed = record_latencies(str(tmp_path), versions)
    assert sorted(zip(landed.partition, landed.offset, landed.version, landed.produced_ms, landed.committed_ms)) == [
        (0, 0, 1, 1000, 1500), (0, 1, 1, 1010, 1500), (0, 2, 2, 1600, 1700), (1, 0, 1, 1020, 1500)]
    # the window keeps records by produce time: [1005, 1700) holds offsets 1 and 2 of partition 0 and 0 of 1
    assert sorted(landed.latencies_ms((1005, 1700))) == [100, 480, 490]
    assert check_exactly_once(landed, 2) == {0: 3, 1: 1}


def test_exactly_once_refuses_duplicates_and_gaps() -> None:
    twice = Landed([0, 0], [0, 0], [1, 1], [2, 2], [1, 2])
    with pytest.raises(AssertionError, match="1 records landed twice"):
        check_exactly_once(twice, 1)
    gap = Landed([0, 0], [0, 2], [1, 1], [2, 2], [1, 1])
    with pytest.raises(AssertionError, match="gaps"):
        check_exactly_once(gap, 1)


def test_batch_phases_keeps_the_windows_batches_with_rows() -> None:
    def progress(second: int, rows: int, trigger: int, add: int) -> dict[str, object]:
        return {"timestamp": f"2026-12-07T10:00:{second:02d}.000Z", "numInputRows": rows,
                "durationMs": {"triggerExecution": trigger, "addBatch": add, "latestOffset": 10}}

    start_ms = 1796637600000  # 2026-12-07T10:00:00Z
    batches = [progress(0, 5, 500, 400), progress(1, 5, 800, 700), progress(2, 0, 10, 0), progress(3, 5, 600, 500),
               progress(9, 5, 100, 50)]
    phases = batch_phases(batches, (start_ms + 1000, start_ms + 4000))
    assert phases["batches"] == 2
    assert phases["addBatch"] == {"median": 500.0, "p90": 700.0}
    assert phases["other"] == {"median": 90.0, "p90": 90.0}  # 600 - 10 - 500, 800 - 10 - 700
    # from the end of the window's batches to the next batch with rows: 3000 - 1800, 9000 - 3600
    assert phases["trigger wait"] == {"median": 1200.0, "p90": 5400.0}
