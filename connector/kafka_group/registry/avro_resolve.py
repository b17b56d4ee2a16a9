"""Logical types across Avro schema resolution: the unit a writer's numbers are in.

The codec decodes with logical types stripped (:func:`kafka_group.registry.avro_types.strip_logical`),
so fastavro resolves a writer's ``timestamp-millis`` long into a reader's ``timestamp-micros`` long
as the same number: read in the reader's unit it would be 1,000 times off. Before a writer schema
id is decoded through a reader, :func:`writer_native_type` walks both schemas as Avro resolution
pairs them (record fields by name or alias, union branches, array items, map values; named types
by their full names, :mod:`kafka_group.registry.avro_names`) and compares
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

from typing import Any, Dict, FrozenSet, Mapping, Optional, Set, Tuple

import pyarrow as pa

from kafka_group.errors import ConfigError
from kafka_group.registry.avro_names import Canonical, place
from kafka_group.registry.avro_types import NATIVE, avro_arrow_type

__all__ = ["writer_native_type", "pair_schemas", "Aliases"]

#: Reader aliases fastavro must not see for one writer: (reader record's name, field's name, alias).
Aliases = FrozenSet[Tuple[str, str, str]]

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


def writer_native_type(writer: Canonical, reader: Canonical, writer_name: str) -> pa.DataType:
    """The reader's native Arrow type with each timestamp in the unit the writer wrote it in.

    Parameters
    ----------
    writer, reader : Canonical
        The writer and reader schemas with their references, names resolved
        (:func:`kafka_group.registry.avro_names.canonical`).
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
    return pair_schemas(writer, reader, writer_name)[0]


def pair_schemas(writer: Canonical, reader: Canonical, writer_name: str) -> Tuple[pa.DataType, Aliases]:
    """:func:`writer_native_type`, and the reader's aliases to drop when reading this writer.

    A writer record with both a reader field's name and one of its aliases is read by the name, as
    Java reads it; fastavro would match both (and fail every record with a KeyError, or read the
    alias's field when it comes first), so the codec reads such a writer through a reader without
    those aliases.
    """
    pairing = _Pairing(writer, reader, writer_name)
    return pairing.top(), frozenset(pairing.dropped)


class _Pairing:
    """One writer and one reader: each (writer type, reader type) pair is paired once (a union of many
    writer types met at every level would otherwise multiply the work)."""

    def __init__(self, writer: Canonical, reader: Canonical, writer_name: str) -> None:
        self._writer, self._reader, self._name = writer.schema, reader.schema, writer_name
        self._wnamed, self._rnamed = writer.named, reader.named
        self._done: Dict[Tuple[int, int], Optional[pa.DataType]] = {}
        self._native_done: Dict[int, pa.DataType] = {}
        self.dropped: Set[Tuple[str, str, str]] = set()

    def top(self) -> pa.DataType:
        paired = self._pair(self._writer, self._reader, "the top level")
        return paired if paired is not None else self._native(self._reader, "the top level")

    def _native(self, reader: Any, where: str) -> pa.DataType:
        found = self._native_done.get(id(reader))
        if found is None:
            found = self._native_done[id(reader)] = avro_arrow_type(reader, self._rnamed, where, NATIVE)
        return found

    def _pair(self, writer: Any, reader: Any, where: str) -> Optional[pa.DataType]:
        """The writer-unit type of ``reader`` at ``where``; None where the two do not resolve (fastavro refuses)."""
        writer, reader = _deref(writer, self._wnamed), _deref(reader, self._rnamed)
        key = (id(writer), id(reader))
        if key not in self._done:
            self._done[key] = None  # a recursive writer met again within itself pairs as not resolving
            self._done[key] = self._pair_once(writer, reader, where)
        return self._done[key]

    def _pair_once(self, writer: Any, reader: Any, where: str) -> Optional[pa.DataType]:
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
            items = self._pair(writer["items"], reader["items"], place(where, "[]"))
            return pa.list_(items if items is not None else self._native(reader["items"], place(where, "[]")))
        if rkind == "map":
            values = self._pair(writer["values"], reader["values"], place(where, "{}"))
            return pa.map_(pa.string(), values if values is not None
                           else self._native(reader["values"], place(where, "{}")))
        return self._leaf(writer, reader, where)

    def _record(self, writer: Mapping[str, Any], reader: Mapping[str, Any], where: str) -> pa.DataType:
        written = {f["name"]: f for f in writer.get("fields", [])}
        fields = []
        for field in reader.get("fields", []):
            name, inner = field["name"], place(where, "." + field["name"])
            aliases = [a for a in field.get("aliases", []) if isinstance(a, str)]
            if name in written and isinstance(reader.get("name"), str):
                self.dropped.update((reader["name"], name, a) for a in aliases if a in written and a != name)
            match = written.get(name) or next((written[a] for a in aliases if a in written), None)
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


def _deref(schema: Any, named: Mapping[str, Any]) -> Any:
    """A named type's definition for its (canonical) name."""
    return named.get(schema, schema) if isinstance(schema, str) else schema


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
