"""The connector on a Spark standalone cluster: a master and two one-core workers on loopback, every
executor its own JVM with its own Python workers (``standalone`` and ``cluster_spark`` fixtures).

What ``local[2]`` cannot show: ranges read by executors in other processes than the driver's, a
task rescheduled after its executor's JVM is SIGKILLed, the driver's control channel and metrics
while executors do the reading.
"""

from __future__ import annotations

import functools
import os
import pathlib
import signal
import urllib.request
from collections import Counter
from typing import Any, Dict, Iterator, List, Optional

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from kafka_group_devbroker.spark_standalone import SparkStandalone
from pyspark_kafka_group import DeltaSink, flow
from tests.cluster.executor_side import gate
from tests.integration.test_jvm_shim import kafka_group_gauges
from tests.support import (
    BackgroundProducer,
    Cluster,
    MakeTopic,
    group_stream,
    keep_columns,
    produce,
    progress,
    table_offsets,
    unique_name,
    wait_for,
)

pytestmark = pytest.mark.cluster


def _landed(uri: str, options: Optional[Dict[str, str]]) -> Counter[Any]:
    """How often each (partition, offset) is in the Delta table at ``uri`` (empty before its first commit)."""
    if not uri.startswith("s3://"):
        return table_offsets(pathlib.Path(uri))
    try:
        data = DeltaTable(uri, storage_options=options).to_pyarrow_dataset().to_table(columns=["partition", "offset"])
    except Exception:  # noqa: BLE001 - no table yet (TableNotFoundError)
        return Counter()
    return Counter(zip(data.column("partition").to_pylist(), data.column("offset").to_pylist()))


def _rows_read(query: Any) -> int:
    return sum(int(p.get("numInputRows", 0)) for p in progress(query))


@pytest.mark.parametrize("store", ["local", "s3"])
def test_two_queries_of_one_group_land_exactly_once(
    cluster_spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path,
    request: pytest.FixtureRequest, store: str,
) -> None:
    topic, group = make_topic(4), unique_name("group")
    options: Optional[Dict[str, str]] = None
    uri = str(tmp_path / "table")
    if store == "s3":
        s3 = request.getfixturevalue("s3")
        uri, options = f"s3://{s3.create_bucket()}/lake/orders", s3.storage_options
    producer = BackgroundProducer(kafka.bootstrap_servers, topic, 4, per_tick=5)

    def start(name: str) -> Any:
        reader = group_stream(cluster_spark, kafka.bootstrap_servers, topic, group,
                              **{"offsets.table": uri, "maxOffsetsPerTrigger": 100})
        for key, value in (options or {}).items():
            reader = reader.option(f"offsets.table.storage.{key}", value)
        return (reader.load().writeStream.queryName(f"{store}_{name}")
                .foreachBatch(DeltaSink(uri, transform=keep_columns, storage_options=options))
                .option("checkpointLocation", str(tmp_path / f"chk-{name}"))
                .trigger(processingTime="1 second").start())

    try:
        producer.produce(100)
        first, second = start("a"), start("b")
        producer.start()
        wait_for(lambda: _rows_read(first) > 0 and _rows_read(second) > 0, "both queries of the group to read", 180)
    finally:
        producer.stop()
    wait_for(lambda: _landed(uri, options) == producer.expected(), "every produced record to land exactly once", 180)
    assert first.isActive and second.isActive, (first.exception(), second.exception())


# -- an executor SIGKILLed mid-batch --------------------------------------------------------------------------------


def _executor_of(pid: int, executors: Dict[int, str]) -> Optional[int]:
    """The executor JVM (a pid in ``executors``) among the ancestors of ``pid``, or None."""
    for _ in range(8):
        if pid in executors:
            return pid
        try:
            stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        pid = int(stat[stat.rfind(")") + 2:].split()[1])
    return None


def test_executor_killed_mid_batch_is_rescheduled_and_nothing_is_lost_or_repeated(
    cluster_spark: SparkSession, standalone: SparkStandalone, kafka: Cluster, make_topic: MakeTopic,
    tmp_path: pathlib.Path,
) -> None:
    topic, group, table = make_topic(4), unique_name("group"), tmp_path / "table"
    gate_folder = tmp_path / "gate"
    gate_folder.mkdir()
    produce(kafka.bootstrap_servers, topic, {p: 150 for p in range(4)})

    def gated(df: Any) -> Any:
        kept = keep_columns(df)
        return kept.mapInArrow(functools.partial(gate, str(gate_folder)), kept.schema)

    app = cluster_spark.sparkContext.applicationId
    before = {e.pid: e.executor_id for e in standalone.executor_pids(app)}
    assert len(before) == 2, f"expected two executors of {app}, found {before}"
    query = (group_stream(cluster_spark, kafka.bootstrap_servers, topic, group,
                          **{"offsets.table": str(table), "maxOffsetsPerTrigger": 300, "minPartitions": 2})
             .load().writeStream.foreachBatch(DeltaSink(str(table), transform=gated))
             .option("checkpointLocation", str(tmp_path / "chk")).trigger(availableNow=True).start())
    try:
        wait_for(lambda: list(gate_folder.glob("task-*")), "a task of batch 0 to start on an executor")
        task_pid = int(next(gate_folder.glob("task-*")).read_text())
        victim = _executor_of(task_pid, before)
        assert victim is not None, f"python worker {task_pid} is not under an executor of {app}: {before}"
        os.kill(victim, signal.SIGKILL)  # that executor's JVM only, a child of this test's worker
        wait_for(lambda: victim not in {e.pid for e in standalone.executor_pids(app)}, "the executor to be gone", 60)
        (gate_folder / "go").touch()
        query.awaitTermination()
    finally:
        (gate_folder / "go").touch()
        query.stop()
    assert table_offsets(table) == Counter((p, o) for p in range(4) for o in range(150))
    # Spark's master replaced the lost executor: the application has two again, one of them new.
    wait_for(lambda: len(standalone.executor_pids(app)) == 2, "the master to start a replacement executor")
    assert {e.executor_id for e in standalone.executor_pids(app)} - set(before.values())


# -- the driver: flow control and the metrics shim ------------------------------------------------------------------


def test_flow_control_from_the_driver_shows_in_the_metrics_shims_gauges(
    cluster_spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    topic, group, name = make_topic(4), unique_name("group"), "cluster_flow"
    produce(kafka.bootstrap_servers, topic, {p: 20 for p in range(4)})
    seen: List[Any] = []
    url = f"{cluster_spark.sparkContext.uiWebUrl}/metrics/prometheus"

    def gauges() -> Dict[str, float]:
        with urllib.request.urlopen(url, timeout=10) as response:
            return kafka_group_gauges(response.read().decode(), name)

    def count(partition: int) -> int:
        return sum(1 for p, _ in seen if p == partition)

    def collect(batch: Any, batch_id: int) -> None:
        seen.extend((r.partition, r.offset) for r in batch.select("partition", "offset").collect())

    query = (group_stream(cluster_spark, kafka.bootstrap_servers, topic, group).load().writeStream.queryName(name)
             .foreachBatch(collect).option("checkpointLocation", str(tmp_path / "chk"))
             .trigger(processingTime="500 milliseconds").start())
    wait_for(lambda: len(seen) == 80, "the first records")
    assert sorted(flow.pause(query, topic, partitions=[1, 2])) == [f"{topic}-1", f"{topic}-2"]
    produce(kafka.bootstrap_servers, topic, {p: 10 for p in range(4)}, start=20)
    wait_for(lambda: count(0) == 30 and count(3) == 30, "the partitions not paused")
    assert count(1) == 20 and count(2) == 20
    wait_for(lambda: gauges().get("pausedPartitions") == 2 and gauges().get("lag") == 20,
             "the shim's gauges to show two paused partitions and their lag")
    assert gauges()["ownedPartitions"] == 4
    assert sorted(flow.resume(query, topic)) == [f"{topic}-1", f"{topic}-2"]
    wait_for(lambda: count(1) == 30 and count(2) == 30, "the resumed partitions")
    assert Counter(seen) == Counter((p, o) for p in range(4) for o in range(30))
    wait_for(lambda: gauges().get("pausedPartitions") == 0 and gauges().get("lag") == 0, "the gauges after resume")


# -- batch reads, raw and registry-decoded --------------------------------------------------------------------------


def test_batch_read_spreads_over_both_executors_and_returns_every_record(
    cluster_spark: SparkSession, kafka: Cluster, make_topic: MakeTopic
) -> None:
    topic = make_topic(3)
    produce(kafka.bootstrap_servers, topic, {0: 500, 1: 300, 2: 1})
    df = (cluster_spark.read.format("kafka-group").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
          .option("subscribe", topic).option("endingOffsets", "latest").option("minPartitions", 4).load())
    rows = df.selectExpr("partition", "offset", "spark_partition_id() AS task").collect()
    assert Counter((r.partition, r.offset) for r in rows) == Counter(
        (p, o) for p, n in {0: 500, 1: 300, 2: 1}.items() for o in range(n))
    assert len({r.task for r in rows}) >= 4


def test_registry_avro_batch_read_decodes_on_the_executors(
    cluster_spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, request: pytest.FixtureRequest
) -> None:
    from tests.integration.test_registry_avro_delta import V1, order, produce_avro

    url = str(request.getfixturevalue("schema_registry").url)
    topic = make_topic(1)
    produce_avro(kafka.bootstrap_servers, url, topic, V1, [order(i) for i in range(6)])
    df = (cluster_spark.read.format("kafka-group").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
          .option("subscribe", topic).option("endingOffsets", "latest").option("valueFormat", "avro")
          .option("schemaRegistryAddress", url)
          .option("minPartitions", 2).load())
    rows = sorted(df.select("offset", "value.id", "value.customer", "value.amount").collect())
    assert [(r.offset, r.id, r.customer, str(r.amount)) for r in rows] == [
        (i, i, f"c{i}", f"{i}.25") for i in range(6)]
