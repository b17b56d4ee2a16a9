"""Starting Spark for the demo, tests and notebooks: local classic and Spark Connect sessions."""

# The import path users write, kept where the code moved: the code and its documentation are in
# pyspark_kafka_group.session.spark_session. tests/unit/test_public_api.py pins these names and their signatures.

from pyspark_kafka_group.session.spark_session import (
    check_java,
    is_connect_session,
    local_connect_session,
    local_session,
)

__all__ = ["check_java", "is_connect_session", "local_connect_session", "local_session"]
