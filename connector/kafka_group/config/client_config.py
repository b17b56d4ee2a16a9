"""Kafka client settings for the driver's group member and the executors' readers.

The user's ``kafka.*`` options pass through; the connector adds the settings its
guarantees depend on and refuses (in :mod:`kafka_group.config.options`) the ones that
would break them.
"""

from __future__ import annotations

from typing import Dict, Mapping

from kafka_group.errors import ConfigError

__all__ = [
    "client_id",
    "member_config",
    "reader_config",
    "isolation_level",
    "uses_consumer_protocol",
    "with_client_id",
    "CLASSIC_ONLY_KEYS",
    "DEFAULT_ASSIGNMENT_STRATEGY",
    "DEFAULT_ISOLATION_LEVEL",
]

#: Incremental rebalances keep unaffected partitions flowing (classic protocol only).
DEFAULT_ASSIGNMENT_STRATEGY = "cooperative-sticky"

#: Member settings of the classic group protocol that librdkafka refuses with
#: ``group.protocol=consumer`` (KIP-848): the broker assigns partitions
#: (``group.remote.assignor`` chooses how) and sets the session and heartbeat timers
#: (``group.consumer.session.timeout.ms``, ``group.consumer.heartbeat.interval.ms``).
#: Values are the fix to suggest.
CLASSIC_ONLY_KEYS: Dict[str, str] = {
    "partition.assignment.strategy": "the broker assigns partitions under the consumer protocol; "
                                     "choose its assignor with 'kafka.group.remote.assignor' (uniform or range)",
    "session.timeout.ms": "the consumer protocol takes the session timeout from the broker "
                          "(group setting 'consumer.session.timeout.ms' or broker 'group.consumer.session.timeout.ms')",
    "heartbeat.interval.ms": "the consumer protocol takes the heartbeat interval from the broker "
                             "(group setting 'consumer.heartbeat.interval.ms' or broker "
                             "'group.consumer.heartbeat.interval.ms')",
    "group.protocol.type": "it only exists in the classic protocol",
}

#: The one isolation level of planning (the driver's ListOffsets) and reading (the
#: executors' Fetch) unless the user sets ``kafka.isolation.level``. Spark's Kafka source
#: reads uncommitted by default (the Java consumer's default); this connector reads
#: committed (librdkafka's default), because a query landing into a lakehouse table would
#: otherwise land the records of aborted transactions, and of open ones that may still
#: abort. With read_committed a plan ends at the last stable offset, so an open
#: transaction is waited for: its records, and everything after them in its partition,
#: enter a plan once it commits (or are skipped as aborted). Planning and reading must
#: agree: a plan past the last stable offset is a range the reader can never finish.
DEFAULT_ISOLATION_LEVEL = "read_committed"
_ISOLATION_LEVELS = ("read_committed", "read_uncommitted")

#: Settings only a group member may carry; readers drop them.
_MEMBER_ONLY_KEYS = frozenset(
    {
        "group.instance.id",
        "partition.assignment.strategy",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "max.poll.interval.ms",
        "group.protocol",
        "group.remote.assignor",
    }
)

_READER_GROUP_ID = "kafka-group-reader"


#: The prefix of every client.id the connector gives its clients (unless the user sets ``kafka.client.id``).
CLIENT_ID_PREFIX = "pyspark-kafka-group"


def client_id(group_id: str | None, role: str) -> str:
    """The ``client.id`` of one of the connector's clients: ``pyspark-kafka-group-<group>-<role>``
    (``pyspark-kafka-group-<role>`` without a group), so Kafka's tools (``kafka-consumer-groups
    --describe``'s ``CLIENT-ID``, broker quotas and request logs) tell which query a client serves.

    Parameters
    ----------
    group_id : str or None
        The query's consumer group (``kafka.group.id``), None for ``assign`` without one.
    role : str
        ``driver`` (the group member and its commits), ``reader`` (the executors' readers) or
        ``admin`` (the driver's metadata and ListOffsets client).
    """
    return "-".join(part for part in (CLIENT_ID_PREFIX, group_id, role) if part)


def with_client_id(client_config: Mapping[str, str], group_id: str | None, role: str) -> Dict[str, str]:
    """``client_config`` with :func:`client_id` as ``client.id`` unless the user set one."""
    return {"client.id": client_id(group_id, role), **client_config}


def uses_consumer_protocol(client_config: Mapping[str, str]) -> bool:
    """Whether ``client_config`` selects the consumer group protocol of KIP-848 (``group.protocol=consumer``)."""
    return client_config.get("group.protocol", "classic").strip().lower() == "consumer"


def member_config(client_config: Mapping[str, str], group_id: str) -> Dict[str, str]:
    """Settings of the driver's consumer-group member.

    With ``group.protocol=consumer`` (KIP-848) the classic-only settings
    (:data:`CLASSIC_ONLY_KEYS`) are neither set nor passed on: librdkafka refuses
    them there. :func:`kafka_group.config.options.parse_source_options` refuses a user's
    such setting before this runs, naming it.

    Parameters
    ----------
    client_config : mapping of str to str
        The user's ``kafka.*`` options without the prefix.
    group_id : str
        The group to join.
    """
    consumer_protocol = uses_consumer_protocol(client_config)
    config = {} if consumer_protocol else {"partition.assignment.strategy": DEFAULT_ASSIGNMENT_STRATEGY}
    config.update({
        "client.id": client_id(group_id, "driver"),
        # New topics matching subscribePattern, and partitions added to a topic, reach
        # the group within this interval (librdkafka's default is 5 minutes).
        "topic.metadata.refresh.interval.ms": "10000",
        # The member never hands records to anyone: it only holds the assignment.
        "fetch.max.bytes": "1048576",
        "queued.max.messages.kbytes": "1024",
    })
    config.update({k: v for k, v in client_config.items() if not (consumer_protocol and k in CLASSIC_ONLY_KEYS)})
    config.update(
        {
            "group.id": group_id,
            "enable.auto.commit": "false",
            "enable.auto.offset.store": "false",
            "auto.offset.reset": "error",
        }
    )
    return config


def isolation_level(client_config: Mapping[str, str]) -> str:
    """The isolation level the driver plans with and the executors read with.

    Parameters
    ----------
    client_config : mapping of str to str
        The user's ``kafka.*`` options without the prefix.

    Returns
    -------
    str
        ``read_committed`` (the default, see :data:`DEFAULT_ISOLATION_LEVEL`) or ``read_uncommitted``.

    Raises
    ------
    ConfigError
        ``kafka.isolation.level`` is neither.
    """
    raw = client_config.get("isolation.level", DEFAULT_ISOLATION_LEVEL)
    level = raw.strip().lower()
    if level not in _ISOLATION_LEVELS:
        raise ConfigError(
            f"option 'kafka.isolation.level' must be read_committed (the default: aborted and open "
            f"transactions are never read) or read_uncommitted (every record, as Spark's Kafka source), got '{raw}'"
        )
    return level


def reader_config(client_config: Mapping[str, str], group_id: str | None) -> Dict[str, str]:
    """Settings of an executor's reader of planned offset ranges (``assign()`` only).

    The reader never joins the group or commits; ``group.id`` is set only because
    the client requires one (and ACLs on it are the user's anyway).
    """
    config = {
        "client.id": client_id(group_id, "reader"),
        # librdkafka 2.16 sleeps 1 s between fetches when the application is slower
        # than fetching; 20 ms keeps the pipeline full.
        "fetch.queue.backoff.ms": "20",
        # A reader's records exist already (its plan ends at or below the high watermark),
        # so it never needs the broker to hold a fetch open for new data. The client has one
        # fetch in flight per broker, and the default 500 ms long poll, sent as soon as a
        # range reaches the partition's end, delayed the next range of a reused client
        # (reader_pool) by 500 ms. Measured on Apache Kafka 4 (November 2026), first record
        # after a re-assign / CPU of a client parked at a partition's end: 1 ms: 3.8 ms /
        # 2.3 % of a core; 5 ms: 6.8 ms / 0.7 %; 10 ms: 11 ms / 0.4 %; 500 ms: 503 ms /
        # 0.1 % (a new client: 6-10 ms idle, 20-150 ms inside Spark tasks). 0 makes some
        # brokers spin.
        "fetch.wait.max.ms": "5",
        "queued.max.messages.kbytes": "65536",
        "fetch.max.bytes": "52428800",
        "max.partition.fetch.bytes": "10485760",
    }
    config.update({k: v for k, v in client_config.items() if k not in _MEMBER_ONLY_KEYS})
    config.update(
        {
            "group.id": group_id or _READER_GROUP_ID,
            "enable.auto.commit": "false",
            "enable.auto.offset.store": "false",
            "enable.partition.eof": "true",
            "auto.offset.reset": "error",
            # Explicit, and the same as the driver's ListOffsets (cluster_metadata.ClusterView):
            # a reader must never stop short of (or read past) the end its plan was made with.
            "isolation.level": isolation_level(client_config),
        }
    )
    return config
