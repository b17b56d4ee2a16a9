"""pyspark-kafka-group's Spark-independent core, one subpackage per concern.

- :mod:`kafka_group.group`: membership in the consumer group, rebalances, cluster metadata;
- :mod:`kafka_group.plan`: what a batch reads (plans, starting positions, data loss,
  AvailableNow, trigger thresholds, bounded batch reads);
- :mod:`kafka_group.flow`: flow control and event-time alignment;
- :mod:`kafka_group.read`: executor-side fetching into Arrow;
- :mod:`kafka_group.delta`: the Delta offsets table and the exactly-once and keyed commits, in layered
  subpackages (storage, rules, files, log, offsets, keyed);
- :mod:`kafka_group.config`: options and librdkafka client settings;
- :mod:`kafka_group.auth`: SASL/OAUTHBEARER tokens, the Kafka client factory, refused logins and ACLs;
- :mod:`kafka_group.registry`: Schema Registry decoding (Avro, Protobuf, JSON Schema);
- :mod:`kafka_group.formats`: the documents the connector reads and writes;
- :mod:`kafka_group.offsets_tool`: the offsets tool (``kafka-group-offsets``).

At the top: the shared bases (the offset model :mod:`kafka_group.offsets`, the error hierarchy
:mod:`kafka_group.errors`, redaction, JSON text, bounded HTTP), the driver
(:mod:`kafka_group.source_driver`) and its factory, the collaborator protocols. Nothing here imports pyspark. The
development brokers are not part of it: they are the separate ``kafka-group-devbroker``
distribution (``devbroker/``, :mod:`kafka_group_devbroker`).
"""

# The one version of the distribution (setup.py reads the same file)
from kafka_group._version import __version__ as __version__
