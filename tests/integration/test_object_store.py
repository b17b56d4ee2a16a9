"""DeltaSink on an object store (s3:// on moto's S3 server, a process on loopback started and stopped
here), and the write path's partitioning and statistics as delta-spark and delta-rs read them."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
from collections import Counter
from typing import Any, Dict, List

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from kafka_group.delta.files.parquet_writer import write_partitioned
from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
from kafka_group.delta.storage.table_location import table_filesystem
from kafka_group.errors import OffsetConflictError
from kafka_group.offsets import OffsetRange, TopicPartition
from pyspark_kafka_group import DeltaSink
from tests.support import (
    REPO,
    Cluster,
    MakeTopic,
    S3Server,
    delta_query_command,
    delta_source,
    expected,
    group_stream,
    keep_columns,
    land_available_now,
    produce,
    progress,
    table_positions,
    table_records,
    unique_name,
)

pytestmark = pytest.mark.integration


def s3_records(uri: str, options: Dict[str, str]) -> Counter[Any]:
    data = DeltaTable(uri, storage_options=options).to_pyarrow_dataset().to_table(
        columns=["topic", "partition", "offset"])
    return Counter(zip(data.column("topic").to_pylist(), data.column("partition").to_pylist(),
                       data.column("offset").to_pylist()))


def s3_positions(uri: str, options: Dict[str, str], group: str, topic: str, partitions: int) -> Dict[int, Any]:
    from kafka_group.delta.offsets.offsets_table import transaction_id

    table = DeltaTable(uri, storage_options=options)
    return {p: table.transaction_version(transaction_id(group, TopicPartition(topic, p))) for p in range(partitions)}


def test_lands_exactly_once_into_s3_with_storage_options_on_sink_and_source(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, s3: S3Server, tmp_path: pathlib.Path
) -> None:
    topic, group = make_topic(2), unique_name("group")
    uri = f"s3://{s3.create_bucket()}/lake/orders"
    options = s3.storage_options

    def run() -> Any:
        reader: Any = group_stream(spark, kafka.bootstrap_servers, topic, group, **{"offsets.table": uri})
        for key, value in options.items():
            reader = reader.option(f"offsets.table.storage.{key}", value)
        return land_available_now(reader.load(), DeltaSink(uri, transform=keep_columns, storage_options=options),
                                  tmp_path / "chk")

    produce(kafka.bootstrap_servers, topic, {0: 40, 1: 25})
    run()
    produce(kafka.bootstrap_servers, topic, {0: 10, 1: 30}, start=0)
    query = run()
    assert s3_records(uri, options) == expected(topic, {0: 50, 1: 55})
    assert s3_positions(uri, options, group, topic, 2) == {0: 50, 1: 55}
    assert S3Server.SECRET_KEY not in json.dumps(progress(query))
    assert [p for p in (tmp_path / "chk").rglob("*") if p.is_file() and S3Server.SECRET_KEY.encode() in p.read_bytes()] == []


def test_killed_before_and_after_the_commit_on_s3_lands_each_record_once(
    kafka: Cluster, make_topic: MakeTopic, s3: S3Server, tmp_path: pathlib.Path
) -> None:
    """The query as its own process, SIGKILLed at sink.before_commit, then at sink.after_commit, then run to
    the end. The storage options reach it the way delta-rs also reads them: AWS_* environment variables."""
    topic, group = make_topic(2), unique_name("group")
    uri = f"s3://{s3.create_bucket()}/t"
    produce(kafka.bootstrap_servers, topic, {0: 30, 1: 30})
    command = delta_query_command(kafka.bootstrap_servers, topic, group, uri, tmp_path / "chk",
                                  "--available-now", "--max-offsets", "20")
    env = {**os.environ, **s3.storage_options}
    for point in ("sink.before_commit", "sink.after_commit"):
        killed = subprocess.run(command, cwd=REPO, env={**env, "KAFKA_GROUP_FAULT_POINT": point},
                                start_new_session=True, capture_output=True, timeout=300)
        assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-3000:]
    done = subprocess.run(command, cwd=REPO, env=env, start_new_session=True, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    options = s3.storage_options
    assert s3_records(uri, options) == expected(topic, {0: 30, 1: 30})
    assert s3_positions(uri, options, group, topic, 2) == {0: 30, 1: 30}


def test_two_writers_of_one_partition_on_s3_one_wins_and_the_losers_files_stay_invisible(s3: S3Server) -> None:
    uri, options = f"s3://{s3.create_bucket()}/t", s3.storage_options
    schema = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64())])
    tp = TopicPartition("orders", 0)

    def files(first: int) -> List[Any]:
        from kafka_group.delta.files.commit_files import DataFile

        rows = pa.record_batch([pa.array(["orders"] * 5), pa.array([0] * 5, pa.int32()),
                                pa.array(range(first, first + 5), pa.int64())], schema=schema)
        written = write_partitioned([rows], filesystem=table_filesystem(uri, options), schema=schema, batch_id=1)
        return [DataFile(f.path, f.size, f.num_records, f.stats, f.partition_values) for f in written]

    DeltaOffsetStore(uri, "g", options).commit(files(0), schema, [OffsetRange(tp, 0, 5)])
    # Both load the table at the same version, plan [5, 10) and write their files.
    a, b = DeltaOffsetStore(uri, "g", options), DeltaOffsetStore(uri, "g", options)
    assert a.check([OffsetRange(tp, 5, 10)]).committable and b.check([OffsetRange(tp, 5, 10)]).committable
    files_a, files_b = files(5), files(5)
    a.commit(files_a, schema, [OffsetRange(tp, 5, 10)])
    with pytest.raises(OffsetConflictError, match="already holds exactly these ranges"):
        b.commit(files_b, schema, [OffsetRange(tp, 5, 10)])
    assert s3_records(uri, options) == Counter({("orders", 0, o): 1 for o in range(10)})
    filesystem = table_filesystem(uri, options)
    # Refused as already committed: indistinguishable from this writer's own commit whose answer was
    # lost, so its files are kept (in no commit, invisible: counted out above; VACUUM removes them).
    assert [filesystem.get_file_info(f.path).type.name for f in files_b] == ["File"]
    assert [filesystem.get_file_info(f.path).type.name for f in files_a] == ["File"]

    # Delta's own fencing on S3 (delta-rs's conditional put): two commits from one version, same app id.
    from deltalake.exceptions import CommitFailedError
    from deltalake.transaction import CommitProperties, Transaction

    first, second = DeltaTable(uri, storage_options=options), DeltaTable(uri, storage_options=options)
    properties = CommitProperties(app_transactions=[Transaction("race", 1)], max_commit_retries=0)
    first.create_write_transaction([], mode="append", schema=first.schema(), commit_properties=properties)
    with pytest.raises(CommitFailedError):
        second.create_write_transaction([], mode="append", schema=second.schema(), commit_properties=properties)


def test_partitioned_table_with_statistics_reads_as_partitioned_in_delta_spark_and_delta_rs(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    topic, group, table = make_topic(3), unique_name("group"), tmp_path / "table"
    produce(kafka.bootstrap_servers, topic, {0: 20, 1: 15, 2: 10})

    def transform(df: Any) -> Any:
        return df.selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "topic", "partition",
                             "offset", "timestamp")

    land_available_now(delta_source(spark, kafka, topic, group, table, maxOffsetsPerTrigger=30),
                       DeltaSink(str(table), transform=transform, partition_by=["partition"]), tmp_path / "chk")
    assert table_records(table) == expected(topic, {0: 20, 1: 15, 2: 10})
    assert table_positions(table, group, topic, 3) == {0: 20, 1: 15, 2: 10}
    dt = DeltaTable(str(table))
    assert dt.metadata().partition_columns == ["partition"]
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{table}`").collect()[0]
    assert list(detail["partitionColumns"]) == ["partition"]

    # delta-spark prunes by partition and reads the same rows.
    pruned = spark.read.format("delta").load(str(table)).where("partition = 1")
    assert pruned.count() == 15
    assert pruned.inputFiles() and all("/partition=1/" in f for f in pruned.inputFiles())

    # The statistics match the data, file by file (delta-rs shows what the log holds).
    import pyarrow.parquet as pq

    actions = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
    assert actions
    for action in actions:
        rows = pq.read_table(table / action["path"]).to_pylist()
        assert "partition" not in rows[0]  # partition values live in the log, not the files
        assert action["num_records"] == len(rows)
        assert action["min.offset"] == min(r["offset"] for r in rows)
        assert action["max.offset"] == max(r["offset"] for r in rows)
        assert action["null_count.key"] == sum(r["key"] is None for r in rows)
        assert (action["min.key"], action["max.key"]) == (min(r["key"] for r in rows), max(r["key"] for r in rows))
        assert action["min.topic"] == action["max.topic"] == topic
        assert action["min.timestamp"] <= min(r["timestamp"] for r in rows)
        assert action["max.timestamp"] >= max(r["timestamp"] for r in rows)
    assert spark.read.format("delta").load(str(table)).where("offset >= 12").count() == 8 + 3

    # partition_by is checked before any file is written.
    before = sorted(p for p in table.rglob("*.parquet"))
    for bad, error in ((["nope"], "names column 'nope'"), (["topic"], "partitioned by \\['partition'\\]")):
        produce(kafka.bootstrap_servers, topic, {0: 1})
        with pytest.raises(Exception, match=error):
            land_available_now(delta_source(spark, kafka, topic, group, table),
                               DeltaSink(str(table), transform=transform, partition_by=bad), tmp_path / unique_name("c"))
        assert sorted(p for p in table.rglob("*.parquet")) == before
