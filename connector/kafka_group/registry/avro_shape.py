"""What an Avro writer schema can make a payload do, computed once per writer for its payload bounds.

Which types take no bytes and how many schema nodes their values hold, how many Arrow slots a value fills
and the fewest bytes it takes, how deep values nest, and whether the schema reaches a decimal
(:class:`Shape`, memoized per named type). The bounds themselves, and the walk of each payload within them,
are :mod:`kafka_group.registry.avro_bounds`'s.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Mapping, Optional, Set, Tuple

from kafka_group.registry.avro_decimals import decimal_bits

__all__ = ["FIXED_SIZE", "Shape", "UNBOUNDED", "enum_slots"]

#: The cost of a zero-byte type that contains itself: more than any budget (fastavro would recurse for ever).
UNBOUNDED = 1 << 62
#: The bytes of Avro's fixed-size primitives.
FIXED_SIZE = {"boolean": 1, "float": 4, "double": 8}


def enum_slots(symbols: Any) -> int:
    """The slots an enum value fills: its longest symbol's UTF-8 bytes in slots of 8 bytes, 1 at least
    (its symbol is copied into the column: a 1-byte item of a long symbol is many bytes of Arrow).
    The compiled decoder charges the same (``native/src/avro_column.rs``, ``slots_of``)."""
    longest = max((len(s.encode("utf-8")) for s in symbols if isinstance(s, str)), default=0) \
        if isinstance(symbols, list) else 0
    return max(1, -(-longest // 8))


class Shape:
    """What a writer schema can do: which types take no bytes, how deep it nests (memoized).

    Parameters
    ----------
    named : mapping of str to schema
        The writer's named types, by full name.
    max_depth : int
        The nesting :meth:`depth` counts up to (a recursive type is one level more).
    max_empty_nodes : int
        The nodes of a zero-byte value past which :meth:`scan` reports it.
    """

    def __init__(self, named: Mapping[str, Any], *, max_depth: int, max_empty_nodes: int) -> None:
        self._named = named
        self._max_depth = max_depth
        self._max_empty_nodes = max_empty_nodes
        self._empty: Dict[str, bool] = {}
        self._cost: Dict[str, int] = {}
        self._depth: Dict[str, int] = {}
        self._slots: Dict[str, int] = {}
        self._least: Dict[str, int] = {}
        self._seen: Set[int] = set()
        self._pending: Dict[Tuple[int, int, str], int] = {}
        #: The most slots per byte any array or map item of the scanned schema fills (set by :meth:`scan`).
        self.dense = 0

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

    def cost(self, schema: Any) -> int:
        """The nodes of the tree of a zero-byte type (each named type counted once per use, computed once;
        a zero-byte type within itself never ends)."""
        return self._memo(schema, self._cost, self._cost_of, UNBOUNDED)

    def _cost_of(self, schema: Any) -> int:
        kind = schema.get("type") if isinstance(schema, dict) else schema
        if kind in ("record", "error"):
            return min(1 + sum(self.cost(f["type"]) for f in schema.get("fields", [])), UNBOUNDED)
        return 1

    def _memo(self, schema: Any, memo: Dict[str, int], of: Callable[[Any], int], busy: int) -> int:
        """``of(schema)``, computed once per named type; ``busy`` while in progress (a recursive type),
        seen by this thread only (a walk of another thread on the shared codec never reads it)."""
        name = schema if isinstance(schema, str) else schema.get("name") if isinstance(schema, dict) else None
        if not (isinstance(name, str) and name in self._named):
            return of(schema)
        found = memo.get(name)
        if found is None:
            key = (threading.get_ident(), id(memo), name)
            if key in self._pending:
                return self._pending[key]
            self._pending[key] = busy
            try:
                found = min(of(self._named[name]), UNBOUNDED)
            finally:
                del self._pending[key]
            memo[name] = found
        return found

    def slots(self, schema: Any) -> int:
        """The Arrow slots one value of ``schema`` fills: 1, a record's fields' and its own, a union's
        largest branch, an enum's longest symbol's (:func:`enum_slots`; a list or map is 1: its items
        are charged as they are read)."""
        return self._memo(schema, self._slots, self._slots_of, 1)

    def _slots_of(self, schema: Any) -> int:
        if isinstance(schema, list):
            return max((self.slots(b) for b in schema), default=1)
        if isinstance(schema, dict) and schema.get("type") in ("record", "error"):
            return min(1 + sum(self.slots(f["type"]) for f in schema.get("fields", [])), UNBOUNDED)
        if isinstance(schema, dict) and schema.get("type") == "enum":
            return enum_slots(schema.get("symbols"))
        return 1

    def least(self, schema: Any) -> int:
        """The fewest bytes a value of ``schema`` takes (a union: its branch index alone)."""
        return self._memo(schema, self._least, self._least_of, 0)

    def _least_of(self, schema: Any) -> int:
        if isinstance(schema, list):
            return 1
        kind = schema.get("type") if isinstance(schema, dict) else schema
        if kind in ("record", "error"):
            return sum(self.least(f["type"]) for f in schema.get("fields", []))
        if kind == "fixed":
            size = schema.get("size")
            return size if isinstance(size, int) and size > 0 else 0
        return 0 if kind == "null" else FIXED_SIZE.get(kind, 1) if isinstance(kind, str) else 1

    def _density(self, items: Any, key: int) -> None:
        """Records the slots per byte of an array's items (key 0) or a map's entries (key 1)."""
        slots, least = self.slots(items) + key, self.least(items) + key
        self.dense = max(self.dense, -(-slots // least) if least else UNBOUNDED)

    def scan(self, schema: Any) -> Tuple[bool, bool]:
        """Whether ``schema`` reaches an array of zero-byte items or a zero-byte value of more than
        ``max_empty_nodes`` nodes; whether it reaches a decimal (both checked by
        :class:`~kafka_group.registry.avro_bounds.Bounds`)."""
        decimals = False
        stack = [schema]
        while stack:
            node = self.deref(stack.pop())
            if id(node) in self._seen or not isinstance(node, (dict, list)):
                continue
            self._seen.add(id(node))
            if isinstance(node, list):
                stack.extend(node)
            elif decimal_bits(node) is not None:
                decimals = True
            elif self.empty(node) and self.cost(node) > self._max_empty_nodes:
                return True, decimals
            elif node.get("type") == "array":
                if self.empty(node["items"]):
                    return True, decimals
                self._density(node["items"], 0)
                stack.append(node["items"])
            elif node.get("type") == "map":
                self._density(node["values"], 1)
                stack.append(node["values"])
            elif node.get("type") in ("record", "error"):
                stack.extend(f["type"] for f in node.get("fields", []))
        return False, decimals

    def depth(self, schema: Any, active: Optional[Set[str]] = None) -> int:
        """How deep values of ``schema`` nest, up to ``max_depth`` (one more: deeper, or a recursive type)."""
        active = set() if active is None else active
        if isinstance(schema, str) and schema in self._named:
            if schema in active:
                return self._max_depth + 1
            if schema not in self._depth:
                active.add(schema)
                self._depth[schema] = min(self.depth(self._named[schema], active), self._max_depth + 1)
                active.discard(schema)
            return self._depth[schema]
        if isinstance(schema, list):
            return 1 + max((self.depth(b, active) for b in schema), default=0)
        if isinstance(schema, dict):
            name = schema.get("name")
            if isinstance(name, str) and name in self._named and schema.get("type") in ("record", "error") \
                    and name not in active:
                return self.depth(schema["name"], active)
            kind = schema.get("type")
            if kind in ("record", "error"):
                return 1 + max((self.depth(f["type"], active) for f in schema.get("fields", [])), default=0)
            if kind == "array":
                return 1 + self.depth(schema["items"], active)
            if kind == "map":
                return 1 + self.depth(schema["values"], active)
        return 0
