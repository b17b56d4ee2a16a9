"""pyspark-kafka-group's Spark-independent core.

Membership (:mod:`kafka_group.membership`), the offset model
(:mod:`kafka_group.offsets`), planning (:mod:`kafka_group.planning`,
:mod:`kafka_group.source_driver`), executor-side fetching
(:mod:`kafka_group.fetch`) and the embedded development broker
(:mod:`kafka_group.embedded`). Nothing here imports pyspark.
"""

__version__ = "0.1.0"
