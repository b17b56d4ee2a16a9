"""SCD type 2, pure: a key's history in the table and a batch's events placed into it in sequence order.

The table is the state: each version ``[__START_AT, __END_AT)`` of a key is read back as the upsert
that opened it at ``__START_AT`` (NULL: a snapshot row, before every event), a version's
``__END_AT`` that no version starts at as a delete there, and each of the key's tombstones (every
delete is recorded, :mod:`kafka_group.delta.keyed.tombstones`) as a delete. The batch's events join
them in sequence order; one sequence holds one event, and the later one wins a tie: a batch's
event over the table's (a partition's later offsets land in later batches), within a batch the
later Kafka offset. The history is then folded again, in sequence order:

- an upsert closes the open version at its sequence and opens one, unless ``tracked`` columns are
  given and none of them differs from the open version: then it updates the open version's other
  columns in place (AUTO CDC's ``track_history_column_list``);
- with ``ignore_null_updates``, a batch's upsert takes the open version's value for each of its
  NULL columns;
- a delete closes the open version (if any) at its sequence.

So an event older than the key's latest version splits the version it falls in (the event's
sequence ends the older part and starts its own version), and a late delete closes the version it
falls in early. The result does not depend on where batches are cut (docs/cdc.md), except where
an in-place update or a filled NULL of an earlier batch hid an event that a late event would have
ordered differently: the table keeps versions, not every event.

Callers: :class:`~kafka_group.delta.keyed.commit.KeyedOffsetStore` on the driver (SCD type 2's MERGE source),
and Spark tasks (:mod:`kafka_group.delta.keyed.scd2_tasks`: the MERGE as Spark tasks, one key at a time).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection, Dict, Hashable, Iterable, List, Mapping, Optional, Sequence, Tuple

from kafka_group.delta.keyed.change_rules import DELETE_COLUMN, END_COLUMN, OFFSET, SEQ, START_COLUMN

__all__ = ["History", "group_by_key", "order_key", "place_events"]

Key = Tuple[Hashable, ...]


def order_key(sequence: Any) -> Any:
    """A sequence as Python orders it: a struct (a dict, its fields in order) compared field by field,
    NULL fields first, as Spark orders structs; ``None`` (a snapshot row's) before every sequence."""
    if sequence is None:
        return (0,)
    if isinstance(sequence, Mapping):
        return (1, tuple((v is not None, order_key(v)[1] if v is not None else 0) for v in sequence.values()))
    return (1, sequence)


@dataclass
class _Event:
    sequence: Any
    delete: bool
    values: Dict[str, Any]
    new: bool  # the batch's (its NULLs may be filled: ignore_null_updates)


@dataclass(frozen=True)
class History:
    """A key's new versions (every column, ``__START_AT`` and ``__END_AT``), and whether they differ from
    the table's (when not, the key is left as it is)."""

    rows: List[Dict[str, Any]]
    changed: bool


def place_events(rows: Sequence[Mapping[str, Any]], tombstones: Iterable[Any], events: Sequence[Mapping[str, Any]],
                 *, columns: Sequence[str], keys: Sequence[str], tracked: Optional[Collection[str]] = None,
                 ignore_null_updates: bool = False) -> History:
    """The versions of one key after ``events`` (see the module docstring).

    Parameters
    ----------
    rows : sequence of mapping
        The key's rows in the table: ``columns``, ``__START_AT``, ``__END_AT``.
    tombstones : iterable
        The sequences of the key's recorded deletes.
    events : sequence of mapping
        The batch's events of the key: the stored columns (a subset of ``columns``), ``__kg_seq``,
        ``__kg_delete`` and ``__kg_offset`` (orders events of one sequence: the later wins).
    columns : sequence of str
        The table's data columns (keys included); a column an event lacks is NULL in its version.
    keys : sequence of str
        The key columns (never filled, never compared).
    tracked : collection of str, optional
        The columns whose change makes a new version; None: every upsert does.
    ignore_null_updates : bool
        Fill the batch's NULLs from the open version.
    """
    timeline: Dict[Any, _Event] = {}
    starts = {order_key(r[START_COLUMN]) for r in rows}
    for r in rows:
        timeline[order_key(r[START_COLUMN])] = _Event(r[START_COLUMN], False, {c: r[c] for c in columns}, False)
    for r in rows:  # an end no version starts at: a delete there
        end = r[END_COLUMN]
        if end is not None and order_key(end) not in starts:
            timeline[order_key(end)] = _Event(end, True, {}, False)
    for t in tombstones:  # a version at a tombstone's sequence is a later upsert of that sequence: it won
        timeline.setdefault(order_key(t), _Event(t, True, {}, False))
    for e in sorted(events, key=lambda e: (order_key(e[SEQ]), e[OFFSET])):
        values = {c: e.get(c) for c in columns}
        timeline[order_key(e[SEQ])] = _Event(e[SEQ], bool(e[DELETE_COLUMN]), values, True)
    versions: List[Dict[str, Any]] = []
    current: Optional[Dict[str, Any]] = None
    for at in sorted(timeline):
        event = timeline[at]
        if event.delete:
            if current is not None:
                current[END_COLUMN] = event.sequence
                current = None
            continue
        values = dict(event.values)
        if event.new and ignore_null_updates and current is not None:
            values = {c: current[c] if v is None and c not in keys else v for c, v in values.items()}
        if current is not None and tracked is not None and all(values[c] == current[c] for c in tracked):
            current.update(values)  # no tracked column changed: the open version updated in place
            continue
        if current is not None:
            current[END_COLUMN] = event.sequence
        current = {**values, START_COLUMN: event.sequence, END_COLUMN: None}
        versions.append(current)
    old = sorted((_row_key(r, columns) for r in rows), key=repr)
    changed = old != sorted((_row_key(r, columns) for r in versions), key=repr)
    return History(versions, changed)


def _row_key(row: Mapping[str, Any], columns: Sequence[str]) -> Tuple[Any, ...]:
    return tuple(row[c] for c in columns) + (row[START_COLUMN], row[END_COLUMN])


def group_by_key(records: Iterable[Mapping[str, Any]], keys: Sequence[str]) -> Dict[Key, List[Mapping[str, Any]]]:
    """``records`` grouped by their key's values (in their order)."""
    out: Dict[Key, List[Mapping[str, Any]]] = {}
    for r in records:
        out.setdefault(tuple(r[k] for k in keys), []).append(r)
    return out
