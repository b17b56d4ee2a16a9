"""Query progress: the source's ``latestOffset`` report and a progress event's source offsets
(see :mod:`kafka_group.formats`, 2).

:func:`write_latest_report` writes the report, :func:`read_latest_report` reads it, and
:func:`read_progress` reads the ``kafka-group`` sources of one progress event. The Java
metrics shim (``jvm-shim/.../ProgressParser.java``) follows the same rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, List, Mapping, Optional, Tuple

from kafka_group.errors import FormatError
from kafka_group.formats.json_values import (
    is_offset,
    loads,
    partition_lists,
    partition_number,
    show,
    source_offset_value,
)
from kafka_group.formats.offset_document import FLOW_KEY, read_offset_document, write_offset_document
from kafka_group.offsets import BatchOffsets, TopicPartition

__all__ = ["MEMBER_KEY", "LatestReport", "ProgressOffsets", "SourceOffsets", "read_latest_report", "read_progress",
           "write_latest_report"]

#: Key of the group membership report in the ``latestOffset`` of query progress.
MEMBER_KEY = "@member"

_REPORT_KEYS = (MEMBER_KEY, FLOW_KEY)


@dataclass(frozen=True)
class LatestReport:
    """A ``kafka-group`` source's ``latestOffset`` in query progress.

    Attributes
    ----------
    latest : dict
        The latest broker offset of each partition the member owns.
    member : dict
        The ``@member`` report: ``group``, ``memberId``, ``generation``, ``owned``,
        ``lastRebalance`` (``assign: true`` and no group with option ``assign``).
    flow : dict
        The ``@flow`` report: ``paused``, ``pausedTopics``, ``held``, ``control``.
    """

    latest: Mapping[TopicPartition, int]
    member: Mapping[str, Any]
    flow: Mapping[str, Any] = field(default_factory=dict)

    @property
    def group(self) -> Optional[str]:
        """The consumer group, or None (option ``assign``)."""
        value = self.member.get("group")
        return value if isinstance(value, str) else None

    @property
    def generation(self) -> Optional[int]:
        """The member's generation (its count of rebalance events), or None when not reported."""
        value = self.member.get("generation")
        return value if isinstance(value, int) else None

    @property
    def owned(self) -> FrozenSet[TopicPartition]:
        """The partitions the member owns (``@member.owned``; else those with a latest offset)."""
        if "owned" in self.member:
            return partition_lists(f"'{MEMBER_KEY}.owned'", self.member["owned"])
        return frozenset(self.latest)

    @property
    def paused(self) -> FrozenSet[TopicPartition]:
        """The partitions paused by flow control (``@flow.paused``)."""
        return partition_lists(f"'{FLOW_KEY}.paused'", self.flow.get("paused", {}))

    @property
    def held(self) -> Dict[TopicPartition, str]:
        """The partitions the last plan held back, with the rule that held them (``@flow.held``)."""
        return {TopicPartition(topic, int(p)): reason
                for topic, partitions in self.flow.get("held", {}).items() for p, reason in partitions.items()}

    @property
    def control(self) -> Optional[str]:
        """The flow-control channel's folder (``@flow.control``), or None."""
        value = self.flow.get("control")
        return value if isinstance(value, str) and value else None


def write_latest_report(latest: Mapping[TopicPartition, int], member: Mapping[str, Any],
                        flow: Mapping[str, Any]) -> Dict[str, Any]:
    """The source's ``latestOffset`` for query progress (``reportLatestOffset``).

    Parameters
    ----------
    latest : dict
        The latest broker offset of each owned partition.
    member : dict
        The membership report (``SourceDriver.membership_report``).
    flow : dict
        The flow-control report (``SourceDriver.flow_report``).
    """
    report = write_offset_document(BatchOffsets(latest, {}))
    report[MEMBER_KEY] = dict(member)
    report[FLOW_KEY] = dict(flow)
    return report


def read_latest_report(doc: Any, *, what: str = "latestOffset") -> LatestReport:
    """Read a ``latestOffset`` written by :func:`write_latest_report`.

    Raises
    ------
    FormatError
        Not an object holding an ``@member`` object; a partition whose latest offset
        is not a number >= 0; an unknown ``@`` key; ``generation``, ``owned``,
        ``paused``, ``held`` or ``control`` of the wrong type.
    """
    if isinstance(doc, str):
        doc = loads(doc, what, f"an object with an '{MEMBER_KEY}' report")
    if not isinstance(doc, Mapping) or not isinstance(doc.get(MEMBER_KEY), Mapping):
        raise FormatError(f"{what} must be a JSON object holding an '{MEMBER_KEY}' object, found {show(doc)}")
    member, flow = doc[MEMBER_KEY], doc.get(FLOW_KEY, {})
    if not isinstance(flow, Mapping):
        raise FormatError(f"{what}: '{FLOW_KEY}' must be an object, found {show(flow)}")
    latest: Dict[TopicPartition, int] = {}
    for topic, partitions in doc.items():
        topic = str(topic)
        if topic.startswith("@"):
            if topic not in _REPORT_KEYS:
                raise FormatError(f"{what}: unknown key '{topic}' (this version knows {', '.join(_REPORT_KEYS)})")
            continue
        if not isinstance(partitions, Mapping):
            raise FormatError(f"{what}: topic '{topic}' must map partitions to offsets, found {show(partitions)}")
        for key, value in partitions.items():
            tp = TopicPartition(topic, partition_number(what, topic, key))
            if not is_offset(value):
                raise FormatError(f"{what}: the latest offset of {tp} must be a number >= 0, found {show(value)}")
            latest[tp] = value
    report = LatestReport(latest, dict(member), dict(flow))
    if "generation" in member and not isinstance(member["generation"], int):
        raise FormatError(f"{what}: '{MEMBER_KEY}.generation' must be a number, found {show(member['generation'])}")
    if "group" in member and not isinstance(member["group"], str):
        raise FormatError(f"{what}: '{MEMBER_KEY}.group' must be a string, found {show(member['group'])}")
    _ = (report.owned, report.paused)  # checks their form now, not at first use
    held = flow.get("held", {})
    if not isinstance(held, Mapping) or not all(
        isinstance(ps, Mapping) and all(isinstance(r, str) for r in ps.values()) for ps in held.values()
    ):
        raise FormatError(f"{what}: '{FLOW_KEY}.held' must be like {{\"orders\": {{\"0\": \"rule\"}}}}, found {show(held)}")
    for topic, partitions in held.items():
        for p in partitions:
            partition_number(f"{what}: '{FLOW_KEY}.held'", str(topic), p)
    if "control" in flow and not isinstance(flow["control"], str):
        raise FormatError(f"{what}: '{FLOW_KEY}.control' must be a folder name, found {show(flow['control'])}")
    return report


@dataclass(frozen=True)
class SourceOffsets:
    """One ``kafka-group`` source of a query progress event.

    Attributes
    ----------
    index : int
        The source's place in the event's ``sources`` (the query's source order).
    description : str
        Spark's description of the source.
    start, end : BatchOffsets or None
        ``startOffset`` and ``endOffset``: the offset documents before and after the
        batch (None before the first batch).
    latest : LatestReport
        ``latestOffset``: the source's report.
    num_input_rows : int or None
        The records the batch read from this source.
    """

    index: int
    description: str
    start: Optional[BatchOffsets]
    end: Optional[BatchOffsets]
    latest: LatestReport
    num_input_rows: Optional[int] = None

    def lag(self) -> Dict[TopicPartition, int]:
        """Latest broker offset minus the position after the batch, for each partition with both."""
        if self.end is None:
            return {}
        positions = self.end.positions
        return {tp: offset - positions[tp] for tp, offset in sorted(self.latest.latest.items()) if tp in positions}


@dataclass(frozen=True)
class ProgressOffsets:
    """What one query progress event says about its ``kafka-group`` sources.

    Attributes
    ----------
    timestamp : str or None
        When the trigger started (ISO 8601, UTC), as Spark wrote it.
    batch_id : int or None
        The micro-batch.
    sources : tuple of SourceOffsets
        The ``kafka-group`` sources, in the query's order; other sources are left out.
    query_id : str
        The query's ``id`` (``""`` when the event has none).
    query_name : str
        The query's ``name`` (``""`` when it has none).
    """

    timestamp: Optional[str]
    batch_id: Optional[int]
    sources: Tuple[SourceOffsets, ...]
    query_id: str = ""
    query_name: str = ""


def _event_mapping(event: Any, what: str) -> Mapping[str, Any]:
    expected = "a query progress event (a JSON object with 'sources')"
    if isinstance(event, str):
        event = loads(event, what, expected)
    elif isinstance(getattr(event, "json", None), str):
        event = loads(event.json, what, expected)  # pyspark's StreamingQueryProgress
    if not isinstance(event, Mapping):
        raise FormatError(f"{what} must be a JSON object, a dict or a StreamingQueryProgress, found {type(event).__name__}")
    return event


def read_progress(event: Any, *, what: str = "progress event") -> ProgressOffsets:
    """The ``kafka-group`` sources' offsets of one query progress event.

    Parameters
    ----------
    event : dict, str or StreamingQueryProgress
        ``query.lastProgress``, an item of ``query.recentProgress``, the progress of
        a ``StreamingQueryListener`` event, or their JSON text.
    what : str
        What the event is, for error messages (``"progress event 3"``).

    Returns
    -------
    ProgressOffsets
        Its timestamp, batch id and ``kafka-group`` sources (a source whose
        ``latestOffset`` is a JSON object holding ``@member``; the others are skipped).

    Raises
    ------
    FormatError
        The event is not a JSON object with a ``sources`` list, or a ``kafka-group``
        source's offsets are malformed.
    """
    doc = _event_mapping(event, what)
    sources = doc.get("sources")
    if not isinstance(sources, list):
        raise FormatError(f"{what} must hold a 'sources' list, found {show(sources)}")
    found: List[SourceOffsets] = []
    for index, source in enumerate(sources):
        where = f"{what}, source {index}"
        if not isinstance(source, Mapping):
            raise FormatError(f"{where} must be an object, found {show(source)}")
        latest = source_offset_value(source.get("latestOffset"))
        if not isinstance(latest, Mapping) or MEMBER_KEY not in latest:
            continue  # not a kafka-group source, or no report yet
        start, end = (source_offset_value(source.get(key)) for key in ("startOffset", "endOffset"))
        rows = source.get("numInputRows")
        found.append(SourceOffsets(
            index=index,
            description=str(source.get("description") or ""),
            start=None if start is None else read_offset_document(start, what=f"{where}: startOffset"),
            end=None if end is None else read_offset_document(end, what=f"{where}: endOffset"),
            latest=read_latest_report(latest, what=f"{where}: latestOffset"),
            num_input_rows=rows if isinstance(rows, int) else None,
        ))
    timestamp, batch_id = doc.get("timestamp"), doc.get("batchId")
    return ProgressOffsets(
        timestamp if isinstance(timestamp, str) else None,
        batch_id if isinstance(batch_id, int) and not isinstance(batch_id, bool) else None,
        tuple(found),
        query_id=str(doc.get("id") or ""),
        query_name=str(doc.get("name") or ""),
    )
