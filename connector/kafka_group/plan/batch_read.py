"""Bounded batch reads (``spark.read.format("kafka-group")``): the offset ranges between two ends.

A batch read takes part in no consumer group and commits nothing: it reads, for
every partition of its subscription (``subscribe``, ``subscribePattern`` or
``assign``, as the topics are when it is planned), the records from where
``startingOffsets`` (or a time) says to where ``endingOffsets`` (or a time) says,
with Spark's rules:

- it starts at ``earliest`` by default and cannot start at ``latest``; it ends at
  ``latest`` by default (the end of each partition when the read is planned) and
  cannot end at ``earliest``;
- a start below the broker's earliest offset (deleted by retention) fails the read
  with ``failOnDataLoss=true`` (the default) and starts at the earliest offset
  otherwise;
- a start by time with no record that recent follows
  ``startingOffsetsByTimestampStrategy``; an end by time with no record that recent
  ends at ``latest``;
- a start after the end, or an explicit end past a partition's end, fails naming the
  partition.

Unlike Spark, partitions the JSON options do not name start at ``earliest`` and end
at ``latest`` (Spark requires every partition to be named). Nothing to read (an empty
topic, ends equal to the starts, a pattern matching no topic) is an empty read; a topic
``subscribe`` or ``assign`` names that does not exist fails the read naming it, as
Spark's source fails. The ranges are split
into tasks like a stream's (:func:`kafka_group.plan.planning.pack_ranges`).
"""

from __future__ import annotations

import logging
from typing import Dict, List, Mapping

from kafka_group.collaborators import Cluster
from kafka_group.config.source_options import SourceOptions, SubscriptionKind
from kafka_group.errors import BrokerUnavailableError, ConfigError, DataLossError, UnknownTopicOrPartitionError
from kafka_group.offsets import LATEST, OffsetRange, StartingOffsets, StartSpec, TopicPartition
from kafka_group.plan.available_now import target_partitions
from kafka_group.plan.positioning import resolve_positions, settle_times, unseen_by_time

__all__ = ["batch_ranges"]

logger = logging.getLogger(__name__)


def batch_ranges(options: SourceOptions, starting: StartingOffsets, cluster: Cluster) -> List[OffsetRange]:
    """The offset range of every partition a batch read covers (empty ranges left out).

    Parameters
    ----------
    options : SourceOptions
        The read's options (subscription, ``endingOffsets``..., ``failOnDataLoss``).
    starting : StartingOffsets
        Where the read starts (:func:`kafka_group.config.option_rules.check_batch_options`).
    cluster : Cluster
        The cluster's metadata and offsets.

    Raises
    ------
    UnknownTopicOrPartitionError
        ``subscribe`` or ``assign`` names a topic (or partition) the cluster does not have, or an option
        names a partition the subscription does not have.
    DataLossError
        A start below the earliest offset, with ``failOnDataLoss=true``.
    NoOffsetForTimestampError
        A start by time with no record that recent and the ``error`` strategy.
    ConfigError
        A start after the end, or an explicit end past the partition's end.
    BrokerUnavailableError
        The cluster did not answer for some partitions.

    Caller: Spark's planning (the driver), once per read.
    """
    ending = options.ending_offsets or StartingOffsets(LATEST)
    _check_topics_exist(options, cluster)
    partitions = sorted(target_partitions(options, cluster))
    known = set(partitions)
    for option, named in (("startingOffsets", starting.specific), ("startingOffsetsByTimestamp", starting.timestamps),
                          ("endingOffsets", ending.specific), ("endingOffsetsByTimestamp", ending.timestamps)):
        missing = sorted(set(named or {}) - known)
        if missing:
            raise UnknownTopicOrPartitionError(
                f"option '{option}' names {', '.join(map(str, missing))}, which the read's topics do not have "
                f"(they have {len(partitions)} partitions): correct the partition numbers")
    starts = _resolve_times({tp: starting.for_partition(tp) for tp in partitions}, cluster, starting.on_no_match)
    ends = _resolve_times({tp: ending.for_partition(tp) for tp in partitions}, cluster, "latest")
    earliest = cluster.earliest_offsets(partitions)
    latest = cluster.latest_offsets(partitions)
    unanswered = sorted(tp for tp in partitions if tp not in earliest or tp not in latest)
    if unanswered:
        raise BrokerUnavailableError(
            f"the cluster gave no offsets for {', '.join(map(str, unanswered))} (their leaders may be down): the "
            "batch read was not planned. Try again, or raise 'kafkaConsumer.connectTimeoutMs'")
    start_at = resolve_positions(partitions, {}, starts, earliest, latest)
    end_at = resolve_positions(partitions, {}, ends, earliest, latest)
    ranges: List[OffsetRange] = []
    losses: List[str] = []
    for tp in partitions:
        start, end = start_at[tp], end_at[tp]
        if end > latest[tp]:
            raise ConfigError(f"option 'endingOffsets' ends {tp} at {end}, past its end ({latest[tp]}): give "
                              "latest (-1) or an offset it has reached")
        if start < earliest[tp]:
            losses.append(f"{tp} offsets {start} to {earliest[tp] - 1}")
            start = earliest[tp]
        if start > end:
            raise ConfigError(f"the batch read would start {tp} at {start}, after its end {end}: check "
                              "'startingOffsets' and 'endingOffsets' (or their timestamps)")
        if end > start:
            ranges.append(OffsetRange(tp, start, end))
    if losses:
        message = ("records the batch read starts at are no longer on the broker (retention or deletion): "
                   + "; ".join(losses))
        if options.fail_on_data_loss:
            raise DataLossError(message + ". Set failOnDataLoss=false to read from the earliest offsets instead")
        logger.warning("%s; reading from the earliest offsets (failOnDataLoss=false)", message)
    logger.info("batch read of %d records: %s", sum(r.size for r in ranges),
                ", ".join(map(str, ranges)) or "nothing")
    return ranges


def _check_topics_exist(options: SourceOptions, cluster: Cluster) -> None:
    """Raise for a topic ``subscribe`` or ``assign`` names that the cluster does not have (Spark's source fails
    the read too, with ``UnknownTopicOrPartitionException``); a pattern matching nothing reads nothing."""
    if options.subscription_kind == SubscriptionKind.PATTERN:
        return
    assigned = options.subscription_kind == SubscriptionKind.ASSIGN
    option = "assign" if assigned else "subscribe"
    topics = sorted({tp.topic for tp in options.assigned}) if assigned else list(options.topics)
    counts = cluster.topic_partitions(topics)
    for topic in topics:
        if topic not in counts:
            raise UnknownTopicOrPartitionError(
                f"option '{option}' names topic '{topic}', which does not exist on the cluster (or is not visible to "
                "this client): the batch read was not planned. Create the topic first or correct the name")
    for tp in sorted(options.assigned) if assigned else ():
        if tp.partition >= counts[tp.topic]:
            raise UnknownTopicOrPartitionError(
                f"option 'assign' names partition {tp.partition} of topic '{tp.topic}', which has partitions 0 to "
                f"{counts[tp.topic] - 1}: correct the partition number")


def _resolve_times(specs: Mapping[TopicPartition, StartSpec], cluster: Cluster,
                   on_no_match: str) -> Dict[TopicPartition, StartSpec]:
    times = unseen_by_time(list(specs), {}, specs)
    if not times:
        return dict(specs)
    settled, waiting = settle_times(specs, cluster.offsets_at_times(times), on_no_match)
    if waiting:
        raise BrokerUnavailableError(
            f"the cluster gave no offsets by timestamp for {', '.join(map(str, sorted(waiting)))}: the batch read "
            "was not planned. Try again")
    return settled

