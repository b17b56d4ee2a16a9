"""An embedded Kafka cluster for development, tests, demos and benchmarks.

It hosts librdkafka's mock cluster (from the confluent-kafka wheel) in a child
process and controls it over a local JSON-lines channel::

    from kafka_group.embedded import EmbeddedKafka

    with EmbeddedKafka(brokers=3, topics={"orders": 8}) as kafka:
        print(kafka.bootstrap_servers)

From a shell: ``python -m kafka_group.embedded --brokers 3 --topic orders:8``.
"""

from kafka_group.embedded.cluster import EmbeddedKafka

__all__ = ["EmbeddedKafka"]
