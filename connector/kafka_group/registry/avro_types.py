"""Avro schemas as Arrow (and so Spark) types: the column a reader schema gives.

=========================================  =========================================
Avro                                       Arrow (Spark)
=========================================  =========================================
``boolean``, ``int``, ``long``             bool, int32, int64 (boolean, int, bigint)
``float``, ``double``                      float32, float64 (float, double)
``string``, ``enum``, ``uuid``             string (string)
``bytes``, ``fixed``                       binary (binary)
``record``                                 struct (struct), every field nullable
``array``, ``map``                         list, map with string keys (array, map)
``["null", T]`` (either order)             T, nullable
``date``                                   date32 (date)
``timestamp-millis``/``-micros``           timestamp[us, UTC] (timestamp)
``local-timestamp-millis``/``-micros``     timestamp[us] (timestamp_ntz)
``decimal(p, s)``, p <= 38                 decimal128(p, s) (decimal(p, s))
``time-millis``, ``time-micros``           int32 ms, int64 us of the day (int, bigint)
other logical types (``uuid``, ...)        their underlying type
=========================================  =========================================

Values are decoded with every logical type but ``decimal`` removed from the schemas
(:func:`strip_logical`): fastavro then makes no ``datetime`` per value (four times faster), and the
column is built in the *plain* type, cast to the *native* one (a timestamp in its own unit: no copy)
and then to the *final* one above (milliseconds times 1,000, checked for overflow), column-wise.
Stripped, a writer's and a reader's units look alike to fastavro: the codec pairs them first
(:mod:`kafka_group.registry.avro_resolve`) and types the column in the writer's unit before the native cast.

Schemas come in the canonical form of :mod:`kafka_group.registry.avro_names` (names resolved).
A union of two or more non-null types, a bare ``null``, a decimal wider than 38 digits, a recursive
type and a type of more than :data:`MAX_FIELDS` fields have no Spark column here:
:func:`avro_arrow_type` refuses them with a ConfigError when the query starts.
"""

from __future__ import annotations

from typing import AbstractSet, Any, Dict, List, Mapping, Optional, Set, Tuple

import pyarrow as pa

from kafka_group.errors import ConfigError
from kafka_group.registry.avro_decimals import MAX_DECIMAL_BYTES
from kafka_group.registry.avro_names import place, shown

__all__ = ["avro_arrow_type", "strip_logical", "FINAL", "NATIVE", "PLAIN", "MAX_FIELDS"]

_PRIMITIVES: Mapping[str, pa.DataType] = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "bytes": pa.binary(),
}

#: The stages of a column's type (see the module's notes).
FINAL, NATIVE, PLAIN = "final", "native", "plain"

_UTC = pa.timestamp("us", tz="UTC")
_LOCAL = pa.timestamp("us")


#: The most struct fields one column's type may have in all (a type that refers to a named type twice
#: at each level doubles per level: 40 levels would be 2^40 fields).
MAX_FIELDS = 100_000


def avro_arrow_type(schema: Any, named: Optional[Mapping[str, Any]] = None, where: str = "the schema",
                    stage: str = FINAL) -> pa.DataType:
    """The Arrow type of values of the Avro ``schema`` in canonical form (see :mod:`~kafka_group.registry.avro_names`).

    Parameters
    ----------
    schema : object
        The canonical schema (a dict, a list for a union, a string for a primitive or a full name).
    named : mapping, optional
        The named types (records, enums, fixed) by canonical full name.
    where : str
        The place in the schema, for messages.
    stage : str
        :data:`FINAL` (the column's type), :data:`NATIVE` (timestamps in their own unit) or
        :data:`PLAIN` (logical types other than decimal as their underlying type).

    Raises
    ------
    ConfigError
        A construct without a Spark type (named in the message, with its place), or a type of more
        than :data:`MAX_FIELDS` fields.
    """
    return _Types({} if named is None else named, stage).arrow(schema, where)[0]


class _Types:
    """One column's type: each named type's Arrow type made once (with its count of fields)."""

    def __init__(self, named: Mapping[str, Any], stage: str) -> None:
        self._named, self._stage = named, stage
        self._done: Dict[str, Tuple[pa.DataType, int]] = {}
        self._active: Set[str] = set()

    def arrow(self, schema: Any, where: str) -> Tuple[pa.DataType, int]:
        if isinstance(schema, str):
            if schema in _PRIMITIVES:
                return _PRIMITIVES[schema], 0
            if schema == "null":
                raise ConfigError(f"Avro type 'null' at {where} has no Spark column: make it a union ['null', T]")
            if schema not in self._named:
                raise ConfigError(f"Avro type {_short(shown(schema))} at {where} is not defined (a missing schema reference?)")
            if schema in self._active:
                raise ConfigError(f"Avro type {_short(shown(schema))} at {where} contains itself (a recursive type): Spark "
                                  "has no recursive column. Read it raw, or give a reader schema without the recursion")
            found = self._done.get(schema)
            if found is None:
                self._active.add(schema)
                try:
                    found = self._of(self._named[schema], where)
                finally:
                    self._active.discard(schema)
                self._done[schema] = found
            return found
        if isinstance(schema, list):
            branches = [b for b in schema if b != "null"]
            if len(branches) != 1:
                raise ConfigError(
                    f"Avro union {_short(schema)} at {where} has {len(branches)} non-null branches; only "
                    "['null', T] has a Spark column here. Read the key/value raw and decode it yourself, or "
                    "give a reader schema without such unions")
            return self.arrow(branches[0], where)
        if isinstance(schema, dict) and isinstance(schema.get("name"), str) and schema["name"] in self._named \
                and schema.get("type") in ("record", "error", "enum", "fixed"):
            return self.arrow(schema["name"], where)  # a definition: made once, by its name
        return self._of(schema, where)

    def _of(self, schema: Any, where: str) -> Tuple[pa.DataType, int]:
        if not isinstance(schema, dict) or "type" not in schema:
            raise ConfigError(f"not an Avro schema at {where}: {_short(schema)}")
        kind = schema["type"]
        logical = schema.get("logicalType")
        if logical is not None and (self._stage != PLAIN or logical == "decimal"):
            typed = _logical(schema, logical, where, self._stage)
            if typed is not None:
                return typed, 0
        if kind == "record" or kind == "error":
            fields: List[pa.Field] = []
            count = 0
            for f in schema.get("fields", []):
                name = f["name"]
                typ, inner = self.arrow(f["type"], place(where, "." + name))
                fields.append(pa.field(name, typ))
                count += inner + 1
                if count > MAX_FIELDS:
                    raise ConfigError(f"Avro type at {where} has more than {MAX_FIELDS:,} fields in all (a named type "
                                      "used at each level again?): no Spark column. Read the key/value raw")
            if not fields:
                raise ConfigError(f"Avro record at {where} has no fields; Spark has no empty struct column")
            return pa.struct(fields), count
        if kind == "enum":
            return pa.string(), 0
        if kind == "fixed":
            return pa.binary(), 0
        if kind == "array":
            items, count = self.arrow(schema["items"], place(where, "[]"))
            return pa.list_(items), count
        if kind == "map":
            values, count = self.arrow(schema["values"], place(where, "{}"))
            return pa.map_(pa.string(), values), count
        return self.arrow(kind, where)


def _logical(schema: Mapping[str, Any], logical: str, where: str, stage: str) -> Optional[pa.DataType]:
    kind = schema["type"]
    if logical == "date" and kind == "int":
        return pa.date32()
    unit = "ms" if logical.endswith("-millis") else "us"
    if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
        return pa.timestamp(unit, tz="UTC") if stage == NATIVE else _UTC
    if logical in ("local-timestamp-millis", "local-timestamp-micros") and kind == "long":
        return pa.timestamp(unit) if stage == NATIVE else _LOCAL
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision, scale = schema.get("precision"), schema.get("scale", 0)
        if not isinstance(precision, int) or not isinstance(scale, int) or not 0 <= scale <= precision:
            return None  # an invalid decimal is its underlying type, as the Avro spec says
        if precision > 38:
            raise ConfigError(f"Avro decimal({precision}, {scale}) at {where} is wider than Spark's 38 digits")
        if kind == "fixed" and isinstance(schema.get("size"), int) and schema["size"] > MAX_DECIMAL_BYTES:
            raise ConfigError(f"Avro fixed decimal at {where} has size {schema['size']:,}: more than the "
                              f"{MAX_DECIMAL_BYTES} bytes any decimal here holds. Give it the size its precision needs")
        return pa.decimal128(precision, scale)
    return None  # unknown logical types are their underlying type (Avro spec)


def strip_logical(schema: Any, drop_aliases: AbstractSet[Tuple[str, str, str]] = frozenset()) -> Any:
    """A copy of ``schema`` (JSON values) without its logical types but ``decimal`` (read as their underlying
    type), and without the field aliases ``drop_aliases`` names as (record's name, field's name, alias)."""
    if isinstance(schema, list):
        return [strip_logical(s, drop_aliases) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: (v if k == "default" else strip_logical(v, drop_aliases)) for k, v in schema.items()}
    if "logicalType" in out and out["logicalType"] != "decimal":
        del out["logicalType"]
    if drop_aliases and out.get("type") in ("record", "error") and isinstance(out.get("fields"), list):
        for field in out["fields"]:
            if isinstance(field, dict) and isinstance(field.get("aliases"), list):
                field["aliases"] = [a for a in field["aliases"] if (out["name"], field.get("name"), a) not in drop_aliases]
    return out


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
