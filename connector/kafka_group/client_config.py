"""Kafka client settings for the driver's group member and the executors' readers.

The user's ``kafka.*`` options pass through; the connector adds the settings its
guarantees depend on and refuses (in :mod:`kafka_group.options`) the ones that
would break them.
"""

from __future__ import annotations

from typing import Dict, Mapping

__all__ = ["member_config", "reader_config", "DEFAULT_ASSIGNMENT_STRATEGY"]

#: Incremental rebalances keep unaffected partitions flowing.
DEFAULT_ASSIGNMENT_STRATEGY = "cooperative-sticky"

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


def member_config(client_config: Mapping[str, str], group_id: str) -> Dict[str, str]:
    """Settings of the driver's consumer-group member.

    Parameters
    ----------
    client_config : mapping of str to str
        The user's ``kafka.*`` options without the prefix.
    group_id : str
        The group to join.
    """
    config = {
        "partition.assignment.strategy": DEFAULT_ASSIGNMENT_STRATEGY,
        # New topics matching subscribePattern, and partitions added to a topic, reach
        # the group within this interval (librdkafka's default is 5 minutes).
        "topic.metadata.refresh.interval.ms": "10000",
        # The member never hands records to anyone: it only holds the assignment.
        "fetch.max.bytes": "1048576",
        "queued.max.messages.kbytes": "1024",
    }
    config.update(client_config)
    config.update(
        {
            "group.id": group_id,
            "enable.auto.commit": "false",
            "enable.auto.offset.store": "false",
            "auto.offset.reset": "error",
        }
    )
    return config


def reader_config(client_config: Mapping[str, str], group_id: str | None) -> Dict[str, str]:
    """Settings of an executor's reader of planned offset ranges (``assign()`` only).

    The reader never joins the group or commits; ``group.id`` is set only because
    the client requires one (and ACLs on it are the user's anyway).
    """
    config = {
        # librdkafka 2.16 sleeps 1 s between fetches when the application is slower
        # than fetching; 20 ms keeps the pipeline full.
        "fetch.queue.backoff.ms": "20",
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
        }
    )
    return config
