"""delta-spark tables with deletion vectors and identity columns (issue 15, item 3, two gaps).

Real Kafka, the run's Spark session with delta-spark, real Delta: the sink appends to a table whose
rows delta-spark deleted through deletion vectors (both readers then agree, and every record not
deleted is there once), and refuses, before any file, tables with identity columns, whose values it
would not assign.
"""

from __future__ import annotations

import pathlib
from collections import Counter
from typing import Any, Tuple

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from pyspark_kafka_group import DeltaSink
from tests.integration.test_delta_spark import SINK_COLUMNS, land, once, spark_offsets
from tests.support import (
    Cluster,
    MakeTopic,
    delta_source,
    land_available_now,
    produce,
    table_positions,
    unique_name,
)

pytestmark = pytest.mark.integration


def delta_rs_offsets(table: pathlib.Path) -> Counter[Tuple[int, int]]:
    """How often each (partition, offset) is in ``table``, read by delta-rs's query engine (which
    applies deletion vectors)."""
    result = QueryBuilder().register("t", DeltaTable(str(table))).execute('SELECT "partition", "offset" FROM t')
    rows = pa.table(result.read_all()).to_pylist()
    return Counter((r["partition"], r["offset"]) for r in rows)


def test_a_table_with_deletion_vectors_takes_more_appends_and_both_readers_agree(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    topic, group, table, chk = make_topic(2), unique_name("group"), tmp_path / "table", tmp_path / "chk"
    spark.sql(f"CREATE TABLE delta.`{table}` ({SINK_COLUMNS}) USING DELTA "
              "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    produce(kafka.bootstrap_servers, topic, {0: 30, 1: 20})
    land(spark, kafka, topic, group, table, chk)

    spark.sql(f"DELETE FROM delta.`{table}` WHERE offset % 3 = 0")
    [delete] = [r for r in spark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect() if r.operation == "DELETE"]
    assert int(delete.operationMetrics["numDeletionVectorsAdded"]) > 0, delete.operationMetrics  # not a rewrite

    produce(kafka.bootstrap_servers, topic, {0: 10, 1: 10}, start=30)
    land(spark, kafka, topic, group, table, chk)

    deleted = Counter({(p, o): 1 for p, n in {0: 30, 1: 20}.items() for o in range(n) if o % 3 == 0})
    wanted = once({0: 40, 1: 30}) - deleted
    assert table_positions(table, group, topic, 2) == {0: 40, 1: 30}
    assert spark_offsets(spark, table) == wanted
    assert delta_rs_offsets(table) == wanted


@pytest.mark.parametrize("column, named", [
    ("id BIGINT GENERATED ALWAYS AS IDENTITY", "column 'id' is an identity column"),
], ids=["identity"])  # generated columns are computed: tests/integration/test_delta_mapped_and_checked_tables.py
def test_identity_columns_are_refused_before_any_file(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path, column: str, named: str
) -> None:
    topic, group, table = make_topic(1), unique_name("group"), tmp_path / "table"
    spark.sql(f"CREATE TABLE delta.`{table}` ({SINK_COLUMNS}, {column}) USING DELTA")
    produce(kafka.bootstrap_servers, topic, {0: 5})
    with pytest.raises(StreamingQueryException) as failure:
        land(spark, kafka, topic, group, table, tmp_path / "chk")
    message = str(failure.value)
    assert named in message and "Nothing was written" in message and "new table" in message, message[-2000:]
    assert DeltaTable(str(table)).version() == 0, "the refused table was changed"
    assert not (table / "data").exists() or not any((table / "data").iterdir()), "files were written"


def test_a_null_in_a_not_null_column_is_refused_before_the_commit_and_lands_once_the_query_is_fixed(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    """Issue 26 item 3: delta-spark declares ``key STRING NOT NULL`` as ``"nullable": false``; a batch
    with a null Kafka key must not land there (delta-rs then cannot read the table)."""
    from confluent_kafka import Producer

    topic, group, table, chk = make_topic(1), unique_name("group"), tmp_path / "table", tmp_path / "chk"
    spark.sql(f"CREATE TABLE delta.`{table}` (key STRING NOT NULL, {SINK_COLUMNS}) USING DELTA")
    produce(kafka.bootstrap_servers, topic, {0: 3})
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    producer.produce(topic, key=None, value=b'{"n":3,"p":0}', partition=0)
    assert producer.flush(30) == 0

    def with_key(df: Any) -> Any:
        return df.selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "topic", "partition",
                             "offset")

    with pytest.raises(StreamingQueryException) as failure:
        land_available_now(delta_source(spark, kafka, topic, group, table), DeltaSink(str(table), transform=with_key),
                           chk)
    message = str(failure.value)
    assert "NotNullViolationError" in message and "1 row(s) with NULL in column 'key'" in message, message[-2000:]
    assert str(table) in message and "DROP NOT NULL" in message and "replays" in message, message[-2000:]
    assert not DeltaTable(str(table)).file_uris(), "the batch was committed"
    # Positioning recorded t-0's start (earliest: 0) in the existing table, in a commit with no data (issue 33,
    # finding 4); the refused batch moved nothing.
    assert table_positions(table, group, topic, 1) == {0: 0}
    assert not (table / "data").exists() or not any((table / "data").rglob("*.parquet")), "the files were kept"

    # The user fixes the query; Spark replays the batch (same offsets) through it, and it lands once.
    def fixed(df: Any) -> Any:
        return with_key(df).selectExpr("coalesce(key, '') AS key", "value", "topic", "partition", "offset")

    land_available_now(delta_source(spark, kafka, topic, group, table), DeltaSink(str(table), transform=fixed), chk)
    assert table_positions(table, group, topic, 1) == {0: 4}
    assert delta_rs_offsets(table) == once({0: 4})  # delta-rs reads it
    assert spark_offsets(spark, table) == once({0: 4})
