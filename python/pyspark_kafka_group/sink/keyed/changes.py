"""The keyed (CDC) sink's change set of a batch, computed by Spark (caller: the driver, per batch).

Before the transform every record gets :data:`~kafka_group.delta.keyed.change_rules.KAFKA_COLUMN`, a struct
of its Kafka ``offset`` and whether it is a ``tombstone`` (its value is NULL); the transform must keep
it. After the transform each row becomes an event: its sequence (``sequence_by``, else the Kafka
offset), whether it deletes its key (a tombstone, or ``apply_as_deletes``), and the stored columns.
For SCD1 the executors reduce the events to the latest per key (a window by key, ordered by
sequence then offset; with ``ignore_null_updates`` each column's latest non-NULL value since the
key's last delete), so only one row per changed key reaches the driver; SCD2 needs every event.
SCD1's ``apply_as_truncates``: the events up to the batch's latest truncate (by sequence, then
offset) are dropped and the change set says the table is emptied first (:data:`TRUNCATE_METADATA`).
The rules themselves: :mod:`kafka_group.delta.keyed.change_rules`.
"""

from __future__ import annotations

from typing import Any, Callable, List, NamedTuple, Optional, Tuple

from kafka_group.delta.keyed.change_rules import (
    DELETE_COLUMN,
    KAFKA_COLUMN,
    OFFSET,
    SEQ,
    TRUNCATE_METADATA,
    KeyedSpec,
    quote,
)
from kafka_group.errors import ConfigError

__all__ = ["ChangeFrame", "change_frame", "change_set", "collect_changes", "refuse_null_sequences"]

_ORDERABLE = ("byte", "short", "integer", "long", "float", "double", "decimal", "string", "date", "timestamp",
              "timestamp_ntz")


class ChangeFrame(NamedTuple):
    """A batch's change set as a Spark DataFrame (:func:`change_frame`)."""

    #: Stored columns, sequence, delete flag, Kafka offset; SCD1: the latest event per key.
    events: Any
    #: The stored column names.
    stored: List[str]
    #: ``apply_as_truncates``: the batch holds a truncate (the table is emptied before ``events`` apply).
    truncated: bool


def change_set(batch: Any, transform: Optional[Callable[[Any], Any]], spec: KeyedSpec) -> Tuple[Any, List[str]]:
    """The batch's change set as a pyarrow Table (stored columns, sequence, delete flag, Kafka offset)
    and the stored column names. Runs the Spark job; the result is a batch's changes, in the driver."""
    return collect_changes(change_frame(batch, transform, spec), spec)


def change_frame(batch: Any, transform: Optional[Callable[[Any], Any]], spec: KeyedSpec) -> ChangeFrame:
    """The batch's change set as a Spark DataFrame (as :func:`change_set`'s, on the executors: SCD1's
    latest event per key computed there). Spark runs a job here only for ``apply_as_truncates`` (the
    batch's latest truncate, one row to the driver)."""
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
    sequence = (F.col(f"{KAFKA_COLUMN}.offset") if spec.sequence_by is None
                else F.expr(spec.sequence_by) if isinstance(spec.sequence_by, str) else spec.sequence_by)
    deletes = F.col(f"{KAFKA_COLUMN}.tombstone")
    truncates = F.lit(False)
    if spec.apply_as_deletes:
        deletes = deletes | F.coalesce(_expression(df, "apply_as_deletes", spec.apply_as_deletes).cast("boolean"),
                                       F.lit(False))
    if spec.apply_as_truncates:
        truncates = F.coalesce(_expression(df, "apply_as_truncates", spec.apply_as_truncates).cast("boolean"),
                               F.lit(False))
    events = _resolved(df, "sequence_by", spec.sequence_by, lambda: df.select(
        *[F.col(quote(c)) for c in stored], sequence.alias(SEQ), deletes.alias(DELETE_COLUMN),
        F.col(f"{KAFKA_COLUMN}.offset").alias(OFFSET), truncates.alias(_TRUNCATE)))
    seq_type = events.schema[SEQ].dataType
    if not _orderable(seq_type, spec.scd_type):
        raise ConfigError(f"DeltaSink(sequence_by={spec.sequence_by!r}) is of type {seq_type.simpleString()}; a "
                          "sequence is a number, string, date or timestamp, or (SCD type 2) a struct of such "
                          "fields, ordered field by field (F.struct('ts', 'lsn')). SCD type 1 compares sequences "
                          "in its MERGE and tombstones as scalars: combine the fields into one, such as "
                          "ts * 1000000 + lsn or a zero-padded string")
    truncated = False
    if spec.apply_as_truncates:
        last = events.where(F.col(_TRUNCATE)).orderBy(F.col(SEQ).desc(), F.col(OFFSET).desc()).select(
            SEQ, OFFSET).limit(1).collect()
        if last:
            truncated = True
            at, offset = last[0][0], last[0][1]
            events = events.where((F.col(SEQ) > F.lit(at)) | ((F.col(SEQ) == F.lit(at)) & (F.col(OFFSET) > offset)))
    events = events.drop(_TRUNCATE)
    if spec.scd_type == 1:  # the latest event per key, on the executors
        by_key = [F.col(quote(k)) for k in spec.keys]
        order = Window.partitionBy(*by_key).orderBy(F.col(SEQ).desc_nulls_last(), F.col(OFFSET).desc())
        if spec.ignore_null_updates:  # each column's latest non-NULL since the key's last delete
            ascending = Window.partitionBy(*by_key).orderBy(F.col(SEQ).asc_nulls_first(), F.col(OFFSET).asc())
            events = events.withColumn("__kg_segment", F.sum(F.col(DELETE_COLUMN).cast("int")).over(
                ascending.rowsBetween(Window.unboundedPreceding, Window.currentRow)))
            segment = Window.partitionBy(*by_key, F.col("__kg_segment")).orderBy(
                F.col(SEQ).asc_nulls_first(), F.col(OFFSET).asc()).rowsBetween(Window.unboundedPreceding,
                                                                                Window.currentRow)
            events = events.select(*[F.col(quote(c)) if c in spec.keys else
                                     F.last(F.when(~F.col(DELETE_COLUMN), F.col(quote(c))), ignorenulls=True)
                                     .over(segment).alias(c) for c in stored],
                                   SEQ, DELETE_COLUMN, OFFSET)
        events = events.withColumn("__kg_rank", F.row_number().over(order)).where("__kg_rank = 1").drop("__kg_rank")
    return ChangeFrame(events, stored, truncated)


def collect_changes(frame: ChangeFrame, spec: KeyedSpec) -> Tuple[Any, List[str]]:
    """:func:`change_frame`'s change set collected to the driver as a pyarrow Table (the driver's MERGE);
    a truncate is said in its schema metadata (:data:`TRUNCATE_METADATA`)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructField, StructType

    schema = StructType([StructField(f.name, f.dataType, True) for f in frame.events.schema.fields])
    table = frame.events.toArrow()
    table = table.cast(to_arrow_schema(schema, timezone="UTC"))
    refuse_null_sequences(spec, table.column(SEQ).null_count)
    if frame.truncated:
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), TRUNCATE_METADATA: b"1"})
    return table, frame.stored


def refuse_null_sequences(spec: KeyedSpec, nulls: int) -> None:
    """Refuse a change set with ``nulls`` events without a sequence."""
    if nulls:
        raise ConfigError(f"DeltaSink(sequence_by={spec.sequence_by!r}) is NULL for {nulls} "
                          "event(s) of this batch; every event needs a sequence (coalesce it in the expression). "
                          "Nothing of the batch landed and no offset moved")


_TRUNCATE = "__kg_truncate"


def _orderable(kind: Any, scd_type: int) -> bool:
    """Whether the sequence's type orders (a struct: SCD2 only, each field orderable)."""
    if kind.typeName() == "struct":
        return scd_type == 2 and all(_orderable(f.dataType, 1) for f in kind.fields)
    return kind.typeName() in _ORDERABLE


def _resolved(df: Any, label: str, given: Any, build: Callable[[], Any]) -> Any:
    """``build()`` (a select over ``df``), a column Spark cannot resolve reported as a
    :class:`~kafka_group.errors.ConfigError` naming the parameter and the columns there are."""
    from pyspark.errors import AnalysisException

    try:
        result = build()
        result.schema  # noqa: B018 - analysed now (Spark Connect analyses lazily)
        return result
    except AnalysisException as exc:
        if "UNRESOLVED_COLUMN" not in str(exc) and "cannot be resolved" not in str(exc):
            raise
        columns = ", ".join(c for c in df.columns if c != KAFKA_COLUMN)
        raise ConfigError(f"DeltaSink({label}={given!r}) names a column the transform's rows do not have "
                          f"(they have {columns}): {str(exc).splitlines()[0]}") from None


def _expression(df: Any, label: str, text: str) -> Any:
    """A SQL expression of a parameter, resolved against ``df`` now (a typo names the parameter)."""
    from pyspark.sql import functions as F

    _resolved(df, label, text, lambda: df.select(F.expr(text)))
    return F.expr(text)
