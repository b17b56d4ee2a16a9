"""Avro names as the specification resolves them, once per schema: the *canonical* form.

:func:`canonical` reads a schema and the schemas it references (each document once, references
first) and returns them with every name resolved, so that the types
(:mod:`~kafka_group.registry.avro_types`), the writer/reader pairing
(:mod:`~kafka_group.registry.avro_resolve`) and fastavro all see one table of named types keyed by
full name:

* a named type (record, error, enum, fixed) is known by its *full name*: a name with dots is its
  own full name; otherwise its ``namespace`` (``""`` is the null namespace) or, without one, the
  namespace of the enclosing named type, as Java's ``Schema.toString()`` relies on (a nested
  record inherits it and carries none);
* a reference by a bare name is looked up in the enclosing namespace, then in the null namespace
  (as Java's parser does); a name with dots is a full name; a referenced schema's named types are
  known by their full names to the schemas that reference it;
* in the canonical form each definition's ``name`` is its full name, written with a leading dot in
  the null namespace (``".Address"``), so that no enclosing namespace can capture it, and each
  reference is the definition's canonical name. fastavro reads the canonical form as the same
  schema. Aliases stay as written: fastavro pairs a writer's named type with a reader's by
  unqualified name or alias, and :mod:`~kafka_group.registry.avro_resolve` pairs them the same way.

A name defined twice, a name used but not defined (earlier), and a schema nested deeper than
:data:`MAX_DEPTH` are :class:`~kafka_group.errors.ConfigError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Sequence, Tuple

from kafka_group.errors import ConfigError

__all__ = ["Canonical", "canonical", "place", "shown", "unqualified", "MAX_DEPTH", "NAMED"]

#: The deepest nesting of one schema document (records, arrays, maps, unions) read.
MAX_DEPTH = 200
NAMED = ("record", "error", "enum", "fixed")
_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})


@dataclass(frozen=True)
class Canonical:
    """A schema and its references in canonical form, with the table of named types.

    ``references`` are in the order they are defined (a reference's references first);
    ``named`` maps each canonical full name to its canonical definition.
    """

    schema: Any
    references: Tuple[Any, ...]
    named: Dict[str, Any]


def canonical(schema: Any, references: Sequence[Any] = (), where: str = "the schema") -> Canonical:
    """The canonical form of ``schema`` (parsed JSON) after ``references`` (parsed JSON, in order).

    Raises
    ------
    ConfigError
        A name defined twice or not defined, a malformed named type, or nesting deeper than
        :data:`MAX_DEPTH`.
    """
    named: Dict[str, Any] = {}
    refs = tuple(_Walk(named, f"a reference of {where}").walk(doc, "", 0, "the top level") for doc in references)
    top = _Walk(named, where).walk(schema, "", 0, "the top level")
    return Canonical(top, refs, named)


def shown(name: str) -> str:
    """A canonical name as messages show it (the null namespace's leading dot removed)."""
    return name[1:] if name.startswith(".") else name


def place(at: str, part: str) -> str:
    """``at`` followed by ``part`` (``.field``, ``[]``, ``{}``), kept short: a hostile schema's long names
    nested deep must not make each place as long as all of them."""
    text = at + part
    return text if len(text) <= 200 else f"{text[:97]}...{text[-100:]}"


def unqualified(name: str) -> str:
    """The last part of a (canonical) full name."""
    return name.rsplit(".", 1)[-1]


def _key(full: str) -> str:
    return full if "." in full else "." + full


class _Walk:
    def __init__(self, named: Dict[str, Any], where: str) -> None:
        self._named, self._where = named, where

    def walk(self, schema: Any, namespace: str, depth: int, at: str) -> Any:
        if depth > MAX_DEPTH:
            raise ConfigError(f"Avro schema {self._where} is nested deeper than {MAX_DEPTH} levels at {at}: "
                              "not read. Read the key/value raw")
        if isinstance(schema, str):
            return schema if schema in _PRIMITIVES else self._lookup(schema, namespace, at)
        if isinstance(schema, list):
            return [self.walk(branch, namespace, depth + 1, at) for branch in schema]
        if not isinstance(schema, dict) or "type" not in schema:
            raise ConfigError(f"not an Avro schema at {at} of {self._where}: {_short(schema)}")
        kind = schema["type"]
        if isinstance(kind, (dict, list)):
            return self.walk(kind, namespace, depth + 1, at)
        if kind in NAMED:
            return self._define(schema, namespace, depth, at)
        if kind == "array" and "items" in schema:
            return dict(schema, items=self.walk(schema["items"], namespace, depth + 1, place(at, "[]")))
        if kind == "map" and "values" in schema:
            return dict(schema, values=self.walk(schema["values"], namespace, depth + 1, place(at, "{}")))
        if kind in _PRIMITIVES:
            return dict(schema)
        if isinstance(kind, str) and kind not in ("array", "map"):
            return self._lookup(kind, namespace, at)  # {"type": "Address"}: Java reads it as the named type
        raise ConfigError(f"not an Avro schema at {at} of {self._where}: {_short(schema)}")

    def _lookup(self, name: str, namespace: str, at: str) -> str:
        if "." in name:
            candidates = [name]
        else:
            candidates = ([f"{namespace}.{name}"] if namespace else []) + ["." + name]
        for candidate in candidates:
            if candidate in self._named:
                return candidate
        raise ConfigError(f"Avro type {_short(name)} at {at} of {self._where} is not defined (or not before its use; "
                          "a missing schema reference?)")

    def _define(self, schema: Dict[str, Any], namespace: str, depth: int, at: str) -> Dict[str, Any]:
        name, space = schema.get("name"), schema.get("namespace")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"Avro {schema['type']} at {at} of {self._where} has no name: {_short(schema)}")
        if "." in name:
            full = name
        elif isinstance(space, str):
            full = f"{space}.{name}" if space else name
        else:
            full = f"{namespace}.{name}" if namespace else name
        if any(not part for part in full.split(".")):
            raise ConfigError(f"Avro name {_short(full)} at {at} of {self._where} has an empty part")
        key = _key(full)
        if key in self._named:
            raise ConfigError(f"Avro type {_short(full)} at {at} of {self._where} is defined twice (the Avro "
                              "specification allows one definition per full name)")
        size = schema.get("size")
        if schema["type"] == "fixed" and (not isinstance(size, int) or isinstance(size, bool) or size < 0):
            raise ConfigError(f"Avro fixed {_short(full)} at {at} of {self._where} has size {_short(size)}, not a "
                              "count of bytes")
        out = {k: v for k, v in schema.items() if k != "namespace"}
        out["name"] = key
        self._named[key] = out  # before the fields: a record may refer to itself
        if schema["type"] in ("record", "error"):
            fields = schema.get("fields", [])
            if not isinstance(fields, list):
                raise ConfigError(f"Avro record {_short(full)} at {at} of {self._where} has fields that are not a list")
            inner = full.rpartition(".")[0]
            walked: List[Any] = []
            for field in fields:
                if not isinstance(field, dict) or not isinstance(field.get("name"), str) or "type" not in field:
                    raise ConfigError(f"Avro record {_short(full)} at {at} of {self._where} has a malformed field: "
                                      f"{_short(field)}")
                walked.append(dict(field, type=self.walk(field["type"], inner, depth + 1, place(at, "." + field["name"]))))
            out["fields"] = walked
        return out


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
