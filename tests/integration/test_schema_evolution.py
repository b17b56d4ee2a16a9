"""Schema evolution into the sink's table (issue 15, item 4): DeltaSink(..., merge_schema=True).

Real Kafka, the run's Spark session (with delta-spark), real Delta. One query whose transform changes
between its batches: a column appears from a batch on and is merged into the table's schema; then a
column of the table disappears and is read as NULL. Every record lands once, and delta-spark and
delta-rs read the merged schema. Refusals (a new column without merge_schema, a type change even
with it) are in ``test_delta_schema_check.py``. A query killed between the ADD COLUMN commit and the
batch's data commit lands the batch once when restarted.
"""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
from typing import Any, Callable, List

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from pyspark_kafka_group import DeltaSink
from tests.support import (
    REPO,
    Cluster,
    MakeTopic,
    delta_query_command,
    delta_source,
    expected,
    keep_columns,
    land_available_now,
    produce,
    table_positions,
    table_records,
    unique_name,
)

pytestmark = pytest.mark.integration


def with_length(df: Any) -> Any:  # a column the table does not have yet
    return keep_columns(df).selectExpr("*", "length(value) AS value_length")


def without_value(df: Any) -> Any:  # a column of the table left out
    return df.selectExpr("topic", "partition", "offset", "CAST(length(value) AS INT) AS value_length")


class Phases:
    """A DeltaSink transform that applies ``transforms[i]`` to the i-th batch it sees, the last one after."""

    def __init__(self, *transforms: Callable[[Any], Any]) -> None:
        self.transforms: List[Callable[[Any], Any]] = list(transforms)
        self.calls = 0

    def __call__(self, df: Any) -> Any:
        transform = self.transforms[min(self.calls, len(self.transforms) - 1)]
        self.calls += 1
        return transform(df)


def test_a_column_added_mid_stream_is_merged_and_a_dropped_one_reads_null(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    topic, group, table = make_topic(1), unique_name("group"), tmp_path / "table"
    produce(kafka.bootstrap_servers, topic, {0: 20})
    # Four batches of 5 records: offsets 0-9 as the table was created, 10-14 with a new column,
    # 15-19 with the new column but without 'value'.
    transform = Phases(keep_columns, keep_columns, with_length, without_value)
    land_available_now(delta_source(spark, kafka, topic, group, table, maxOffsetsPerTrigger=5),
                       # the sink names the table by a file: URI, the source by its path: the same table
                       DeltaSink(table.as_uri(), transform=transform, merge_schema=True), tmp_path / "chk")
    assert transform.calls == 4

    assert table_records(table) == expected(topic, {0: 20})
    assert table_positions(table, group, topic, 1) == {0: 20}
    dt = DeltaTable(str(table))
    assert [f.name for f in dt.schema().fields] == ["value", "topic", "partition", "offset", "value_length"]
    rows = dt.to_pyarrow_dataset().to_table(columns=["offset", "value", "value_length"]).to_pylist()
    by_offset = {r["offset"]: (r["value"], r["value_length"]) for r in rows}
    assert all(by_offset[o][1] is None for o in range(10)), by_offset
    assert all(by_offset[o][1] == len(by_offset[o][0]) for o in range(10, 15)), by_offset
    assert all(by_offset[o][0] is None and by_offset[o][1] is not None for o in range(15, 20)), by_offset

    # delta-spark reads the merged schema, the same rows, and the schema change in the history.
    read = spark.read.format("delta").load(str(table))
    assert read.columns == ["value", "topic", "partition", "offset", "value_length"]
    assert {r.offset: (r.value, r.value_length) for r in read.collect()} == by_offset
    history = [r.operation for r in sorted(spark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect(),
                                           key=lambda r: r.version)]
    assert history.count("ADD COLUMN") == 1, history
    assert history[history.index("ADD COLUMN") + 1] == "WRITE", history


@pytest.mark.crash
def test_killed_between_the_schema_merge_and_the_data_commit_lands_the_batch_once(
    kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    """SIGKILL the query (driver, JVM, workers) right after the ADD COLUMN commit, before the batch's data
    and offsets: the table has the new column and nothing of the batch; the restarted query lands it once."""
    topic, group, table, checkpoint = make_topic(1), unique_name("group"), tmp_path / "table", tmp_path / "chk"
    command = delta_query_command(kafka.bootstrap_servers, topic, group, table, checkpoint, "--available-now")
    produce(kafka.bootstrap_servers, topic, {0: 10})
    first = subprocess.run(command, cwd=REPO, start_new_session=True, capture_output=True, timeout=300)
    assert first.returncode == 0, first.stderr.decode()[-3000:]

    produce(kafka.bootstrap_servers, topic, {0: 10}, start=10)
    merging = [*command, "--add-column", "--merge-schema"]
    env = {**os.environ, "KAFKA_GROUP_FAULT_POINT": "delta.after_schema_merge"}
    killed = subprocess.run(merging, cwd=REPO, env=env, start_new_session=True, capture_output=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-3000:]
    assert "value_length" in [f.name for f in DeltaTable(str(table)).schema().fields]
    assert table_records(table) == expected(topic, {0: 10})
    assert table_positions(table, group, topic, 1) == {0: 10}

    again = subprocess.run(merging, cwd=REPO, start_new_session=True, capture_output=True, timeout=300)
    assert again.returncode == 0, again.stderr.decode()[-3000:]
    assert table_records(table) == expected(topic, {0: 20})
    assert table_positions(table, group, topic, 1) == {0: 20}
    lengths = DeltaTable(str(table)).to_pyarrow_dataset().to_table(columns=["offset", "value_length"]).to_pylist()
    assert sorted(r["offset"] for r in lengths if r["value_length"] is not None) == list(range(10, 20))
