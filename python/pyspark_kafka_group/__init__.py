"""pyspark-kafka-group: Kafka into Spark Structured Streaming as a real consumer-group member.

Spark finds this package by its ``pyspark_`` prefix and registers
:class:`DefaultSource` under the name ``kafka-group``, so no
``spark.dataSource.register`` call is needed::

    df = (spark.readStream.format("kafka-group")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "orders")
          .option("kafka.group.id", "orders-bronze")
          .load())
"""

from pyspark_kafka_group.spark_requirement import require_spark

# Before anything imports pyspark.sql.datasource: a missing or older pyspark gets a message that
# names the version found and what to install (the package does not require pyspark from pip).
require_spark()

from pyspark_kafka_group.catalog_tables import ResolvedTable, UnityCatalog, resolve_table  # noqa: E402
from pyspark_kafka_group.cluster_size import cluster_options  # noqa: E402
from pyspark_kafka_group.data_source import KafkaGroupDataSource  # noqa: E402
from pyspark_kafka_group.delta_sink import DeltaSink  # noqa: E402

#: The class Spark's data source lookup registers automatically.
DefaultSource = KafkaGroupDataSource

__all__ = ["DefaultSource", "DeltaSink", "KafkaGroupDataSource", "ResolvedTable", "UnityCatalog", "cluster_options",
           "resolve_table"]
