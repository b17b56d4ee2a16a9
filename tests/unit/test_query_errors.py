"""``failure_reason``: the connector's own line out of the errors Spark raises for a query.

The texts are those Spark 4.2 raised in the three cases docs/troubleshooting.md shows (a wrong bootstrap server
while a query runs, a keyed sink's error in ``foreachBatch``, a bad option at ``load()``), shortened where they
repeat; ``tests/integration/test_stream_errors.py`` raises the real ones.
"""

from __future__ import annotations

from pyspark_kafka_group.query_errors import failure_reason

RUNNING_SOURCE = """[STREAM_FAILED] Query [id = 14bb, runId = c21c] terminated with exception: \
[PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] Failed when Python streaming data source perform \
prepareForTriggerAvailableNow: Traceback (most recent call last):
  File "/site-packages/kafka_group/group/cluster_metadata.py", line 156, in topic_partitions
    metadata = admin.list_topics(timeout=self._timeout_s)
cimpl.KafkaException: KafkaError{code=_TRANSPORT,val=-195,str="Failed to get metadata: Local: Broker transport failure"}

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/site-packages/kafka_group/group/cluster_metadata.py", line 159, in topic_partitions
    raise BrokerUnavailableError.from_kafka(
kafka_group.errors.BrokerUnavailableError: could not reach the Kafka cluster at '127.0.0.1:9' (option \
'kafka.bootstrap.servers') within 5 s: Failed to get metadata: Local: Broker transport failure. Check the servers and \
the network, or raise option 'kafkaConsumer.connectTimeoutMs' (Kafka error _TRANSPORT)
 SQLSTATE: 38000"""

FOREACH_BATCH = """[STREAM_FAILED] Query [id = 6ef4, runId = 128f] terminated with exception: \
[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function in foreach batch sink. Reason: \
An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):
  File "/site-packages/py4j/clientserver.py", line 644, in _call_proxy
    return_value = getattr(self.pool[obj_id], method)(*params)
  File "/site-packages/pyspark_kafka_group/sink/keyed/changes.py", line 43, in change_set
    raise ConfigError(
kafka_group.errors.ConfigError: DeltaSink(keys=...) names 'id', which the transform's rows do not have
 SQLSTATE: 39000"""

AT_LOAD = """[PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance: \
kafka_group.errors.ConfigError: option 'maxOffsetsPerTrigger' must be a positive whole number from 1 to \
9223372036854775807, got '-5'
 SQLSTATE: 38000"""


def test_a_running_source_s_error_gives_the_connector_s_line() -> None:
    assert failure_reason(Exception(RUNNING_SOURCE)) == (
        "kafka_group.errors.BrokerUnavailableError: could not reach the Kafka cluster at '127.0.0.1:9' (option "
        "'kafka.bootstrap.servers') within 5 s: Failed to get metadata: Local: Broker transport failure. Check the "
        "servers and the network, or raise option 'kafkaConsumer.connectTimeoutMs' (Kafka error _TRANSPORT)")


def test_a_foreach_batch_error_gives_the_connector_s_line() -> None:
    assert failure_reason(Exception(FOREACH_BATCH)) == (
        "kafka_group.errors.ConfigError: DeltaSink(keys=...) names 'id', which the transform's rows do not have")


def test_an_error_at_load_gives_the_connector_s_line_without_spark_s_prefix() -> None:
    assert failure_reason(Exception(AT_LOAD)) == (
        "kafka_group.errors.ConfigError: option 'maxOffsetsPerTrigger' must be a positive whole number from 1 to "
        "9223372036854775807, got '-5'")


def test_other_errors_give_their_last_exception_line_or_their_first_line() -> None:
    assert failure_reason(ValueError("Traceback (most recent call last):\n  File x\nKeyError: 'a'")) == "KeyError: 'a'"
    assert failure_reason(RuntimeError("the query stopped\nmore")) == "RuntimeError: the query stopped"
    assert failure_reason(RuntimeError("")) == "RuntimeError"
