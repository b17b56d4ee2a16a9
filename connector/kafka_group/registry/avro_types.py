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

A union of two or more non-null types, a bare ``null`` and a decimal wider than 38 digits have no
Spark column here: :func:`avro_arrow_type` refuses them with a ConfigError when the query starts.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

import pyarrow as pa

from kafka_group.errors import ConfigError

__all__ = ["avro_arrow_type", "strip_logical", "FINAL", "NATIVE", "PLAIN"]

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

#: The key in ``named`` of the record names being expanded (a name met again inside itself is recursion).
_IN_PROGRESS = " in progress"

_UTC = pa.timestamp("us", tz="UTC")
_LOCAL = pa.timestamp("us")


def avro_arrow_type(schema: Any, named: Optional[Dict[str, Any]] = None, where: str = "the schema",
                    stage: str = FINAL) -> pa.DataType:
    """The Arrow type of values of the Avro ``schema`` (its parsed JSON).

    Parameters
    ----------
    schema : object
        The schema as JSON values (a dict, a list for a union, a string for a primitive or a name).
    named : dict, optional
        Named types (records, enums, fixed) defined so far, by full name and by short name.
    where : str
        The place in the schema, for messages.
    stage : str
        :data:`FINAL` (the column's type), :data:`NATIVE` (timestamps in their own unit) or
        :data:`PLAIN` (logical types other than decimal as their underlying type).

    Raises
    ------
    ConfigError
        A construct without a Spark type (named in the message, with its place).
    """
    named = {} if named is None else named
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema]
        if schema == "null":
            raise ConfigError(f"Avro type 'null' at {where} has no Spark column: make it a union ['null', T]")
        if schema in named:
            if schema in named.get(_IN_PROGRESS, ()):
                raise ConfigError(f"Avro type {schema!r} at {where} contains itself (a recursive type): Spark has "
                                  "no recursive column. Read it raw, or give a reader schema without the recursion")
            return avro_arrow_type(named[schema], named, where, stage)
        raise ConfigError(f"Avro type {schema!r} at {where} is not defined (a missing schema reference?)")
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1:
            raise ConfigError(
                f"Avro union {_short(schema)} at {where} has {len(branches)} non-null branches; only "
                "['null', T] has a Spark column here. Read the key/value raw and decode it yourself, or "
                "give a reader schema without such unions")
        return avro_arrow_type(branches[0], named, where, stage)
    if not isinstance(schema, dict) or "type" not in schema:
        raise ConfigError(f"not an Avro schema at {where}: {_short(schema)}")
    kind = schema["type"]
    logical = schema.get("logicalType")
    if logical is not None and (stage != PLAIN or logical == "decimal"):
        typed = _logical(schema, logical, where, stage)
        if typed is not None:
            return typed
    if kind == "record" or kind == "error":
        names = _define(schema, named)
        in_progress = named.setdefault(_IN_PROGRESS, set())
        in_progress.update(names)
        fields: List[pa.Field] = []
        try:
            for f in schema.get("fields", []):
                name = f["name"]
                fields.append(pa.field(name, avro_arrow_type(f["type"], named, f"{where}.{name}", stage)))
        finally:
            in_progress.difference_update(names)
        if not fields:
            raise ConfigError(f"Avro record at {where} has no fields; Spark has no empty struct column")
        return pa.struct(fields)
    if kind == "enum":
        _define(schema, named)
        return pa.string()
    if kind == "fixed":
        _define(schema, named)
        return pa.binary()
    if kind == "array":
        return pa.list_(avro_arrow_type(schema["items"], named, f"{where}[]", stage))
    if kind == "map":
        return pa.map_(pa.string(), avro_arrow_type(schema["values"], named, f"{where}{{}}", stage))
    return avro_arrow_type(kind, named, where, stage)


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
        return pa.decimal128(precision, scale)
    return None  # unknown logical types are their underlying type (Avro spec)


def _define(schema: Mapping[str, Any], named: Dict[str, Any]) -> List[str]:
    """Register a named type under its full and short names; returns them."""
    name = schema.get("name")
    if not isinstance(name, str):
        return []
    namespace = schema.get("namespace")
    full = name if "." in name or not namespace else f"{namespace}.{name}"
    short = full.rsplit(".", 1)[-1]
    named[full] = schema
    named[short] = schema
    return [full, short]


def strip_logical(schema: Any) -> Any:
    """A copy of ``schema`` (JSON values) without its logical types but ``decimal`` (read as their underlying type)."""
    if isinstance(schema, list):
        return [strip_logical(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: (v if k == "default" else strip_logical(v)) for k, v in schema.items()}
    if "logicalType" in out and out["logicalType"] != "decimal":
        del out["logicalType"]
    return out


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
