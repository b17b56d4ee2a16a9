"""The offset document: the JSON Spark stores for a ``kafka-group`` source (see :mod:`kafka_group.formats`, 1).

Written by :func:`write_offset_document`, read by :func:`read_offset_document`, here and
nowhere else; the in-memory model is :class:`kafka_group.offsets.BatchOffsets`.
"""

from __future__ import annotations

from typing import Any, Dict, FrozenSet, Mapping, Tuple

from kafka_group.errors import FormatError
from kafka_group.formats.json_values import is_offset, loads, partition_lists, partition_number, show
from kafka_group.offsets import BatchOffsets, OffsetRange, TopicPartition

__all__ = ["FLOW_KEY", "GROUP_KEY", "OFFSETS_TABLE_KEY", "read_flow_pauses", "read_offset_document",
           "write_offset_document"]

#: The offset document's key naming the consumer group.
GROUP_KEY = "@group"
#: The offset document's key naming the Delta table that holds the offsets.
OFFSETS_TABLE_KEY = "@offsetsTable"
#: The offset document's key holding the query's manual pauses (kept by Spark's checkpoint);
#: in ``latestOffset``, the flow-control report.
FLOW_KEY = "@flow"

_DOCUMENT_KEYS = (GROUP_KEY, OFFSETS_TABLE_KEY, FLOW_KEY)


def write_offset_document(offsets: BatchOffsets) -> Dict[str, Any]:
    """The offset document of ``offsets``, JSON-ready (see the module docstring).

    Parameters
    ----------
    offsets : BatchOffsets
        The batch's positions, planned ranges and metadata.

    Returns
    -------
    dict
        ``{"@group": ..., "topic": {"0": [from, until] or position}}``; metadata keys
        only when set, partitions sorted.
    """
    doc: Dict[str, Any] = {}
    if offsets.group is not None:
        doc[GROUP_KEY] = offsets.group
    if offsets.offsets_table is not None:
        doc[OFFSETS_TABLE_KEY] = offsets.offsets_table
    if offsets.flow:
        doc[FLOW_KEY] = dict(offsets.flow)
    for tp in sorted(offsets.positions):
        r = offsets.ranges.get(tp)
        value: Any = [r.from_offset, r.until_offset] if r is not None else offsets.positions[tp]
        doc.setdefault(tp.topic, {})[str(tp.partition)] = value
    return doc


def read_offset_document(doc: Any, *, what: str = "source offsets") -> BatchOffsets:
    """Read an offset document written by :func:`write_offset_document`.

    Parameters
    ----------
    doc : dict or str
        The document, parsed (as Spark hands it to the source) or as JSON text (as
        the checkpoint and query progress hold it).
    what : str
        What the document is, for error messages (``"endOffset of source 0"``).

    Returns
    -------
    BatchOffsets

    Raises
    ------
    FormatError
        Not a JSON object; a partition that is neither an offset >= 0 nor a range
        ``[from, until]`` with ``from <= until``; an ``@`` key this version does not
        know, or a metadata value of the wrong type.
    """
    if isinstance(doc, str):
        doc = loads(doc, what, "an offset document like {\"orders\": {\"0\": [500, 600]}}")
    if not isinstance(doc, Mapping):
        raise FormatError(f"{what} must be a JSON object like {{\"orders\": {{\"0\": [500, 600]}}}}, found {show(doc)}")
    positions: Dict[TopicPartition, int] = {}
    ranges: Dict[TopicPartition, OffsetRange] = {}
    for topic, partitions in doc.items():
        topic = str(topic)
        if topic.startswith("@"):
            if topic not in _DOCUMENT_KEYS:
                raise FormatError(
                    f"{what}: unknown key '{topic}' (this version knows {', '.join(_DOCUMENT_KEYS)}): the document "
                    "was written by another version of pyspark-kafka-group, or is not a kafka-group offset document"
                )
            continue
        if not isinstance(partitions, Mapping):
            raise FormatError(f"{what}: topic '{topic}' must map partitions to offsets, found {show(partitions)}")
        for key, value in partitions.items():
            tp = TopicPartition(topic, partition_number(what, topic, key))
            if is_offset(value):
                positions[tp] = value
            elif isinstance(value, list) and len(value) == 2 and all(is_offset(v) for v in value) and value[0] <= value[1]:
                ranges[tp] = OffsetRange(tp, value[0], value[1])
                positions[tp] = value[1]
            else:
                raise FormatError(f"{what}: {tp} must be an offset >= 0 or a range [from, until], found {show(value)}")
    group, table, flow = doc.get(GROUP_KEY), doc.get(OFFSETS_TABLE_KEY), doc.get(FLOW_KEY)
    for key, value in ((GROUP_KEY, group), (OFFSETS_TABLE_KEY, table)):
        if value is not None and not isinstance(value, str):
            raise FormatError(f"{what}: '{key}' must be a string, found {show(value)}")
    if flow is not None:
        read_flow_pauses(flow, what=what)
    return BatchOffsets(positions, ranges, group, table, dict(flow or {}))


def read_flow_pauses(flow: Any, *, what: str = "source offsets") -> Tuple[FrozenSet[str], FrozenSet[TopicPartition]]:
    """The paused topics and partitions of an offset document's ``@flow`` entry.

    The entry is ``{"pausedTopics": ["audit"], "paused": {"orders": [0, 3]}}`` (either key may be
    missing), as :meth:`kafka_group.flow.flow_control.PauseState.to_doc` writes it.

    Raises
    ------
    FormatError
        The entry is not an object, ``pausedTopics`` is not a list of topic names, or ``paused``
        not an object of partition lists; Spark's checkpoint holds it, so every restart would
        meet it: the message names the document and the fix.
    """
    where = f"{what}: '{FLOW_KEY}'"
    fix = ("it is written by the connector and holds the query's manual pauses; the checkpoint was edited or "
           "damaged. Restore the checkpoint, or start from a new one")
    if not isinstance(flow, Mapping):
        raise FormatError(f"{where} must be an object of pauses, found {show(flow)}: {fix}")
    topics = flow.get("pausedTopics", [])
    if not isinstance(topics, list) or not all(isinstance(t, str) and t for t in topics):
        raise FormatError(f"{where}.pausedTopics must be a list of topic names, found {show(topics)}: {fix}")
    try:
        partitions = partition_lists(f"{where}.paused", flow.get("paused", {}))
    except FormatError as exc:
        raise FormatError(f"{exc}: {fix}") from None
    return frozenset(topics), partitions
