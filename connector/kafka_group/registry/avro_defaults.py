"""Avro reader defaults of ``bytes`` and ``fixed`` as the bytes the specification says they are.

The Avro specification writes a ``bytes`` or ``fixed`` default as a JSON string whose code points
0-255 are the bytes (``"\\u00ff"`` is the byte 0xFF). fastavro hands the string back as written,
and Arrow would store its UTF-8 (two bytes for one). :func:`bytes_defaults` converts them in
fastavro's parsed form, where they sit in the record fields of its table of named types: in
``bytes`` and ``fixed`` fields, and nested in record, array and map defaults and in a union's first
branch (a union's default is of its first branch); a ``decimal`` default becomes its value. A
default with a code point above 255, or a ``fixed`` default of another size, is a ConfigError.
"""

from __future__ import annotations

import decimal
from typing import Any, Mapping

from kafka_group.errors import ConfigError
from kafka_group.registry.avro_names import shown

__all__ = ["bytes_defaults"]


def bytes_defaults(named: Mapping[str, Any], schema_name: str) -> None:
    """Convert, in place, the defaults of every record field of fastavro's table of named types ``named``.

    Raises
    ------
    ConfigError
        A ``bytes``/``fixed`` default with a code point above 255, or a ``fixed`` default of another size.
    """
    for definition in list(named.values()):
        if not isinstance(definition, dict) or definition.get("type") not in ("record", "error"):
            continue
        for field in definition.get("fields", []):
            if isinstance(field, dict) and "default" in field:
                where = f"the default of field {_short(field.get('name'))} of {_short(definition.get('name'))}"
                try:
                    field["default"] = _convert(field["default"], field.get("type"), named, where, schema_name)
                except RecursionError:
                    raise ConfigError(f"Avro schema {schema_name}: {where} is nested too deep to read") from None


def _convert(value: Any, schema: Any, named: Mapping[str, Any], where: str, schema_name: str) -> Any:
    if isinstance(schema, str) and schema in named:
        schema = named[schema]
    if isinstance(schema, list):
        return _convert(value, schema[0], named, where, schema_name) if schema else value
    kind = schema.get("type") if isinstance(schema, dict) else schema
    if kind in ("bytes", "fixed"):
        data = _bytes(value, where, schema_name)
        if kind == "fixed" and isinstance(data, bytes) and len(data) != schema.get("size"):
            raise ConfigError(f"Avro schema {schema_name}: {where} is {len(data)} bytes, not the size {schema.get('size')} "
                              "of its fixed type. Give a default of that many characters (code points 0-255)")
        return _decimal(data, schema)
    if kind in ("record", "error") and isinstance(value, dict):
        fields = {f["name"]: f["type"] for f in schema.get("fields", []) if isinstance(f, dict) and "name" in f}
        return {k: _convert(v, fields[k], named, where, schema_name) if k in fields else v for k, v in value.items()}
    if kind == "array" and isinstance(value, list):
        return [_convert(v, schema.get("items"), named, where, schema_name) for v in value]
    if kind == "map" and isinstance(value, dict):
        return {k: _convert(v, schema.get("values"), named, where, schema_name) for k, v in value.items()}
    return value


def _bytes(value: Any, where: str, schema_name: str) -> Any:
    if not isinstance(value, str):
        return value  # bytes already (converted before), or what fastavro's parse let through
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError as exc:
        raise ConfigError(f"Avro schema {schema_name}: {where} has the code point {ord(value[exc.start]):#x}, above 255: "
                          "a bytes default's characters are its bytes (\\u0000-\\u00ff)") from None


def _decimal(data: Any, schema: Any) -> Any:
    if not isinstance(data, bytes) or not isinstance(schema, dict) or schema.get("logicalType") != "decimal":
        return data
    precision, scale = schema.get("precision"), schema.get("scale", 0)
    if not isinstance(precision, int) or not isinstance(scale, int) or not 0 <= scale <= precision or len(data) > 64:
        return data
    sign, digits, _ = decimal.Decimal(int.from_bytes(data, "big", signed=True)).as_tuple()
    return decimal.Decimal((sign, digits, -scale))  # exact: Arrow refuses it if it is wider than the precision


def _short(name: Any) -> str:
    return repr(shown(name)[:80]) if isinstance(name, str) else "(unnamed)"


