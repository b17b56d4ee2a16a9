"""Debezium change events as the keyed :class:`~pyspark_kafka_group.DeltaSink`'s input.

Debezium writes each change of a database row as an *envelope*: ``op`` (``c`` create,
``u`` update, ``d`` delete, ``r`` a snapshot read, ``t`` truncate), the row ``before``
and ``after`` the change, and ``source``, where in the database's log the change was
(``ts_ms``; PostgreSQL's ``lsn``; MySQL's and MariaDB's binlog ``file``, ``pos`` and
``row``). After a delete it writes a *tombstone*: the row's key with a null value, so
that a compacted topic can forget the key.

:func:`debezium_changes` turns a batch of such records into one row per change: the
table's columns, :data:`SEQUENCE` (where the change sits in the database's order),
:data:`DELETED` (true for a delete) and :data:`OP`. :func:`debezium_transform` makes it
the sink's ``transform``, and :func:`debezium_sink_options` gives the sink's
``sequence_by``, ``apply_as_deletes`` and ``except_column_list`` for those columns::

    DeltaSink("/lake/customers", keys=["id"],
              transform=debezium_transform(schema="id int, name string, email string"),
              **debezium_sink_options())

Records arrive in either of Debezium's value formats:

- JSON (``JsonConverter``): ``value`` is the record's bytes, with or without the
  converter's ``{"schema": ..., "payload": ...}`` wrapper (``schemas.enable``); the
  table's columns come from ``schema`` (a DDL string or a ``StructType``), typed as the
  converter writes them (temporal types are numbers since the epoch, ``precise``
  decimals base64 bytes: convert them in a transform of your own after this one);
- Avro through the Schema Registry (the source's ``valueFormat=avro``): ``value`` is a
  decoded struct, and the table's columns are ``after``'s fields.

Everything here is a Spark expression over the batch: nothing is collected, nothing of
a record ever runs as code, and a record that is not a change event fails the batch
with Spark's ``raise_error``, naming its topic, partition and offset.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from kafka_group.delta.keyed.change_rules import KAFKA_COLUMN
from kafka_group.errors import ConfigError

__all__ = ["DELETED", "OP", "SEQUENCE", "debezium_changes", "debezium_sink_options", "debezium_transform"]

#: The column holding where a change sits in the database's order (``decimal(38,0)``).
SEQUENCE = "_debezium_sequence"
#: The column that is true for a delete (a ``d`` event, or a tombstone with ``sequence="kafka"``).
DELETED = "_debezium_deleted"
#: The column holding the event's ``op`` (null for a tombstone).
OP = "_debezium_op"


#: Positions and offsets are combined as ``streamed + position * 10**19 + offset`` in a ``decimal(38,0)``:
#: a Kafka offset is below 2**63 < 10**19; positions below :data:`_MAX_POSITION`; ``streamed`` is
#: :data:`_STREAMED` for every event but a snapshot read (``r``), so streamed changes rank above them.
_SHIFT = 10 ** 19
_MAX_POSITION = 5 * 10 ** 18
_STREAMED = 5 * 10 ** 37
#: A binlog position is ``file number * 10**12 + pos``: file numbers below 10**6, positions below 10**12.
_BINLOG_FILE_SHIFT = 10 ** 12

#: Columns the keyed sink adds to each record before its transform, which the transform keeps.
_SINK_COLUMNS = (KAFKA_COLUMN,)

_SEQUENCES = ("source", "kafka")
_TRUNCATES = ("fail", "skip")


def debezium_changes(
    batch: Any,
    *,
    schema: Union[str, Any, None] = None,
    keys: Optional[Sequence[str]] = None,
    sequence: str = "source",
    truncate: str = "fail",
) -> Any:
    """One row per Debezium change event of ``batch``: the row's columns, :data:`SEQUENCE`, :data:`DELETED`, :data:`OP`.

    Parameters
    ----------
    batch : pyspark.sql.DataFrame
        Rows of the ``kafka-group`` source (``key``, ``value``, ``topic``, ``partition``,
        ``offset``): ``value`` binary (Debezium's JSON converter) or a struct (Avro decoded
        with the source's ``valueFormat=avro``).
    schema : str or StructType, optional
        The table's columns, as a DDL string (``"id int, name string"``) or a ``StructType``:
        required for JSON values, refused for decoded ones (their ``after`` struct is the schema).
    keys : list of str, optional
        The table's key columns. Needed with ``sequence="kafka"``, where a tombstone becomes
        a delete of the key read from the record's Kafka key (JSON, with or without the
        wrapper, or a decoded struct).
    sequence : {"source", "kafka"}, default "source"
        What orders a key's changes. ``"source"``: streamed changes (``c``, ``u``, ``d``) above
        snapshot reads (``r``: the state before streaming began; a PostgreSQL transaction still
        open when the snapshot was taken streams changes whose LSN is below the snapshot's), then
        the database's position (PostgreSQL's ``source.lsn``, else the binlog's ``file`` number
        and ``pos`` for MySQL and MariaDB, else ``source.ts_ms``), then the Kafka offset. It keeps
        its order across topics and partitions (a topic re-created or repartitioned), and an
        event the connector sends again after its own restart never moves a row back. Tombstones
        are dropped: the ``d`` event before each one deletes the row. ``"kafka"``: the Kafka
        offset alone, the order Debezium wrote a key's events to its partition; tombstones
        delete their key, so a compacted topic, whose ``d`` events the log cleaner may have
        removed, lands right.
    truncate : {"fail", "skip"}, default "fail"
        A ``t`` (truncate) event cannot be a change of one key: ``"fail"`` fails the batch
        naming the record; ``"skip"`` drops it (the table keeps the truncated rows).

    Returns
    -------
    pyspark.sql.DataFrame
        The table's columns (``after``'s values; ``before``'s for a delete), then
        :data:`SEQUENCE` (``decimal(38,0)``), :data:`DELETED` (boolean) and :data:`OP` (string).

    Raises
    ------
    ConfigError
        A parameter out of its choices, ``schema`` missing for JSON values or given for decoded
        ones, ``keys`` missing with ``sequence="kafka"`` or naming no column of ``schema``.

    Notes
    -----
    Pure and stateless: a Spark plan over ``batch``, evaluated on the executors. A record that
    is not a change event (no ``op``, JSON that does not fit ``schema``, an unknown ``op``, a
    quarantined record's ``value_error``) fails the batch through ``raise_error`` with its
    topic, partition and offset; nothing is lost, the batch is read again after a fix.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    if sequence not in _SEQUENCES:
        raise ConfigError(f"debezium_changes(sequence={sequence!r}): use one of {', '.join(map(repr, _SEQUENCES))}")
    if truncate not in _TRUNCATES:
        raise ConfigError(f"debezium_changes(truncate={truncate!r}): use one of {', '.join(map(repr, _TRUNCATES))}")
    missing = [c for c in ("key", "value", "topic", "partition", "offset") if c not in batch.columns]
    if missing:
        raise ConfigError(f"debezium_changes needs the kafka-group source's rows; the batch has no {missing} column: "
                          "pass it as DeltaSink(transform=...) and select nothing before it")
    decoded = isinstance(batch.schema["value"].dataType, StructType)
    if decoded:
        if schema is not None:
            raise ConfigError("debezium_changes(schema=...) is for JSON values; this batch's value is decoded "
                              "(valueFormat=avro) and its 'after' struct is the table's schema: leave schema out")
        envelope, row_type = _decoded_envelope(batch)
    else:
        if schema is None:
            raise ConfigError("debezium_changes needs schema=... (the table's columns, such as "
                              "'id int, name string') to parse JSON change events")
        row_type = schema if isinstance(schema, StructType) else StructType.fromDDL(schema)
        envelope = _json_envelope(row_type)
    clash = [c for c in row_type.fieldNames() if c in (SEQUENCE, DELETED, OP, *_SINK_COLUMNS)]
    if clash:
        raise ConfigError(f"debezium_changes: the table's columns {clash} are names this transform adds; "
                          "rename them with a transform after this one")
    key_list = list(keys or [])
    if sequence == "kafka" and not key_list:
        raise ConfigError("debezium_changes(sequence='kafka') turns tombstones into deletes of their key: "
                          "give the table's keys, such as keys=['id']")
    unknown = [k for k in key_list if k not in row_type.fieldNames()]
    if unknown:
        raise ConfigError(f"debezium_changes(keys={key_list!r}): {unknown} not among the table's columns "
                          f"{row_type.fieldNames()}")

    where = F.format_string("topic %s partition %d offset %d", "topic", "partition", "offset")
    events = batch.select(
        *[F.col(c) for c in _SINK_COLUMNS if c in batch.columns],
        "key", F.col("value").isNull().alias("_tombstone"), "topic", "partition", "offset",
        (F.col("value_error") if "value_error" in batch.columns else F.lit(None).cast("string")).alias("_bad"),
        envelope.alias("_e"),
    )
    op = F.col("_e.op")
    tombstone = F.col("_tombstone")
    problem = (
        F.when(F.col("_bad").isNotNull(), F.concat(F.lit("a record that did not decode ("), F.col("_bad"),
                                                    F.lit("), not a change event, at "), where))
        .when(tombstone, F.lit(None))
        .when(F.col("_e._corrupt").isNotNull(),
              F.concat(F.lit("a value that is not a Debezium change event of the given schema at "), where))
        .when(op.isNull(), F.concat(F.lit("a value with no 'op' (not a Debezium change event) at "), where))
        .when(~op.isin("c", "u", "d", "r", "t"),
              F.concat(F.lit("a Debezium event with op '"), op, F.lit("' (not c, u, d, r or t) at "), where))
        .when(op.isin("c", "u", "r") & F.col("_e.after").isNull(),
              F.concat(F.lit("a Debezium '"), op, F.lit("' event without 'after' at "), where))
        .when((op == "d") & F.col("_e.before").isNull(),
              F.concat(F.lit("a Debezium delete without 'before' (the table's REPLICA IDENTITY is NOTHING?) at "),
                       where, F.lit(": give the table a primary key or REPLICA IDENTITY DEFAULT")))
    )
    if truncate == "fail":
        problem = problem.when(op == "t", F.concat(
            F.lit("a Debezium truncate event (op 't') at "), where,
            F.lit(": a keyed table cannot apply it row by row; truncate the table yourself and pass "
                  "debezium_changes(truncate='skip') to go on")))
    # One CASE, so that no optimizer reordering lets a dropped row skip its check.
    keep = F.when(tombstone, F.lit(sequence == "kafka")).otherwise(op != "t")
    checked = events.where(F.when(problem.isNotNull(), F.raise_error(
        F.concat(F.lit("debezium_changes: "), problem))).otherwise(keep))

    key_values = _key_fields(batch, row_type, key_list) if sequence == "kafka" else {}
    columns = []
    for field in row_type.fields:
        # getField, never a parsed path: a column name is data, whatever characters it holds
        value = F.when(op == "d", F.col("_e").getField("before").getField(field.name)) \
            .otherwise(F.col("_e").getField("after").getField(field.name))
        if field.name in key_values:
            value = F.when(tombstone, key_values[field.name]).otherwise(value)
        columns.append(value.cast(field.dataType).alias(field.name))
    return checked.select(
        *columns,
        *[F.col(c) for c in _SINK_COLUMNS if c in batch.columns],
        _sequence(sequence, batch).alias(SEQUENCE),
        (tombstone | (op == "d")).alias(DELETED),
        op.alias(OP),
    )


def debezium_transform(
    *,
    schema: Union[str, Any, None] = None,
    keys: Optional[Sequence[str]] = None,
    sequence: str = "source",
    truncate: str = "fail",
) -> Callable[[Any], Any]:
    """:func:`debezium_changes` with these parameters, as a ``DeltaSink(transform=...)``.

    The parameters are checked when the first batch arrives (the batch decides between JSON
    and decoded values); an unknown ``sequence`` or ``truncate`` is refused here.

    Examples
    --------
    >>> sink = DeltaSink("/lake/customers", keys=["id"],                       # doctest: +SKIP
    ...                  transform=debezium_transform(schema="id int, name string, email string"),
    ...                  **debezium_sink_options())
    """
    if sequence not in _SEQUENCES:
        raise ConfigError(f"debezium_transform(sequence={sequence!r}): use one of {', '.join(map(repr, _SEQUENCES))}")
    if truncate not in _TRUNCATES:
        raise ConfigError(f"debezium_transform(truncate={truncate!r}): use one of {', '.join(map(repr, _TRUNCATES))}")
    key_list = None if keys is None else list(keys)

    def transform(batch: Any) -> Any:
        return debezium_changes(batch, schema=schema, keys=key_list, sequence=sequence, truncate=truncate)

    return transform


def debezium_sink_options() -> Dict[str, Any]:
    """The keyed ``DeltaSink``'s ``sequence_by``, ``apply_as_deletes`` and ``except_column_list`` for
    :func:`debezium_changes`' rows: ordered by :data:`SEQUENCE`, deleted where :data:`DELETED`, and
    neither of them nor :data:`OP` a column of the table."""
    return {"sequence_by": SEQUENCE, "apply_as_deletes": DELETED, "except_column_list": [SEQUENCE, DELETED, OP]}


# -- the envelope ----------------------------------------------------------------------


def _source_fields() -> Any:
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    return StructType([StructField("ts_ms", LongType()), StructField("lsn", LongType()),
                       StructField("file", StringType()), StructField("pos", LongType())])


def _json_envelope(row_type: Any) -> Any:
    """The envelope of a JSON value, wrapped (``schemas.enable=true``) or not, as one struct column."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    envelope = StructType([
        StructField("before", row_type), StructField("after", row_type), StructField("op", StringType()),
        StructField("source", _source_fields()),
    ])
    # The converter's wrapper: {"schema": {...}, "payload": <envelope>}; a plain envelope has neither.
    document = StructType([*envelope.fields, StructField("payload", envelope), StructField("_corrupt", StringType())])
    parsed = F.from_json(F.col("value").cast("string"), document,
                         {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt"})
    wrapped = parsed["payload"].isNotNull()
    return F.struct(*[F.when(wrapped, parsed["payload"][f.name]).otherwise(parsed[f.name]).alias(f.name)
                      for f in envelope.fields], parsed["_corrupt"].alias("_corrupt"))


def _decoded_envelope(batch: Any) -> Any:
    """The envelope of a decoded (Avro) value as one struct column, and its row type (``after``'s)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    value_type = batch.schema["value"].dataType
    names = value_type.fieldNames()
    missing = [n for n in ("before", "after", "op", "source") if n not in names]
    if missing or not isinstance(value_type["after"].dataType, StructType):
        raise ConfigError(f"debezium_changes: the decoded value has fields {names}, not Debezium's envelope "
                          "(before, after, op, source): read the table's change topic with valueFormat=avro")
    source_type = value_type["source"].dataType
    source_names = source_type.fieldNames() if isinstance(source_type, StructType) else []
    source = F.struct(*[
        (F.col("value").getField("source").getField(f.name) if f.name in source_names else F.lit(None))
        .cast(f.dataType).alias(f.name)
        for f in _source_fields().fields
    ])
    envelope = F.struct(F.col("value.before").alias("before"), F.col("value.after").alias("after"),
                        F.col("value.op").cast("string").alias("op"), source.alias("source"),
                        F.lit(None).cast("string").alias("_corrupt"))
    return envelope, value_type["after"].dataType


def _key_fields(batch: Any, row_type: Any, keys: List[str]) -> Dict[str, Any]:
    """Each key column read from the record's Kafka key: JSON, wrapped (``{"schema", "payload"}``) or
    not, or a struct decoded with the source's ``keyFormat=avro``."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    key_type = batch.schema["key"].dataType
    if isinstance(key_type, StructType):
        absent = [k for k in keys if k not in key_type.fieldNames()]
        if absent:
            raise ConfigError(f"debezium_changes(keys={keys!r}): the decoded Kafka key has fields "
                              f"{key_type.fieldNames()}, not {absent}")
        return {k: F.col("key").getField(k) for k in keys}
    fields = StructType([row_type[k] for k in keys])
    document = StructType([*fields.fields, StructField("payload", fields), StructField("schema", StringType())])
    parsed = F.from_json(F.col("key").cast("string"), document)
    wrapped = parsed["payload"].isNotNull()
    return {k: F.when(wrapped, parsed["payload"][k]).otherwise(parsed[k]) for k in keys}


def _sequence(sequence: str, batch: Any) -> Any:
    """The order of a key's changes: see :func:`debezium_changes`' ``sequence``."""
    from pyspark.sql import functions as F

    offset = F.col("offset").cast("decimal(38,0)")
    if sequence == "kafka":
        return offset
    where = F.format_string("topic %s partition %d offset %d", "topic", "partition", "offset")
    file_number = F.regexp_replace(F.regexp_extract(F.col("_e.source.file"), r"(\d+)$", 1), "^0+", "")
    binlog = F.when(
        F.col("_e.source.file").isNotNull() & (F.col("_e.source.pos") >= 0),
        F.when((F.length(file_number) <= 6) & (F.col("_e.source.pos") < _BINLOG_FILE_SHIFT),
               F.concat(F.lit("0"), file_number).cast("decimal(38,0)")
               * F.lit(str(_BINLOG_FILE_SHIFT)).cast("decimal(38,0)") + F.col("_e.source.pos").cast("decimal(38,0)")),
    )
    position = F.coalesce(
        F.when(F.col("_e.source.lsn") >= 0, F.col("_e.source.lsn").cast("decimal(38,0)")),
        binlog,
        F.when(F.col("_e.source.ts_ms") >= 0, F.col("_e.source.ts_ms").cast("decimal(38,0)")),
    )
    streamed = F.when(F.col("_e.op") == "r", F.lit(0).cast("decimal(38,0)")) \
        .otherwise(F.lit(str(_STREAMED)).cast("decimal(38,0)"))
    return (
        F.when(position.isNull() | (position >= F.lit(str(_MAX_POSITION)).cast("decimal(38,0)")), F.raise_error(
            F.concat(F.lit("debezium_changes: a change event whose source has no lsn, binlog file and pos or ts_ms "
                           "that the sequence can hold (lsn below 5 * 10**18; binlog file number below 10**6 and pos "
                           "below 10**12) at "), where, F.lit(": use sequence='kafka'"))))
        .otherwise((streamed + position * F.lit(str(_SHIFT)).cast("decimal(38,0)") + offset).cast("decimal(38,0)"))
    )
