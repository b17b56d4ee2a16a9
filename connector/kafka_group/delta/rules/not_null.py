"""The columns a Delta table declares NOT NULL, at any depth, and the NULLs data holds there.

Executors count, per file they write, the NULLs of the table's NOT NULL columns
(:func:`count_nulls`); the driver refuses the commit of a file that has any
(:mod:`kafka_group.delta.files.not_null_check`), since Delta readers (delta-rs) then cannot read
the table.
"""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Tuple, Union

__all__ = [
    "ELEMENT",
    "MAP_VALUE",
    "ColumnPath",
    "count_nulls",
    "describe_path",
    "not_null_paths",
]

#: A column at any depth: field names, :data:`ELEMENT` for an array's elements, :data:`MAP_VALUE`
#: for a map's values (``("headers", ELEMENT, "key")``). JSON-able, so executors return it as is.
ColumnPath = Tuple[Union[str, int], ...]
#: An array's elements in a :data:`ColumnPath`.
ELEMENT = 0
#: A map's values in a :data:`ColumnPath`.
MAP_VALUE = 1


def not_null_paths(schema_json: Mapping[str, Any]) -> List[ColumnPath]:
    """The columns a Delta schema (its JSON as a dict) declares non-nullable, at any depth:
    fields with ``"nullable": false``, arrays with ``"containsNull": false`` (their elements)
    and maps with ``"valueContainsNull": false`` (their values). A nested one is non-nullable
    only where its parent is present: a NULL struct holds no field."""
    found: List[ColumnPath] = []

    def walk(kind: Any, path: ColumnPath) -> None:
        if not isinstance(kind, Mapping):
            return
        if kind.get("type") == "struct":
            for f in kind.get("fields", []):
                here = path + (str(f["name"]),)
                if f.get("nullable", True) is False:
                    found.append(here)
                walk(f.get("type"), here)
        elif kind.get("type") == "array":
            here = path + (ELEMENT,)
            if kind.get("containsNull", True) is False:
                found.append(here)
            walk(kind.get("elementType"), here)
        elif kind.get("type") == "map":
            here = path + (MAP_VALUE,)
            if kind.get("valueContainsNull", True) is False:
                found.append(here)
            walk(kind.get("valueType"), here)

    walk(schema_json, ())
    return found


def describe_path(path: ColumnPath) -> str:
    """A column path as users write it: ``key``, ``payload.id``, ``headers[].key``, ``attributes{}``."""
    text = ""
    for part in path:
        if part == ELEMENT and not isinstance(part, str):
            text += "[]"
        elif part == MAP_VALUE and not isinstance(part, str):
            text += "{}"
        else:
            text += ("." if text else "") + str(part)
    return text


def count_nulls(table: Any, path: ColumnPath) -> Optional[int]:
    """How many NULLs ``table`` (a ``pyarrow.Table`` or ``RecordBatch``) holds at ``path`` where
    every enclosing struct, array and map is present; None when it has no such column."""
    if not path or not isinstance(path[0], str) or path[0] not in table.schema.names:
        return None
    column = table.column(path[0])
    chunks = column.chunks if hasattr(column, "chunks") else [column]
    total = 0
    for chunk in chunks:
        found = _nulls_in(chunk, path[1:])
        if found is None:
            return None
        total += found
    return total


def _nulls_in(array: Any, rest: ColumnPath) -> Optional[int]:
    import pyarrow as pa

    if not rest:
        return int(array.null_count)
    part, rest = rest[0], rest[1:]
    if isinstance(part, str):
        if not pa.types.is_struct(array.type) or array.type.get_field_index(part) < 0:
            return None
        present = array.filter(array.is_valid()) if array.null_count else array  # a NULL struct holds no field
        return _nulls_in(present.field(part), rest)
    if part == MAP_VALUE and pa.types.is_map(array.type):
        # The entries of present maps only (pyarrow has no flatten for maps: as a list of entries).
        present = array.filter(array.is_valid()) if array.null_count else array
        return _nulls_in(pa.ListArray.from_arrays(present.offsets, present.items).flatten(), rest)
    if part == ELEMENT and (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
        return _nulls_in(array.flatten(), rest)  # the elements of present lists only
    return None
