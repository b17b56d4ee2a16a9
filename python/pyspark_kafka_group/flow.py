"""Flow control of running ``kafka-group`` queries: ``pause``, ``resume``, ``status``, ``queries``."""

# The import path users write, kept where the code moved: the code and its documentation are in
# pyspark_kafka_group.source.flow. tests/unit/test_public_api.py pins these names and their signatures.

from pyspark_kafka_group.source.flow import pause, queries, resume, status

__all__ = ["pause", "queries", "resume", "status"]
