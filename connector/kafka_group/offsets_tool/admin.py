"""Read and reset the Kafka offsets kept in a Delta table, like ``kafka-consumer-groups``: the work
of the offsets tool, whose command line is :mod:`kafka_group.offsets_tool.command` (``kafka-group-offsets``).

``show`` prints, per topic-partition, the table's committed position, the
broker's latest offset and the lag. ``reset`` moves positions to the earliest or
latest offsets, to the first offset at or after a timestamp, or to explicit
offsets, in a Delta commit of its own (no data). A running query picks a reset
up at its next batch; resetting backwards re-lands records, forwards skips them.

Like ``kafka-consumer-groups --reset-offsets``, ``reset`` is a dry run unless
``--execute`` is given: it prints each partition's position now and after the
reset, checks what the real reset checks (the table exists and is the group's,
every target is within what the broker holds) and changes nothing.

Usage (``kafka-group-offsets`` is the console script; ``python -m kafka_group.offsets_tool`` is the same)::

    kafka-group-offsets show --table /lake/orders_bronze --group orders-bronze \\
        --bootstrap-servers host:9092 --topic orders
    kafka-group-offsets reset --table /lake/orders_bronze --group orders-bronze \\
        --bootstrap-servers host:9092 --topic orders --partitions 0,3 --to-earliest      # dry run
    kafka-group-offsets reset ... --to-earliest --execute                # applies it
    kafka-group-offsets reset ... --to-timestamp 2026-11-23T08:00:00Z
    kafka-group-offsets reset ... --to-offsets '{"orders":{"0":1200}}'

A secured cluster's settings come from a properties file, as Kafka's own tools take them
(``--command-config client.properties``: ``security.protocol=SASL_SSL``, ``sasl.jaas.config=...``,
``ssl.truststore.location=...``; Java forms are translated as the source's options are), or from
environment variables ``KAFKA_GROUP_KAFKA_<SETTING>`` (``KAFKA_GROUP_KAFKA_SASL_PASSWORD``);
never from the command line, where other users of the host would see a password. Kafka's config
providers (``config.providers=env`` with ``${env:VAR}``, ``file``, ``dir``) are resolved in them as
Kafka's tools resolve them (:mod:`kafka_group.config.config_providers`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence

from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
from kafka_group.errors import ConfigError
from kafka_group.group.cluster_metadata import ClusterView
from kafka_group.json_text import INT64_MAX
from kafka_group.offsets import TopicPartition

__all__ = ["PartitionOffsets", "PlannedReset", "show_offsets", "plan_reset", "reset_offsets", "parse_timestamp",
           "past_end"]


@dataclass(frozen=True)
class PartitionOffsets:
    """One row of ``show``."""

    topic_partition: TopicPartition
    """The partition."""
    committed: Optional[int]
    """The table's position (next offset to read), None if the table never saw it."""
    latest: Optional[int]
    """The broker's latest offset."""

    @property
    def lag(self) -> Optional[int]:
        """Records on the broker not yet in the table."""
        if self.latest is None:
            return None
        return self.latest - (self.committed or 0)


@dataclass(frozen=True)
class PlannedReset:
    """One row of ``reset``: where a partition is and where the reset puts it."""

    topic_partition: TopicPartition
    """The partition."""
    current: Optional[int]
    """The table's position now (next offset to read), None if the table never saw it."""
    new: int
    """The position after the reset."""


def show_offsets(
    table: str, group: str, cluster: ClusterView, topics: Sequence[str]
) -> List[PartitionOffsets]:
    """The table's positions and the broker's latest offsets of every partition of ``topics``."""
    partitions = cluster.partitions_of(list(topics))
    store = DeltaOffsetStore(table, group)
    committed = store.positions(partitions)
    latest = cluster.latest_offsets(partitions)
    return [PartitionOffsets(tp, committed.get(tp), latest.get(tp)) for tp in partitions]


def reset_offsets(
    table: str,
    group: str,
    cluster: ClusterView,
    partitions: Sequence[TopicPartition],
    *,
    to: str,
    timestamp_ms: Optional[int] = None,
    offsets: Optional[Mapping[TopicPartition, int]] = None,
) -> Dict[TopicPartition, int]:
    """Reset ``partitions`` in the table (at once: :func:`plan_reset` shows it first) and return
    the new positions.

    Parameters as :func:`plan_reset`.

    Raises
    ------
    ConfigError
        As :func:`plan_reset`.
    OffsetStoreError
        The table does not exist yet, or belongs to another group.
    """
    plan = plan_reset(table, group, cluster, partitions, to=to, timestamp_ms=timestamp_ms, offsets=offsets)
    target = {row.topic_partition: row.new for row in plan}
    DeltaOffsetStore(table, group).reset(target, reason=f"reset to {to}")
    return target


def plan_reset(
    table: str,
    group: str,
    cluster: ClusterView,
    partitions: Sequence[TopicPartition],
    *,
    to: str,
    timestamp_ms: Optional[int] = None,
    offsets: Optional[Mapping[TopicPartition, int]] = None,
) -> List[PlannedReset]:
    """What resetting ``partitions`` would do: each one's position now and after; changes nothing.

    Checks what :func:`reset_offsets` checks, so a plan that is shown can be applied.

    Parameters
    ----------
    table : str
        The Delta table holding the offsets (``offsets.table``).
    group : str
        The consumer group the table belongs to.
    cluster : ClusterView
        The Kafka cluster, for the partitions' earliest, latest and by-time offsets.
    partitions : sequence of TopicPartition
        The partitions to reset.
    to : {"earliest", "latest", "timestamp", "offsets"}
        Where to move them.
    timestamp_ms : int, optional
        With ``to="timestamp"``: the first offset whose record time is at or after it
        (the latest offset when there is none).
    offsets : mapping, optional
        With ``to="offsets"``: explicit positions.

    Returns
    -------
    list of PlannedReset
        One row per partition, in ``partitions``' order.

    Raises
    ------
    ConfigError
        An unknown ``to``, a missing argument, or an offset outside the partition.
    OffsetStoreError
        The table does not exist yet, or belongs to another group.
    """
    if not partitions:
        raise ConfigError("reset: no partitions to reset (check --topic and --partitions)")
    earliest = cluster.earliest_offsets(partitions)
    latest = cluster.latest_offsets(partitions)
    if to == "earliest":
        target = dict(earliest)
    elif to == "latest":
        target = dict(latest)
    elif to == "timestamp":
        if timestamp_ms is None:
            raise ConfigError("reset --to-timestamp needs a timestamp")
        target = cluster.offsets_for_timestamp(partitions, timestamp_ms)
    elif to == "offsets":
        if not offsets:
            raise ConfigError("reset --to-offsets needs JSON like {\"orders\":{\"0\":1200}}")
        target = {tp: offsets[tp] for tp in partitions if tp in offsets}
    else:
        raise ConfigError(f"reset: unknown target '{to}': use earliest, latest, timestamp or offsets")
    for tp, pos in target.items():
        low, high = earliest.get(tp), latest.get(tp)
        if low is not None and high is not None and not low <= pos <= high:
            raise ConfigError(
                f"reset: offset {pos} of {tp} is outside what the broker holds ([{low}, {high}]): choose one in it"
            )
    missing = [str(tp) for tp in partitions if tp not in target]
    if missing:
        raise ConfigError(f"reset: no target offset for {', '.join(missing)}")
    current = DeltaOffsetStore(table, group).positions_before_reset(partitions)
    return [PlannedReset(tp, current[tp], target[tp]) for tp in partitions]


def parse_timestamp(text: str) -> int:
    """Milliseconds since the epoch from ISO-8601 (``2026-11-23T08:00:00Z``) or a number of ms.

    Raises
    ------
    ConfigError
        Neither form, or a time before 1970 or past a Java long of milliseconds.
    """
    value = text.strip()
    shown = value if len(value) <= 60 else value[:60] + "..."
    problem = f"--to-timestamp '{shown}' is neither ISO-8601 (2026-11-23T08:00:00Z) nor milliseconds since the epoch"
    # ASCII digits only: str.isdigit() takes '²', which int() refuses.
    if value.isascii() and value.isdigit():
        if len(value) > 19 or int(value) > INT64_MAX:
            raise ConfigError(f"--to-timestamp '{shown}' is past the largest Kafka timestamp ({INT64_MAX})")
        return int(value)
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=dt.timezone.utc)
        millis = int(parsed.timestamp() * 1000)
    except (ValueError, OverflowError, OSError):  # fromisoformat's error repeats the value the message names
        raise ConfigError(problem) from None
    if millis < 0:
        raise ConfigError(f"--to-timestamp '{shown}' is before 1970: Kafka's record times start there")
    return millis


def past_end(rows: Sequence[PartitionOffsets]) -> List[PartitionOffsets]:
    """The rows whose table position is past the partition's latest offset (a negative lag).

    A partition's end does not move back, so the table's position is past it only when the
    partition is not the one the table read: the topic was deleted and recreated under the same
    name (its offsets start again at 0), an unclean leader election cut the log, or the table
    (or its offsets) came from another cluster.
    """
    return [row for row in rows if row.committed is not None and row.latest is not None
            and row.committed > row.latest]
