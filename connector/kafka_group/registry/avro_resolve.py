"""Logical types across Avro schema resolution: the unit a writer's numbers are in.

The codec decodes with logical types stripped (:func:`kafka_group.registry.avro_types.strip_logical`),
so fastavro resolves a writer's ``timestamp-millis`` long into a reader's ``timestamp-micros`` long
as the same number: read in the reader's unit it would be 1,000 times off. Before a writer schema
id is decoded through a reader, :func:`writer_native_type` walks both schemas as Avro resolution
pairs them (record fields by name or alias, union branches, array items, map values) and compares
the logical types at each pair:

================================================  ==============================================
writer, reader                                    what the reader gets
================================================  ==============================================
the same, or either without a logical type        the value as written (the reader's declaration
                                                  is all there is when the writer has none)
``timestamp-*`` and ``timestamp-*`` (or           the same instant: the column is first typed in
``local-timestamp-*`` and ``local-timestamp-*``)  the writer's unit, then cast (millis to micros
with the reader in millis or micros               is exact; micros to millis is an error for a
                                                  record whose value is not whole milliseconds)
anything else (``date`` promoted to a             a :class:`~kafka_group.errors.ConfigError`: every
``timestamp-*`` long, an instant read as a        record of that writer id is an error naming the
``local-timestamp``, ``time-millis`` into         field and both logical types, never a value in
``time-micros``, ...)                             the wrong unit
================================================  ==============================================

``decimal`` is not stripped: fastavro reads it with the writer's scale and Arrow rescales it to the
reader's exactly or refuses that record (see :mod:`kafka_group.registry.avro_codec`).
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence

import pyarrow as pa

from kafka_group.errors import ConfigError
from kafka_group.registry.avro_types import NATIVE, avro_arrow_type

__all__ = ["writer_native_type"]

#: Logical types that say the unit of a number, with the Avro type they annotate.
_UNITS: Mapping[str, str] = {
    "date": "int", "time-millis": "int", "time-micros": "long",
    "timestamp-millis": "long", "timestamp-micros": "long", "timestamp-nanos": "long",
    "local-timestamp-millis": "long", "local-timestamp-micros": "long", "local-timestamp-nanos": "long",
}
_ARROW_UNIT: Mapping[str, str] = {"millis": "ms", "micros": "us", "nanos": "ns"}
#: Avro's promotions (writer type, reader type) besides equal types.
_PROMOTES = {("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"), ("long", "double"),
             ("float", "double"), ("string", "bytes"), ("bytes", "string")}
_NAMED = ("record", "error", "enum", "fixed")


def writer_native_type(writer: Any, writer_refs: Sequence[Any], reader: Any, reader_refs: Sequence[Any],
                       writer_name: str) -> pa.DataType:
    """The reader's native Arrow type with each timestamp in the unit the writer wrote it in.

    Parameters
    ----------
    writer, reader : object
        The writer and reader schemas (parsed JSON).
    writer_refs, reader_refs : sequence
        The schemas each references (parsed JSON), a reference's references first.
    writer_name : str
        How messages name the writer schema (``id 7``).

    Returns
    -------
    pyarrow.DataType
        Equal to the reader's :data:`~kafka_group.registry.avro_types.NATIVE` type where no unit
        differs; cast from it to the reader's native type, a column gets the reader's units.

    Raises
    ------
    ConfigError
        A writer's logical type the reader's cannot take exactly (see the module's table).
    """
    return _Pairing(writer, writer_refs, reader, reader_refs, writer_name).top()


class _Pairing:
    def __init__(self, writer: Any, writer_refs: Sequence[Any], reader: Any, reader_refs: Sequence[Any],
                 writer_name: str) -> None:
        self._writer, self._reader, self._name = writer, reader, writer_name
        self._wnamed: Dict[str, Any] = {}
        self._rnamed: Dict[str, Any] = {}
        for doc in (*writer_refs, writer):
            _collect(doc, self._wnamed)
        for doc in (*reader_refs, reader):
            _collect(doc, self._rnamed)
        self._arrow_named: Dict[str, Any] = {}
        for doc in reader_refs:
            avro_arrow_type(doc, self._arrow_named, "a reference", NATIVE)
        avro_arrow_type(reader, self._arrow_named, "the top level", NATIVE)  # defines the reader's own names

    def top(self) -> pa.DataType:
        paired = self._pair(self._writer, self._reader, "the top level")
        return paired if paired is not None else self._native(self._reader, "the top level")

    def _native(self, reader: Any, where: str) -> pa.DataType:
        return avro_arrow_type(reader, self._arrow_named, where, NATIVE)

    def _pair(self, writer: Any, reader: Any, where: str) -> Optional[pa.DataType]:
        """The writer-unit type of ``reader`` at ``where``; None where the two do not resolve (fastavro refuses)."""
        writer, reader = _deref(writer, self._wnamed), _deref(reader, self._rnamed)
        if isinstance(reader, list):
            branches = [b for b in reader if b != "null"]
            return self._pair(writer, branches[0], where) if len(branches) == 1 else None
        if isinstance(writer, list):
            paired = {p for p in (self._pair(b, reader, where) for b in writer if b != "null") if p is not None}
            if len(paired) > 1:
                raise ConfigError(
                    f"writer schema {self._name} has a union at {where} whose branches hold different time "
                    "units for the one reader type there: its records are not decoded. Read the key/value raw, or "
                    f"register writer schemas with one unit at {where}")
            return paired.pop() if paired else None
        wkind, rkind = _kind(writer), _kind(reader)
        if wkind != rkind and (wkind, rkind) not in _PROMOTES and {wkind, rkind} != {"record", "error"}:
            return None
        if rkind in ("record", "error"):
            return self._record(writer, reader, where)
        if rkind == "array":
            items = self._pair(writer["items"], reader["items"], f"{where}[]")
            return pa.list_(items if items is not None else self._native(reader["items"], f"{where}[]"))
        if rkind == "map":
            values = self._pair(writer["values"], reader["values"], f"{where}{{}}")
            return pa.map_(pa.string(), values if values is not None
                           else self._native(reader["values"], f"{where}{{}}"))
        return self._leaf(writer, reader, where)

    def _record(self, writer: Mapping[str, Any], reader: Mapping[str, Any], where: str) -> pa.DataType:
        written = {f["name"]: f for f in writer.get("fields", [])}
        fields = []
        for field in reader.get("fields", []):
            name, inner = field["name"], f"{where}.{field['name']}"
            match = written.get(name) or next((written[a] for a in field.get("aliases", []) if a in written), None)
            paired = None if match is None else self._pair(match["type"], field["type"], inner)
            fields.append(pa.field(name, paired if paired is not None else self._native(field["type"], inner)))
        return pa.struct(fields)

    def _leaf(self, writer: Any, reader: Any, where: str) -> pa.DataType:
        native = self._native(reader, where)
        wunit, runit = _unit(writer), _unit(reader)
        if wunit is None or runit is None or wunit == runit:
            return native
        wzone, _, wscale = wunit.rpartition("-")
        rzone, _, rscale = runit.rpartition("-")
        if wzone == rzone and wzone in ("timestamp", "local-timestamp") and rscale in ("millis", "micros"):
            return pa.timestamp(_ARROW_UNIT[wscale], tz="UTC" if wzone == "timestamp" else None)
        raise ConfigError(
            f"writer schema {self._name} has logical type {wunit!r} at {where} where the reader schema has "
            f"{runit!r}: its numbers would be read in the wrong unit, so its records are not decoded. Give "
            f"the reader schema the writer's logical type at {where} (or none, to read the plain number)")


def _collect(schema: Any, named: Dict[str, Any]) -> None:
    """Register every named type defined in ``schema`` by full and short name (as avro_types does)."""
    if isinstance(schema, list):
        for branch in schema:
            _collect(branch, named)
        return
    if not isinstance(schema, dict):
        return
    kind = schema.get("type")
    if kind in _NAMED and isinstance(schema.get("name"), str):
        name, namespace = schema["name"], schema.get("namespace")
        full = name if "." in name or not namespace else f"{namespace}.{name}"
        named[full] = schema
        named[full.rsplit(".", 1)[-1]] = schema
    if isinstance(kind, (dict, list)):
        _collect(kind, named)
    for field in schema.get("fields", []) if kind in ("record", "error") else []:
        _collect(field.get("type"), named)
    for key in ("items", "values"):
        if key in schema:
            _collect(schema[key], named)


def _deref(schema: Any, named: Mapping[str, Any]) -> Any:
    """A named type's definition for its name; ``{"type": T}`` with no more keys as ``T``."""
    for _ in range(100):  # names pointing at names; a loop here is a broken schema fastavro refuses
        if isinstance(schema, str) and schema in named:
            schema = named[schema]
        elif isinstance(schema, dict) and isinstance(schema.get("type"), (dict, list)) and "logicalType" not in schema:
            schema = schema["type"]
        elif isinstance(schema, dict) and schema.get("type") in named and "logicalType" not in schema:
            schema = named[schema["type"]]
        else:
            return schema
    return schema


def _kind(schema: Any) -> Any:
    if isinstance(schema, dict):
        kind = schema.get("type")
        return kind if isinstance(kind, str) else None
    return schema


def _unit(schema: Any) -> Optional[str]:
    """The unit-bearing logical type of a primitive schema, when valid for its type."""
    if not isinstance(schema, dict):
        return None
    logical = schema.get("logicalType")
    return logical if isinstance(logical, str) and _UNITS.get(logical) == schema.get("type") else None
