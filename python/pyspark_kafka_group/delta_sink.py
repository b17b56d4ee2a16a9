"""Landing micro-batches in Delta Lake, exactly once: data and Kafka offsets in one commit.

:class:`DeltaSink` is a ``foreachBatch`` function. For each micro-batch it

1. reads the batch's planned offset ranges from the query's checkpoint
   (``<checkpointLocation>/offsets/<batchId>``: Spark writes the source's end
   offsets there before it runs the batch), directly for a local checkpoint and
   through Spark (``read.text``) for any other file system, so that it works in
   Spark Connect sessions too;
2. asks the table whether those ranges are still committable (see
   :mod:`kafka_group.delta.delta_offsets`): a batch already committed (a replay after a
   crash) is skipped; partitions another member or a reset moved are left out
   (their rows dropped, or nothing of the batch landed when the rows cannot be
   told apart), and the source plans what did not land again from the table;
3. has the Spark executors write the batch's Parquet files into the table
   (``batch.mapInArrow``: each task writes its rows, one file per partition-value
   combination, through delta-rs's object store, so local paths, ``s3://``,
   ``abfss://`` and ``gs://`` alike, with no Hadoop file system and no JVM; see
   :mod:`kafka_group.delta.delta_files`) and return each file's ``add`` action: path,
   size, record count, statistics for data skipping, partition values. The files
   are invisible: they are in no Delta commit yet;
4. commits those files together with the new position of every planned
   partition in one Delta transaction, on the driver, through delta-rs.

Nothing is visible until step 4 succeeds. Files of a batch whose commit is refused
(its offsets conflict) are deleted; files of task attempts Spark retried, and of a
crash before the commit, are in no commit: invisible, and delta-spark's ``VACUUM``
removes them. The source's ``commit()`` then also
commits the offsets to the Kafka group, for lag tools; losing that loses nothing.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator, List, Mapping, Optional, Sequence

from kafka_group.delta.commit_files import DataFile
from kafka_group.delta.delta_files import write_partitioned
from kafka_group.delta.delta_offsets import DeltaOffsetStore
from kafka_group.delta.file_stats import DEFAULT_INDEXED_COLUMNS
from kafka_group.delta.not_null import ColumnPath
from kafka_group.delta.partition_values import check_partition_columns
from kafka_group.delta.table_location import normalize_table_path, same_table_location, table_filesystem
from kafka_group.errors import ConfigError, OffsetConflictError
from kafka_group.faults import crash_point
from kafka_group.formats import read_checkpoint_offsets
from kafka_group.offsets import OffsetRange
from pyspark_kafka_group.spark_requirement import require_sink_dependencies

__all__ = ["DeltaSink"]

#: How often a batch is checked, written and committed again after losing partitions to a rebalance.
_LAND_ATTEMPTS = 3

logger = logging.getLogger(__name__)



@dataclass(frozen=True)
class BatchPlan:
    """What the source planned for one micro-batch."""

    batch_id: int
    group: str
    offsets_table: str
    ranges: List[OffsetRange]


class DeltaSink:
    """A ``foreachBatch`` function that lands a ``kafka-group`` stream in Delta exactly once.

    Parameters
    ----------
    path : str
        The Delta table. The source must name the same table in its
        ``offsets.table`` option: the table's commits hold the offsets.
    transform : callable, optional
        A stateless row transformation (``DataFrame -> DataFrame``: select,
        ``from_json``, filter, ...) applied to the source's rows before they are
        written. Prefer it to transforming the stream before ``foreachBatch``:
        the sink then still sees ``topic`` and ``partition``, and when one
        partition's offsets conflict (it moved to another member) it drops just
        that partition's rows and lands the rest, instead of landing nothing of
        the batch (the source then reads the rest again in its next batch).
    checkpoint_location : str, optional
        The query's checkpoint location (its ``checkpointLocation`` option). A
        classic session finds it from the running query when omitted; under Spark
        Connect it is required (nothing reachable without the driver's JVM names
        it), and omitting it raises :class:`~kafka_group.errors.ConfigError` here.
    storage_options : dict, optional
        delta-rs storage options for an object store table (``s3://``, ``abfss://``,
        ``gs://``): credentials, endpoint, region, such as ``{"AWS_REGION": "eu-west-1"}``.
        They reach the executors that write the files and the driver that commits them;
        delta-rs also reads ``AWS_*``, ``AZURE_*`` and ``GOOGLE_*`` environment variables.
        Give the source the same through its ``offsets.table.storage.<KEY>`` options. The
        values are secrets: they appear in no log, error or progress.
    partition_by : list of str, optional
        Partition the table by these columns (string, integer, boolean or date columns of
        the rows written, after ``transform``). A new table is created partitioned so; an
        existing table must be partitioned by exactly these. Left out, the sink follows an
        existing table's partitioning and creates a new table unpartitioned.

    merge_schema : bool, default False
        Delta's ``mergeSchema``: columns a batch adds (top-level, or fields of structs) are added
        to the table's schema, and columns of the table a batch lacks are read as NULL for its
        rows. Without it such a batch fails the query before any file is written, naming the
        column. A column whose type changes is refused either way. The new columns are committed
        (``ADD COLUMN``) right before the batch's data and offsets, see
        :meth:`kafka_group.delta.delta_offsets.DeltaOffsetStore.commit`. Give every query of the
        group that writes the table the same transform and setting: once one merged a column,
        the others' batches lack it and are refused unless they merge too.

    Raises
    ------
    ConfigError
        No path, or (in a Spark Connect process) no ``checkpoint_location``.
    DependencyError
        pandas or pyarrow, which Spark's ``mapInArrow`` needs for the sink's writes, is missing
        or older than pyspark asks for (the message names the package and the pip command).

    Notes
    -----
    Works in classic and Spark Connect sessions alike: the batch's plan is read
    from the checkpoint with Python (local paths) or through Spark itself (other
    file systems), never through the driver's JVM.

    Examples
    --------
    >>> stream = (spark.readStream.format("kafka-group")            # doctest: +SKIP
    ...           .option("kafka.bootstrap.servers", servers)
    ...           .option("subscribe", "orders")
    ...           .option("kafka.group.id", "orders-bronze")
    ...           .option("offsets.table", "/lake/orders_bronze")
    ...           .load())
    >>> query = (stream.writeStream                                  # doctest: +SKIP
    ...          .foreachBatch(DeltaSink("/lake/orders_bronze",
    ...                                  transform=lambda df: df.selectExpr("CAST(value AS STRING) AS json")))
    ...          .option("checkpointLocation", "/chk/orders_bronze")
    ...          .start())
    """

    def __init__(
        self,
        path: str,
        *,
        transform: Optional[Callable[[Any], Any]] = None,
        checkpoint_location: Optional[str] = None,
        storage_options: Optional[Mapping[str, str]] = None,
        partition_by: Optional[Sequence[str]] = None,
        merge_schema: bool = False,
    ) -> None:
        if not isinstance(path, str) or not path.strip():
            raise ConfigError("DeltaSink needs the path of the Delta table to write, got an empty path")
        if isinstance(partition_by, str) or (
            partition_by is not None and not all(isinstance(c, str) and c for c in partition_by)
        ):
            raise ConfigError(
                f"DeltaSink(partition_by=...) takes a list of column names, such as ['date'], got {partition_by!r}"
            )
        require_sink_dependencies()
        self.path = path
        self.transform = transform
        if checkpoint_location is None and _connect_mode():
            raise ConfigError(_CONNECT_NEEDS_CHECKPOINT)
        self.checkpoint_location = checkpoint_location
        self._checkpoint_verified = False
        self.storage_options = dict(storage_options or {})
        self.partition_by = None if partition_by is None else list(partition_by)
        self.merge_schema = bool(merge_schema)

    def __repr__(self) -> str:  # never the storage options: they hold credentials
        return f"DeltaSink({self.path!r}, partition_by={self.partition_by!r})"

    def __call__(self, batch: Any, batch_id: int) -> None:
        """Land one micro-batch (Spark calls this through ``foreachBatch``).

        A batch whose offsets conflict with the table (another member or a reset moved
        some of its partitions) never fails the query: the partitions the table agrees
        with land when the batch keeps ``topic`` and ``partition`` (or the transform is
        given here); otherwise nothing of it lands. Either way the source's next batch
        plans whatever did not land from the table's positions again (it follows the
        table at every batch), so nothing is lost and nothing is written twice. Spark
        replays a batch from its checkpoint without asking the source, so a conflict
        that failed the batch would fail every restart.
        """
        plan = self._plan(batch, batch_id)
        store = DeltaOffsetStore(self.path, plan.group, self.storage_options)
        # Before any file is written: a store that ignores conditional puts is refused (ConditionalPutError).
        store.check_conditional_put()
        for attempt in range(1, _LAND_ATTEMPTS + 1):
            try:
                self._land(batch, batch_id, plan, store)
                return
            except OffsetConflictError as exc:
                # Another member committed some of these partitions while the files were
                # being written (a rebalance): check again and land the rest.
                if attempt == _LAND_ATTEMPTS or not self._can_drop_partitions(batch):
                    self._land_nothing(store, plan, batch_id, str(exc))
                    return
                logger.warning("batch %d lost a race for some partitions; landing the others", batch_id)

    def _land(self, batch: Any, batch_id: int, plan: BatchPlan, store: DeltaOffsetStore) -> None:
        check = store.check(plan.ranges)
        if check.already_committed:
            logger.info("batch %d is already in %s (a replay after a restart): skipping it", batch_id, self.path)
            return
        ranges = list(plan.ranges)
        if check.conflicts:
            if not self._can_drop_partitions(batch):
                self._land_nothing(store, plan, batch_id,
                                   f"{check.describe_conflicts(ranges)}; the batch has no 'topic' and 'partition' "
                                   "columns to keep the other partitions' rows by (pass the transform as "
                                   "DeltaSink(transform=...) to land them)")
                return
            logger.warning(
                "batch %d: %s; dropping those partitions' rows (their new owner has them) and landing the rest",
                batch_id, check.describe_conflicts(ranges),
            )
            ranges = check.committable
            batch = self._only_partitions(batch, ranges)
        if self.transform is not None:
            batch = self.transform(batch)
        from pyspark.sql.pandas.types import to_arrow_schema

        # Before any file is written: a batch that does not fit the table is refused whole.
        # Spark's timestamps are UTC instants (timestamp[us, tz=UTC]), as in the written files.
        schema = to_arrow_schema(batch.schema, timezone="UTC")
        store.check_schema(schema, batch=f"batch {batch_id}", merge_schema=self.merge_schema)
        partition_by = self._partition_columns(store, schema)
        crash_point("sink.before_write")
        files = self._write_files(batch, batch_id, schema, partition_by, store)
        if not ranges and not files:
            return
        crash_point("sink.before_commit")
        # A commit refused for another writer's offsets (OffsetConflictError) deletes the files: in no commit,
        # invisible, and gone; one refused as already committed keeps them (an older version may read them).
        store.commit(
            files,
            schema,
            ranges,
            metadata={
                "kafkaGroup.batchId": batch_id,
                "kafkaGroup.ranges": ",".join(str(r) for r in ranges),
            },
            partition_by=partition_by,
            merge_schema=self.merge_schema,
        )
        crash_point("sink.after_commit")

    @staticmethod
    def _land_nothing(store: DeltaOffsetStore, plan: BatchPlan, batch_id: int, why: str) -> None:
        logger.warning(
            "batch %d lands nothing: %s. Another member committed some of its partitions meanwhile, or their "
            "offsets were reset; the source plans every offset of this batch that is not in the table again, "
            "from the table's positions, in its next batch", batch_id, why,
        )
        # Partitions the table never saw would look never read to the next plan (this
        # query's or another member's) and start at 'startingOffsets', latest by default:
        # past this batch. Their position is recorded where this batch started (the store
        # leaves out every partition the table has a position for).
        store.hold_unseen([r for r in plan.ranges if r.size > 0],
                          reason=f"batch {batch_id} landed nothing (offset conflict)")

    @staticmethod
    def _can_drop_partitions(batch: Any) -> bool:
        return {"topic", "partition"} <= set(batch.columns)

    # -- the batch's plan --------------------------------------------------------------

    def _plan(self, batch: Any, batch_id: int) -> BatchPlan:
        text = self._read_offsets_file(batch, batch_id)
        docs = read_checkpoint_offsets(text, where=f"the checkpoint offsets file of batch {batch_id}").offsets_table_sources()
        if len(docs) != 1:
            raise ConfigError(
                f"DeltaSink('{self.path}') needs exactly one kafka-group source with option 'offsets.table' "
                f"in the query, found {len(docs)}: set .option(\"offsets.table\", \"{self.path}\") on the source"
            )
        doc = docs[0]
        assert doc.group is not None and doc.offsets_table is not None
        if not same_table_location(doc.offsets_table, self.path):
            raise ConfigError(
                f"the source's option 'offsets.table' is '{doc.offsets_table}' but DeltaSink writes '{self.path}': "
                "the offsets must live in the table the data goes to. Use the same path for both"
            )
        return BatchPlan(batch_id, doc.group, doc.offsets_table, doc.planned_ranges())

    def _read_offsets_file(self, batch: Any, batch_id: int) -> str:
        """The text of ``<checkpoint>/offsets/<batchId>``, without the driver's JVM.

        Local paths (no scheme, or ``file:``) are read directly when the file is on this
        machine; anything else (``dbfs:/``, ``s3a://``, ``abfss://``, ``hdfs://``, or a
        path of the cluster's default file system) through Spark itself, with the
        cluster's own credentials: ``read.text(wholetext=True)`` works in classic and
        Spark Connect sessions alike.
        """
        session = batch.sparkSession
        root = (self.checkpoint_location or _checkpoint_of_running_query(session)).rstrip("/")
        if self.checkpoint_location and not self._checkpoint_verified:
            self._verify_checkpoint(session, root)
        if self.checkpoint_location:
            self._refuse_committed_batch(session, root, batch_id)
        location = f"{root}/offsets/{batch_id}"
        text = _read_text(session, location)
        if text is None:
            raise ConfigError(
                f"DeltaSink found no planned offsets for batch {batch_id} at '{location}': pass the "
                "query's checkpoint location as DeltaSink(..., checkpoint_location=...)"
            )
        return text

    def _verify_checkpoint(self, session: Any, root: str) -> None:
        """Check once that ``checkpoint_location`` is the checkpoint of a query running in ``session``.

        A sink handed another query's checkpoint (the query's ``checkpointLocation``
        changed, the sink's did not) would read that query's plans. Spark keeps the
        query id in ``<checkpoint>/metadata``; under Spark Connect the batch's session
        is the query's own, so the id must be among its active queries. (A classic
        batch runs on a clone of the session, whose query list is not the query's.)
        """
        from pyspark_kafka_group.spark_session import is_connect_session

        if is_connect_session(session):
            metadata = _read_text(session, f"{root}/metadata")
            active = {str(query.id) for query in session.streams.active}
            query_id = _query_id(metadata)
            if active and query_id not in active:
                whose = f"the checkpoint of query {query_id}" if query_id else "no query's checkpoint"
                raise ConfigError(
                    f"DeltaSink(checkpoint_location='{root}') is {whose}, not of a query running in this "
                    "session: pass the query's own checkpointLocation as DeltaSink(..., checkpoint_location=...)"
                )
        self._checkpoint_verified = True

    @staticmethod
    def _refuse_committed_batch(session: Any, root: str, batch_id: int) -> None:
        """Refuse a ``checkpoint_location`` that has already committed batch ``batch_id``.

        Spark calls ``foreachBatch`` for batch N only while the query's
        ``<checkpoint>/commits/N`` does not exist: on a restart it replays N when the
        commit log ends at N-1, and starts N+1 when it ends at N
        (``MicroBatchExecution.populateStartOffsets``); it writes ``commits/N`` after the
        sink returns. A checkpoint holding ``commits/N`` now is another query's (or a stale
        copy), whose ``offsets/N`` is not this batch's plan. Checked before any file is
        written, at every batch (one file lookup).
        """
        local = _local_path(root)
        if local is not None and os.path.isdir(os.path.join(local, "offsets")):  # on this disk: no Spark read
            committed = os.path.isfile(os.path.join(local, "commits", str(batch_id)))
        else:
            committed = _read_text(session, f"{root}/commits/{batch_id}") is not None
        if committed:
            raise ConfigError(
                f"DeltaSink(checkpoint_location='{root}') has already committed batch {batch_id}, which Spark is "
                "running now: it is not this query's checkpoint (or a stale copy of it), so its offsets are not "
                "this batch's plan. Pass the query's own checkpointLocation as DeltaSink(..., checkpoint_location=...)"
            )

    # -- conflicts ---------------------------------------------------------------------

    @staticmethod
    def _only_partitions(batch: Any, ranges: Sequence[OffsetRange]) -> Any:
        from pyspark.sql import functions as F

        keep = F.lit(False)
        for r in ranges:
            tp = r.topic_partition
            keep = keep | ((F.col("topic") == tp.topic) & (F.col("partition") == tp.partition))
        return batch.where(keep)

    # -- files -------------------------------------------------------------------------

    def _partition_columns(self, store: DeltaOffsetStore, schema: Any) -> List[str]:
        """The partition columns this batch's files are written for, checked against the batch
        and the table before any file is written."""
        existing = store.partition_columns()
        partition_by = self.partition_by if self.partition_by is not None else list(existing or [])
        check_partition_columns(schema, partition_by, table=self.path)
        if existing is not None:
            store.check_partition_columns(partition_by)
        return partition_by

    def _write_files(
        self, batch: Any, batch_id: int, schema: Any, partition_by: Sequence[str], store: DeltaOffsetStore
    ) -> List[DataFile]:
        """Have the executors write ``batch`` into the table; the files' ``add`` actions."""
        # Resolved here: a relative local path means the driver's working directory, not a worker's.
        write = _file_writer(normalize_table_path(self.path), self.storage_options, schema, batch_id, partition_by,
                             _indexed_columns(store.configuration()), store.not_null_columns())
        if partition_by:
            # Each task then writes one file per key, one at a time (write_partitioned closes a
            # file when the key changes). Empty strings sort with nulls: both are the null value.
            batch = batch.sortWithinPartitions(*[_sort_key(c, schema.field(c).type) for c in partition_by])
        rows = batch.mapInArrow(write, _WRITTEN_FILE_SCHEMA).collect()
        return [
            DataFile(row["path"], int(row["size"]), int(row["num_records"]), row["stats"],
                     json.loads(row["partition_values"]),
                     {tuple(path): int(count) for path, count in json.loads(row["null_counts"])})
            for row in rows
        ]


#: One row per written file, as the executors return them (``mapInArrow``'s result schema).
_WRITTEN_FILE_SCHEMA = ("path string, size long, num_records long, stats string, partition_values string, "
                        "null_counts string")


def _sort_key(column: str, arrow_type: Any) -> Any:
    """The ``sortWithinPartitions`` key of a partition column: ascending, nulls first, and for a
    string column the empty string as null (the order ``write_partitioned`` groups by)."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    ref = F.col("`" + column.replace("`", "``") + "`")
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        ref = F.nullif(ref, F.lit(""))
    return ref.asc_nulls_first()


def _indexed_columns(configuration: Mapping[str, Optional[str]]) -> int:
    """The table's ``delta.dataSkippingNumIndexedCols`` (delta-spark's default, 32, when unset)."""
    raw = configuration.get("delta.dataSkippingNumIndexedCols")
    try:
        return int(raw) if raw is not None else DEFAULT_INDEXED_COLUMNS
    except ValueError:
        return DEFAULT_INDEXED_COLUMNS


def _file_writer(
    table: str, storage_options: Mapping[str, str], schema: Any, batch_id: int, partition_by: Sequence[str],
    indexed_columns: int, not_null: Sequence[ColumnPath] = (),
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The ``mapInArrow`` function: writes a task's rows, yields one row per file written.

    Caller: Spark tasks on the executors (the closure is pickled, storage options included;
    they are never logged)."""
    options = dict(storage_options)
    columns = list(partition_by)
    counted = [tuple(path) for path in not_null]

    def write(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        written = write_partitioned(batches, filesystem=table_filesystem(table, options), schema=schema,
                                    batch_id=batch_id, partition_by=columns, indexed_columns=indexed_columns,
                                    not_null=counted)
        for f in written:
            yield pa.RecordBatch.from_pydict(
                {"path": [f.path], "size": [f.size], "num_records": [f.num_records], "stats": [f.stats],
                 "partition_values": [json.dumps(f.partition_values)],
                 "null_counts": [json.dumps([[list(path), count] for path, count in f.null_counts.items()])]},
                schema=pa.schema([("path", pa.string()), ("size", pa.int64()), ("num_records", pa.int64()),
                                  ("stats", pa.string()), ("partition_values", pa.string()),
                                  ("null_counts", pa.string())]),
            )

    return write


_CONNECT_NEEDS_CHECKPOINT = (
    "DeltaSink under Spark Connect needs the query's checkpoint location: pass "
    "DeltaSink(path, checkpoint_location=<the query's checkpointLocation option>). A Connect session "
    "has no driver JVM to ask the running query for it, and neither its progress nor the session's "
    "settings name it"
)

#: A URI scheme such as ``s3a:`` or ``dbfs:`` (one letter would be a Windows drive).
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")


def _local_path(location: str) -> Optional[str]:
    """``location`` as a path on this machine, or ``None`` when it names another file system."""
    if location.startswith("file://"):
        return location[len("file://"):]
    if location.startswith("file:"):
        return location[len("file:"):]
    return None if _SCHEME.match(location) else location


def _read_text(session: Any, location: str) -> Optional[str]:
    """The whole text of the file at ``location`` (``None`` when there is none): local paths
    (no scheme, or ``file:``) from this machine's disk when the file is there, anything
    else through Spark."""
    local = _local_path(location)
    if local is not None and os.path.isfile(local):
        with open(local, encoding="utf-8") as handle:
            return handle.read()
    return _read_through_spark(session, location)


def _query_id(metadata: Optional[str]) -> Optional[str]:
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


def _checkpoint_of_running_query(session: Any) -> str:
    """The checkpoint root of the query running this ``foreachBatch`` call (classic sessions only).

    Classic-only: it asks the driver JVM (the query id is a local property of the
    batch's thread; the query's resolved checkpoint root lives in the JVM). Under
    Spark Connect it raises :class:`ConfigError` before anything is written.
    """
    from pyspark.sql import SparkSession

    from pyspark_kafka_group.spark_session import is_connect_session

    if is_connect_session(session):
        raise ConfigError(_CONNECT_NEEDS_CHECKPOINT)
    query_id = session.sparkContext.getLocalProperty("sql.streaming.queryId")
    sessions = [SparkSession.getActiveSession(), SparkSession.builder.getOrCreate(), session]
    for candidate in sessions:
        if candidate is None or query_id is None:
            continue
        query = candidate.streams.get(query_id)
        if query is not None:
            return str(query._jsq.streamingQuery().resolvedCheckpointRoot())
    raise ConfigError(
        "DeltaSink could not find the running query's checkpoint: pass it as "
        "DeltaSink(path, checkpoint_location=<the query's checkpointLocation>)"
    )


def _connect_mode() -> bool:
    """Whether this process is in Spark Connect mode (``builder.remote(...)`` or ``SPARK_CONNECT_MODE_ENABLED``)."""
    from pyspark.sql.utils import is_remote

    return bool(is_remote())
