"""Flow control of running ``kafka-group`` queries, from a notebook cell or any process on the driver.

>>> from pyspark_kafka_group import flow
>>> flow.pause(query, "orders", partitions=[3, 4])   # or a whole topic: flow.pause(query, "orders")
>>> flow.resume(query, "orders")
>>> flow.status(query)                               # one dict per owned partition

A paused partition is planned with an empty range from the next batch on, stays
assigned to this query's group member, and resumes exactly where it stopped.
Pauses are kept in the query's checkpoint (they survive a restart) and are
dropped, with a log line, when the group moves the partition to another member.

The query is reached through its control channel, a folder on the
driver's local disk that only its user can reach (checked: see
:mod:`kafka_group.flow.flow_channel`), found from the
query's progress. From another process on the driver, pass the folder instead of
the query; :func:`queries` lists them.

Spark Connect: the same calls take a Connect ``StreamingQuery``. The client
cannot see the driver's disk, so the request travels through Spark itself: a
one-row batch read of the ``kafka-group-flow`` source
(:mod:`pyspark_kafka_group.source.flow_source`), whose reader hands the request to the
channel while Spark plans the read, on the driver, and returns the answer as the
row. Each request carries its own id, so a read Spark plans twice pauses once.
The format is registered in the query's session on first use; the package must
be installed where the Connect server runs (as for ``kafka-group`` itself).
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Dict, List, Optional, Sequence, Union

from kafka_group.errors import FlowControlError
from kafka_group.flow.channel_client import find_controls, read_status, send_request
from kafka_group.flow.default_root import default_roots
from kafka_group.formats import read_progress

__all__ = ["pause", "resume", "status", "queries"]

QueryOrControl = Union[Any, str]


def pause(query: QueryOrControl, topic: str, partitions: Optional[Sequence[int]] = None, *,
          timeout_s: float = 30.0) -> List[str]:
    """Pause partitions of a running query from its next batch on.

    Parameters
    ----------
    query : StreamingQuery or str
        The query (``writeStream...start()``, of a classic or a Spark Connect
        session), or the folder of its control channel (a path on the driver).
    topic : str
        A topic the query reads.
    partitions : sequence of int, optional
        Partitions of ``topic`` this query owns; all of the topic (including
        partitions assigned to it later) when omitted.
    timeout_s : float
        How long to wait for the query's first progress and for its answer.

    Returns
    -------
    list of str
        The topic or partitions that were not paused before.

    Raises
    ------
    FlowControlError
        The topic is not read by the query, a partition does not exist or belongs to
        another member, or the query did not answer. The query is not disturbed.
    """
    return _request(query, "pause", topic, partitions, timeout_s)


def resume(query: QueryOrControl, topic: str, partitions: Optional[Sequence[int]] = None, *,
           timeout_s: float = 30.0) -> List[str]:
    """Resume paused partitions (all pauses of ``topic`` when ``partitions`` is omitted).

    Returns the topic or partitions that were paused. Raises like :func:`pause`.
    """
    return _request(query, "resume", topic, partitions, timeout_s)


def status(query: QueryOrControl, *, timeout_s: float = 30.0) -> List[Dict[str, Any]]:
    """Per owned partition, as of the query's last plan.

    Returns
    -------
    list of dict
        ``topic``, ``partition``, ``position`` (next offset to read when the batch
        was planned), ``latest`` (end of the partition then), ``lag``, ``planned``
        (``[from, until)`` of the last batch or None), ``paused``, ``pausedSince``
        and ``heldBy`` (the rule that held the partition back in the last plan:
        ``paused``, ``alignment``, ``maxOffsetsPerPartition``, ``topicPriority``,
        ``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger`` (a skipped trigger), or None).
        ``pandas.DataFrame(status(q))`` shows it
        as a table.
    """
    control = _control_of(query, timeout_s)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if _is_connect(query):
                answer = _through_spark(query, control, {"op": "status"}, timeout_s)
                rows: List[Dict[str, Any]] = answer["status"]["partitions"]
            else:
                rows = read_status(control)["partitions"]
            return rows
        except FlowControlError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def queries(group: Optional[str] = None, control_dir: Optional[str] = None) -> List[Dict[str, Any]]:
    """The running ``kafka-group`` queries on this machine (optionally of one group).

    Each entry has ``control`` (pass it to :func:`pause`, :func:`resume`,
    :func:`status`), ``group``, ``subscription`` and ``pid``. ``control_dir`` is the
    queries' ``flow.controlDir`` option, if they set one; without it, every default root of this
    user is searched (:mod:`kafka_group.flow.default_root`).
    """
    if control_dir:
        return find_controls(control_dir, group)
    return [found for root in default_roots() for found in find_controls(root, group)]


def _request(query: QueryOrControl, op: str, topic: str, partitions: Optional[Sequence[int]],
             timeout_s: float) -> List[str]:
    if not isinstance(topic, str) or not topic:
        raise FlowControlError(f"{op}: name a topic, got {topic!r}")
    numbers: Optional[List[int]] = None
    if partitions is not None:
        if isinstance(partitions, (str, bytes)) or not all(
            isinstance(p, int) and not isinstance(p, bool) for p in partitions
        ):
            raise FlowControlError(f"{op}: partitions must be a list of partition numbers, got {partitions!r}")
        numbers = sorted(set(partitions))
        negative = [p for p in numbers if p < 0]
        if negative:
            raise FlowControlError(f"{op}: partition numbers start at 0, got {negative}")
    control = _control_of(query, timeout_s)
    request = {"op": op, "topic": topic, "partitions": numbers}
    if _is_connect(query):
        answer = _through_spark(query, control, request, timeout_s)
    else:
        answer = send_request(control, request, timeout_s)
    return list(answer.get("changed", []))


def _is_connect(query: QueryOrControl) -> bool:
    """Whether ``query`` is a Spark Connect ``StreamingQuery`` (its driver's disk is out of reach)."""
    return not isinstance(query, str) and type(query).__module__.startswith("pyspark.sql.connect")


#: Connect sessions (by id) in which ``kafka-group-flow`` is registered.
_registered: set[str] = set()


def _through_spark(query: Any, control: str, request: Dict[str, Any], timeout_s: float) -> Dict[str, Any]:
    """Send ``request`` to the query's channel through a ``kafka-group-flow`` read in its own session."""
    from pyspark.sql import SparkSession

    from pyspark_kafka_group.source.flow_source import FlowControlDataSource

    # A Connect StreamingQuery keeps its session in _session (it has no public accessor).
    session: Any = getattr(query, "_session", None) or SparkSession.getActiveSession()
    if session is None:
        raise FlowControlError("flow control of a Spark Connect query needs its session, and none is active")
    if session.session_id not in _registered:
        session.dataSource.register(FlowControlDataSource)
        _registered.add(session.session_id)
    rows = (session.read.format(FlowControlDataSource.name())
            .option("control", control)
            .option("request", json.dumps(request))
            .option("requestId", uuid.uuid4().hex)
            .option("timeoutSeconds", str(timeout_s))
            .load().collect())
    if len(rows) != 1:
        raise FlowControlError(f"format 'kafka-group-flow' answered {len(rows)} rows, expected one")
    answer: Dict[str, Any] = json.loads(rows[0][0])
    if not answer.get("ok"):
        raise FlowControlError(str(answer.get("error", "the request was refused")))
    return answer


def _control_of(query: QueryOrControl, timeout_s: float) -> str:
    """The control folder of ``query``, from its progress (waiting for the first one)."""
    if isinstance(query, str):
        return query
    if not hasattr(query, "recentProgress"):
        raise FlowControlError(
            f"expected a StreamingQuery of a 'kafka-group' source or a control folder, got {type(query).__name__}"
        )
    deadline = time.monotonic() + timeout_s
    while True:
        controls = _controls_in_progress(query)
        if len(controls) == 1:
            return controls[0]
        if len(controls) > 1:
            raise FlowControlError(
                f"the query reads {len(controls)} 'kafka-group' sources: pass the control folder of one of them "
                f"({', '.join(controls)})"
            )
        if not query.isActive:
            raise FlowControlError("the query is not running: flow control needs a running query")
        if time.monotonic() > deadline:
            raise FlowControlError(
                f"the query has reported no progress of a 'kafka-group' source within {timeout_s:g} s: wait for "
                "its first batch (query.lastProgress), then try again"
            )
        time.sleep(0.2)


def _controls_in_progress(query: Any) -> List[str]:
    """The control folders reported by the ``kafka-group`` sources of the query's latest progress that has one."""
    for index, progress in enumerate(reversed(query.recentProgress or [])):
        found = [source.latest.control
                 for source in read_progress(progress, what=f"recent progress event -{index + 1}").sources
                 if source.latest.control]
        if found:
            return found
    return []
