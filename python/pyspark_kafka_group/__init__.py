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

from pyspark_kafka_group.data_source import KafkaGroupDataSource
from pyspark_kafka_group.delta_sink import DeltaSink

#: The class Spark's data source lookup registers automatically.
DefaultSource = KafkaGroupDataSource

__all__ = ["DefaultSource", "DeltaSink", "KafkaGroupDataSource"]
