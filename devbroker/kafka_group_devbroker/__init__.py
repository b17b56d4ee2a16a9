"""Development Kafka clusters for tests, demos and benchmarks, on 127.0.0.1.

A separate distribution (``kafka-group-devbroker``, folder ``devbroker/``): the
connector's wheel does not ship it.

Two engines with one set of methods (``bootstrap_servers``, ``create_topic``,
``delete_topic``, ``delete_records``, ``broker_down``/``broker_up``, ``stop``):

- ``mock``: librdkafka's mock cluster (from the confluent-kafka wheel), hosted in a
  child process (:class:`EmbeddedKafka`). No download, starts in a second, and
  injects protocol errors real Kafka cannot push.
- ``kafka``: Apache Kafka brokers in KRaft mode, one JVM each
  (:class:`ApacheKafka`), jars fetched by Maven on first use.

::

    from kafka_group_devbroker import start_cluster

    with start_cluster("kafka", brokers=3, topics={"orders": 8}) as kafka:
        print(kafka.bootstrap_servers)

From a shell: ``kafka-group-broker --engine kafka --brokers 3 --topic orders:8``.
"""

from __future__ import annotations

from typing import Mapping, Optional, Union

from kafka_group_devbroker.apache_kafka import ApacheKafka
from kafka_group_devbroker.cluster import EmbeddedKafka
from kafka_group.errors import EmbeddedBrokerError

__all__ = ["ApacheKafka", "EmbeddedKafka", "DevelopmentCluster", "ENGINES", "start_cluster"]

#: The engines :func:`start_cluster` knows.
ENGINES = ("kafka", "mock")

DevelopmentCluster = Union[ApacheKafka, EmbeddedKafka]


def start_cluster(
    engine: str, brokers: int = 1, topics: Optional[Mapping[str, int]] = None
) -> DevelopmentCluster:
    """Start a development cluster of either engine and return it (stop it, or use ``with``).

    Parameters
    ----------
    engine : {"kafka", "mock"}
        Apache Kafka (KRaft, fetched by Maven) or librdkafka's mock cluster.
    brokers : int, default 1
        Number of brokers.
    topics : dict of str to int, optional
        Topics to create, name to partition count.

    Returns
    -------
    ApacheKafka or EmbeddedKafka
        The started cluster.

    Raises
    ------
    EmbeddedBrokerError
        For an unknown engine, or when the cluster does not start.
    """
    if engine == "kafka":
        return ApacheKafka(brokers, topics).start()
    if engine == "mock":
        return EmbeddedKafka(brokers, topics).start()
    raise EmbeddedBrokerError(f"unknown broker engine {engine!r}: choose 'kafka' (Apache Kafka) or 'mock'")
