"""The plan the compiled Avro decoder (``kafka_group._native.avro_decode``) reads payloads by.

The Python codec (:mod:`kafka_group.registry.avro_codec`) is the reference; the compiled decoder
is its fast path for the schemas it reads exactly. A plan is made only when:

* the writer schema is the reader schema (the same text and references: no schema resolution,
  no aliases, no defaults; a writer of another version is decoded by the Python codec);
* the writer needs no payload walk of :mod:`~kafka_group.registry.avro_bounds` other than its
  decimals' and its items' Arrow slots, which the compiled decoder checks itself (no arrays of
  zero-byte items, no recursion, no nesting deeper than its bound);
* every type in it is one of: ``boolean``, ``int``, ``long``, ``float``, ``double``, ``string``,
  ``bytes``, ``fixed`` (of 1 byte or more), ``enum``, ``record``, ``array``, ``map``, a union of
  ``null`` and one type, and the logical types ``date``, ``timestamp-millis``/``-micros``,
  ``local-timestamp-millis``/``-micros`` and ``decimal`` (valid, of ``bytes`` or a ``fixed`` of at
  most 16 bytes); other logical types read as their underlying type, as in the reference.

Anything else has no plan (None) and its records are decoded by the Python codec. Within a plan,
the compiled decoder hands back to the Python codec each record it does not decode exactly (see
``native/src/avro.rs``), so values and per-record errors are the reference's.

A plan is a list of nodes ``(kind, a, b, c, children, names)``, node 0 the top level; each named
type is one node, however often it is used.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Set, Tuple

from kafka_group.registry.avro_names import Canonical

__all__ = ["PlanNode", "native_plan"]

#: One node of a plan: (kind, a, b, c, children, names); see ``native/src/avro.rs``.
PlanNode = Tuple[str, int, int, int, List[int], List[str]]

_PRIMITIVES = ("boolean", "int", "long", "float", "double", "string", "bytes")
_TIMESTAMPS: Mapping[str, Tuple[int, int]] = {  # (is UTC, is millis)
    "timestamp-millis": (1, 1), "timestamp-micros": (1, 0),
    "local-timestamp-millis": (0, 1), "local-timestamp-micros": (0, 0),
}
#: The widest fixed the compiled decoder reads (a larger one has no plan).
MAX_FIXED = 1 << 20


class _Unsupported(Exception):
    pass


def native_plan(schema: Canonical) -> Optional[List[PlanNode]]:
    """The plan of ``schema`` (canonical, names resolved) in the column type
    :func:`~kafka_group.registry.avro_types.avro_arrow_type` gives it, or None when a type in it is
    not one the compiled decoder reads (see the module's notes)."""
    try:
        return _Planner(schema.named).plan(schema.schema)
    except (_Unsupported, RecursionError, KeyError, TypeError, AttributeError):
        return None


class _Planner:
    def __init__(self, named: Mapping[str, Any]) -> None:
        self._named = named
        self._nodes: List[Optional[PlanNode]] = []
        self._done: Dict[str, int] = {}
        self._active: Set[str] = set()

    def plan(self, schema: Any) -> List[PlanNode]:
        self.node(schema)
        nodes = [n for n in self._nodes if n is not None]
        if len(nodes) != len(self._nodes):
            raise _Unsupported()
        return nodes

    def _add(self, kind: str, a: int = 0, b: int = 0, c: int = 0, children: Optional[List[int]] = None,
             names: Optional[List[str]] = None) -> int:
        self._nodes.append((kind, a, b, c, children or [], names or []))
        return len(self._nodes) - 1

    def node(self, schema: Any) -> int:
        if isinstance(schema, str):
            if schema in _PRIMITIVES:
                return self._add(schema)
            if schema not in self._named or schema in self._active:
                raise _Unsupported()  # null, an unknown name, a recursive type
            found = self._done.get(schema)
            if found is None:
                self._active.add(schema)
                found = self._of(self._named[schema])
                self._active.discard(schema)
                self._done[schema] = found
            return found
        if isinstance(schema, list):
            if len(schema) != 2 or schema.count("null") != 1:
                raise _Unsupported()
            null = schema.index("null")
            index = len(self._nodes)
            self._nodes.append(None)  # node 0 is the top level: its children come after it
            child = self.node(schema[1 - null])
            self._nodes[index] = ("nullable", null, 0, 0, [child], [])
            return index
        if isinstance(schema, dict) and isinstance(schema.get("name"), str) and schema["name"] in self._named \
                and schema.get("type") in ("record", "error", "enum", "fixed"):
            return self.node(schema["name"])
        return self._of(schema)

    def _of(self, schema: Any) -> int:
        if not isinstance(schema, dict):
            raise _Unsupported()
        kind, logical = schema["type"], schema.get("logicalType")
        if logical is not None:
            typed = self._logical(schema, kind, logical)
            if typed is not None:
                return typed
        if kind in ("record", "error"):
            fields = schema["fields"]
            if not isinstance(fields, list) or not fields:
                raise _Unsupported()
            index = len(self._nodes)
            self._nodes.append(None)
            children = [self.node(f["type"]) for f in fields]
            names = [f["name"] for f in fields]
            if not all(isinstance(n, str) for n in names):
                raise _Unsupported()
            self._nodes[index] = ("record", 0, 0, 0, children, names)
            return index
        if kind == "enum":
            symbols = schema["symbols"]
            if not isinstance(symbols, list) or not symbols or not all(isinstance(s, str) for s in symbols):
                raise _Unsupported()
            return self._add("enum", names=list(symbols))
        if kind == "fixed":
            size = schema["size"]
            if type(size) is not int or not 1 <= size <= MAX_FIXED:
                raise _Unsupported()
            return self._add("fixed", size)
        if kind in ("array", "map"):
            index = len(self._nodes)
            self._nodes.append(None)
            child = self.node(schema["items"] if kind == "array" else schema["values"])
            self._nodes[index] = (kind, 0, 0, 0, [child], [])
            return index
        return self.node(kind)

    def _logical(self, schema: Mapping[str, Any], kind: Any, logical: Any) -> Optional[int]:
        """The node of a logical type the column types (as avro_types' FINAL stage does), None for
        one read as its underlying type."""
        if logical == "date" and kind == "int":
            return self._add("date")
        if logical in _TIMESTAMPS and kind == "long":
            utc, millis = _TIMESTAMPS[logical]
            return self._add("timestamp", utc, millis)
        if logical == "decimal" and kind in ("bytes", "fixed"):
            precision, scale = schema.get("precision"), schema.get("scale", 0)
            if type(precision) is not int or type(scale) is not int or not 0 <= scale <= precision \
                    or not 1 <= precision <= 38:
                raise _Unsupported()  # an invalid decimal, or one the codec refuses: the reference's
            size = 0
            if kind == "fixed":
                size = schema["size"]
                if type(size) is not int or not 1 <= size <= 16:
                    raise _Unsupported()
            return self._add("decimal", precision, scale, size)
        return None
