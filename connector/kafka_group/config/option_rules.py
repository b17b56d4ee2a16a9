"""The rules between options: what a stream needs, what a batch read refuses, the two group
protocols' settings, starting offsets of partitions the query reads.

Each refusal is a :class:`~kafka_group.errors.ConfigError` naming the option and the fix.
Called by :func:`kafka_group.config.options.parse_source_options` and by the data source
once it knows whether it serves a stream or a batch read.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Mapping, Optional, Tuple

from kafka_group.config.client_config import CLASSIC_ONLY_KEYS, uses_consumer_protocol
from kafka_group.config.option_catalog import OPTION_SPELLING
from kafka_group.config.source_options import SourceOptions, SubscriptionKind
from kafka_group.errors import ConfigError
from kafka_group.offsets import EARLIEST, LATEST, StartingOffsets, TopicPartition

__all__ = [
    "check_batch_options",
    "check_group_given",
    "check_group_protocol",
    "check_starting_offsets_topics",
    "check_stream_options",
]


def check_stream_options(options: SourceOptions) -> None:
    """The rules of a stream (``spark.readStream``): a group with ``subscribe`` and
    ``subscribePattern``, and no end.

    Raises
    ------
    ConfigError
        Naming the option and the fix.
    """
    check_group_given(options, batch_hint=False)
    ending = sorted(OPTION_SPELLING[k] for k in options.given if k in _BATCH_ONLY)
    if ending:
        raise ConfigError(
            f"option '{ending[0]}' is for batch reads (spark.read): a stream has no end. Remove it, or use "
            "Trigger.AvailableNow to stop at the offsets that are latest when the query starts"
        )


def check_group_given(options: SourceOptions, *, batch_hint: bool) -> None:
    """``subscribe`` and ``subscribePattern`` need ``kafka.group.id`` (``batch_hint``: say a batch read does not)."""
    kind = options.subscription_kind
    if kind != SubscriptionKind.ASSIGN and not options.group_id:
        raise ConfigError(
            f"option 'kafka.group.id' is required with '{kind}': the driver joins this "
            "consumer group and plans the partitions the group assigns to it. Set "
            ".option(\"kafka.group.id\", \"<your-group>\"), or use 'assign' to read fixed "
            "partitions without a group"
            + (". A batch read (spark.read) needs no group: give it 'endingOffsets' (latest reads to the end)"
               if batch_hint else "")
        )


#: Options of batch reads only, and options of streams only that a batch read refuses (each with why).
_BATCH_ONLY = frozenset({"endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"})
_STREAM_ONLY: Mapping[str, str] = {
    "offsets.table": "a batch read commits nothing; land a topic exactly once with a stream and DeltaSink",
    "rebalancelistener": "a batch read joins no group",
    "maxoffsetsperpartition": "flow control shapes the batches of a stream",
    "flow.budgetsharing": "flow control shapes the batches of a stream",
    "flow.topicpriority": "flow control shapes the batches of a stream",
    "flow.alignment.maxdrift": "flow control shapes the batches of a stream",
    "flow.controldir": "flow control shapes the batches of a stream",
    "groupjointimeoutms": "a batch read joins no group",
    "revoketimeoutms": "a batch read joins no group",
    "availablenowtimeoutms": "a batch read is not an AvailableNow run",
}


def check_batch_options(options: SourceOptions) -> StartingOffsets:
    """The rules of a batch read (``spark.read``); returns where it starts (``earliest`` unless set).

    As in Spark, a batch read starts at ``earliest`` by default and cannot start at
    ``latest`` (it would read nothing); ``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger``
    and ``maxTriggerDelay`` are ignored. Options of this connector's streams (the offsets
    table, flow control, group timeouts) are refused: a batch read joins no group and
    commits nothing.

    Raises
    ------
    ConfigError
        Naming the option and the fix.
    """
    for key in sorted(options.given):
        if key in _STREAM_ONLY:
            raise ConfigError(f"option '{OPTION_SPELLING.get(key, key)}' is for streams (spark.readStream): "
                              f"{_STREAM_ONLY[key]}. Remove it from this batch read")
    starting = options.starting_offsets
    if "startingoffsets" not in options.given:
        starting = replace(starting, default=EARLIEST)
    if starting.timestamp is None and (
            starting.default == LATEST and not starting.specific
            or any(v == LATEST for tp, v in (starting.specific or {}).items()
                   if tp not in (starting.timestamps or {}))):
        raise ConfigError("option 'startingOffsets' cannot be latest (-1) for a batch read: it would read nothing. "
                          "Give earliest, -2 or an offset")
    return starting


def check_group_protocol(client_config: Mapping[str, str]) -> None:
    """Refuse settings of one group protocol combined with the other (librdkafka would refuse them later)."""
    protocol = client_config.get("group.protocol")
    if protocol is not None and protocol.strip().lower() not in ("classic", "consumer"):
        raise ConfigError(
            f"option 'kafka.group.protocol' is '{protocol}': use 'classic' (the default; client-side "
            "assignment) or 'consumer' (KIP-848; the broker assigns partitions, Kafka 4.0 or later)"
        )
    if uses_consumer_protocol(client_config):
        for key in sorted(CLASSIC_ONLY_KEYS):
            if key in client_config:
                raise ConfigError(
                    f"option 'kafka.{key}' cannot be used with 'kafka.group.protocol=consumer': "
                    f"{CLASSIC_ONLY_KEYS[key]}. Remove 'kafka.{key}', or set 'kafka.group.protocol' to 'classic'"
                )
    elif "group.remote.assignor" in client_config:
        raise ConfigError(
            "option 'kafka.group.remote.assignor' only applies to 'kafka.group.protocol=consumer' (the broker's "
            "assignor); with the classic protocol choose 'kafka.partition.assignment.strategy' instead, or set "
            "'kafka.group.protocol' to 'consumer'"
        )


def check_starting_offsets_topics(
    starting: StartingOffsets,
    kind: str,
    topics: Tuple[str, ...],
    pattern: Optional[str],
    assigned: Tuple[TopicPartition, ...],
) -> None:
    """Options naming partitions (``startingOffsets``, ``startingOffsetsByTimestamp``) name only subscribed ones."""
    named = [("startingOffsets", tp) for tp in sorted(starting.specific or {})]
    named += [("startingOffsetsByTimestamp", tp) for tp in sorted(starting.timestamps or {})]
    for option, tp in named:
        if kind == SubscriptionKind.SUBSCRIBE and tp.topic not in topics:
            raise ConfigError(
                f"option '{option}' names topic '{tp.topic}', which 'subscribe' does not "
                f"include ({', '.join(topics)}): remove it or subscribe to it"
            )
        if kind == SubscriptionKind.PATTERN and pattern is not None and not re.fullmatch(pattern, tp.topic):
            raise ConfigError(
                f"option '{option}' names topic '{tp.topic}', which does not match "
                f"'subscribePattern' ({pattern}): remove it or change the pattern"
            )
        if kind == SubscriptionKind.ASSIGN and tp not in assigned:
            raise ConfigError(
                f"option '{option}' names {tp}, which 'assign' does not include: "
                "remove it or assign that partition"
            )
