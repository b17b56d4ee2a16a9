"""The three failures docs/troubleshooting.md shows, as a user meets them: ``failure_reason`` gives the connector's
own line for each, whatever Spark wrapped it in.

A wrong bootstrap server (the query's source fails while it runs: ``[STREAM_FAILED]`` around the source runner's
traceback), a keyed ``DeltaSink`` given a NULL key (``[STREAM_FAILED]`` around ``foreachBatch``'s traceback), and a
bad option (``load()`` fails: ``[PYTHON_DATA_SOURCE_ERROR]``). Real Kafka, real Spark, real Delta.
"""

from __future__ import annotations

import pathlib

import pytest
from pyspark.errors import AnalysisException, StreamingQueryException
from pyspark.sql import SparkSession

from pyspark_kafka_group import DeltaSink
from pyspark_kafka_group.query_errors import failure_reason
from tests.support import Cluster, MakeTopic, group_stream, produce, unique_name

pytestmark = pytest.mark.integration


def test_a_wrong_bootstrap_server_while_the_query_runs(spark: SparkSession, tmp_path: pathlib.Path) -> None:
    query = (group_stream(spark, "127.0.0.1:9", "orders", unique_name("g"),
                          **{"kafkaConsumer.connectTimeoutMs": "5000"})
             .load().writeStream.format("noop").option("checkpointLocation", str(tmp_path / "chk"))
             .trigger(availableNow=True).start())
    with pytest.raises(StreamingQueryException) as failed:
        query.awaitTermination()
    assert str(failed.value).startswith("[STREAM_FAILED]")
    assert failure_reason(failed.value).startswith(
        "kafka_group.errors.BrokerUnavailableError: could not reach the Kafka cluster at '127.0.0.1:9' (option "
        "'kafka.bootstrap.servers') within 5 s"), failure_reason(failed.value)


def test_a_keyed_sink_given_a_null_key(spark: SparkSession, kafka: Cluster, make_topic: MakeTopic,
                                       tmp_path: pathlib.Path) -> None:
    topic = make_topic(1)
    produce(kafka.bootstrap_servers, topic, {0: 3})  # values {"n":i,"p":0}: no "id"
    table = tmp_path / "table"
    sink = DeltaSink(str(table), keys=["id"], transform=lambda batch: batch.selectExpr(
        "__kafka", "get_json_object(CAST(value AS STRING), '$.id') AS id", "CAST(value AS STRING) AS value"))
    query = (group_stream(spark, kafka.bootstrap_servers, topic, unique_name("g"), **{"offsets.table": str(table)})
             .load().writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "chk"))
             .trigger(availableNow=True).start())
    with pytest.raises(StreamingQueryException) as failed:
        query.awaitTermination()
    assert str(failed.value).startswith("[STREAM_FAILED]")
    reason = failure_reason(failed.value)
    # the three records of the one NULL key are one change of the batch (the latest per key)
    assert reason == (
        "kafka_group.errors.OffsetStoreError: DeltaSink(keys=['id']): 1 change(s) of this batch have a NULL 'id', and "
        f"a key identifies a row of offsets.table '{table}'. Nothing of the batch landed and no offset moved: fill or "
        "drop those rows in the transform, then restart the query"), reason


def test_a_bad_option_at_load(spark: SparkSession, kafka: Cluster) -> None:
    with pytest.raises(AnalysisException) as failed:
        group_stream(spark, kafka.bootstrap_servers, "orders", unique_name("g"), maxOffsetsPerTrigger="-5").load()
    assert failure_reason(failed.value) == (
        "kafka_group.errors.ConfigError: option 'maxOffsetsPerTrigger' must be a positive whole number from 1 to "
        "9223372036854775807, got '-5'")
