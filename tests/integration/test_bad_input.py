"""Bad input fails before any data moves, with the option's name and the fix."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
from pyspark.errors import PySparkException, StreamingQueryException
from pyspark.sql import SparkSession

from tests.support import Cluster, MakeTopic, unique_name

pytestmark = pytest.mark.integration


def start(df: Any, tmp_path: Any) -> Any:
    return (
        df.writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "chk"))
        .trigger(availableNow=True)
        .start()
    )


def test_option_errors_surface_at_load(spark: SparkSession, kafka: Cluster) -> None:
    def stream(**options: str) -> Any:
        builder = spark.readStream.format("kafka-group")
        for key, value in {"subscribe": "orders", "kafka.group.id": "g", **options}.items():
            builder = builder.option(key, value)
        return builder

    with pytest.raises(PySparkException, match="option 'kafka.bootstrap.servers' is required"):
        stream().load()
    servers = {"kafka.bootstrap.servers": kafka.bootstrap_servers}
    with pytest.raises(PySparkException, match="'maxOffsetsPerTrigger' must be a positive whole number"):
        stream(**servers, maxOffsetsPerTrigger="-1").load()
    with pytest.raises(PySparkException, match="option 'kafka.enable.auto.commit' is not allowed"):
        stream(**servers, **{"kafka.enable.auto.commit": "true"}).load()
    with pytest.raises(PySparkException, match="exactly one of 'subscribe', 'subscribePattern' or 'assign'"):
        stream(**servers, assign='{"orders":[0]}').load()
    with pytest.raises(PySparkException, match="option 'startingOffsets' is not valid JSON"):
        stream(**servers, startingOffsets='{"orders":').load()


def test_unreachable_broker_fails_naming_the_servers(spark: SparkSession, tmp_path: pathlib.Path) -> None:
    df = (
        spark.readStream.format("kafka-group")
        .option("kafka.bootstrap.servers", "127.0.0.1:1")
        .option("subscribe", "orders")
        .option("kafka.group.id", unique_name("group"))
        .option("kafkaConsumer.connectTimeoutMs", "3000")
        .load()
    )
    query = start(df, tmp_path)
    with pytest.raises(StreamingQueryException, match="could not reach the Kafka cluster at '127.0.0.1:1'"):
        query.awaitTermination()
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("*.parquet"))


@pytest.mark.parametrize("partition_spec, message", [
    ("missing", "names topic '{missing}', which does not exist"),
    ("partition", "names partition 9 of topic '{topic}', which has partitions 0 to 1"),
])
def test_assign_of_missing_topic_or_partition(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path, partition_spec: str,
    message: str
) -> None:
    topic = make_topic(2)
    missing = unique_name("no-such-topic")
    assign = f'{{"{missing}":[0]}}' if partition_spec == "missing" else f'{{"{topic}":[0,9]}}'
    df = (
        spark.readStream.format("kafka-group")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("assign", assign)
        .load()
    )
    query = start(df, tmp_path)
    with pytest.raises(StreamingQueryException, match=message.format(missing=missing, topic=topic)):
        query.awaitTermination()


def test_rebalance_listener_that_cannot_be_imported_fails_before_reading(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    topic = make_topic(1)
    df = (
        spark.readStream.format("kafka-group")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
        .option("kafka.group.id", unique_name("group"))
        .option("rebalanceListener", "no_such_module_here:on_rebalance")
        .load()
    )
    query = start(df, tmp_path)
    with pytest.raises(StreamingQueryException, match="option 'rebalanceListener': cannot import module"):
        query.awaitTermination()
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("*.parquet"))
