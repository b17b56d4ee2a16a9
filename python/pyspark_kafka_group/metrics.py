"""Kafka-group gauges in Spark's metrics system: build the JVM shim and configure a session with it."""

# The import path users write, kept where the code moved: the code and its documentation are in
# pyspark_kafka_group.observability.metrics. tests/unit/test_public_api.py pins these names and their signatures.

from pyspark_kafka_group.observability.metrics import (
    LISTENER_CLASS,
    SOURCE_NAME,
    add_metrics_listener,
    configure_spark_with_kafka_group_metrics,
    kafka_group_metrics_conf,
    shim_jar,
)

__all__ = ["LISTENER_CLASS", "SOURCE_NAME", "add_metrics_listener", "configure_spark_with_kafka_group_metrics",
           "kafka_group_metrics_conf", "shim_jar"]
