"""Bounds on what one Avro payload makes the decoder do, checked before fastavro reads it.

fastavro's work is bounded by a payload's bytes except in three cases, found by reviews
(issues 33, 35) and set by bytes anyone who can produce to the topic controls:

* values that take no bytes (``null``, a record of such fields or of none, ``fixed`` of size 0):
  an array's block count is free, and 11 bytes claiming 2^40 nulls kept fastavro looping for
  hours; 12.5 KB claiming 100,000 records of 4,000 null fields took 9.2 s; a record of two copies
  of the level below, 22 levels deep, is 4 million nodes in no bytes at all;
* nesting deeper than fastavro's recursion can take (a recursive writer schema, or one nested very
  deep through its references): 100,000 nested nodes in 200 KB crashed the interpreter (SIGSEGV);
* a ``decimal`` whose bytes are longer than its precision holds: fastavro's conversion is
  quadratic in them (1 MB of a ``decimal(10, 2)`` took 96 s, then failed);
* array or map items that fill many Arrow slots in few bytes: a null of a 1,000-field record is
  1 byte but a slot in each of its fields, so 20,004 bytes of them took 152 MiB in this codec and
  154 MiB in the compiled decoder (avrobound review).

For writer schemas with any of them (:func:`bounds_for`, from what :mod:`~kafka_group.registry.avro_shape`
finds in the schema; other schemas are not scanned), each
payload is first walked by :meth:`Bounds.check`, which reads its block counts, lengths and union
branches without building values, iteratively. A payload is a bad record naming the place
(``badRecords=quarantine`` lands it) when its zero-byte values hold more than
:data:`EMPTY_ITEMS_BASE` plus :data:`EMPTY_ITEMS_PER_BYTE` per byte schema nodes (each value is
charged the nodes of its type's tree, counted once per type), when it nests deeper than
:data:`MAX_NESTING`, or when a decimal's value needs more bits than its precision's digits (at most
:data:`MAX_DECIMAL_DIGITS`, what Arrow's decimal256 holds; a value padded with sign bytes is
read as Java reads it; for a writer checked for its decimals alone, payloads of
:data:`DECIMALS_CHECKED_FROM` bytes or more), or when its array and map items fill more than
:data:`SLOTS_BASE` plus :data:`SLOTS_PER_BYTE` per byte Arrow slots (each item charged the leaf
count of its type, a list or map counted as one, a map's key as one more, an enum as its longest
symbol's bytes in slots of 8). Only writers with items of
more than SLOTS_PER_BYTE slots per byte they take at least are walked for their slots (no other
payload can exceed the budget), and only payloads long enough to; the compiled decoder reads them
(:attr:`Bounds.native`: it charges the same slots and hands back a record beyond them). A ``fixed``
decimal of more than :data:`MAX_DECIMAL_BYTES` bytes is a ConfigError. Valid data within the bounds
decodes as before.
"""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Tuple

from kafka_group.errors import ConfigError
from kafka_group.registry.avro_decimals import MAX_DECIMAL_BYTES, MAX_DECIMAL_DIGITS, decimal_problem
from kafka_group.registry.avro_names import Canonical, place
from kafka_group.registry.avro_shape import FIXED_SIZE, UNBOUNDED, Shape

__all__ = ["Bounds", "bounds_for", "MAX_NESTING", "EMPTY_ITEMS_BASE", "EMPTY_ITEMS_PER_BYTE",
           "SLOTS_BASE", "SLOTS_PER_BYTE",
           "MAX_DECIMAL_DIGITS", "MAX_DECIMAL_BYTES",
           "DECIMALS_CHECKED_FROM"]

#: Arrow slots one payload's array and map items may fill: this many (about 0.5 MiB of Arrow at the
#: 8 bytes a slot takes), plus SLOTS_PER_BYTE per byte of it. Items of records of numbers, strings and
#: nullable primitives fill at most about one slot per byte they take, so ordinary writers are far below
#: it (and not walked); a payload within it costs at most ~64 bytes of Arrow per byte.
SLOTS_BASE = 65_536
SLOTS_PER_BYTE = 8
#: The deepest nesting (records, unions, arrays, maps within each other) of one decoded payload.
MAX_NESTING = 500
#: Schema nodes one payload's zero-byte values may hold: this many, plus EMPTY_ITEMS_PER_BYTE per byte of it.
EMPTY_ITEMS_BASE = 1024
EMPTY_ITEMS_PER_BYTE = 8
#: Payloads shorter than this are not walked for their decimals alone: fastavro's conversion of a
#: decimal this long costs microseconds (the walk would cost more than the decode), and a value
#: wider than its precision is refused by Arrow record by record.
DECIMALS_CHECKED_FROM = 256
_VARINT = ("int", "long", "enum")


def bounds_for(writer: Canonical) -> Optional["Bounds"]:
    """The payload check a writer schema needs, or None (no zero-byte array items or large zero-byte
    values, no decimals, no deep nesting).

    Raises
    ------
    ConfigError
        A ``fixed`` decimal of more than :data:`MAX_DECIMAL_BYTES` bytes.
    """
    shape = Shape(writer.named, max_depth=MAX_NESTING, max_empty_nodes=EMPTY_ITEMS_BASE)
    try:
        empty, decimals = shape.scan(writer.schema)
        if not empty and shape.depth(writer.schema) <= MAX_NESTING:
            walked_from = DECIMALS_CHECKED_FROM if decimals else UNBOUNDED
            if shape.dense > SLOTS_PER_BYTE:  # payloads that may fill more slots than the budget
                walked_from = min(walked_from, SLOTS_BASE // (shape.dense - SLOTS_PER_BYTE) + 1)
            return Bounds(writer.schema, writer.named, shape, walked_from) if walked_from < UNBOUNDED else None
    except RecursionError:  # nested deeper than Python's own stack: checked like a recursive type
        pass
    return Bounds(writer.schema, writer.named, shape)


class _Bad(Exception):
    pass


class Bounds:
    """Walks one writer schema's payloads within the bounds (see the module's notes)."""

    def __init__(self, schema: Any, named: Mapping[str, Any], shape: Shape, walked_from: int = 0) -> None:
        self._schema, self._named, self._shape, self._walked_from = schema, named, shape, walked_from

    @property
    def decimals_only(self) -> bool:
        """Whether this writer is walked for its decimals alone (no zero-byte items, no deep nesting, no
        items of more than :data:`SLOTS_PER_BYTE` slots per byte)."""
        return self._walked_from == DECIMALS_CHECKED_FROM and self._shape.dense <= SLOTS_PER_BYTE

    @property
    def native(self) -> bool:
        """Whether the compiled decoder may read this writer: it is walked for its decimals or its items'
        slots alone, which that decoder checks itself (handing back a record beyond them)."""
        return self._walked_from > 0

    def check(self, data: bytes) -> Optional[str]:
        """Why ``data`` is not decoded, or None when it is within the bounds (it may still not decode)."""
        if len(data) < self._walked_from:
            return None
        try:
            self._walk(data)
        except _Bad as exc:
            return str(exc)
        except RecursionError:
            return f"Avro writer schema nests deeper than {MAX_NESTING} levels: its records are not decoded"
        except (ValueError, TypeError, KeyError, AttributeError, ConfigError) as exc:  # fastavro cannot read it either
            return f"Avro writer schema cannot be read: {type(exc).__name__}: {exc}"[:500]
        return None

    def _walk(self, data: bytes) -> None:
        end = len(data)
        budget = EMPTY_ITEMS_BASE + EMPTY_ITEMS_PER_BYTE * end
        empty = 0
        slot_budget = SLOTS_BASE + SLOTS_PER_BYTE * end
        slots = 0
        pos = 0
        # tasks: (schema, depth, where); ("blocks", items, is_map, depth, where); ("repeat", ...)
        stack: List[Tuple[Any, ...]] = [("value", self._schema, 0, "the top level")]

        def varint() -> int:
            nonlocal pos
            shift = result = 0
            while True:
                if pos >= end or shift > 63:
                    raise _Bad(f"Avro payload of {end} bytes ends inside a number")
                byte = data[pos]
                pos += 1
                result |= (byte & 0x7F) << shift
                if byte < 0x80:
                    return (result >> 1) ^ -(result & 1)
                shift += 7

        while stack:
            task = stack.pop()
            tag = task[0]
            if tag == "blocks":
                _, items, is_map, depth, where = task
                count = varint()
                if count == 0:
                    continue
                if count < 0:
                    count = -count
                    varint()  # the block's size in bytes
                stack.append(task)
                if not is_map and self._shape.empty(items):
                    empty += count * self._shape.cost(items)
                    if empty > budget:
                        raise _Bad(_too_many(end, budget, where))
                    continue
                if count > end - pos:
                    raise _Bad(f"Avro payload of {end} bytes claims {count:,} items at {where}, more than its bytes hold")
                slots += count * (self._shape.slots(items) + is_map)
                if slots > slot_budget:
                    raise _Bad(_too_wide(end, slot_budget, where))
                stack.append(("repeat", items, is_map, count, depth, where))
                continue
            if tag == "repeat":
                _, items, is_map, count, depth, where = task
                if count > 1:
                    stack.append(("repeat", items, is_map, count - 1, depth, where))
                stack.append(("value", items, depth, where))
                if is_map:
                    stack.append(("value", "string", depth, where))
                continue
            _, schema, depth, where = task
            if depth > MAX_NESTING:
                raise _Bad(f"Avro payload is nested deeper than {MAX_NESTING} levels at {where}: not decoded (a "
                           "recursive writer schema; deeper records would crash the decoder)")
            schema = self._shape.deref(schema)
            if not isinstance(schema, list) and self._shape.empty(schema):  # no bytes: charged, not walked
                empty += self._shape.cost(schema)
                if empty > budget:
                    raise _Bad(_too_many(end, budget, where))
                continue
            if isinstance(schema, list):
                branch = varint()
                if not 0 <= branch < len(schema):
                    raise _Bad(f"Avro payload has union branch {branch} at {where}, which has {len(schema)}")
                stack.append(("value", schema[branch], depth + 1, where))
                continue
            kind = schema.get("type") if isinstance(schema, dict) else schema
            if kind in _VARINT:
                varint()
            elif kind in FIXED_SIZE:
                pos += FIXED_SIZE[kind]
            elif kind in ("string", "bytes"):
                size = varint()
                if size < 0 or size > end - pos:
                    raise _Bad(f"Avro payload of {end} bytes claims {size:,} bytes at {where}")
                if kind == "bytes":
                    _check_decimal(decimal_problem(schema, data, pos, size, where))
                pos += size
            elif kind == "fixed":
                size = int(schema.get("size", 0))
                if pos + size <= end:
                    _check_decimal(decimal_problem(schema, data, pos, size, where))
                pos += size
            elif kind in ("record", "error"):
                for field in reversed(schema.get("fields", [])):
                    stack.append(("value", field["type"], depth + 1, place(where, "." + field["name"])))
            elif kind == "array":
                stack.append(("blocks", schema["items"], False, depth + 1, where))
            elif kind == "map":
                stack.append(("blocks", schema["values"], True, depth + 1, where))
            if pos > end:
                raise _Bad(f"Avro payload of {end} bytes ends inside the value at {where}")


def _too_many(end: int, budget: int, where: str) -> str:
    return (f"Avro payload of {end} bytes claims values that take no bytes (null, empty records, fixed of size 0) "
            f"of more than {budget:,} schema nodes at {where}: not decoded (at most {EMPTY_ITEMS_BASE:,} plus "
            f"{EMPTY_ITEMS_PER_BYTE} per byte of the record, each value counted by the nodes of its type)")


def _too_wide(end: int, budget: int, where: str) -> str:
    return (f"Avro payload of {end} bytes has array or map items filling more than {budget:,} Arrow slots at "
            f"{where}: not decoded (at most {SLOTS_BASE:,} plus {SLOTS_PER_BYTE} per byte of the record, each item "
            "counted by the fields of its type: a null of a wide record is one byte but a slot in each field)")


def _check_decimal(problem: Optional[str]) -> None:
    if problem is not None:
        raise _Bad(problem)
