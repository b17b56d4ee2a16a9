"""One checked micro-batch into its Delta table: the rows appended, or the keyed changes MERGEd, with its offsets.

:class:`~pyspark_kafka_group.sink.delta_sink.DeltaSink` decides what lands (the table's location, the
batch's plan, the partitions whose offsets the table still agrees with); this module lands it, in one
Delta commit that holds the data and the new position of every planned partition:

- :func:`land_rows` (append): the table's rules and schema checked, the executors' Parquet files
  (:mod:`~pyspark_kafka_group.sink.sink_files`), then one commit of those files with the offsets
  (:meth:`kafka_group.delta.offsets.delta_offsets.DeltaOffsetStore.commit`), then the table's small files
  compacted when enough have gathered (:mod:`~pyspark_kafka_group.sink.sink_compaction`, its own commit);
- :func:`land_changes` (keyed): the batch's change set (:mod:`~pyspark_kafka_group.sink.keyed.changes`),
  the tombstones, then one MERGE commit with the offsets: as Spark tasks
  (:mod:`~pyspark_kafka_group.sink.keyed.scd1_tasks`, SCD2's :mod:`~pyspark_kafka_group.sink.keyed.scd2_tasks`:
  deletion vectors, or copy-on-write by the executors), else on the driver
  (:mod:`kafka_group.delta.keyed.commit`).

Caller: the driver, inside ``foreachBatch``, one batch at a time. The ``crash_point`` names are the fault
injection points of the exactly-once tests.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional, Sequence

from kafka_group.delta.keyed.change_rules import KeyedSpec
from kafka_group.delta.keyed.commit import KeyedOffsetStore
from kafka_group.delta.keyed.refusals import refuse_null_keys
from kafka_group.delta.keyed.tombstones import Tombstones
from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
from kafka_group.errors import ConfigError
from kafka_group.faults import crash_point
from kafka_group.offsets import OffsetRange
from pyspark_kafka_group.sink.keyed.changes import change_frame, collect_changes
from pyspark_kafka_group.sink.keyed.scd2_tasks import merge_scd2_as_tasks
from pyspark_kafka_group.sink.keyed.scd1_tasks import merge_as_tasks
from pyspark_kafka_group.sink.sink_compaction import compact_after_commit
from pyspark_kafka_group.sink.sink_files import partition_columns, write_files
from pyspark_kafka_group.sink.sink_rules import VIOLATION_COLUMN, apply_rules

__all__ = ["land_changes", "land_rows"]


def land_rows(batch: Any, batch_id: int, ranges: Sequence[OffsetRange], store: DeltaOffsetStore, *,
              partition_by: Optional[Sequence[str]], merge_schema: bool, storage_options: Dict[str, str]) -> None:
    """Append mode: ``batch`` (transformed) written by the executors and committed with ``ranges``.

    Parameters
    ----------
    batch : DataFrame
        The rows to append, after the sink's ``transform``.
    batch_id : int
        Spark's batch id, recorded in the commit's metadata.
    ranges : sequence of OffsetRange
        The planned ranges the table agrees with (``store.check`` said so); their end offsets are committed.
    store : DeltaOffsetStore
        The table, as ``check`` loaded it.
    partition_by : sequence of str, optional
        The sink's ``partition_by`` (None: follow the table's partitioning).
    merge_schema : bool
        Delta's ``mergeSchema``.
    storage_options : dict
        The running batch's storage options (the executors write with them).
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    # The table's column mapping and rules (as check() loaded it): generated columns the batch lacks
    # are computed, and every row is checked against the rules as its files are written.
    contract = store.write_contract(batch.columns)
    batch, checked = apply_rules(batch, contract)
    # Before any file is written: a batch that does not fit the table is refused whole.
    # Spark's timestamps are UTC instants (timestamp[us, tz=UTC]), as in the written files.
    schema = to_arrow_schema((batch.drop(VIOLATION_COLUMN) if checked else batch).schema, timezone="UTC")
    store.check_schema(schema, batch=f"batch {batch_id}", merge_schema=merge_schema)
    columns = partition_columns(store, partition_by, store.table_path, schema)
    crash_point("sink.before_write")
    files = write_files(batch, batch_id, schema, columns, store, store.table_path, storage_options, contract,
                        checked)
    if not ranges and not files:
        return
    crash_point("sink.before_commit")
    # A commit refused for another writer's offsets (OffsetConflictError) deletes the files: in no commit,
    # invisible, and gone; one refused as already committed keeps them (an older version may read them).
    store.commit(files, schema, ranges, metadata=_commit_metadata(batch_id, ranges), partition_by=columns,
                 merge_schema=merge_schema, contract=contract)
    crash_point("sink.after_commit")
    if files:  # right after its own commit: the sink's next batch never races it
        compact_after_commit(batch, store.table_path, storage_options, batch_id, store.group)


def land_changes(batch: Any, batch_id: int, ranges: Sequence[OffsetRange], store: KeyedOffsetStore,
                 spec: KeyedSpec, *, transform: Optional[Callable[[Any], Any]],
                 partition_by: Optional[Sequence[str]],
                 tombstones_of: Callable[[str, KeyedSpec], Tombstones],
                 table_properties: Optional[Mapping[str, str]] = None) -> None:
    """Keyed mode: the batch's change set (computed by Spark) MERGEd into the table with the batch's
    offsets, in one commit: as Spark tasks, the change set never on the driver
    (SCD1: :mod:`pyspark_kafka_group.sink.keyed.scd1_tasks`, SCD2: :mod:`pyspark_kafka_group.sink.keyed.scd2_tasks`:
    deletion vectors, or copy-on-write by the executors on a table without them); otherwise (the tables
    those tasks do not take: :func:`~kafka_group.delta.keyed.task_rewrite.task_merge_refusal`) collected
    to the driver's memory and MERGEd there (:mod:`kafka_group.delta.keyed.commit`).

    ``transform`` is the sink's (the change set applies it after marking each record's Kafka offset and
    tombstone);
    ``tombstones_of(table_path, spec)`` gives the tombstones of the table (the sink keeps one
    object per location). Other parameters as :func:`land_rows`'s.
    """
    crash_point("sink.before_write")
    frame = change_frame(batch, transform, spec)
    stored = frame.stored
    tombstones = tombstones_of(store.table_path, spec)  # SCD2 too: a late upsert before a delete stays closed
    columns = list(partition_by) if partition_by is not None else (store.partition_columns() or [])
    missing = [c for c in columns if c not in stored]
    if missing:
        raise ConfigError(f"DeltaSink(partition_by=...) names {', '.join(missing)}, which the table does not "
                          f"store (it stores {', '.join(stored)})")
    if store.merges_as_tasks():
        if spec.scd_type == 1:
            merge_as_tasks(frame.events, stored, batch_id, ranges, store, spec, partition_by=columns,
                           storage_options=store.storage_options(), tombstones=tombstones,
                           metadata=_commit_metadata(batch_id, ranges), table_properties=table_properties,
                           truncate=frame.truncated)
        else:  # SCD2 refuses apply_as_truncates when it is built (KeyedSpec.build)
            merge_scd2_as_tasks(frame.events, stored, batch_id, ranges, store, spec, partition_by=columns,
                                storage_options=store.storage_options(), tombstones=tombstones,
                                metadata=_commit_metadata(batch_id, ranges), table_properties=table_properties)
        crash_point("sink.after_commit")
        tombstones.collect_garbage()
        return
    changes, stored = collect_changes(frame, spec)
    if not ranges and changes.num_rows == 0:
        return
    refuse_null_keys(changes, spec, store.table_path)
    crash_point("sink.before_commit")
    # before the commit: kafka_group.delta.keyed.tombstones says why
    tombstones.record(tombstones.deletes(changes))
    store.merge_changes(changes, spec, stored, ranges, partition_by=columns,
                        metadata=_commit_metadata(batch_id, ranges),
                        prepare=tombstones.apply if spec.scd_type == 1 else None,
                        deletes_of=tombstones.all_of if spec.scd_type == 2 else None,
                        table_properties=table_properties)
    crash_point("sink.after_commit")
    tombstones.collect_garbage()


def _commit_metadata(batch_id: int, ranges: Sequence[OffsetRange]) -> Dict[str, Any]:
    """What a batch's commit records beside its offsets: Spark's batch id and the ranges, for people reading
    the table's history."""
    return {"kafkaGroup.batchId": batch_id, "kafkaGroup.ranges": ",".join(str(r) for r in ranges)}
