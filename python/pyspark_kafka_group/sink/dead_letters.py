"""The dead-letter table of :class:`~pyspark_kafka_group.sink.routing.RoutedDeltaSink`: records that cannot land.

Opt-in (``RoutedDeltaSink(dead_letters="/lake/_dead_letters")``); without it a record that cannot land fails
the batch, or is quarantined, as with one ``DeltaSink``. With it, these records go to the dead-letter table
instead of their topic's table:

- records the source quarantined (``badRecords=quarantine``: they did not decode through the Schema
  Registry; their ``value_error``/``key_error`` is the message, class ``undecodable``);
- records for which the user's ``dead_letter_when`` (a SQL expression over the source's rows, per topic or for
  all) is a message, class ``rejected`` (for example JSON that is not a change event).

Each dead letter is one row: ``topic``, ``partition``, ``offset``, ``timestamp``, ``key``, ``value`` (the
record's bytes as read; a decoded value as JSON), ``headers``, ``error_class``, ``error_message``, ``batch_id``.
The table is a shared table of the route: it holds the positions of every partition of each batch, committed
with its rows (or alone, when a batch has no dead letter), so it lands each dead letter exactly once by the
rules every routed table follows (docs/exactly-once.md, "Many tables").

``dead_letter_when`` must be deterministic: :meth:`DeadLetters.flagged` and :meth:`DeadLetters.kept` each
evaluate it (once for the dead-letter table, once for the topics' tables), so an answer that changes between
the two would put a record in both or neither.

Not dead letters (yet): rows a CHECK constraint refuses and NULL keys or sequences of a keyed table still fail
the batch, as with one ``DeltaSink`` (they are found after the table's transform, which drops the record's
bytes).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Union

from kafka_group.errors import ConfigError

__all__ = ["DEAD_LETTER_COLUMNS", "DeadLetters"]

#: The dead-letter table's columns, in order.
DEAD_LETTER_COLUMNS = ("topic", "partition", "offset", "timestamp", "key", "value", "headers", "error_class",
                       "error_message", "batch_id")
_HEADERS_TYPE = "array<struct<key:string,value:binary>>"
_QUARANTINE = (("value_error", "value_raw", "value"), ("key_error", "key_raw", "key"))


class DeadLetters:
    """Which records of a batch are dead letters, and their rows.

    Parameters
    ----------
    location : str
        The dead-letter table.
    when : str or dict, optional
        ``dead_letter_when``: a SQL expression (a message, or NULL) for every topic, or ``{topic: expression}``.
    """

    def __init__(self, location: str, when: Union[str, Mapping[str, str], None]) -> None:
        if when is not None and not isinstance(when, (str, Mapping)):
            raise ConfigError("RoutedDeltaSink(dead_letter_when) takes a SQL expression or {topic: expression}, "
                              f"got {type(when).__name__}")
        if isinstance(when, str) and not when.strip():
            raise ConfigError("RoutedDeltaSink(dead_letter_when) is empty: give a SQL expression that is a message "
                              "for a record that cannot land, NULL for the others")
        self.location = location
        self.when = when

    def _reason(self, batch: Any) -> "tuple[Any, Any]":
        """The columns (error class, error message) of ``batch``'s rows: NULL for a record that lands."""
        from pyspark.sql import functions as F

        classes, messages = [], []
        for error, _, _ in _QUARANTINE:
            if error in batch.columns:
                classes.append(F.when(F.col(error).isNotNull(), F.lit("undecodable")))
                messages.append(F.col(error))
        rejected: Optional[Any] = None
        if isinstance(self.when, str):
            rejected = F.expr(self.when).cast("string")
        elif self.when is not None:
            for topic, expression in self.when.items():
                case = F.when(F.col("topic") == topic, F.expr(expression).cast("string"))
                rejected = case if rejected is None else F.coalesce(rejected, case)
        if rejected is not None:
            classes.append(F.when(rejected.isNotNull(), F.lit("rejected")))
            messages.append(rejected)
        if not messages:
            return F.lit(None).cast("string"), F.lit(None).cast("string")
        return F.coalesce(*classes), F.coalesce(*messages)

    def flagged(self, batch: Any, batch_id: int) -> Any:
        """The dead letters of ``batch``, as rows of the dead-letter table (:data:`DEAD_LETTER_COLUMNS`)."""
        from pyspark.sql import functions as F

        error_class, message = self._reason(batch)
        columns = {
            "topic": F.col("topic"), "partition": F.col("partition"), "offset": F.col("offset"),
            "timestamp": F.col("timestamp") if "timestamp" in batch.columns else F.lit(None).cast("timestamp"),
            "key": _bytes(batch, "key", "key_raw"), "value": _bytes(batch, "value", "value_raw"),
            "headers": F.col("headers") if "headers" in batch.columns else F.lit(None).cast(_HEADERS_TYPE),
            "error_class": error_class, "error_message": message, "batch_id": F.lit(batch_id).cast("long"),
        }
        return batch.where(error_class.isNotNull()).select(*(c.alias(n) for n, c in columns.items()))

    def kept(self, batch: Any) -> Any:
        """The rows of ``batch`` that are not dead letters (they go to their topic's table)."""
        error_class, _ = self._reason(batch)
        return batch.where(error_class.isNull())


def _bytes(batch: Any, name: str, raw: str) -> Any:
    """Column ``name`` as the record's bytes: its quarantined bytes, binary as is, text as UTF-8, anything
    decoded as JSON text."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, StringType

    if name not in batch.columns:
        return F.lit(None).cast("binary")
    kind = batch.schema[name].dataType
    value = (F.col(name) if isinstance(kind, BinaryType) else F.col(name).cast("binary")
             if isinstance(kind, StringType) else F.to_json(F.col(name)).cast("binary"))
    return F.coalesce(F.col(raw), value) if raw in batch.columns else value
