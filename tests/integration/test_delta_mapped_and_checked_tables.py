"""delta-spark tables with column mapping, CHECK constraints, generated columns and invariants (issue 35).

Real Kafka, the run's Spark session with delta-spark, real Delta. Column mapping: delta-spark
creates a partitioned table with a nested struct in ``name`` or ``id`` mode, renames a column and
drops one; the sink's files must carry the physical names and field ids, their statistics and
partition values keyed physically, and delta-spark (read, OPTIMIZE, VACUUM) and delta-rs must read
the rows that landed. Rules: a generated column is computed, a row that breaks a CHECK constraint
or a legacy invariant fails its batch naming the rule and the row, with nothing landed and no
offset moved; once the rule is fixed, Spark's replay lands the batch once.
"""

from __future__ import annotations

import json
import pathlib
from collections import Counter
from typing import Any, Dict, List, Set, Tuple

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from pyspark_kafka_group import DeltaSink
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

Row = Tuple[int, int, str]


def _mapped(df: Any) -> Any:
    """The batch as the column-mapped table names it (``value`` renamed ``payload``, a nested struct)."""
    return df.selectExpr("CAST(value AS STRING) AS payload", "topic", "partition", "offset",
                         "named_struct('p', partition, 'o', offset) AS meta")


def _spark_rows(spark: SparkSession, table: pathlib.Path) -> Counter[Row]:
    rows = spark.read.format("delta").load(str(table)).collect()
    for r in rows:
        assert (r.meta.p, r.meta.o) == (r.partition, r.offset), r
    return Counter((r.partition, r.offset, r.payload) for r in rows)


def _delta_rs_rows(table: pathlib.Path) -> Counter[Row]:
    result = QueryBuilder().register("t", DeltaTable(str(table))).execute(
        'SELECT "partition", "offset", payload, meta[\'o\'] AS o FROM t')
    rows = pa.table(result.read_all()).to_pylist()
    assert all(r["o"] == r["offset"] for r in rows), rows
    return Counter((r["partition"], r["offset"], r["payload"]) for r in rows)


def _expected(counts: Dict[int, int]) -> Counter[Row]:
    return Counter((p, i, f'{{"n":{i},"p":{p}}}') for p, n in counts.items() for i in range(n))


def _physical_names(table: pathlib.Path) -> Set[str]:
    names: Set[str] = set()

    def walk(kind: Any) -> None:
        for f in kind.get("fields", []) if isinstance(kind, dict) else []:
            names.add(f["metadata"]["delta.columnMapping.physicalName"])
            walk(f["type"])

    walk(json.loads(DeltaTable(str(table)).schema().to_json()))
    return names


def _sink_adds(table: pathlib.Path) -> List[Dict[str, Any]]:
    adds = []
    for commit in sorted((table / "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]
        if any("kafkaGroup.groupId" in json.dumps(a.get("commitInfo", {})) for a in actions):
            adds += [a["add"] for a in actions if "add" in a]
    return adds


@pytest.mark.parametrize("mode", ["name", "id"])
def test_column_mapped_tables_take_batches_under_physical_names(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path, mode: str
) -> None:
    topic, group, table, chk = make_topic(2), unique_name("group"), tmp_path / "table", tmp_path / "chk"
    spark.sql(f"CREATE TABLE delta.`{table}` (value STRING, topic STRING, partition INT, offset BIGINT, "
              "meta STRUCT<p: INT, o: BIGINT>, gone STRING) USING DELTA PARTITIONED BY (partition) "
              f"TBLPROPERTIES ('delta.columnMapping.mode' = '{mode}')")
    spark.sql(f"ALTER TABLE delta.`{table}` RENAME COLUMN value TO payload")
    spark.sql(f"ALTER TABLE delta.`{table}` DROP COLUMN gone")
    produce(kafka.bootstrap_servers, topic, {0: 6, 1: 4})
    land_available_now(delta_source(spark, kafka, topic, group, table), DeltaSink(str(table), transform=_mapped), chk)

    wanted = _expected({0: 6, 1: 4})
    assert table_positions(table, group, topic, 2) == {0: 6, 1: 4}
    assert _spark_rows(spark, table) == wanted
    assert _delta_rs_rows(table) == wanted
    # The protocol's keys: partition values and statistics by physical names (data skipping uses them).
    physical = _physical_names(table)
    adds = _sink_adds(table)
    assert adds and all(set(a["partitionValues"]) <= physical and len(a["partitionValues"]) == 1 for a in adds)
    assert all(set(json.loads(a["stats"])["minValues"]) <= physical for a in adds), adds
    assert spark.read.format("delta").load(str(table)).where("offset = 5").count() == 1

    spark.sql(f"OPTIMIZE delta.`{table}`").collect()
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        spark.sql(f"VACUUM delta.`{table}` RETAIN 0 HOURS").collect()
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    assert _spark_rows(spark, table) == wanted
    assert _delta_rs_rows(table) == wanted


def test_generated_columns_are_computed_and_a_row_breaking_a_check_fails_its_batch_until_fixed(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    topic, group, table, chk = make_topic(1), unique_name("group"), tmp_path / "table", tmp_path / "chk"
    spark.sql(f"CREATE TABLE delta.`{table}` (value STRING, topic STRING, partition INT, offset BIGINT, "
              "value_length INT GENERATED ALWAYS AS (length(value))) USING DELTA")
    spark.sql(f"ALTER TABLE delta.`{table}` ADD CONSTRAINT small_offsets CHECK (offset < 3)")
    produce(kafka.bootstrap_servers, topic, {0: 4})

    def keep(df: Any) -> Any:
        return df.selectExpr("CAST(value AS STRING) AS value", "topic", "partition", "offset")

    with pytest.raises(StreamingQueryException) as failure:
        land_available_now(delta_source(spark, kafka, topic, group, table), DeltaSink(str(table), transform=keep),
                           chk)
    message = str(failure.value)
    assert "ConstraintViolationError" in message, message[-3000:]
    assert "CHECK constraint small_offsets (offset < 3) is violated by the row with offset=3" in message, \
        message[-3000:]
    assert "Nothing of the batch was committed and no offset moved" in message, message[-3000:]
    assert not DeltaTable(str(table)).file_uris(), "the batch was committed"
    assert table_positions(table, group, topic, 1) == {0: 0}
    assert not (table / "data").exists() or not any((table / "data").rglob("*.parquet")), "the files were kept"

    # The user fixes the rule; Spark replays the batch (same offsets) and it lands once, generated column computed.
    spark.sql(f"ALTER TABLE delta.`{table}` DROP CONSTRAINT small_offsets")
    spark.sql(f"ALTER TABLE delta.`{table}` ADD CONSTRAINT known_offsets CHECK (offset < 100)")
    land_available_now(delta_source(spark, kafka, topic, group, table), DeltaSink(str(table), transform=keep), chk)
    assert table_positions(table, group, topic, 1) == {0: 4}
    rows = spark.read.format("delta").load(str(table)).collect()
    assert sorted((r.offset, r.value_length) for r in rows) == [(i, len(f'{{"n":{i},"p":0}}')) for i in range(4)]
    spark.sql(f"OPTIMIZE delta.`{table}`").collect()
    assert spark.read.format("delta").load(str(table)).count() == 4
    # delta-spark's own writer accepts the table after the sink's commits.
    spark.sql(f"INSERT INTO delta.`{table}` (value, topic, partition, offset) VALUES ('abc', 'x', 9, 50)")
    assert spark.sql(f"SELECT value_length FROM delta.`{table}` WHERE partition = 9").collect()[0][0] == 3


def test_a_row_breaking_a_legacy_invariant_fails_its_batch_naming_it(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    topic, group, table, chk = make_topic(1), unique_name("group"), tmp_path / "table", tmp_path / "chk"
    invariant = {"delta.invariants": json.dumps({"expression": {"expression": "offset < 3"}})}
    schema = StructType([StructField("value", StringType()), StructField("topic", StringType()),
                         StructField("partition", IntegerType()), StructField("offset", LongType(), True, invariant)])
    spark.createDataFrame([], schema).write.format("delta").save(str(table))  # protocol (1, 2), as before features
    produce(kafka.bootstrap_servers, topic, {0: 3})

    def keep(df: Any) -> Any:
        return df.selectExpr("CAST(value AS STRING) AS value", "topic", "partition", "offset")

    land_available_now(delta_source(spark, kafka, topic, group, table), DeltaSink(str(table), transform=keep), chk)
    assert table_positions(table, group, topic, 1) == {0: 3}
    produce(kafka.bootstrap_servers, topic, {0: 1}, start=3)
    with pytest.raises(StreamingQueryException) as failure:
        land_available_now(delta_source(spark, kafka, topic, group, table), DeltaSink(str(table), transform=keep),
                           chk)
    message = str(failure.value)
    assert "invariant of column offset (offset < 3) is violated by the row with offset=3" in message, message[-3000:]
    assert table_positions(table, group, topic, 1) == {0: 3}
    assert sorted(r.offset for r in spark.read.format("delta").load(str(table)).collect()) == [0, 1, 2]
