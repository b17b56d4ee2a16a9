"""The documents this connector writes and reads, each read and written here and nowhere else.

1. **The offset document**: the JSON Spark stores for a ``kafka-group`` source (in the
   checkpoint, and as ``startOffset``/``endOffset`` in query progress)::

       {"@group": "g", "@offsetsTable": "/t", "@flow": {"paused": {"orders": [1]}},
        "orders": {"0": [500, 600], "1": 30}}

   Per topic, per partition: a range ``[from, until]`` planned in that batch (the
   position after it is ``until``), or a number, the position of a partition not
   planned. Keys starting with ``@`` are metadata (Kafka topic names cannot hold
   ``@``): the consumer group, the Delta offsets table, the query's manual pauses.
   :func:`write_offset_document` and :func:`read_offset_document`; the in-memory
   model is :class:`kafka_group.offsets.BatchOffsets`.

2. **A query progress event's source offsets**: ``sources[i].startOffset``,
   ``endOffset`` (offset documents) and ``latestOffset``, the source's report
   (:func:`write_latest_report`): the latest broker offset of each owned partition
   plus the ``@member`` report (group, member id, generation, owned partitions,
   last rebalance) and the ``@flow`` report (pauses, held partitions, control
   folder). :func:`read_progress` takes an event as a dict, its JSON text, or
   pyspark's ``StreamingQueryProgress`` (through its ``.json``). A source is a
   ``kafka-group`` source when its ``latestOffset`` is a JSON object holding an
   ``@member`` object; other sources are skipped. The Java metrics shim
   (``jvm-shim/.../ProgressParser.java``) follows the same rule.

3. **Spark's checkpoint offsets file** ``<checkpointLocation>/offsets/<batchId>``:
   a version line (``v1``), a metadata JSON line, then one line per source of the
   query, in the query's order: the source's offset JSON, or ``-`` when it had none.
   :func:`read_checkpoint_offsets` parses its text; reading the file is the caller's.

Every reader fails loudly with :class:`kafka_group.errors.FormatError` (an
:class:`~kafka_group.errors.OffsetFormatError`) on what it does not understand,
naming the document, what was expected and what was found. Sample documents of
each kind, good and malformed, live in ``tests/data/formats`` and are read by both
the Python unit tests and the Java shim's test.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, List, Mapping, Optional, Tuple

from kafka_group.errors import FormatError
from kafka_group.offsets import BatchOffsets, OffsetRange, TopicPartition

__all__ = [
    "CHECKPOINT_VERSIONS",
    "FLOW_KEY",
    "GROUP_KEY",
    "MEMBER_KEY",
    "OFFSETS_TABLE_KEY",
    "CheckpointOffsets",
    "LatestReport",
    "ProgressOffsets",
    "SourceOffsets",
    "read_checkpoint_offsets",
    "read_latest_report",
    "read_offset_document",
    "read_progress",
    "write_latest_report",
    "write_offset_document",
]

#: The offset document's key naming the consumer group.
GROUP_KEY = "@group"
#: The offset document's key naming the Delta table that holds the offsets.
OFFSETS_TABLE_KEY = "@offsetsTable"
#: The offset document's key holding the query's manual pauses (kept by Spark's checkpoint);
#: in ``latestOffset``, the flow-control report.
FLOW_KEY = "@flow"
#: Key of the group membership report in the ``latestOffset`` of query progress.
MEMBER_KEY = "@member"
#: The checkpoint offsets file versions this module reads (Spark's ``OffsetSeqLog`` writes ``v1``).
CHECKPOINT_VERSIONS = (1,)

_DOCUMENT_KEYS = (GROUP_KEY, OFFSETS_TABLE_KEY, FLOW_KEY)
_REPORT_KEYS = (MEMBER_KEY, FLOW_KEY)


def _show(value: Any, limit: int = 200) -> str:
    """``value`` as JSON for an error message, shortened."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _loads(text: str, what: str, expected: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(
            f"{what} is not JSON ({exc.msg} at character {exc.pos}): expected {expected}, found {_show(text)}"
        ) from None


def _is_offset(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _partition(what: str, topic: str, key: Any) -> int:
    if isinstance(key, str) and key.isdigit() and key.isascii():
        return int(key)
    if isinstance(key, int) and not isinstance(key, bool) and key >= 0:
        return key
    raise FormatError(f"{what}: partition {_show(key)} of topic '{topic}' must be a whole number >= 0")


def _partition_lists(what: str, value: Any) -> FrozenSet[TopicPartition]:
    """``{"orders": [0, 3]}`` (the form reports use) as a set of partitions."""
    if not isinstance(value, Mapping):
        raise FormatError(f"{what} must be an object of partition lists like {{\"orders\": [0, 3]}}, found {_show(value)}")
    found: set[TopicPartition] = set()
    for topic, partitions in value.items():
        if not isinstance(partitions, list):
            raise FormatError(f"{what}: topic '{topic}' must map to a list of partitions, found {_show(partitions)}")
        found.update(TopicPartition(str(topic), _partition(what, str(topic), p)) for p in partitions)
    return frozenset(found)


# -- 1. the offset document -----------------------------------------------------------------


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
        doc = _loads(doc, what, "an offset document like {\"orders\": {\"0\": [500, 600]}}")
    if not isinstance(doc, Mapping):
        raise FormatError(f"{what} must be a JSON object like {{\"orders\": {{\"0\": [500, 600]}}}}, found {_show(doc)}")
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
            raise FormatError(f"{what}: topic '{topic}' must map partitions to offsets, found {_show(partitions)}")
        for key, value in partitions.items():
            tp = TopicPartition(topic, _partition(what, topic, key))
            if _is_offset(value):
                positions[tp] = value
            elif isinstance(value, list) and len(value) == 2 and all(_is_offset(v) for v in value) and value[0] <= value[1]:
                ranges[tp] = OffsetRange(tp, value[0], value[1])
                positions[tp] = value[1]
            else:
                raise FormatError(f"{what}: {tp} must be an offset >= 0 or a range [from, until], found {_show(value)}")
    group, table, flow = doc.get(GROUP_KEY), doc.get(OFFSETS_TABLE_KEY), doc.get(FLOW_KEY)
    for key, value in ((GROUP_KEY, group), (OFFSETS_TABLE_KEY, table)):
        if value is not None and not isinstance(value, str):
            raise FormatError(f"{what}: '{key}' must be a string, found {_show(value)}")
    if flow is not None and not isinstance(flow, Mapping):
        raise FormatError(f"{what}: '{FLOW_KEY}' must be an object of pauses, found {_show(flow)}")
    return BatchOffsets(positions, ranges, group, table, dict(flow or {}))


# -- 2. query progress ----------------------------------------------------------------------


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
            return _partition_lists(f"'{MEMBER_KEY}.owned'", self.member["owned"])
        return frozenset(self.latest)

    @property
    def paused(self) -> FrozenSet[TopicPartition]:
        """The partitions paused by flow control (``@flow.paused``)."""
        return _partition_lists(f"'{FLOW_KEY}.paused'", self.flow.get("paused", {}))

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
        doc = _loads(doc, what, f"an object with an '{MEMBER_KEY}' report")
    if not isinstance(doc, Mapping) or not isinstance(doc.get(MEMBER_KEY), Mapping):
        raise FormatError(f"{what} must be a JSON object holding an '{MEMBER_KEY}' object, found {_show(doc)}")
    member, flow = doc[MEMBER_KEY], doc.get(FLOW_KEY, {})
    if not isinstance(flow, Mapping):
        raise FormatError(f"{what}: '{FLOW_KEY}' must be an object, found {_show(flow)}")
    latest: Dict[TopicPartition, int] = {}
    for topic, partitions in doc.items():
        topic = str(topic)
        if topic.startswith("@"):
            if topic not in _REPORT_KEYS:
                raise FormatError(f"{what}: unknown key '{topic}' (this version knows {', '.join(_REPORT_KEYS)})")
            continue
        if not isinstance(partitions, Mapping):
            raise FormatError(f"{what}: topic '{topic}' must map partitions to offsets, found {_show(partitions)}")
        for key, value in partitions.items():
            tp = TopicPartition(topic, _partition(what, topic, key))
            if not _is_offset(value):
                raise FormatError(f"{what}: the latest offset of {tp} must be a number >= 0, found {_show(value)}")
            latest[tp] = value
    report = LatestReport(latest, dict(member), dict(flow))
    if "generation" in member and not isinstance(member["generation"], int):
        raise FormatError(f"{what}: '{MEMBER_KEY}.generation' must be a number, found {_show(member['generation'])}")
    if "group" in member and not isinstance(member["group"], str):
        raise FormatError(f"{what}: '{MEMBER_KEY}.group' must be a string, found {_show(member['group'])}")
    _ = (report.owned, report.paused)  # checks their form now, not at first use
    held = flow.get("held", {})
    if not isinstance(held, Mapping) or not all(
        isinstance(ps, Mapping) and all(isinstance(r, str) for r in ps.values()) for ps in held.values()
    ):
        raise FormatError(f"{what}: '{FLOW_KEY}.held' must be like {{\"orders\": {{\"0\": \"rule\"}}}}, found {_show(held)}")
    for topic, partitions in held.items():
        for p in partitions:
            _partition(f"{what}: '{FLOW_KEY}.held'", str(topic), p)
    if "control" in flow and not isinstance(flow["control"], str):
        raise FormatError(f"{what}: '{FLOW_KEY}.control' must be a folder name, found {_show(flow['control'])}")
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


_NOT_JSON = object()


def _offset_value(value: Any) -> Any:
    """A source offset as progress holds it, parsed: None, the JSON value, or ``_NOT_JSON``.

    Spark embeds offsets as JSON values in ``progress.json`` (``null`` when there is
    none); pyspark's ``SourceProgress`` turns them back into JSON text (``"null"``).
    """
    if value is None:
        return None
    if isinstance(value, str):
        if not value.strip():
            return None
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return _NOT_JSON  # another source's offset, as Spark printed it
    return value


def _event_mapping(event: Any, what: str) -> Mapping[str, Any]:
    expected = "a query progress event (a JSON object with 'sources')"
    if isinstance(event, str):
        event = _loads(event, what, expected)
    elif isinstance(getattr(event, "json", None), str):
        event = _loads(event.json, what, expected)  # pyspark's StreamingQueryProgress
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
        raise FormatError(f"{what} must hold a 'sources' list, found {_show(sources)}")
    found: List[SourceOffsets] = []
    for index, source in enumerate(sources):
        where = f"{what}, source {index}"
        if not isinstance(source, Mapping):
            raise FormatError(f"{where} must be an object, found {_show(source)}")
        latest = _offset_value(source.get("latestOffset"))
        if not isinstance(latest, Mapping) or MEMBER_KEY not in latest:
            continue  # not a kafka-group source, or no report yet
        start, end = (_offset_value(source.get(key)) for key in ("startOffset", "endOffset"))
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


# -- 3. Spark's checkpoint offsets file ---------------------------------------------------------


@dataclass(frozen=True)
class CheckpointOffsets:
    """A batch's ``<checkpointLocation>/offsets/<batchId>`` file, parsed.

    Attributes
    ----------
    version : int
        The file's version (line 1, ``v1``).
    metadata : dict
        Line 2: ``batchWatermarkMs``, ``batchTimestampMs``, ``conf``.
    sources : tuple of str or None
        One entry per source of the query, in its order: the source's offset JSON,
        or None (``-``) when the source had no offset for the batch.
    where : str
        Where the text came from, for error messages.
    """

    version: int
    metadata: Mapping[str, Any]
    sources: Tuple[Optional[str], ...]
    where: str = "checkpoint offsets file"

    def source(self, index: int) -> BatchOffsets:
        """The offset document of source ``index`` (0 for a query's only source).

        Raises
        ------
        FormatError
            There is no such source, it has no offsets (``-``), or its line is not a
            ``kafka-group`` offset document.
        """
        if not 0 <= index < len(self.sources):
            raise FormatError(f"{self.where} holds {len(self.sources)} source(s): it has no source {index}")
        line = self.sources[index]
        if line is None:
            raise FormatError(f"{self.where}: source {index} has no offsets ('-') in this batch")
        return read_offset_document(line, what=f"{self.where}, source {index}")

    def offsets_table_sources(self) -> List[BatchOffsets]:
        """The offset documents of the ``kafka-group`` sources that keep offsets in a Delta table.

        Those are the lines holding ``@group`` (written with option ``offsets.table``).
        Lines of other sources (not a JSON object, or no ``@group``) are left out.

        Raises
        ------
        FormatError
            A line holding ``@group`` is not a valid offset document.
        """
        found = []
        for index, line in enumerate(self.sources):
            if line is None:
                continue
            value = _offset_value(line)
            if isinstance(value, Mapping) and GROUP_KEY in value:
                found.append(read_offset_document(value, what=f"{self.where}, source {index}"))
        return found


def read_checkpoint_offsets(text: str, *, where: str = "checkpoint offsets file") -> CheckpointOffsets:
    """Parse the text of Spark's ``<checkpointLocation>/offsets/<batchId>`` file.

    Parameters
    ----------
    text : str
        The file's content (reading it, locally or through Hadoop, is the caller's).
    where : str
        The file's path, for error messages.

    Returns
    -------
    CheckpointOffsets

    Raises
    ------
    FormatError
        The first line is not a version this module reads (:data:`CHECKPOINT_VERSIONS`),
        or the second is not a JSON object.
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # a final newline
    first = lines[0].strip() if lines else ""
    if not (first.startswith("v") and first[1:].isdigit()):
        raise FormatError(f"{where} must start with a version line like 'v1', found {_show(first)}")
    if int(first[1:]) not in CHECKPOINT_VERSIONS:
        raise FormatError(
            f"{where} has version '{first}', which this connector does not read (it reads "
            f"{', '.join(f'v{v}' for v in CHECKPOINT_VERSIONS)}): written by a newer Spark? Use the Spark "
            "version this connector supports"
        )
    if len(lines) < 2:
        raise FormatError(f"{where} has no metadata line after '{first}'")
    metadata = _loads(lines[1], f"{where}: the metadata line", "a JSON object")
    if not isinstance(metadata, Mapping):
        raise FormatError(f"{where}: the metadata line must be a JSON object, found {_show(metadata)}")
    sources = tuple(None if line.strip() == "-" else line.strip() for line in lines[2:])
    return CheckpointOffsets(int(first[1:]), dict(metadata), sources, where)
