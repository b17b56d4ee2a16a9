"""JSON Schema -> Arrow types, and one JSON value -> the Python value of that Arrow type.

The mapping (:func:`json_shape`), for the schemas Confluent's ``JSONSerializer`` registers (draft-07,
and 2020-12 as pydantic writes it): ``object`` with ``properties`` -> struct (in the properties'
order; ``additionalProperties`` ignored); ``array`` with one ``items`` schema -> list; ``string`` ->
string, with ``format`` ``date-time`` -> timestamp(us, UTC) and ``date`` -> date32; ``integer`` ->
int64; ``number`` -> float64; ``boolean`` -> bool. ``type: [T, "null"]``, ``anyOf``/``oneOf``
of one schema and ``null``, and properties not ``required`` are nullable (every Arrow field is).
``$ref`` is followed within the document (``#/definitions/...``, ``#/$defs/...``) and into the
schema's references (by reference name); a schema that reaches itself has no finite Spark type:
:class:`~kafka_group.errors.ConfigError` names the property.

Everything else (``oneOf``/``anyOf`` of different types, an object without ``properties``, an array
of tuples, a schema with no ``type``) is a string column holding the value's JSON text: a union of
objects has no Spark type, and refusing the topic would leave its records unreadable, while the text
keeps each value exact (``from_json`` reads it further): compact (no blanks between items), and each
number as the payload wrote it (``12345678901234567.89`` stays so; payloads are parsed with
:class:`~kafka_group.json_text.ExactNumber`).
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

import pyarrow as pa

from kafka_group.errors import ConfigError
from kafka_group.json_text import NotJson, compact, parse_json
from kafka_group.registry.codec import RegisteredSchema

__all__ = ["Shape", "json_shape", "to_arrow_value", "BadValue", "load_document"]

_INT64 = (-(2**63), 2**63 - 1)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


@dataclass(frozen=True)
class Shape:
    """What one JSON Schema position reads as: ``kind`` is one of ``object``, ``array``, ``string``,
    ``integer``, ``number``, ``boolean``, ``date-time``, ``date``, ``json`` (the value's JSON text).
    """

    kind: str
    fields: Tuple[Tuple[str, "Shape"], ...] = ()
    items: Optional["Shape"] = None

    def arrow_type(self) -> pa.DataType:
        """The Arrow type of this position."""
        if self.kind == "object":
            return pa.struct([pa.field(name, shape.arrow_type()) for name, shape in self.fields])
        if self.kind == "array":
            assert self.items is not None
            return pa.list_(self.items.arrow_type())
        return _SCALARS[self.kind]

    def has_json_text(self) -> bool:
        """Whether some position below is read as JSON text (Arrow's JSON reader cannot produce it)."""
        if self.kind == "json":
            return True
        return any(s.has_json_text() for _, s in self.fields) or bool(self.items and self.items.has_json_text())


_SCALARS: Dict[str, pa.DataType] = {
    "string": pa.string(), "integer": pa.int64(), "number": pa.float64(), "boolean": pa.bool_(),
    "date-time": pa.timestamp("us", tz="UTC"), "date": pa.date32(), "json": pa.string(),
}


def load_document(schema: RegisteredSchema) -> Any:
    """The parsed JSON of ``schema.text``; :class:`ConfigError` when it is not JSON."""
    try:
        return parse_json(schema.text)
    except NotJson as exc:
        raise ConfigError(f"the JSON schema{_id_text(schema)} is not JSON: {exc}") from None


def _id_text(schema: RegisteredSchema) -> str:
    return f" (id {schema.schema_id})" if schema.schema_id is not None else ""


def json_shape(schema: RegisteredSchema) -> Shape:
    """The :class:`Shape` of ``schema``'s root (see the module's table)."""
    return _Mapper(schema).shape(load_document(schema), "", ())


class _Mapper:
    def __init__(self, schema: RegisteredSchema) -> None:
        self.root = schema
        self.documents: Dict[str, Any] = {}
        self._collect("", schema, 0)

    def _collect(self, name: str, schema: RegisteredSchema, depth: int) -> None:
        if depth > 32 or name in self.documents:
            return
        self.documents[name] = load_document(schema)
        for reference in schema.references:
            self._collect(reference.name, reference.schema, depth + 1)

    def _resolve(self, ref: str, document: str, path: str) -> Tuple[str, Any]:
        target, _, pointer = ref.partition("#")
        name = document if not target else target
        if name not in self.documents:  # an absolute URI ($id-based) naming a reference by its file name
            name = name.rsplit("/", 1)[-1]
        if name not in self.documents:
            raise ConfigError(f"the JSON schema's property '{path}' refers to {ref!r}, which is neither in the "
                              "schema nor one of its references")
        node = self.documents[name]
        for part in [p for p in pointer.split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise ConfigError(f"the JSON schema's property '{path}' refers to {ref!r}, which does not exist")
        return name, node

    def shape(self, node: Any, path: str, stack: Tuple[str, ...], document: str = "") -> Shape:
        if not isinstance(node, dict):
            return Shape("json")  # true, false: anything
        if "$ref" in node and isinstance(node["$ref"], str):
            key = f"{node['$ref']}@{document}"
            if key in stack:
                raise ConfigError(f"the JSON schema's property '{path or '(root)'}' is recursive ($ref "
                                  f"{node['$ref']!r} reaches itself): Spark needs a finite schema")
            name, target = self._resolve(node["$ref"], document, path or "(root)")
            return self.shape(target, path, stack + (key,), name)
        for union in ("anyOf", "oneOf"):
            if isinstance(node.get(union), list):
                branches = [b for b in node[union] if not (isinstance(b, dict) and b.get("type") == "null")]
                shapes = {self.shape(b, path, stack, document) for b in branches}
                return shapes.pop() if len(shapes) == 1 else Shape("json")
        if isinstance(node.get("allOf"), list) and len(node["allOf"]) == 1:
            return self.shape(node["allOf"][0], path, stack, document)
        kind = node.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if k != "null"]
            kind = kinds[0] if len(kinds) == 1 else ("number" if sorted(kinds) == ["integer", "number"] else None)
        if kind is None and "properties" in node:
            kind = "object"
        if kind == "object" and isinstance(node.get("properties"), dict) and "allOf" not in node:
            return Shape("object", tuple(
                (name, self.shape(sub, f"{path}.{name}" if path else name, stack, document))
                for name, sub in node["properties"].items()))
        if kind == "array" and isinstance(node.get("items"), dict) and "prefixItems" not in node:
            return Shape("array", items=self.shape(node["items"], f"{path}[]", stack, document))
        if kind == "string":
            form = node.get("format")
            return Shape(form if form in ("date-time", "date") else "string")
        if kind in ("integer", "number", "boolean"):
            return Shape(kind)
        return Shape("json")


class BadValue(ValueError):
    """A JSON value that the reader's type cannot hold; ``str()`` names the property and why."""


def to_arrow_value(value: Any, shape: Shape, path: str = "") -> Any:
    """``value`` (parsed JSON) as the Python value of ``shape.arrow_type()``; :class:`BadValue` if it cannot be."""
    if value is None:
        return None
    kind = shape.kind
    if kind == "object":
        if not isinstance(value, dict):
            raise BadValue(f"{_at(path)}is {_json_kind(value)}, the schema says object")
        return {name: to_arrow_value(value.get(name), sub, f"{path}.{name}" if path else name)
                for name, sub in shape.fields}
    if kind == "array":
        if not isinstance(value, list):
            raise BadValue(f"{_at(path)}is {_json_kind(value)}, the schema says array")
        assert shape.items is not None
        return [to_arrow_value(item, shape.items, f"{path}[{i}]") for i, item in enumerate(value)]
    if kind == "json":
        return _utf8(compact(value), path)
    if kind == "boolean" and isinstance(value, bool):
        return value
    if kind == "integer" and isinstance(value, int) and not isinstance(value, bool):
        if not _INT64[0] <= value <= _INT64[1]:
            raise BadValue(f"{_at(path)}{value} does not fit a 64-bit integer")
        return value
    if kind == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an int of more digits than a double's range
            number = math.inf
        if math.isinf(number) or math.isnan(number):
            raise BadValue(f"{_at(path)}does not fit a double")
        return number
    if isinstance(value, str):
        if kind == "string":
            return _utf8(value, path)
        if kind == "date-time":
            return _timestamp(value, path)
        if kind == "date":
            try:
                return datetime.date.fromisoformat(value)
            except ValueError:
                raise BadValue(f"{_at(path)}{value!r} is not a date (YYYY-MM-DD)") from None
    raise BadValue(f"{_at(path)}is {_json_kind(value)}, the schema says {kind}")


def _utf8(text: str, path: str) -> str:
    """``text`` when Arrow can store it: JSON's ``\\ud800`` escapes decode to lone surrogates, which are not UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BadValue(f"{_at(path)}holds a lone surrogate (character {exc.start}), which is not Unicode text") from None
    return text


def _timestamp(text: str, path: str) -> datetime.datetime:
    # RFC 3339's UTC designator, which Python 3.10's fromisoformat refuses
    iso = text[:-1] + "+00:00" if text[-1:] in ("Z", "z") else text
    try:
        moment = datetime.datetime.fromisoformat(iso)
    except ValueError:
        raise BadValue(f"{_at(path)}{text!r} is not an RFC 3339 date-time") from None
    if moment.tzinfo is None:  # RFC 3339 requires an offset; without one it is read as UTC, like Arrow does
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    try:
        return moment.astimezone(datetime.timezone.utc)
    except OverflowError:  # 0001-01-01T00:00:00+01:00 is in year 0 in UTC
        raise BadValue(f"{_at(path)}{text!r} is beyond the years 1 to 9999 in UTC") from None


def _at(path: str) -> str:
    return f"property '{path}' " if path else "the value "


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    return "a number" if isinstance(value, (int, float)) else "null"
