"""Reading the connector's own message out of the errors Spark raises for a query."""

# The import path users write, kept where the code moved: the code and its documentation are in
# pyspark_kafka_group.session.query_errors. tests/unit/test_public_api.py pins these names and their signatures.

from pyspark_kafka_group.session.query_errors import failure_reason

__all__ = ["failure_reason"]
