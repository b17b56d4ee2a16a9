"""The columns of the rows the keyed MERGE as Spark tasks writes (:mod:`pyspark_kafka_group.sink.keyed.scd1_tasks`).

An upsert's row takes its stored columns and ``__SEQUENCE`` from the change; a column the upsert keeps
from the row it replaces (:func:`~kafka_group.delta.keyed.task_rewrite.kept_columns`: one the batch does
not store, and with ``ignore_null_updates`` a stored column the change leaves NULL) comes from the
``fired`` row the task that dropped the old row returned
(:data:`~kafka_group.delta.keyed.task_rewrite.OLD_PREFIX` + column; NULL for a key no live row holds).
After a truncate no row is replaced: a column the batch does not store is NULL.

Caller: the driver, building the Spark plan of the new rows.
"""

from __future__ import annotations

from typing import Any, List, Sequence

from kafka_group.delta.keyed.change_rules import SEQ, SEQUENCE_COLUMN, quote
from kafka_group.delta.keyed.task_rewrite import OLD_PREFIX

__all__ = ["written_columns"]


def written_columns(table_schema: Any, stored: Sequence[str], kept: Sequence[str],
                    ignore_null_updates: bool) -> List[Any]:
    """The Spark columns of the written rows, in the table's order (``table_schema``: its Arrow schema);
    ``kept``: the columns read from the replaced rows."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_type

    columns = []
    for f in table_schema:
        if f.name == SEQUENCE_COLUMN:
            columns.append(F.col(SEQ).alias(SEQUENCE_COLUMN))
        elif f.name in kept:
            old = F.col(quote(OLD_PREFIX + f.name))
            columns.append((F.coalesce(F.col(quote(f.name)), old) if f.name in stored and ignore_null_updates
                            else old if f.name not in stored else F.col(quote(f.name))).alias(f.name))
        elif f.name in stored:
            columns.append(F.col(quote(f.name)))
        else:
            columns.append(F.lit(None).cast(from_arrow_type(f.type)).alias(f.name))
    return columns
