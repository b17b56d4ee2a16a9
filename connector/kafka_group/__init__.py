"""pyspark-kafka-group's Spark-independent core.

Membership (:mod:`kafka_group.membership`), the offset model
(:mod:`kafka_group.offsets`), planning (:mod:`kafka_group.planning`,
:mod:`kafka_group.source_driver`) and executor-side fetching
(:mod:`kafka_group.fetch`). Nothing here imports pyspark. The development
brokers are not part of it: they are the separate ``kafka-group-devbroker``
distribution (``devbroker/``, :mod:`kafka_group_devbroker`).
"""

__version__ = "0.1.0"
