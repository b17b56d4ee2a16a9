"""The keyed (CDC) sink's change set of a batch, computed by Spark (caller: the driver, per batch).

Before the transform every record gets :data:`~kafka_group.delta.keyed.change_rules.KAFKA_COLUMN`, a struct
of its Kafka ``offset`` and whether it is a ``tombstone`` (its value is NULL); the transform must keep
it. After the transform each row becomes an event: its sequence (``sequence_by``, else the Kafka
offset), whether it deletes its key (a tombstone, or ``apply_as_deletes``), and the stored columns.
For SCD1 the executors reduce the events to the latest per key (a window by key, ordered by
sequence then offset), so only one row per changed key reaches the driver; SCD2 needs every event.
The rules themselves: :mod:`kafka_group.delta.keyed.change_rules`.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

from kafka_group.delta.keyed.change_rules import DELETE_COLUMN, KAFKA_COLUMN, OFFSET, SEQ, KeyedSpec, quote
from kafka_group.errors import ConfigError

__all__ = ["change_frame", "change_set", "collect_changes", "refuse_null_sequences"]

_ORDERABLE = ("byte", "short", "integer", "long", "float", "double", "decimal", "string", "date", "timestamp",
              "timestamp_ntz")


def change_set(batch: Any, transform: Optional[Callable[[Any], Any]], spec: KeyedSpec) -> Tuple[Any, List[str]]:
    """The batch's change set as a pyarrow Table (stored columns, sequence, delete flag, Kafka offset)
    and the stored column names. Runs the Spark job; the result is a batch's changes, in the driver."""
    return collect_changes(*change_frame(batch, transform, spec), spec)


def change_frame(batch: Any, transform: Optional[Callable[[Any], Any]], spec: KeyedSpec) -> Tuple[Any, List[str]]:
    """The batch's change set as a Spark DataFrame (as :func:`change_set`'s, on the executors: SCD1's
    latest event per key computed there) and the stored column names; no Spark job runs."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if "offset" not in batch.columns:
        raise ConfigError(
            "DeltaSink(keys=...) needs the source's 'offset' column in the batch (the default sequence, and "
            "the order of equal sequences): transform the rows in DeltaSink(transform=...), not before foreachBatch")
    tombstone = F.col("value").isNull() if "value" in batch.columns else F.lit(False)
    df = batch.withColumn(KAFKA_COLUMN, F.struct(F.col("offset").cast("long").alias("offset"),
                                                 tombstone.alias("tombstone")))
    if transform is not None:
        df = transform(df)
    if KAFKA_COLUMN not in df.columns:
        raise ConfigError(
            f"DeltaSink(keys=...): the transform dropped the column '{KAFKA_COLUMN}' the sink adds to every record "
            "(its Kafka offset and whether it is a tombstone); keep it: select it with your columns, such as "
            f"df.select('{KAFKA_COLUMN}', ...), or use withColumn")
    stored = spec.stored_columns(df.columns)
    for k in spec.keys:
        if k not in stored:
            raise ConfigError(f"DeltaSink(keys=...) names '{k}', which the transform's rows do not have "
                              f"(they have {', '.join(stored)})")
    sequence = F.expr(spec.sequence_by) if spec.sequence_by else F.col(f"{KAFKA_COLUMN}.offset")
    deletes = F.col(f"{KAFKA_COLUMN}.tombstone")
    if spec.apply_as_deletes:
        deletes = deletes | F.coalesce(F.expr(spec.apply_as_deletes).cast("boolean"), F.lit(False))
    events = df.select(*[F.col(quote(c)) for c in stored], sequence.alias(SEQ), deletes.alias(DELETE_COLUMN),
                       F.col(f"{KAFKA_COLUMN}.offset").alias(OFFSET))
    seq_type = events.schema[SEQ].dataType
    if seq_type.typeName() not in _ORDERABLE:
        raise ConfigError(f"DeltaSink(sequence_by={spec.sequence_by!r}) is of type {seq_type.simpleString()}; a "
                          "sequence is a number, string, date or timestamp (combine several fields into one, "
                          "such as a zero-padded string or ts * 1000000 + lsn)")
    if spec.scd_type == 1:  # the latest event per key, on the executors
        order = Window.partitionBy(*[F.col(quote(k)) for k in spec.keys]).orderBy(
            F.col(SEQ).desc_nulls_last(), F.col(OFFSET).desc())
        events = events.withColumn("__kg_rank", F.row_number().over(order)).where("__kg_rank = 1").drop("__kg_rank")
    return events, stored


def collect_changes(events: Any, stored: List[str], spec: KeyedSpec) -> Tuple[Any, List[str]]:
    """:func:`change_frame`'s change set collected to the driver as a pyarrow Table (the driver's MERGE)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructField, StructType

    schema = StructType([StructField(f.name, f.dataType, True) for f in events.schema.fields])
    table = events.toArrow()
    table = table.cast(to_arrow_schema(schema, timezone="UTC"))
    refuse_null_sequences(spec, table.column(SEQ).null_count)
    return table, stored


def refuse_null_sequences(spec: KeyedSpec, nulls: int) -> None:
    """Refuse a change set with ``nulls`` events without a sequence."""
    if nulls:
        raise ConfigError(f"DeltaSink(sequence_by={spec.sequence_by!r}) is NULL for {nulls} "
                          "event(s) of this batch; every event needs a sequence (coalesce it in the expression). "
                          "Nothing of the batch landed and no offset moved")
