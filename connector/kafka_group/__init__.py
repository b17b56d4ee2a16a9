"""pyspark-kafka-group's Spark-independent core, one subpackage per concern.

- :mod:`kafka_group.group`: membership in the consumer group, rebalances, cluster metadata;
- :mod:`kafka_group.plan`: what a batch reads (plans, starting positions, data loss,
  AvailableNow, trigger thresholds, bounded batch reads);
- :mod:`kafka_group.flow`: flow control and event-time alignment;
- :mod:`kafka_group.read`: executor-side fetching into Arrow;
- :mod:`kafka_group.delta`: the Delta offsets table and the exactly-once commit;
- :mod:`kafka_group.config`: options and librdkafka client settings.

At the top: the offset model (:mod:`kafka_group.offsets`) and the documents' formats
(:mod:`kafka_group.formats`), the error hierarchy (:mod:`kafka_group.errors`), the driver
(:mod:`kafka_group.source_driver`) and its factory, the collaborator protocols, the
offsets tool (``kafka-group-offsets``, :mod:`kafka_group.offsets_tool`). Nothing here imports pyspark. The
development brokers are not part of it: they are the separate ``kafka-group-devbroker``
distribution (``devbroker/``, :mod:`kafka_group_devbroker`).
"""

# The one version of the distribution (setup.py reads the same file)
from kafka_group._version import __version__ as __version__
