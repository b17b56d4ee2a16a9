"""Bounds on what one Avro payload makes the decoder do, checked before fastavro reads it.

fastavro's work is bounded by a payload's bytes except in two cases, both found by a review
(issue 33) and both set by bytes anyone who can produce to the topic controls:

* an array of items that take no bytes (``null``, a record of such fields or of none, ``fixed`` of
  size 0): its block count is free, and 11 bytes claiming 2^40 nulls kept fastavro looping for
  hours, reading nothing;
* nesting deeper than fastavro's recursion can take (a recursive writer schema, or one nested very
  deep through its references): 100,000 nested nodes in 200 KB crashed the interpreter (SIGSEGV).

For writer schemas with either (:func:`bounds_for`; other schemas are not scanned), each payload is
first walked by :meth:`Bounds.check`, which reads its block counts, lengths and union branches
without building values, iteratively: a payload with more than :data:`EMPTY_ITEMS_BASE` plus
:data:`EMPTY_ITEMS_PER_BYTE` per byte zero-byte items, or nested deeper than :data:`MAX_NESTING`,
is a bad record naming the place (``badRecords=quarantine`` lands it). Valid data within the
bounds decodes as before.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Set, Tuple

from kafka_group.registry.avro_names import Canonical, place

__all__ = ["Bounds", "bounds_for", "MAX_NESTING", "EMPTY_ITEMS_BASE", "EMPTY_ITEMS_PER_BYTE"]

#: The deepest nesting (records, unions, arrays, maps within each other) of one decoded payload.
MAX_NESTING = 500
#: Zero-byte array items one payload may hold: this many, plus EMPTY_ITEMS_PER_BYTE per byte of it.
EMPTY_ITEMS_BASE = 1024
EMPTY_ITEMS_PER_BYTE = 8

_FIXED_SIZE = {"boolean": 1, "float": 4, "double": 8}
_VARINT = ("int", "long", "enum")


def bounds_for(writer: Canonical) -> Optional["Bounds"]:
    """The payload check a writer schema needs, or None (no zero-byte array items, no deep nesting)."""
    shape = _Shape(writer.named)
    try:
        if not shape.has_empty_items(writer.schema) and shape.depth(writer.schema) <= MAX_NESTING:
            return None
    except RecursionError:  # nested deeper than Python's own stack: checked like a recursive type
        pass
    return Bounds(writer.schema, writer.named, shape)


class _Shape:
    """What a writer schema can do: which types take no bytes, how deep it nests (memoized)."""

    def __init__(self, named: Mapping[str, Any]) -> None:
        self._named = named
        self._empty: Dict[str, bool] = {}
        self._depth: Dict[str, int] = {}
        self._seen: Set[int] = set()

    def deref(self, schema: Any) -> Any:
        return self._named.get(schema, schema) if isinstance(schema, str) else schema

    def empty(self, schema: Any) -> bool:
        """Whether values of ``schema`` can take no bytes (a recursive record counts as empty)."""
        name = schema if isinstance(schema, str) else schema.get("name") if isinstance(schema, dict) else None
        if isinstance(name, str) and name in self._named:
            if name not in self._empty:
                self._empty[name] = True  # while in progress: recursion without bytes is unbounded
                self._empty[name] = self._empty_of(self._named[name])
            return self._empty[name]
        return self._empty_of(schema)

    def _empty_of(self, schema: Any) -> bool:
        kind = schema.get("type") if isinstance(schema, dict) else schema
        if kind == "null":
            return True
        if kind == "fixed":
            return bool(schema.get("size") == 0)
        if kind in ("record", "error"):
            return all(self.empty(f["type"]) for f in schema.get("fields", []))
        return False

    def has_empty_items(self, schema: Any) -> bool:
        """Whether an array of items that take no bytes is reachable in ``schema``."""
        stack = [schema]
        while stack:
            node = self.deref(stack.pop())
            if id(node) in self._seen or not isinstance(node, (dict, list)):
                continue
            self._seen.add(id(node))
            if isinstance(node, list):
                stack.extend(node)
            elif node.get("type") == "array":
                if self.empty(node["items"]):
                    return True
                stack.append(node["items"])
            elif node.get("type") == "map":
                stack.append(node["values"])
            elif node.get("type") in ("record", "error"):
                stack.extend(f["type"] for f in node.get("fields", []))
        return False

    def depth(self, schema: Any, active: Optional[Set[str]] = None) -> int:
        """How deep values of ``schema`` nest; more than MAX_NESTING for a recursive type."""
        active = set() if active is None else active
        if isinstance(schema, str) and schema in self._named:
            if schema in active:
                return MAX_NESTING + 1
            if schema not in self._depth:
                active.add(schema)
                self._depth[schema] = min(self.depth(self._named[schema], active), MAX_NESTING + 1)
                active.discard(schema)
            return self._depth[schema]
        if isinstance(schema, list):
            return 1 + max((self.depth(b, active) for b in schema), default=0)
        if isinstance(schema, dict):
            if schema.get("name") in self._named and schema.get("type") in ("record", "error") \
                    and schema["name"] not in active:
                return self.depth(schema["name"], active)
            kind = schema.get("type")
            if kind in ("record", "error"):
                return 1 + max((self.depth(f["type"], active) for f in schema.get("fields", [])), default=0)
            if kind == "array":
                return 1 + self.depth(schema["items"], active)
            if kind == "map":
                return 1 + self.depth(schema["values"], active)
        return 0


class _Bad(Exception):
    pass


class Bounds:
    """Walks one writer schema's payloads within the bounds (see the module's notes)."""

    def __init__(self, schema: Any, named: Mapping[str, Any], shape: _Shape) -> None:
        self._schema, self._named, self._shape = schema, named, shape

    def check(self, data: bytes) -> Optional[str]:
        """Why ``data`` is not decoded, or None when it is within the bounds (it may still not decode)."""
        try:
            self._walk(data)
        except _Bad as exc:
            return str(exc)
        except RecursionError:
            return f"Avro writer schema nests deeper than {MAX_NESTING} levels: its records are not decoded"
        except (ValueError, TypeError) as exc:  # a fixed size that is no number: fastavro cannot read it either
            return f"Avro writer schema cannot be read: {type(exc).__name__}: {exc}"[:500]
        return None

    def _walk(self, data: bytes) -> None:
        end = len(data)
        budget = EMPTY_ITEMS_BASE + EMPTY_ITEMS_PER_BYTE * end
        empty = 0
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
                    empty += count
                    if empty > budget:
                        raise _Bad(
                            f"Avro payload of {end} bytes claims more than {budget:,} array items that take no bytes "
                            f"(null, empty records, fixed of size 0) at {where}: not decoded (at most "
                            f"{EMPTY_ITEMS_BASE:,} plus {EMPTY_ITEMS_PER_BYTE} per byte of the record)")
                    continue
                if count > end - pos:
                    raise _Bad(f"Avro payload of {end} bytes claims {count:,} items at {where}, more than its bytes hold")
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
            if isinstance(schema, list):
                branch = varint()
                if not 0 <= branch < len(schema):
                    raise _Bad(f"Avro payload has union branch {branch} at {where}, which has {len(schema)}")
                stack.append(("value", schema[branch], depth + 1, where))
                continue
            kind = schema.get("type") if isinstance(schema, dict) else schema
            if kind in _VARINT:
                varint()
            elif kind in _FIXED_SIZE:
                pos += _FIXED_SIZE[kind]
            elif kind in ("string", "bytes"):
                size = varint()
                if size < 0 or size > end - pos:
                    raise _Bad(f"Avro payload of {end} bytes claims {size:,} bytes at {where}")
                pos += size
            elif kind == "fixed":
                pos += int(schema.get("size", 0))
            elif kind in ("record", "error"):
                for field in reversed(schema.get("fields", [])):
                    stack.append(("value", field["type"], depth + 1, place(where, "." + field["name"])))
            elif kind == "array":
                stack.append(("blocks", schema["items"], False, depth + 1, where))
            elif kind == "map":
                stack.append(("blocks", schema["values"], True, depth + 1, where))
            if pos > end:
                raise _Bad(f"Avro payload of {end} bytes ends inside the value at {where}")
