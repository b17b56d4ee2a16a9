"""Spark's Kafka lag metrics, computed from a ``kafka-group`` query's progress events.

Spark's own Kafka source reports, in ``sources[].metrics`` of every progress
event, how far the batch ended behind the broker: ``minOffsetsBehindLatest``,
``maxOffsetsBehindLatest`` and ``avgOffsetsBehindLatest`` over its partitions.
A Python data source cannot fill ``metrics`` (pyspark 4.2 has no hook for it),
but the same numbers follow from what this source does report:

- ``endOffset``: each partition's position after the batch (the next offset the
  query reads);
- ``latestOffset``: the latest broker offset of every partition the group member
  owns, with the ``@member`` report (group, generation, owned partitions) and the
  ``@flow`` report (paused partitions).

A partition's lag is ``latest - position``, as in Spark's Kafka source (which
uses the latest offsets it fetched for the same trigger). Partitions the member
owns but has no position for yet are left out, as Spark leaves out partitions
absent from its end offsets.

:func:`source_metrics` is pure (plain dicts in, plain data out); the Prometheus
exporter in ``pyspark_kafka_group.prometheus`` publishes its result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from kafka_group.formats import read_progress
from kafka_group.offsets import TopicPartition

__all__ = ["SourceMetrics", "source_metrics"]


@dataclass(frozen=True)
class SourceMetrics:
    """Lag and membership of one ``kafka-group`` source, as of one progress event.

    Attributes
    ----------
    query_id : str
        The query's id (stable across restarts from the same checkpoint).
    query_name : str
        The query's name, or ``""`` when it has none.
    source : int
        The source's place among the query's sources.
    batch_id : int or None
        The micro-batch the event reports.
    group : str or None
        The consumer group (None with option ``assign``).
    generation : int or None
        The member's generation (its count of rebalance events).
    owned : int
        Partitions the member owns.
    paused : int
        Owned partitions paused by flow control.
    input_rows : int or None
        Records the batch read from this source.
    behind_latest : dict
        ``latest - position`` of every owned partition with both.
    """

    query_id: str
    query_name: str
    source: int
    batch_id: Optional[int]
    group: Optional[str]
    generation: Optional[int]
    owned: int
    paused: int
    input_rows: Optional[int]
    behind_latest: Dict[TopicPartition, int] = field(default_factory=dict)

    @property
    def min_offsets_behind_latest(self) -> Optional[int]:
        """Spark's ``minOffsetsBehindLatest``; None when no partition has a lag yet."""
        return min(self.behind_latest.values()) if self.behind_latest else None

    @property
    def max_offsets_behind_latest(self) -> Optional[int]:
        """Spark's ``maxOffsetsBehindLatest``; None when no partition has a lag yet."""
        return max(self.behind_latest.values()) if self.behind_latest else None

    @property
    def avg_offsets_behind_latest(self) -> Optional[float]:
        """Spark's ``avgOffsetsBehindLatest``; None when no partition has a lag yet."""
        if not self.behind_latest:
            return None
        return sum(self.behind_latest.values()) / len(self.behind_latest)

    def spark_metrics(self) -> Dict[str, str]:
        """The three numbers under Spark's names, as Spark's Kafka source writes them in
        ``sources[].metrics`` (strings; empty when no partition has a lag yet)."""
        if not self.behind_latest:
            return {}
        return {
            "minOffsetsBehindLatest": str(self.min_offsets_behind_latest),
            "maxOffsetsBehindLatest": str(self.max_offsets_behind_latest),
            "avgOffsetsBehindLatest": str(float(self.avg_offsets_behind_latest or 0.0)),
        }


def source_metrics(event: Any, *, what: str = "progress event") -> List[SourceMetrics]:
    """The lag metrics of each ``kafka-group`` source of one progress event.

    Parameters
    ----------
    event : dict, str or StreamingQueryProgress
        ``query.lastProgress``, a ``StreamingQueryListener`` event's ``progress``, or
        its JSON text.
    what : str
        How to name the event in errors.

    Returns
    -------
    list of SourceMetrics
        One per ``kafka-group`` source that has reported (other sources are skipped).

    Raises
    ------
    kafka_group.errors.FormatError
        The event, or a ``kafka-group`` source's offsets in it, is malformed.
    """
    parsed = read_progress(event, what=what)
    found: List[SourceMetrics] = []
    for source in parsed.sources:
        owned = source.latest.owned
        found.append(SourceMetrics(
            query_id=parsed.query_id,
            query_name=parsed.query_name,
            source=source.index,
            batch_id=parsed.batch_id,
            group=source.latest.group,
            generation=source.latest.generation,
            owned=len(owned),
            paused=len(source.latest.paused & owned),
            input_rows=source.num_input_rows,
            behind_latest={tp: lag for tp, lag in source.lag().items() if tp in owned},
        ))
    return found

