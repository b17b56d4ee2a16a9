"""What :class:`~pyspark_kafka_group.sink.delta_sink.DeltaSink` reads of the query's checkpoint: a batch's plan.

Spark writes the source's end offsets of batch N to ``<checkpointLocation>/offsets/N`` before it
runs the batch. This module finds the checkpoint (the sink's ``checkpoint_location``, or in a classic
session the running query's), checks that it is the running query's, reads the file (directly for a
local checkpoint, through Spark's ``read.text`` for any other file system, so Spark Connect sessions
work too) and parses the plan. Caller: the driver, inside ``foreachBatch``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, List, Optional

from kafka_group.delta.offsets.table_routes import is_template
from kafka_group.delta.storage.table_location import same_table_location
from kafka_group.errors import ConfigError
from kafka_group.formats import read_checkpoint_offsets
from kafka_group.offsets import OffsetRange

__all__ = ["BatchPlan", "CONNECT_NEEDS_CHECKPOINT", "batch_plan", "checkpoint_of_running_query", "connect_mode",
           "local_path", "planned_offsets_text", "query_id", "read_batch_offsets", "read_text", "refuse_committed_batch",
           "verify_checkpoint"]


@dataclass(frozen=True)
class BatchPlan:
    """What the source planned for one micro-batch."""

    batch_id: int
    group: str
    offsets_table: str
    ranges: List[OffsetRange]


def batch_plan(text: str, batch_id: int, table: str) -> BatchPlan:
    """The plan of batch ``batch_id`` in the text of its checkpoint offsets file, for the sink writing ``table``.

    Raises
    ------
    ConfigError
        The query has not exactly one ``kafka-group`` source with ``offsets.table``, or that option names
        another table than ``table``.
    """
    docs = read_checkpoint_offsets(text, where=f"the checkpoint offsets file of batch {batch_id}").offsets_table_sources()
    if len(docs) != 1:
        raise ConfigError(
            f"DeltaSink('{table}') needs exactly one kafka-group source with option 'offsets.table' "
            f"in the query, found {len(docs)}: set .option(\"offsets.table\", \"{table}\") on the source"
        )
    doc = docs[0]
    assert doc.group is not None and doc.offsets_table is not None
    if is_template(doc.offsets_table) or doc.offsets_table.lstrip().startswith("{"):
        # A routed source (many tables): a plain DeltaSink would land every topic in one table (at a template's
        # literal path even) while the source positions from the topics' own tables.
        raise ConfigError(
            f"the source's option 'offsets.table' is '{doc.offsets_table}', the tables of many topics: land them "
            "with RoutedDeltaSink (its source_options() give the source's options), not DeltaSink"
        )
    if not same_table_location(doc.offsets_table, table):
        raise ConfigError(
            f"the source's option 'offsets.table' is '{doc.offsets_table}' but DeltaSink writes '{table}': "
            "the offsets must live in the table the data goes to. Use the same path for both"
        )
    return BatchPlan(batch_id, doc.group, doc.offsets_table, doc.planned_ranges())


def read_batch_offsets(session: Any, checkpoint_location: Optional[str], batch_id: int, *, verify: bool) -> str:
    """The text of ``<checkpoint>/offsets/<batchId>``, without the driver's JVM.

    Local paths (no scheme, or ``file:``) are read directly when the file is on this
    machine; anything else (``dbfs:/``, ``s3a://``, ``abfss://``, ``hdfs://``, or a
    path of the cluster's default file system) through Spark itself, with the
    cluster's own credentials: ``read.text(wholetext=True)`` works in classic and
    Spark Connect sessions alike. A ``checkpoint_location`` (None: the running query's, classic sessions
    only) is checked to be the running query's when ``verify`` (the sink's first batch), and at every
    batch not to have committed this batch already.
    """
    root = (checkpoint_location or checkpoint_of_running_query(session)).rstrip("/")
    if checkpoint_location and verify:
        verify_checkpoint(session, root)
    if checkpoint_location:
        refuse_committed_batch(session, root, batch_id)
    return planned_offsets_text(session, root, batch_id)


def planned_offsets_text(session: Any, root: str, batch_id: int) -> str:
    """The text of ``<root>/offsets/<batchId>`` (see :func:`read_text`).

    Raises
    ------
    ConfigError
        There is no such file.
    """
    location = f"{root}/offsets/{batch_id}"
    text = read_text(session, location)
    if text is None:
        raise ConfigError(
            f"DeltaSink found no planned offsets for batch {batch_id} at '{location}': pass the "
            "query's checkpoint location as DeltaSink(..., checkpoint_location=...)"
        )
    return text


def verify_checkpoint(session: Any, root: str) -> None:
    """Check that ``root`` is the checkpoint of a query running in ``session``.

    A sink handed another query's checkpoint (the query's ``checkpointLocation``
    changed, the sink's did not) would read that query's plans. Spark keeps the
    query id in ``<checkpoint>/metadata``; under Spark Connect the batch's session
    is the query's own, so the id must be among its active queries. (A classic
    batch runs on a clone of the session, whose query list is not the query's.)
    """
    from pyspark_kafka_group.session.spark_session import is_connect_session

    if is_connect_session(session):
        metadata = read_text(session, f"{root}/metadata")
        active = {str(query.id) for query in session.streams.active}
        found = query_id(metadata)
        if active and found not in active:
            whose = f"the checkpoint of query {found}" if found else "no query's checkpoint"
            raise ConfigError(
                f"DeltaSink(checkpoint_location='{root}') is {whose}, not of a query running in this "
                "session: pass the query's own checkpointLocation as DeltaSink(..., checkpoint_location=...)"
            )


def refuse_committed_batch(session: Any, root: str, batch_id: int) -> None:
    """Refuse a checkpoint ``root`` that has already committed batch ``batch_id``.

    Spark calls ``foreachBatch`` for batch N only while the query's
    ``<checkpoint>/commits/N`` does not exist: on a restart it replays N when the
    commit log ends at N-1, and starts N+1 when it ends at N
    (``MicroBatchExecution.populateStartOffsets``); it writes ``commits/N`` after the
    sink returns. A checkpoint holding ``commits/N`` now is another query's (or a stale
    copy), whose ``offsets/N`` is not this batch's plan. Checked before any file is
    written, at every batch (one file lookup).
    """
    local = local_path(root)
    if local is not None and os.path.isdir(os.path.join(local, "offsets")):  # on this disk: no Spark read
        committed = os.path.isfile(os.path.join(local, "commits", str(batch_id)))
    else:
        committed = read_text(session, f"{root}/commits/{batch_id}") is not None
    if committed:
        raise ConfigError(
            f"DeltaSink(checkpoint_location='{root}') has already committed batch {batch_id}, which Spark is "
            "running now: it is not this query's checkpoint (or a stale copy of it), so its offsets are not "
            "this batch's plan. Pass the query's own checkpointLocation as DeltaSink(..., checkpoint_location=...)"
        )


CONNECT_NEEDS_CHECKPOINT = (
    "DeltaSink under Spark Connect needs the query's checkpoint location: pass "
    "DeltaSink(path, checkpoint_location=<the query's checkpointLocation option>). A Connect session "
    "has no driver JVM to ask the running query for it, and neither its progress nor the session's "
    "settings name it"
)

#: A URI scheme such as ``s3a:`` or ``dbfs:`` (one letter would be a Windows drive).
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")


def local_path(location: str) -> Optional[str]:
    """``location`` as a path on this machine, or ``None`` when it names another file system."""
    if location.startswith("file://"):
        return location[len("file://"):]
    if location.startswith("file:"):
        return location[len("file:"):]
    return None if _SCHEME.match(location) else location


def read_text(session: Any, location: str) -> Optional[str]:
    """The whole text of the file at ``location`` (``None`` when there is none): local paths
    (no scheme, or ``file:``) from this machine's disk when the file is there, anything
    else through Spark."""
    local = local_path(location)
    if local is not None and os.path.isfile(local):
        with open(local, encoding="utf-8") as handle:
            return handle.read()
    return _read_through_spark(session, location)


def query_id(metadata: Optional[str]) -> Optional[str]:
    """The query id in a checkpoint's ``metadata`` file (``{"id": ...}``), or ``None``."""
    from kafka_group.json_text import parse_json

    try:
        doc = parse_json(metadata or "null")
    except ValueError:  # NotJson: malformed, too deep or too large a number
        return None
    return str(doc["id"]) if isinstance(doc, dict) and "id" in doc else None


def _read_through_spark(session: Any, location: str) -> Optional[str]:
    """The whole text of the file at ``location``, read by Spark (``None`` when there is none)."""
    from pyspark.errors import AnalysisException

    try:
        rows = session.read.text(location, wholetext=True).collect()
    except AnalysisException as exc:
        if "PATH_NOT_FOUND" in str(exc):
            return None
        raise
    return str(rows[0][0]) if rows else None


def checkpoint_of_running_query(session: Any) -> str:
    """The checkpoint root of the query running this ``foreachBatch`` call (classic sessions only).

    Classic-only: it asks the driver JVM (the query id is a local property of the
    batch's thread; the query's resolved checkpoint root lives in the JVM). Under
    Spark Connect it raises :class:`ConfigError` before anything is written.
    """
    from pyspark.sql import SparkSession

    from pyspark_kafka_group.session.spark_session import is_connect_session

    if is_connect_session(session):
        raise ConfigError(CONNECT_NEEDS_CHECKPOINT)
    running = session.sparkContext.getLocalProperty("sql.streaming.queryId")
    sessions = [SparkSession.getActiveSession(), SparkSession.builder.getOrCreate(), session]
    for candidate in sessions:
        if candidate is None or running is None:
            continue
        query = candidate.streams.get(running)
        if query is not None:
            return str(query._jsq.streamingQuery().resolvedCheckpointRoot())
    raise ConfigError(
        "DeltaSink could not find the running query's checkpoint: pass it as "
        "DeltaSink(path, checkpoint_location=<the query's checkpointLocation>)"
    )


def connect_mode() -> bool:
    """Whether this process is in Spark Connect mode (``builder.remote(...)`` or ``SPARK_CONNECT_MODE_ENABLED``)."""
    from pyspark.sql.utils import is_remote

    return bool(is_remote())
