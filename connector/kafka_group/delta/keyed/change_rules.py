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
    Every event of a batch at or above the key's latest sequence in the table (the latest
    ``__END_AT`` or ``__START_AT`` of its rows, :func:`latest_sequences`; NULLs are below any)
    counts, in sequence order: an upsert opens a version and closes the one before; a delete closes
    it. An event at the key's latest sequence is a tie with the event that made it, and as within a
    batch the later one wins: the current version opened at that sequence is dropped, and the event
    applies in its place. Events below the key's latest sequence are ignored (deletes are
    remembered: a closed row keeps them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Hashable, Iterable, List, Mapping, Optional, Sequence, Tuple

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
    "KeyLatest",
    "Scd2Changes",
    "latest_sequences",
    "quote",
    "scd1_clauses",
    "scd2_changes",
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
CLOSE_AT = "__kg_close_at"

_RESERVED = (SEQUENCE_COLUMN, START_COLUMN, END_COLUMN, KAFKA_COLUMN)


def quote(column: str) -> str:
    """``column`` as a SQL identifier for delta-rs's predicates (backticks, inner ones doubled)."""
    return "`" + column.replace("`", "``") + "`"


@dataclass(frozen=True)
class KeyedSpec:
    """What ``DeltaSink(keys=..., ...)`` was given, checked (:meth:`build`)."""

    keys: Tuple[str, ...]
    sequence_by: Optional[str]
    apply_as_deletes: Optional[str]
    column_list: Optional[Tuple[str, ...]]
    except_column_list: Tuple[str, ...]
    scd_type: int

    @staticmethod
    def build(keys: Any, sequence_by: Any, apply_as_deletes: Any, column_list: Any, except_column_list: Any,
              stored_as_scd_type: Any) -> "KeyedSpec":
        """Check the parameters; a :class:`~kafka_group.errors.ConfigError` names the wrong one and the fix."""
        names = _names("keys", keys)
        if not names:
            raise ConfigError("DeltaSink(keys=...) needs at least one column name, such as keys=['id']")
        for label, value in (("sequence_by", sequence_by), ("apply_as_deletes", apply_as_deletes)):
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ConfigError(f"DeltaSink({label}=...) takes a SQL expression string, got {value!r}")
        if column_list is not None and except_column_list is not None:
            raise ConfigError("DeltaSink takes column_list or except_column_list, not both: give one")
        columns = None if column_list is None else _names("column_list", column_list)
        excluded = () if except_column_list is None else _names("except_column_list", except_column_list)
        if stored_as_scd_type not in (1, 2) or isinstance(stored_as_scd_type, bool):
            raise ConfigError(f"DeltaSink(stored_as_scd_type=...) is 1 or 2, got {stored_as_scd_type!r}")
        for name in names + (columns or ()) :
            if name in _RESERVED:
                raise ConfigError(f"DeltaSink: the column name {name!r} is the sink's own ({', '.join(_RESERVED)}); "
                                  "rename it in the transform")
        missing = [k for k in names if columns is not None and k not in columns]
        dropped = [k for k in names if k in excluded]
        if missing or dropped:
            raise ConfigError(f"DeltaSink: the key column(s) {', '.join(missing + dropped)} must be stored: keep "
                              "them in column_list and out of except_column_list")
        return KeyedSpec(names, sequence_by, apply_as_deletes, columns, excluded, int(stored_as_scd_type))

    def stored_columns(self, batch_columns: Sequence[str]) -> List[str]:
        """The transform's columns the table stores (keys included), in the batch's order."""
        present = [c for c in batch_columns if c not in (KAFKA_COLUMN, SEQ, DELETE_COLUMN, OFFSET)]
        if self.column_list is not None:
            unknown = [c for c in self.column_list if c not in present]
            if unknown:
                raise ConfigError(f"DeltaSink(column_list=...) names {', '.join(unknown)}, which the transform's "
                                  f"rows do not have (they have {', '.join(present)})")
            return [c for c in present if c in self.column_list]
        return [c for c in present if c not in self.except_column_list]

    def system_columns(self) -> Tuple[str, ...]:
        """The columns the sink adds to the table."""
        return (SEQUENCE_COLUMN,) if self.scd_type == 1 else (START_COLUMN, END_COLUMN)


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


def scd1_clauses(keys: Sequence[str], stored: Sequence[str]) -> MergeClauses:
    """SCD1: a delete at or above the row's sequence removes it, such an upsert replaces it, an unknown
    key's upsert is inserted.

    ``stored`` are the change set's data columns (keys included); the change set holds one event
    per key, with :data:`SEQ` and :data:`DELETE_COLUMN`.
    """
    # at or above the row's: the later event of a tie wins (docstring); a NULL sequence takes any event
    newer = f"(s.{SEQ} >= t.{quote(SEQUENCE_COLUMN)} OR t.{quote(SEQUENCE_COLUMN)} IS NULL)"
    values = {quote(c): f"s.{quote(c)}" for c in stored}
    values[quote(SEQUENCE_COLUMN)] = f"s.{SEQ}"
    return MergeClauses(
        predicate=key_predicate(keys),
        delete_when=f"s.{DELETE_COLUMN} AND {newer}",
        update_when=f"NOT s.{DELETE_COLUMN} AND {newer}",
        updates={k: v for k, v in values.items() if k not in {quote(c) for c in keys}},
        insert_when=f"NOT s.{DELETE_COLUMN}",
        inserts=values,
    )


def scd2_clauses(keys: Sequence[str], stored: Sequence[str]) -> MergeClauses:
    """SCD2: a 'close' row ends the key's current version; a 'drop' row deletes the key's current
    version opened at its ``__START_AT`` (a tie the later event wins); an 'insert' row (it never
    matches) adds one."""
    values = {quote(c): f"s.{quote(c)}" for c in stored}
    values[quote(START_COLUMN)] = f"s.{quote(START_COLUMN)}"
    values[quote(END_COLUMN)] = f"s.{quote(END_COLUMN)}"
    return MergeClauses(
        predicate=f"{key_predicate(keys)} AND t.{quote(END_COLUMN)} IS NULL AND (s.{ACTION} = 'close' OR "
                  f"(s.{ACTION} = 'drop' AND t.{quote(START_COLUMN)} = s.{quote(START_COLUMN)}))",
        delete_when=f"s.{ACTION} = 'drop'",
        update_when=f"s.{ACTION} = 'close'",
        updates={quote(END_COLUMN): f"s.{CLOSE_AT}"},
        insert_when=f"s.{ACTION} = 'insert'",
        inserts=values,
    )


Key = Tuple[Hashable, ...]


@dataclass(frozen=True)
class KeyLatest:
    """SCD2: a key's latest sequence in the table, and whether its current version opened there."""

    sequence: Any
    """The highest ``__END_AT``, else ``__START_AT``, of its rows (NULLs left out)."""
    opened: bool
    """Its current version (``__END_AT`` NULL) starts at :attr:`sequence`: an event of that sequence
    replaces it."""


def latest_sequences(rows: Iterable[Mapping[str, Any]], keys: Sequence[str]) -> Dict[Key, KeyLatest]:
    """SCD2: each key's latest sequence in the table, from its rows (the highest ``__END_AT``, else
    ``__START_AT``): events below it are ignored, deleted keys' included. A key whose rows have no
    sequence (a snapshot loaded by another tool) is left out: every event of it counts."""
    latest: Dict[Key, Any] = {}
    current: Dict[Key, Any] = {}
    for row in rows:
        key = tuple(row[k] for k in keys)
        if row[END_COLUMN] is None:
            current[key] = row[START_COLUMN]
        seq = row[END_COLUMN] if row[END_COLUMN] is not None else row[START_COLUMN]
        if seq is not None and (key not in latest or seq > latest[key]):
            latest[key] = seq
    return {key: KeyLatest(seq, key in current and current[key] is not None and current[key] == seq)
            for key, seq in latest.items()}


@dataclass(frozen=True)
class Scd2Changes:
    """SCD2's MERGE source: versions to insert, the current versions to close (key, at), and those to
    drop (key, their ``__START_AT``)."""

    inserts: List[Dict[str, Any]]
    closes: List[Tuple[Key, Any]]
    drops: List[Tuple[Key, Any]] = field(default_factory=list)


def scd2_changes(events: Iterable[Mapping[str, Any]], keys: Sequence[str], stored: Sequence[str],
                 latest: Mapping[Key, KeyLatest]) -> Scd2Changes:
    """The versions a batch's events make (see the module docstring).

    ``events`` carry the ``stored`` columns, :data:`SEQ`, :data:`DELETE_COLUMN` and :data:`OFFSET` (the
    Kafka offset, which orders events of equal sequence; the later one wins). ``latest`` is
    :func:`latest_sequences` of the table's rows for these keys.
    """
    by_key: Dict[Key, List[Mapping[str, Any]]] = {}
    for e in events:
        key = tuple(e[k] for k in keys)
        if key in latest and e[SEQ] < latest[key].sequence:
            continue  # older than what the table holds: out of order
        by_key.setdefault(key, []).append(e)
    inserts: List[Dict[str, Any]] = []
    closes: List[Tuple[Key, Any]] = []
    drops: List[Tuple[Key, Any]] = []
    for key, evs in by_key.items():
        evs.sort(key=lambda e: (e[SEQ], e[OFFSET]))
        deduped: List[Mapping[str, Any]] = []
        for e in evs:  # one event per sequence: the later in Kafka wins
            if deduped and deduped[-1][SEQ] == e[SEQ]:
                deduped[-1] = e
            else:
                deduped.append(e)
        first = deduped[0][SEQ]
        if key in latest and first == latest[key].sequence and latest[key].opened:
            # A tie with the event that opened the key's current version, from an earlier batch (so an
            # earlier offset of the key's partition): this one wins. That version goes; the one before it
            # is already closed at this sequence.
            drops.append((key, first))
        else:  # (a tie with a delete: the key has no current version, and the close matches nothing)
            closes.append((key, first))
        for i, e in enumerate(deduped):
            if e[DELETE_COLUMN]:
                continue
            end = deduped[i + 1][SEQ] if i + 1 < len(deduped) else None
            inserts.append({**{c: e[c] for c in stored}, START_COLUMN: e[SEQ], END_COLUMN: end})
    return Scd2Changes(inserts, closes, drops)
