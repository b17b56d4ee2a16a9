"""Landing micro-batches in Delta Lake, exactly once: data and Kafka offsets in one commit.

:class:`DeltaSink` is a ``foreachBatch`` function. For each micro-batch it

1. reads the batch's planned offset ranges from the query's checkpoint
   (``<checkpointLocation>/offsets/<batchId>``: Spark writes the source's end offsets there before it runs the
   batch), directly for a local checkpoint and through Spark (``read.text``) for any other file system, so that
   it works in Spark Connect sessions too (:mod:`pyspark_kafka_group.sink.sink_checkpoint`);
2. asks the table whether those ranges are still committable (see
   :mod:`kafka_group.delta.offsets.delta_offsets`): a batch already committed (a replay after a crash) is
   skipped; partitions another member or a reset moved are left out (their rows dropped, or nothing of the batch
   landed when the rows cannot be told apart), and the source plans what did not land again from the table;
3. has the Spark executors write the batch's Parquet files into the table (``batch.mapInArrow``: each task
   writes its rows, one file per partition-value combination, through delta-rs's object store, so local paths,
   ``s3://``, ``abfss://`` and ``gs://`` alike, with no Hadoop file system and no JVM; see
   :mod:`kafka_group.delta.files.parquet_writer`) and return each file's ``add`` action: path, size, record
   count, statistics for data skipping, partition values. The files are invisible: they are in no Delta commit
   yet (:mod:`pyspark_kafka_group.sink.sink_files`);
4. commits those files together with the new position of every planned partition in one Delta transaction, on
   the driver, through delta-rs (or, for a table with features delta-rs cannot commit to, such as row tracking
   or in-commit timestamps, through the connector's own commit, :mod:`kafka_group.delta.log.commit`).

Steps 1 and 2 and what a conflict drops are this module's; steps 3 and 4 (or the keyed MERGE) are
:mod:`pyspark_kafka_group.sink.landing`'s.

Nothing is visible until step 4 succeeds. Files of a batch whose commit is refused (its offsets conflict) are
deleted; files of task attempts Spark retried, and of a crash before the commit, are in no commit: invisible,
and delta-spark's ``VACUUM`` removes them. The source's ``commit()`` then also commits the offsets to the Kafka
group, for lag tools; losing that loses nothing.
"""

from __future__ import annotations

import datetime
import logging
import time
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from kafka_group.delta.keyed.change_rules import KeyedSpec
from kafka_group.delta.keyed.commit import KeyedOffsetStore
from kafka_group.delta.keyed.tombstones import Tombstones, tombstones_location
from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
from kafka_group.delta.storage.table_names import ResolvedTable, check_location, parse_table_name
from kafka_group.delta.storage.unity_catalog import UnityCatalog
from kafka_group.errors import ConfigError, OffsetConflictError
from kafka_group.offsets import OffsetRange
from pyspark_kafka_group.session.spark_requirement import require_sink_dependencies
from pyspark_kafka_group.sink.catalog_tables import resolve_table
from pyspark_kafka_group.sink.keyed.parameters import keyed_parameters, keyed_table_properties
from pyspark_kafka_group.sink.landing import land_changes, land_rows
from pyspark_kafka_group.sink.sink_checkpoint import (
    CONNECT_NEEDS_CHECKPOINT,
    BatchPlan,
    batch_plan,
    connect_mode,
    read_batch_offsets,
)

__all__ = ["DeltaSink"]

#: How often a batch is checked, written and committed again after losing partitions to a rebalance.
_LAND_ATTEMPTS = 3
#: A catalog's temporary credentials are fetched again when they expire within this many milliseconds.
_CREDENTIALS_MARGIN_MS = 5 * 60 * 1000

logger = logging.getLogger(__name__)


class DeltaSink:
    """A ``foreachBatch`` function that lands a ``kafka-group`` stream in Delta exactly once.

    Parameters
    ----------
    path : str, optional
        The Delta table's location (a path or a URI). The source must name the same table in
        its ``offsets.table`` option: the table's commits hold the offsets. A value that reads as
        a catalog name (``sales.orders``, ``main.sales.orders``: dots, no ``/``, no scheme) is
        refused as ambiguous: write ``./sales.orders`` for such a folder, ``table=`` for the name.
    table : str or ResolvedTable, optional
        Instead of ``path``: the table's catalog name (``table``, ``schema.table``,
        ``catalog.schema.table``), as ``writeStream.toTable(...)`` and ``DeltaTable.forName`` take
        it. It is resolved to its location at the first batch, through the batch's session
        (``DESCRIBE DETAIL``: classic and Spark Connect alike) or ``catalog``; the source's
        ``offsets.table`` must be that location (:func:`~pyspark_kafka_group.sink.catalog_tables.resolve_table`
        gives the source's options). A :class:`~kafka_group.delta.storage.table_names.ResolvedTable` is used as resolved
        (its credentials fetched again only with ``catalog``).
    catalog : UnityCatalog, optional
        Resolve ``table`` through this Unity Catalog server, whose temporary credentials become the
        storage options (fetched again before they expire; ``storage_options`` given here win).
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

    keys : list of str or Column, optional
        The keyed (CDC) mode: the columns (after ``transform``) that identify a row. Each batch's
        change events are then MERGEd into the table with its offsets in one Delta commit: upserts,
        deletes (a Kafka tombstone, a record whose value is NULL, deletes its key; so does
        ``apply_as_deletes``), the latest event per key by ``sequence_by`` winning (equal sequences:
        the later Kafka offset, in one batch or across batches), and events older than what the table
        holds for their key ignored (docs/cdc.md). Without ``keys`` the sink appends, as before.
    sequence_by : str or Column, optional
        Keyed mode: a SQL expression (a column name, or such as ``"source.lsn"``) or a Column ordering
        the events of a key: a number, string, date or timestamp (SCD type 2 also a struct, ordered
        field by field, ``F.struct("ts", "lsn")``). Default: the Kafka offset, which orders a key's
        events as long as the key stays in one partition (Kafka's keyed partitioning; a topic whose
        partition count changed moves keys: give a sequence from the data then).
    apply_as_deletes : str, optional
        Keyed mode: a SQL boolean expression over the transformed row that marks a delete, such as
        ``"op = 'd'"``.
    column_list, except_column_list : list of str, optional
        Keyed mode: the transformed columns the table stores (keys included), or those it leaves out.
    stored_as_scd_type : {1, 2, "1", "2"}, default 1
        Keyed mode: 1 keeps one row per live key, with its event's sequence in ``__SEQUENCE``;
        2 keeps every version with its validity ``[__START_AT, __END_AT)`` (``__END_AT`` NULL: current).
    tombstone_retention : float or datetime.timedelta, default 7 days
        Keyed mode: how long a delete is remembered (seconds, or a ``timedelta``). Within
        it, an event older than its key's delete that arrives in a later batch is ignored; after it
        the tombstone is collected and such an event inserts the key again (docs/cdc.md). The default
        is Kafka's default ``retention.ms`` (Databricks' AUTO CDC keeps 2 days).
    ignore_null_updates, apply_as_truncates, track_history_column_list, track_history_except_column_list
        Keyed mode, as in AUTO CDC: NULL columns of an update keep the table's values; a SQL boolean
        expression marking a truncate (SCD type 1); the columns whose change makes a new version (SCD
        type 2; others update the current version in place). docs/cdc.md, "Parameters".
    table_properties : dict, optional
        Keyed mode: the created table's properties, over ``{"delta.enableDeletionVectors": "true"}`` (docs/cdc.md).
    merge_schema : bool, default False
        Delta's ``mergeSchema``: columns a batch adds (top-level, or fields of structs) are added
        to the table's schema, and columns of the table a batch lacks are read as NULL for its
        rows. Without it such a batch fails the query before any file is written, naming the
        column. A column whose type changes is refused either way. The new columns are committed
        (``ADD COLUMN``) right before the batch's data and offsets, see
        :meth:`kafka_group.delta.offsets.delta_offsets.DeltaOffsetStore.commit`. Give every query of the
        group that writes the table the same transform and setting: once one merged a column,
        the others' batches lack it and are refused unless they merge too.

    Raises
    ------
    ConfigError
        Neither or both of ``path`` and ``table``, a path that reads as a name, a malformed name, or
        (in a Spark Connect process) no ``checkpoint_location``.
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
        path: Optional[str] = None,
        *,
        table: Union[str, ResolvedTable, None] = None,
        catalog: Optional[UnityCatalog] = None,
        transform: Optional[Callable[[Any], Any]] = None,
        checkpoint_location: Optional[str] = None,
        storage_options: Optional[Mapping[str, str]] = None,
        partition_by: Optional[Sequence[str]] = None,
        merge_schema: bool = False,
        keys: Optional[Sequence[Any]] = None,
        sequence_by: Any = None,
        apply_as_deletes: Optional[str] = None,
        column_list: Optional[Sequence[Any]] = None,
        except_column_list: Optional[Sequence[Any]] = None,
        stored_as_scd_type: Union[int, str] = 1,
        tombstone_retention: Union[float, datetime.timedelta, None] = None,
        ignore_null_updates: bool = False,
        apply_as_truncates: Optional[str] = None,
        track_history_column_list: Optional[Sequence[Any]] = None,
        track_history_except_column_list: Optional[Sequence[Any]] = None,
        table_properties: Optional[Mapping[str, Any]] = None,
    ) -> None:
        if (path is None) == (table is None):
            raise ConfigError("DeltaSink takes the Delta table's location, DeltaSink('/lake/orders_bronze'), or its "
                              "catalog name, DeltaSink(table='main.sales.orders_bronze'): exactly one of the two")
        if path is not None and (not isinstance(path, str) or not path.strip()):
            raise ConfigError("DeltaSink needs the path of the Delta table to write, got an empty path")
        if isinstance(table, str):
            parse_table_name(table)  # a malformed name fails here, not at the first batch
        elif table is not None and not isinstance(table, ResolvedTable):
            raise ConfigError(f"DeltaSink(table=...) takes a table name or a ResolvedTable, got {type(table).__name__}")
        if isinstance(partition_by, str) or (partition_by is not None
                                             and not all(isinstance(c, str) and c for c in partition_by)):
            raise ConfigError("DeltaSink(partition_by=...) takes a list of column names, such as ['date'], "
                              f"got {partition_by!r}")
        require_sink_dependencies()
        #: The table's location; for ``table=`` a name, set at the first batch (:meth:`_location`).
        self.path: Optional[str] = None if path is None else check_location(path, where="DeltaSink(path)")
        self.table = table.name if isinstance(table, ResolvedTable) else table
        self.catalog = catalog
        self._resolved: Optional[ResolvedTable] = table if isinstance(table, ResolvedTable) else None
        self.transform = transform
        if checkpoint_location is None and connect_mode():
            raise ConfigError(CONNECT_NEEDS_CHECKPOINT)
        self.checkpoint_location = checkpoint_location
        self._checkpoint_verified = False
        self.storage_options = dict(storage_options or {})
        self._batch_storage_options = self.storage_options  # the running batch's: the catalog's merged in
        self.partition_by = None if partition_by is None else list(partition_by)
        self.merge_schema = bool(merge_schema)
        #: The keyed mode's parameters (None: append), and how long a delete is remembered (seconds).
        self.keyed, self.tombstone_retention = keyed_parameters(keys, self.merge_schema, {
            "sequence_by": sequence_by, "apply_as_deletes": apply_as_deletes, "column_list": column_list,
            "except_column_list": except_column_list, "stored_as_scd_type": stored_as_scd_type,
            "tombstone_retention": tombstone_retention, "ignore_null_updates": ignore_null_updates,
            "apply_as_truncates": apply_as_truncates, "track_history_column_list": track_history_column_list,
            "track_history_except_column_list": track_history_except_column_list})
        self.table_properties = keyed_table_properties(self.keyed, table_properties)
        self._tombstones: Optional[Tombstones] = None

    def __repr__(self) -> str:  # never the storage options: they hold credentials
        where = repr(self.path) if self.table is None else f"table={self.table!r}"
        keyed = "" if self.keyed is None else f", keys={list(self.keyed.keys)!r}"
        return f"DeltaSink({where}, partition_by={self.partition_by!r}{keyed})"

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
        self._land_planned(batch, batch_id)

    def _land_planned(self, batch: Any, batch_id: int, plan: Optional[BatchPlan] = None) -> None:
        """Land ``batch`` by ``plan``: by default the query's plan of ``batch_id``, read from its checkpoint;
        :class:`~pyspark_kafka_group.sink.routing.RoutedDeltaSink` hands each of its tables its share."""
        path, self._batch_storage_options = self._location(batch)
        plan = self._plan(batch, batch_id) if plan is None else plan
        store = (DeltaOffsetStore if self.keyed is None else KeyedOffsetStore)(
            path, plan.group, self._batch_storage_options)
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
        if self.keyed is not None:
            assert isinstance(store, KeyedOffsetStore)
            land_changes(batch, batch_id, ranges, store, self.keyed, transform=self.transform,
                         partition_by=self.partition_by, tombstones_of=self._tombstones_of,
                         table_properties=self.table_properties)
            return
        land_rows(batch if self.transform is None else self.transform(batch), batch_id, ranges, store,
                  partition_by=self.partition_by, merge_schema=self.merge_schema,
                  storage_options=self._batch_storage_options)

    def _location(self, batch: Any) -> "tuple[str, dict[str, str]]":
        """The table's location and storage options: ``path``'s, or ``table``'s, resolved at the first batch
        (and again when a catalog's credentials are about to expire). Caller: ``foreachBatch`` (the driver,
        or under Spark Connect the server's Python worker, whose session resolves the name)."""
        if self.table is None:
            assert self.path is not None
            return self.path, self.storage_options
        resolved = self._resolved
        if resolved is None or (self.catalog is not None and resolved.expires_at_ms is not None
                                and resolved.expires_at_ms - _CREDENTIALS_MARGIN_MS <= time.time() * 1000):
            resolved = resolve_table(batch.sparkSession, self.table, catalog=self.catalog)
            if self._resolved is not None and resolved.location != self._resolved.location:
                raise ConfigError(f"table '{self.table}' moved from {self._resolved.location} to {resolved.location} "
                                  "while the query ran: restart the query with the source's offsets.table at the "
                                  "new location")
            self._resolved = resolved
        self.path = resolved.location
        return resolved.location, {**resolved.storage_options, **self.storage_options}

    def _tombstones_of(self, table_path: str, spec: KeyedSpec) -> Tombstones:
        """SCD1's tombstones of the table (one object per location: it keeps the time of its last
        garbage collection), with the running batch's storage options."""
        if self._tombstones is None or self._tombstones.path != tombstones_location(table_path):
            self._tombstones = Tombstones(table_path, self._batch_storage_options, spec, self.tombstone_retention)
        self._tombstones.use_storage_options(self._batch_storage_options)
        return self._tombstones

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
        assert self.path is not None  # set by _location
        return batch_plan(self._read_offsets_file(batch, batch_id), batch_id, self.path)

    def _read_offsets_file(self, batch: Any, batch_id: int) -> str:
        """The text of ``<checkpoint>/offsets/<batchId>`` (:func:`~pyspark_kafka_group.sink.sink_checkpoint.read_batch_offsets`)."""
        text = read_batch_offsets(batch.sparkSession, self.checkpoint_location, batch_id,
                                  verify=not self._checkpoint_verified)
        self._checkpoint_verified = True
        return text

    # -- conflicts ---------------------------------------------------------------------

    @staticmethod
    def _only_partitions(batch: Any, ranges: Sequence[OffsetRange]) -> Any:
        from pyspark.sql import functions as F

        keep = F.lit(False)
        for r in ranges:
            tp = r.topic_partition
            keep = keep | ((F.col("topic") == tp.topic) & (F.col("partition") == tp.partition))
        return batch.where(keep)
