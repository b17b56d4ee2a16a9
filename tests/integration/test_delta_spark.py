"""delta-spark on the tables DeltaSink writes (issue 15, item 3): users maintain them with it.

Real Kafka, the run's Spark session (delta-spark's extension and catalog, see ``tests/conftest.py``),
real Delta: delta-spark reads, optimizes, vacuums and checkpoints the tables the sink writes through
delta-rs, and the sink writes the tables delta-spark creates, or refuses them before any file.
"""

from __future__ import annotations

import pathlib
from collections import Counter
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest
from deltalake import DeltaTable
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from kafka_group.delta.files.commit_files import DataFile
from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
from kafka_group.errors import OffsetConflictError
from kafka_group.offsets import OffsetRange, TopicPartition
from pyspark_kafka_group import DeltaSink
from tests.support import (
    Cluster,
    MakeTopic,
    delta_source,
    keep_columns,
    land_available_now,
    produce,
    table_folder_files,
    table_offsets,
    table_positions,
    unique_name,
    wait_for,
)

pytestmark = pytest.mark.integration

#: The columns DeltaSink(transform=keep_columns) writes, as delta-spark's DDL names them.
SINK_COLUMNS = "value STRING, topic STRING, partition INT, offset BIGINT"


def land(spark: SparkSession, kafka: Cluster, topic: str, group: str, table: pathlib.Path,
         checkpoint: pathlib.Path, **options: Any) -> None:
    """Land everything ``topic`` has into ``table`` with a DeltaSink (Trigger.AvailableNow)."""
    land_available_now(delta_source(spark, kafka, topic, group, table, **options),
                       DeltaSink(str(table), transform=keep_columns), checkpoint)


def spark_offsets(spark: SparkSession, table: pathlib.Path) -> Counter[Tuple[int, int]]:
    """How often each (partition, offset) is in ``table``, read by delta-spark."""
    rows = spark.read.format("delta").load(str(table)).select("partition", "offset").collect()
    return Counter((r.partition, r.offset) for r in rows)


def once(counts: Dict[int, int]) -> Counter[Tuple[int, int]]:
    """Offsets ``[0, n)`` of each partition, once each."""
    return Counter((p, o) for p, n in counts.items() for o in range(n))


def spark_history(spark: SparkSession, table: pathlib.Path) -> List[Any]:
    """delta-spark's ``DESCRIBE HISTORY``, oldest first."""
    return sorted(spark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect(), key=lambda r: r.version)


def live_files(table: pathlib.Path) -> List[str]:
    """The data files of the table's latest version, as delta-rs sees them."""
    return sorted(DeltaTable(str(table)).file_uris())


def test_delta_spark_reads_the_sinks_tables_and_history(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    topic, group, table = make_topic(3), unique_name("group"), tmp_path / "table"
    counts = {0: 70, 1: 40, 2: 25}
    produce(kafka.bootstrap_servers, topic, counts)
    land(spark, kafka, topic, group, table, tmp_path / "chk", maxOffsetsPerTrigger=50)

    assert spark_offsets(spark, table) == table_offsets(table) == once(counts)
    assert spark.read.format("delta").load(str(table)).count() == sum(counts.values())
    ours = sorted(DeltaTable(str(table)).history(), key=lambda e: e["version"])
    theirs = spark_history(spark, table)
    assert len(ours) >= 3  # several batches
    assert [(r.version, r.operation) for r in theirs] == [(e["version"], e["operation"]) for e in ours]
    assert {r.engineInfo for r in theirs} == {ours[-1]["engineInfo"]}  # delta-rs:py-<version>
    # Our commit metadata (kafkaGroup.*) sits in the commit info; delta-spark's history shows no column
    # for such keys (userMetadata stays empty), delta-rs's history returns them.
    assert all(r.userMetadata is None for r in theirs)
    assert all(e["kafkaGroup.groupId"] == group for e in ours)


def test_optimize_and_vacuum_by_delta_spark_keep_every_record_once_and_the_fencing(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    topic, group, table, chk = make_topic(2), unique_name("group"), tmp_path / "table", tmp_path / "chk"
    produce(kafka.bootstrap_servers, topic, {0: 60, 1: 60})
    land(spark, kafka, topic, group, table, chk, maxOffsetsPerTrigger=30)
    sink_files = live_files(table)
    assert len(sink_files) >= 4

    # Between batches: OPTIMIZE rewrites the small files, VACUUM RETAIN 0 HOURS deletes the sink's.
    optimized = spark.sql(f"OPTIMIZE delta.`{table}`").collect()[0].metrics
    assert optimized.numFilesRemoved == len(sink_files) and optimized.numFilesAdded >= 1
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        spark.sql(f"VACUUM delta.`{table}` RETAIN 0 HOURS").collect()
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    assert not any(pathlib.Path(f.replace("file://", "")).exists() for f in sink_files)
    assert spark_offsets(spark, table) == table_offsets(table) == once({0: 60, 1: 60})

    # The positions (txn actions) survived the rewrite: a stale range is refused, a replayed one skipped.
    assert table_positions(table, group, topic, 2) == {0: 60, 1: 60}
    store = DeltaOffsetStore(str(table), group)
    stale = [OffsetRange(TopicPartition(topic, 0), 0, 30)]
    assert store.check(stale).conflicts == {TopicPartition(topic, 0): 60}
    version = DeltaTable(str(table)).version()
    with pytest.raises(OffsetConflictError, match="planned \\[0, 30\\) but the table is at 60"):
        store.commit([DataFile("data/none.parquet", 1, 1)], None, stale)
    # Spark replays the last batch (its commit marker lost, as after a crash): the sink skips it.
    last = max(int(p.name) for p in (chk / "commits").iterdir() if p.name.isdigit())
    (chk / "commits" / str(last)).unlink()
    (chk / "commits" / f".{last}.crc").unlink(missing_ok=True)
    land(spark, kafka, topic, group, table, chk, maxOffsetsPerTrigger=30)
    assert DeltaTable(str(table)).version() == version
    assert spark_offsets(spark, table) == once({0: 60, 1: 60})

    # While the sink lands batches: OPTIMIZE and VACUUM (default retention) commit between its commits.
    # Each OPTIMIZE waits for the round before it to land, so it finds at least two files to rewrite (the last
    # OPTIMIZE's and that round's; with fewer it commits nothing), and runs while the sink lands the next round.
    produced = {0: 60, 1: 60}
    query = (delta_source(spark, kafka, topic, group, table, maxOffsetsPerTrigger=40).writeStream
             .foreachBatch(DeltaSink(str(table), transform=keep_columns))
             .option("checkpointLocation", str(chk)).trigger(processingTime="500 milliseconds").start())

    def landed(expected: Dict[int, int]) -> Callable[[], bool]:
        def check() -> bool:
            assert query.isActive, f"the query stopped: {query.exception()}"
            return table_positions(table, group, topic, 2) == expected
        return check

    def produce_a_round() -> Dict[int, int]:
        produce(kafka.bootstrap_servers, topic, {0: 20, 1: 20}, start=produced[0])
        return {0: produced[0] + 20, 1: produced[1] + 20}

    try:
        produced = produce_a_round()
        while produced[0] < 120:
            wait_for(landed(produced), f"the sink to land offset {produced[0]} of each partition")
            produced = produce_a_round()
            spark.sql(f"OPTIMIZE delta.`{table}`").collect()
            if produced[0] == 100:  # once: each VACUUM lists the whole table folder
                spark.sql(f"VACUUM delta.`{table}`").collect()
        # More records after the last OPTIMIZE and the VACUUM: the sink commits on top of them.
        produced = produce_a_round()
        wait_for(landed(produced), "the sink to land every record")
    finally:
        query.stop()
    assert query.exception() is None
    # The sink's commits (WRITE) and delta-spark's interleave: batches landed after an OPTIMIZE and a VACUUM.
    history = [r.operation for r in spark_history(spark, table) if r.version > version]
    assert "OPTIMIZE" in history and "WRITE" in history[history.index("OPTIMIZE"):], history
    assert "VACUUM END" in history and "WRITE" in history[history.index("VACUUM END"):], history
    assert spark_offsets(spark, table) == table_offsets(table) == once(produced)


#: A CHECK constraint delta-spark accepts whose meaning depends on the session that evaluates it (a string in
#: double quotes is a string or an identifier by spark.sql.ansi.doubleQuotedIdentifiers): refused.
QUOTED_CHECK = 'ADD CONSTRAINT named_topic CHECK (topic <> "none")'


@pytest.mark.parametrize("properties, alter, refused", [
    pytest.param("", None, None, id="defaults"),
    pytest.param("'delta.enableChangeDataFeed' = 'true'", None, None, id="change-data-feed"),
    pytest.param("'delta.enableDeletionVectors' = 'true'", None, None, id="deletion-vectors"),
    pytest.param("'delta.columnMapping.mode' = 'name'", None, None, id="column-mapping"),
    pytest.param("'delta.enableRowTracking' = 'true'", None, None, id="row-tracking"),
    pytest.param("", QUOTED_CHECK, "a double quote", id="check-with-a-double-quoted-string"),
])
def test_tables_created_by_delta_spark_are_written_or_refused_before_any_file(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path,
    properties: str, alter: Optional[str], refused: Optional[str],
) -> None:
    topic, group, table = make_topic(2), unique_name("group"), tmp_path / "table"
    spark.sql(f"CREATE TABLE delta.`{table}` ({SINK_COLUMNS}) USING DELTA"
              + (f" TBLPROPERTIES ({properties})" if properties else ""))
    if alter is not None:
        spark.sql(f"ALTER TABLE delta.`{table}` {alter}")
    produce(kafka.bootstrap_servers, topic, {0: 30, 1: 20})

    if refused is not None:
        version = DeltaTable(str(table)).version()
        with pytest.raises(StreamingQueryException) as failure:
            land(spark, kafka, topic, group, table, tmp_path / "chk")
        message = str(failure.value)
        assert "UnsupportedTableFeatureError" in message, message[-2000:]
        assert refused in message and "Nothing was written and no offset moved" in message, message[-2000:]
        # The source records where the group starts (a commit of positions, no data: docs/exactly-once.md);
        # the refused batch adds no file and no commit of its own.
        after = [h for h in DeltaTable(str(table)).history() if h["version"] > version]
        assert all(h.get("kafkaGroup.operation") == "start" for h in after), after
        assert DeltaTable(str(table)).file_uris() == [] and table_folder_files(table) == set(), "files were written"
        return

    land(spark, kafka, topic, group, table, tmp_path / "chk")
    assert spark_offsets(spark, table) == once({0: 30, 1: 20})
    assert table_positions(table, group, topic, 2) == {0: 30, 1: 20}
    if "ChangeDataFeed" in properties:
        changes = (spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 1)
                   .load(str(table)).groupBy("_change_type").count().collect())
        assert {r._change_type: r["count"] for r in changes} == {"insert": 50}


def test_checkpoints_of_either_side_are_read_by_the_other(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    topic, group, table, chk = make_topic(2), unique_name("group"), tmp_path / "table", tmp_path / "chk"
    log = table / "_delta_log"
    produce(kafka.bootstrap_servers, topic, {0: 40, 1: 40})
    land(spark, kafka, topic, group, table, chk, maxOffsetsPerTrigger=20)

    # delta-spark checkpoints the table; the commits before it go (as its log clean-up does), so the
    # sink can only find its positions, and the table its group, in delta-spark's checkpoint.
    jvm = spark._jvm
    assert jvm is not None
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, str(table))
    none = jvm.scala.Option.empty()
    delta_log.checkpoint(delta_log.update(False, none, none), none)
    checkpointed = DeltaTable(str(table)).version()
    assert (log / f"{checkpointed:020d}.checkpoint.parquet").exists()
    for commit in log.glob("*.json"):
        if int(commit.name.split(".")[0]) < checkpointed:
            commit.unlink()
    assert table_positions(table, group, topic, 2) == {0: 40, 1: 40}
    produce(kafka.bootstrap_servers, topic, {0: 30, 1: 30}, start=40)
    land(spark, kafka, topic, group, table, chk, maxOffsetsPerTrigger=20)
    assert table_offsets(table) == once({0: 70, 1: 70})

    # delta-rs checkpoints the table; delta-spark, its cache cleared, reads it from that checkpoint.
    DeltaTable(str(table)).create_checkpoint()
    checkpointed = DeltaTable(str(table)).version()
    for commit in log.glob("*.json"):
        if int(commit.name.split(".")[0]) < checkpointed:
            commit.unlink()
    jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    assert spark_offsets(spark, table) == once({0: 70, 1: 70})
    assert [r.version for r in spark_history(spark, table)] == [checkpointed]
    # And the sink goes on from the positions in its own checkpoint.
    produce(kafka.bootstrap_servers, topic, {0: 10, 1: 10}, start=70)
    land(spark, kafka, topic, group, table, chk)
    assert spark_offsets(spark, table) == table_offsets(table) == once({0: 80, 1: 80})
