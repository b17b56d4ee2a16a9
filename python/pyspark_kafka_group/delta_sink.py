"""Landing micro-batches in Delta Lake, exactly once: data and Kafka offsets in one commit.

:class:`DeltaSink` is a ``foreachBatch`` function. For each micro-batch it

1. reads the batch's planned offset ranges from the query's checkpoint
   (``<checkpointLocation>/offsets/<batchId>``: Spark writes the source's end
   offsets there before it runs the batch);
2. asks the table whether those ranges are still committable (see
   :mod:`kafka_group.delta_offsets`): a batch already committed (a replay after a
   crash) is skipped; partitions another member or a reset moved are left out
   (their rows dropped, or nothing of the batch landed when the rows cannot be
   told apart), and the source plans what did not land again from the table;
3. has the Spark executors write the batch's Parquet files into the table folder
   (invisible: they are in no Delta commit yet);
4. commits those files together with the new position of every planned
   partition in one Delta transaction, on the driver, through delta-rs.

Nothing is visible until step 4 succeeds. The source's ``commit()`` then also
commits the offsets to the Kafka group, for lag tools; losing that loses nothing.
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from dataclasses import dataclass
from typing import Any, Callable, List, Mapping, Optional, Sequence

from kafka_group.delta_offsets import DATA_FOLDER, DataFile, DeltaOffsetStore, normalize_table_path, same_table_location
from kafka_group.errors import ConfigError, OffsetConflictError
from kafka_group.faults import crash_point
from kafka_group.formats import read_checkpoint_offsets
from kafka_group.offsets import OffsetRange

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
        The query's checkpoint location; found from the running query when omitted.
    storage_options : dict, optional
        delta-rs storage options (object stores).
    merge_schema : bool, default False
        Delta's ``mergeSchema``: columns a batch adds (top-level, or fields of structs) are added
        to the table's schema, and columns of the table a batch lacks are read as NULL for its
        rows. Without it such a batch fails the query before any file is written, naming the
        column. A column whose type changes is refused either way. The new columns are committed
        (``ADD COLUMN``) right before the batch's data and offsets, see
        :meth:`kafka_group.delta_offsets.DeltaOffsetStore.commit`. Give every query of the
        group that writes the table the same transform and setting: once one merged a column,
        the others' batches lack it and are refused unless they merge too.

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
        merge_schema: bool = False,
    ) -> None:
        if not isinstance(path, str) or not path.strip():
            raise ConfigError("DeltaSink needs the path of the Delta table to write, got an empty path")
        self.path = path
        self.transform = transform
        self.checkpoint_location = checkpoint_location
        self.storage_options = dict(storage_options or {})
        self.merge_schema = bool(merge_schema)

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
        store.check_schema(to_arrow_schema(batch.schema, timezone="UTC"), batch=f"batch {batch_id}",
                           merge_schema=self.merge_schema)
        crash_point("sink.before_write")
        files, schema, folder = self._write_files(batch, batch_id)
        if not ranges and not files:
            return
        crash_point("sink.before_commit")
        try:
            store.commit(
                files,
                schema,
                ranges,
                metadata={
                    "kafkaGroup.batchId": batch_id,
                    "kafkaGroup.ranges": ",".join(str(r) for r in ranges),
                },
                merge_schema=self.merge_schema,
            )
        except OffsetConflictError:
            shutil.rmtree(folder, ignore_errors=True)  # in no commit: invisible, and now gone
            raise
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
        root = self.checkpoint_location or _checkpoint_of_running_query(batch)
        jvm = batch.sparkSession._jvm
        hadoop_conf = batch.sparkSession._jsc.hadoopConfiguration()
        path = jvm.org.apache.hadoop.fs.Path(f"{root.rstrip('/')}/offsets/{batch_id}")
        fs = path.getFileSystem(hadoop_conf)
        if not fs.exists(path):
            raise ConfigError(
                f"DeltaSink found no planned offsets for batch {batch_id} at '{path.toString()}': pass the "
                "query's checkpoint location as DeltaSink(..., checkpoint_location=...)"
            )
        stream = fs.open(path)
        try:
            return str(jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
        finally:
            stream.close()

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

    def _write_files(self, batch: Any, batch_id: int) -> tuple[List[DataFile], Any, str]:
        import pyarrow.parquet as pq
        from pyspark.sql.pandas.types import to_arrow_schema

        # The query's own session: Spark runs foreachBatch on a clone of the user's, so
        # this never changes the user's setting (test_exactly_once_delta pins it).
        session = batch.sparkSession
        session.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        relative_dir = f"{DATA_FOLDER}/{batch_id:08d}-{uuid.uuid4().hex[:12]}"
        table_root = normalize_table_path(self.path)
        target = f"{table_root}/{relative_dir}"
        batch.write.mode("errorifexists").parquet(target)
        files: List[DataFile] = []
        schema = None
        for name in sorted(os.listdir(target)):
            full = os.path.join(target, name)
            if name.startswith(("_", ".")) or name.endswith(".crc"):
                os.remove(full)
                continue
            meta = pq.read_metadata(full)
            if schema is None:
                schema = pq.read_schema(full)
            if meta.num_rows == 0:
                os.remove(full)
                continue
            files.append(DataFile(f"{relative_dir}/{name}", os.path.getsize(full), meta.num_rows))
        if schema is None:
            schema = to_arrow_schema(batch.schema, timezone="UTC")
        if not files:  # nothing to add: leave no empty folder per empty batch behind
            shutil.rmtree(target, ignore_errors=True)
        return files, schema, target


def _checkpoint_of_running_query(batch: Any) -> str:
    """The checkpoint root of the query running this ``foreachBatch`` call."""
    from pyspark.sql import SparkSession

    query_id = batch.sparkSession.sparkContext.getLocalProperty("sql.streaming.queryId")
    sessions = [SparkSession.getActiveSession(), SparkSession.builder.getOrCreate(), batch.sparkSession]
    for session in sessions:
        if session is None or query_id is None:
            continue
        query = session.streams.get(query_id)
        if query is not None:
            return str(query._jsq.streamingQuery().resolvedCheckpointRoot())
    raise ConfigError(
        "DeltaSink could not find the running query's checkpoint: pass it as "
        "DeltaSink(path, checkpoint_location=<the query's checkpointLocation>)"
    )

