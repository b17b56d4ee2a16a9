"""The keyed (CDC) sink where batches are cut, and tables it did not create (Apache Kafka, real Spark,
delta-rs and delta-spark).

Events of one key with equal sequences must give the same table whether they land in one batch or
in two (the later Kafka offset wins, docs/cdc.md), for SCD1 through delta-rs's MERGE, SCD1 through
the connector's own MERGE (a table with deletion vectors) and SCD2. Rows a snapshot loaded without
the sink's sequence (NULL ``__SEQUENCE``, ``__START_AT``) take the key's next event. A nested
invariant the own MERGE does not evaluate refuses the table.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any, Dict, List, Optional

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from pyspark_kafka_group import DeltaSink
from tests.cdc_support import Event, parse, produce_events, spark_rows, table_rows
from tests.integration.test_cdc_deletion_vectors import _deletion_vectors_added_by_the_sink
from tests.support import Cluster, MakeTopic, delta_source, land_available_now, table_positions, unique_name

pytestmark = pytest.mark.integration

SCD1 = ["id", "v", "__SEQUENCE"]
SCD2 = ["id", "v", "__START_AT", "__END_AT"]


def _u(v: int, seq: int) -> Dict[str, Any]:
    return {"v": v, "seq": seq, "op": "u"}


def _d(seq: int) -> Dict[str, Any]:
    return {"v": None, "seq": seq, "op": "d"}


#: One partition, in offset order. Each key's second and third events share sequence 5; the first
#: batch of the cut run ends after offset 7 (maxOffsetsPerTrigger=8), between them.
FIRST: List[Event] = [
    (0, "a", _u(10, 1)), (0, "a", _u(11, 5)),          # then a later upsert at 5
    (0, "d", _u(20, 1)), (0, "d", _u(21, 5)),          # then a later delete at 5
    (0, "u", _u(30, 1)), (0, "u", _d(5)),              # then a later upsert at 5
    (0, "snap", _u(7, 5)), (0, "snapdel", _d(5)),     # rows a snapshot loaded with a NULL sequence
]
SECOND: List[Event] = [(0, "a", _u(12, 5)), (0, "d", _d(5)), (0, "u", _u(32, 5))]

WANT_SCD1 = [("a", 12, 5), ("snap", 7, 5), ("u", 32, 5)]
WANT_SCD2 = sorted([("a", 10, 1, 5), ("a", 12, 5, None), ("d", 20, 1, 5), ("snap", 100, None, 5),
                    ("snap", 7, 5, None), ("snapdel", 200, None, 5), ("u", 30, 1, 5), ("u", 32, 5, None)], key=repr)


def test_equal_sequences_and_snapshot_rows_give_one_table_whatever_the_batches(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    """Each kind of table is created by delta-spark holding two snapshot rows without a sequence, then
    the same events land into one copy in one batch and into another in two; both copies must hold
    the later offset's version of every tie, and the snapshot rows updated or deleted."""
    topic = make_topic(1)
    produce_events(kafka.bootstrap_servers, topic, FIRST + SECOND)
    kinds = {"scd1": ("v BIGINT, __SEQUENCE BIGINT", "NULL", ""),
             "scd1-dvs": ("v BIGINT, __SEQUENCE BIGINT", "NULL",
                          "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"),
             "scd2": ("v BIGINT, __START_AT BIGINT, __END_AT BIGINT", "NULL, NULL", "")}
    results: Dict[str, Any] = {}
    for kind, (columns, nulls, properties) in kinds.items():
        for cut, max_offsets in (("one", 1000), ("two", len(FIRST))):
            name = f"{kind}-{cut}"
            table = tmp_path / name
            spark.sql(f"CREATE TABLE delta.`{table}` (id STRING, {columns}) USING DELTA {properties}")
            spark.sql(f"INSERT INTO delta.`{table}` VALUES ('snap', 100, {nulls}), ('snapdel', 200, {nulls})")
            sink = DeltaSink(str(table), keys=["id"], sequence_by="seq", apply_as_deletes="op = 'd'",
                             transform=parse, column_list=["id", "v"], stored_as_scd_type=2 if kind == "scd2" else 1)
            group = unique_name("group")
            try:
                query = land_available_now(delta_source(spark, kafka, topic, group, table,
                                                        maxOffsetsPerTrigger=max_offsets), sink, tmp_path / f"chk-{name}")
            except StreamingQueryException as exc:
                results[name] = str(exc).splitlines()[0][:300]
                continue
            columns_read = SCD2 if kind == "scd2" else SCD1
            rows = spark_rows(spark, table, columns_read)
            # delta-rs's reader does not read deletion vectors: delta-spark alone reads that table
            same = kind == "scd1-dvs" or rows == table_rows(table, columns_read)
            results[name] = {"rows": rows, "delta-rs reads the same": same,
                             "batches": [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]],
                             "position": table_positions(table, group, topic, 1)}
    total = len(FIRST) + len(SECOND)
    want = {f"{kind}-{cut}": {"rows": WANT_SCD2 if kind == "scd2" else WANT_SCD1, "delta-rs reads the same": True,
                              "batches": [total] if cut == "one" else [len(FIRST), len(SECOND)],
                              "position": {0: total}}
            for kind in kinds for cut in ("one", "two")}
    assert results == want
    assert _deletion_vectors_added_by_the_sink(tmp_path / "scd1-dvs-two") > 0  # the own MERGE ran


def test_a_nested_invariant_refuses_the_own_merge_before_anything_lands(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    """A table with deletion vectors (the own MERGE) and a legacy invariant on a nested field, which
    delta-spark enforces: a batch whose row breaks it must not land."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    topic, group, table = make_topic(1), unique_name("group"), tmp_path / "table"
    invariant = {"delta.invariants": json.dumps({"expression": {"expression": "s.x < 100"}})}
    schema = StructType([StructField("id", StringType()),
                         StructField("s", StructType([StructField("x", LongType(), True, invariant)])),
                         StructField("__SEQUENCE", LongType())])
    spark.createDataFrame([], schema).write.format("delta").save(str(table))
    spark.sql(f"ALTER TABLE delta.`{table}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    with pytest.raises(Exception, match="s.x < 100"):  # delta-spark itself refuses such a row
        spark.sql(f"INSERT INTO delta.`{table}` VALUES ('z', named_struct('x', 500), 1)").collect()

    def nested(df: Any) -> Any:
        return parse(df).select("__kafka", "id", F.struct(F.col("v").alias("x")).alias("s"), "seq")

    produce_events(kafka.bootstrap_servers, topic, [(0, "k", _u(500, 1))])
    sink = DeltaSink(str(table), keys=["id"], sequence_by="seq", transform=nested, column_list=["id", "s"])
    failure: Optional[BaseException] = None
    try:
        land_available_now(delta_source(spark, kafka, topic, group, table), sink, tmp_path / "chk")
    except StreamingQueryException as exc:
        failure = exc
    landed = spark.read.format("delta").load(str(table)).count()
    assert failure is not None, f"the batch landed {landed} row(s) breaking the invariant s.x < 100"
    assert "invariant" in str(failure) and "s.x" in str(failure), str(failure)[-3000:]
    assert landed == 0
    assert table_positions(table, group, topic, 1)[0] in (None, 0)  # at most the batch's start: no offset moved
