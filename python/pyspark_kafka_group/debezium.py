"""Debezium change events as the keyed :class:`~pyspark_kafka_group.DeltaSink`'s input."""

# The import path users write, kept where the code moved: the code and its documentation are in
# pyspark_kafka_group.sink.debezium. tests/unit/test_public_api.py pins these names and their signatures.

from pyspark_kafka_group.sink.debezium import (
    DELETED,
    OP,
    SEQUENCE,
    debezium_changes,
    debezium_sink_options,
    debezium_transform,
)

__all__ = ["DELETED", "OP", "SEQUENCE", "debezium_changes", "debezium_sink_options", "debezium_transform"]
