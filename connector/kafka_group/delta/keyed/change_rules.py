"""The rules of the keyed (CDC) sink, pure: which event of a key wins, and the MERGE that applies it.

:class:`~pyspark_kafka_group.sink.delta_sink.DeltaSink` with ``keys`` applies change events to a table
keyed by those columns (docs/cdc.md). Every event has a *sequence* (``sequence_by``, by default the
Kafka offset) and is an upsert or a delete (a Kafka tombstone, or ``apply_as_deletes``).

SCD type 1 (the table holds one row per live key)
    Within a batch, the event with the highest sequence of each key wins (ties: the higher Kafka
    offset). Across batches the table stores each row's sequence in :data:`SEQUENCE_COLUMN`, and an
    event whose sequence is below it is ignored (:func:`scd1_clauses`): out-of-order events never
    move a row back. An event of the row's own sequence replaces it: a partition's later offsets
    land in later batches, so the later offset wins a tie however the batches are cut. A row whose
    sequence is NULL (loaded by another tool) takes any event. A delete removes the row and leaves a
    tombstone (:mod:`kafka_group.delta.keyed.tombstones`), which drops a later batch's upserts of the
    key below the delete's sequence, for the tombstones' retention (docs/cdc.md).
SCD type 2 (the table holds every version, valid in ``[__START_AT, __END_AT)``)
    Every event counts, in sequence order, wherever it falls in the key's history: an upsert opens
    a version and closes the one before, a delete closes it; a late event splits the version it
    falls in (:mod:`kafka_group.delta.keyed.scd2_history`). Each key the batch changes has its
    versions replaced in the MERGE (:func:`scd2_clauses`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from kafka_group.errors import ConfigError

__all__ = [
    "DELETE_COLUMN",
    "END_COLUMN",
    "KAFKA_COLUMN",
    "KeyedSpec",
    "OFFSET",
    "SEQ",
    "SEQUENCE_COLUMN",
    "START_COLUMN",
    "TRUNCATE_METADATA",
    "quote",
    "scd1_clauses",
    "scd2_clauses",
]

#: SCD1: the sequence of the event each row holds (compared with the next events of its key).
SEQUENCE_COLUMN = "__SEQUENCE"
#: SCD2: where a version starts (its event's sequence) and ends (the next event's; NULL: current).
START_COLUMN = "__START_AT"
END_COLUMN = "__END_AT"
#: The struct the sink adds to every record before the transform: ``offset`` (the default sequence)
#: and ``tombstone`` (the record's value is NULL). The transform must keep it; never written.
KAFKA_COLUMN = "__kafka"
#: The change set's columns (never written): the event's sequence and whether it deletes its key.
SEQ = "__kg_seq"
DELETE_COLUMN = "__kg_delete"
#: The change set's Kafka offset of each event (orders events of one sequence: the later one wins).
OFFSET = "__kg_offset"
#: SCD2's change set: what a row does ('insert' a version, 'close' the key's current one) and when.
ACTION = "__kg_action"
#: The change set's schema metadata key saying the batch holds a truncate (``apply_as_truncates``, SCD1).
TRUNCATE_METADATA = b"kafka_group.truncate"

_RESERVED = (SEQUENCE_COLUMN, START_COLUMN, END_COLUMN, KAFKA_COLUMN)


def quote(column: str) -> str:
    """``column`` as a SQL identifier for delta-rs's predicates (backticks, inner ones doubled)."""
    return "`" + column.replace("`", "``") + "`"


@dataclass(frozen=True)
class KeyedSpec:
    """What ``DeltaSink(keys=..., ...)`` was given, checked (:meth:`build`)."""

    keys: Tuple[str, ...]
    sequence_by: Any
    """A SQL expression (str), a pyspark Column (a struct orders field by field), or None (the offset)."""
    apply_as_deletes: Optional[str]
    column_list: Optional[Tuple[str, ...]]
    except_column_list: Tuple[str, ...]
    scd_type: int
    ignore_null_updates: bool = False
    apply_as_truncates: Optional[str] = None
    track_history_column_list: Optional[Tuple[str, ...]] = None
    track_history_except_column_list: Optional[Tuple[str, ...]] = None

    @staticmethod
    def build(keys: Any, sequence_by: Any, apply_as_deletes: Any, column_list: Any, except_column_list: Any,
              stored_as_scd_type: Any, *, ignore_null_updates: Any = False, apply_as_truncates: Any = None,
              track_history_column_list: Any = None, track_history_except_column_list: Any = None) -> "KeyedSpec":
        """Check the parameters; a :class:`~kafka_group.errors.ConfigError` names the wrong one and the fix.

        ``sequence_by`` is a SQL expression string, or any other object (a pyspark Column: the Spark
        layer checks it, this core imports no pyspark)."""
        names = _names("keys", keys)
        if not names:
            raise ConfigError("DeltaSink(keys=...) needs at least one column name, such as keys=['id']")
        if isinstance(sequence_by, str) and not sequence_by.strip():
            raise ConfigError(f"DeltaSink(sequence_by=...) takes a SQL expression string or a Column, got {sequence_by!r}")
        for label, value in (("apply_as_deletes", apply_as_deletes), ("apply_as_truncates", apply_as_truncates)):
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ConfigError(f"DeltaSink({label}=...) takes a SQL expression string, got {value!r}")
        if not isinstance(ignore_null_updates, bool):
            raise ConfigError(f"DeltaSink(ignore_null_updates=...) is True or False, got {ignore_null_updates!r}")
        if column_list is not None and except_column_list is not None:
            raise ConfigError("DeltaSink takes column_list or except_column_list, not both: give one")
        columns = None if column_list is None else _names("column_list", column_list)
        excluded = () if except_column_list is None else _names("except_column_list", except_column_list)
        scd_type = scd_type_of(stored_as_scd_type)
        if track_history_column_list is not None and track_history_except_column_list is not None:
            raise ConfigError("DeltaSink takes track_history_column_list or track_history_except_column_list, not "
                              "both: give one")
        tracked = None if track_history_column_list is None else _names("track_history_column_list",
                                                                        track_history_column_list)
        untracked = None if track_history_except_column_list is None else _names(
            "track_history_except_column_list", track_history_except_column_list)
        if scd_type != 2 and (tracked is not None or untracked is not None):
            raise ConfigError("DeltaSink(track_history_column_list / track_history_except_column_list) belong to "
                              "stored_as_scd_type=2 (SCD type 1 keeps no history), as in AUTO CDC: leave them out")
        if scd_type != 1 and apply_as_truncates is not None:
            raise ConfigError("DeltaSink(apply_as_truncates=...) belongs to stored_as_scd_type=1, as in AUTO CDC "
                              "(a truncate would erase the history SCD type 2 keeps): leave it out")
        for name in names + (columns or ()) :
            if name in _RESERVED:
                raise ConfigError(f"DeltaSink: the column name {name!r} is the sink's own ({', '.join(_RESERVED)}); "
                                  "rename it in the transform")
        missing = [k for k in names if columns is not None and k not in columns]
        dropped = [k for k in names if k in excluded]
        if missing or dropped:
            raise ConfigError(f"DeltaSink: the key column(s) {', '.join(missing + dropped)} must be stored: keep "
                              "them in column_list and out of except_column_list")
        return KeyedSpec(names, sequence_by, apply_as_deletes, columns, excluded, scd_type, ignore_null_updates,
                         apply_as_truncates, tracked, untracked)

    def stored_columns(self, batch_columns: Sequence[str]) -> List[str]:
        """The transform's columns the table stores (keys included), in the batch's order."""
        present = [c for c in batch_columns if c not in (KAFKA_COLUMN, SEQ, DELETE_COLUMN, OFFSET)]
        if self.column_list is not None:
            unknown = [c for c in self.column_list if c not in present]
            if unknown:
                raise ConfigError(f"DeltaSink(column_list=...) names {', '.join(unknown)}, which the transform's "
                                  f"rows do not have (they have {', '.join(present)})")
            stored = [c for c in present if c in self.column_list]
        else:
            stored = [c for c in present if c not in self.except_column_list]
        for label, names in (("track_history_column_list", self.track_history_column_list),
                             ("track_history_except_column_list", self.track_history_except_column_list)):
            unknown = [c for c in names or () if c not in stored]
            if unknown:
                raise ConfigError(f"DeltaSink({label}=...) names {', '.join(unknown)}, which the table does not store "
                                  f"(it stores {', '.join(stored)})")
        return stored

    def tracked_columns(self, columns: Sequence[str]) -> Optional[Tuple[str, ...]]:
        """SCD2: the columns (of the table's ``columns``) whose change makes a new version; None: every upsert
        makes one."""
        if self.track_history_column_list is not None:
            return self.track_history_column_list
        if self.track_history_except_column_list is not None:
            return tuple(c for c in columns if c not in self.track_history_except_column_list and c not in self.keys)
        return None

    def system_columns(self) -> Tuple[str, ...]:
        """The columns the sink adds to the table."""
        return (SEQUENCE_COLUMN,) if self.scd_type == 1 else (START_COLUMN, END_COLUMN)


def scd_type_of(value: Any) -> int:
    """``stored_as_scd_type`` as AUTO CDC takes it: 1, 2, "1" or "2"."""
    if isinstance(value, bool) or value not in (1, 2, "1", "2"):
        raise ConfigError(f"DeltaSink(stored_as_scd_type=...) is 1, 2, '1' or '2' (as AUTO CDC), got {value!r}")
    return int(value)


def _names(label: str, value: Any) -> Tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(
            isinstance(c, str) and c for c in value):
        raise ConfigError(f"DeltaSink({label}=...) takes a list of column names, such as ['id'], got {value!r}")
    return tuple(value)


def key_predicate(keys: Sequence[str]) -> str:
    """The MERGE's join on the keys (plain equalities: delta-rs prunes the target's files by the
    change set's key range, see docs/exactly-once.md)."""
    return " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in keys)


@dataclass(frozen=True)
class MergeClauses:
    """The MERGE of a change set: its join, and each clause's predicate and column assignments."""

    predicate: str
    delete_when: Optional[str]
    update_when: Optional[str]
    updates: Dict[str, str]
    insert_when: str
    inserts: Dict[str, str]


def scd1_clauses(keys: Sequence[str], stored: Sequence[str], *, ignore_null_updates: bool = False,
                 truncate: bool = False) -> MergeClauses:
    """SCD1: a delete at or above the row's sequence removes it, such an upsert replaces it, an unknown
    key's upsert is inserted. ``ignore_null_updates``: an upsert's NULL columns keep the row's values.
    ``truncate``: the batch holds a truncate, the change set only its events after it; every row the
    change set does not match is deleted (:func:`~kafka_group.delta.keyed.commit` adds that clause) and a
    matched row takes its event whatever its sequence (the row was truncated).

    ``stored`` are the change set's data columns (keys included); the change set holds one event
    per key, with :data:`SEQ` and :data:`DELETE_COLUMN`.
    """
    # at or above the row's: the later event of a tie wins (docstring); a NULL sequence takes any event
    newer = "TRUE" if truncate else f"(s.{SEQ} >= t.{quote(SEQUENCE_COLUMN)} OR t.{quote(SEQUENCE_COLUMN)} IS NULL)"
    values = {quote(c): f"s.{quote(c)}" for c in stored}
    values[quote(SEQUENCE_COLUMN)] = f"s.{SEQ}"
    updates = {k: v for k, v in values.items() if k not in {quote(c) for c in keys}}
    if ignore_null_updates and not truncate:
        updates = {k: v if k == quote(SEQUENCE_COLUMN) else f"coalesce({v}, t.{k})" for k, v in updates.items()}
    return MergeClauses(
        predicate=key_predicate(keys),
        delete_when=f"s.{DELETE_COLUMN} AND {newer}",
        update_when=f"NOT s.{DELETE_COLUMN} AND {newer}",
        updates=updates,
        insert_when=f"NOT s.{DELETE_COLUMN}",
        inserts=values,
    )


def scd2_clauses(keys: Sequence[str], columns: Sequence[str]) -> MergeClauses:
    """SCD2: a 'drop' row deletes every version of its key; an 'insert' row (it never matches) adds one.
    A key the batch changes gets one 'drop' and all its versions again
    (:func:`~kafka_group.delta.keyed.scd2_history.place_events`)."""
    values = {quote(c): f"s.{quote(c)}" for c in columns}
    values[quote(START_COLUMN)] = f"s.{quote(START_COLUMN)}"
    values[quote(END_COLUMN)] = f"s.{quote(END_COLUMN)}"
    return MergeClauses(
        predicate=f"{key_predicate(keys)} AND s.{ACTION} = 'drop'",
        delete_when=f"s.{ACTION} = 'drop'",
        update_when=None,
        updates={},
        insert_when=f"s.{ACTION} = 'insert'",
        inserts=values,
    )
