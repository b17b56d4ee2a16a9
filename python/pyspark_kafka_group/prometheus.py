"""Spark's Kafka lag metrics of ``kafka-group`` queries, for Prometheus, without the JVM."""

# The import path users write, kept where the code moved: the code and its documentation are in
# pyspark_kafka_group.observability.prometheus. tests/unit/test_public_api.py pins these names and their signatures.

from pyspark_kafka_group.observability.prometheus import KafkaGroupMetricsListener, export_metrics

__all__ = ["KafkaGroupMetricsListener", "export_metrics"]
