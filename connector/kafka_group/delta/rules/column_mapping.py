"""Column mapping (``delta.columnMapping.mode`` ``name`` or ``id``): the physical names the sink's files carry.

A column-mapped table names each column, at any depth, twice in its schema: the logical name users
see, and ``delta.columnMapping.physicalName`` with ``delta.columnMapping.id`` in the field's metadata.
The Delta protocol ("Column Mapping") asks a writer of such a table to

* write the data files under the physical names, with each field's id as its Parquet field id
  (``id`` mode reads by id, ``name`` mode by name; delta-spark writes both, and so does the sink);
* key the ``add`` action's ``partitionValues`` and the ``stats`` JSON by physical names.

A rename (``RENAME COLUMN``) changes only the logical name and a drop (``DROP COLUMN``) only the
schema, so files keep their meaning; a column dropped and added again gets a new physical name. The
sink writes its batch under the mapping of the table version it checked, and the commit is refused
when the version it commits on maps the batch's columns otherwise
(:func:`kafka_group.delta.rules.write_contract.check_contract`).

New columns (``DeltaSink(merge_schema=True)``) are refused on such a table: each needs a fresh
physical name and id and ``delta.columnMapping.maxColumnId`` advanced in the same ``metaData``
action, which delta-rs 1.6.6's ``add_columns`` does not write. Nothing here imports pyspark.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from kafka_group.errors import OffsetStoreError, UnsupportedTableFeatureError

__all__ = ["ColumnMapping", "column_mapping_of", "refuse_new_columns"]

_PHYSICAL = "delta.columnMapping.physicalName"
_ID = "delta.columnMapping.id"
_FIELD_ID = b"PARQUET:field_id"

#: A field's physical name and id, and the same for its nested fields (a struct's, or the structs
#: inside an array's elements or a map's keys and values, by their logical names).
_Node = Tuple[str, int, Dict[str, Any]]


@dataclass(frozen=True)
class ColumnMapping:
    """The physical names and ids of a column-mapped table's columns, at any depth. Picklable: the
    driver builds it from the table version it checked and the executors write their files by it.

    Caller: the driver (built by :func:`column_mapping_of`) and Spark tasks (:meth:`physical_table`).
    """

    mode: str
    """``name`` or ``id``."""
    fields: Dict[str, Any]
    """Logical name -> ``(physical name, id, nested fields)``, recursively."""

    def physical_name(self, column: str) -> str:
        """The physical name of top-level ``column`` (a partition column: the key of ``partitionValues``)."""
        return str(self._node(self.fields, column)[0])

    def physical_partition_values(self, values: Mapping[str, Optional[str]]) -> Dict[str, Optional[str]]:
        """``partitionValues`` keyed by physical names, as the protocol asks of a column-mapped table."""
        return {self.physical_name(column): value for column, value in values.items()}

    def physical_schema(self, arrow_schema: Any) -> Any:
        """``arrow_schema`` (logical names, a subset of the table's columns) under the physical names,
        each field carrying its id as ``PARQUET:field_id``."""
        import pyarrow as pa

        return pa.schema([self._physical_field(f, self.fields) for f in arrow_schema])

    def physical_table(self, table: Any, physical_schema: Any) -> Any:
        """``table`` (logical names) as ``physical_schema`` (from :meth:`physical_schema`): the same
        buffers under other names, no data copied."""
        import pyarrow as pa

        columns = [_view(table.column(i), physical_schema.field(i).type) for i in range(table.num_columns)]
        return pa.Table.from_arrays(columns, schema=physical_schema)

    def _physical_field(self, f: Any, nodes: Mapping[str, Any]) -> Any:
        import pyarrow as pa

        physical, field_id, nested = self._node(nodes, f.name)
        metadata = dict(f.metadata or {})
        metadata[_FIELD_ID] = str(field_id).encode()
        return pa.field(physical, self._physical_type(f.type, nested), f.nullable, metadata)

    def _physical_type(self, arrow_type: Any, nested: Mapping[str, Any]) -> Any:
        import pyarrow as pa

        if pa.types.is_struct(arrow_type):
            return pa.struct([self._physical_field(arrow_type.field(i), nested.get("", {}))
                              for i in range(arrow_type.num_fields)])
        if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
            element = arrow_type.value_field
            inner = element.with_type(self._physical_type(element.type, nested.get("element", {})))
            return pa.list_(inner) if pa.types.is_list(arrow_type) else pa.large_list(inner)
        if pa.types.is_map(arrow_type):
            key = arrow_type.key_field.with_type(self._physical_type(arrow_type.key_type, nested.get("key", {})))
            item = arrow_type.item_field.with_type(self._physical_type(arrow_type.item_type, nested.get("value", {})))
            return pa.map_(key, item, arrow_type.keys_sorted)
        return arrow_type

    def _node(self, nodes: Mapping[str, Any], name: str) -> _Node:
        node = nodes.get(name)
        if node is None:
            raise OffsetStoreError(
                f"column '{name}' has no physical name in the column-mapped table ({self.mode} mode): the batch "
                "names a column the table does not have. Nothing was written and no offset moved"
            )
        return (str(node[0]), int(node[1]), dict(node[2]))

    def signature(self, columns: Sequence[str]) -> Dict[str, Any]:
        """What the files of a batch with ``columns`` depend on: their mapping (compared at the commit)."""
        return {"mode": self.mode, **{c: self.fields.get(c) for c in columns}}


def _view(column: Any, physical_type: Any) -> Any:
    """A chunked array as a type of the same layout (fields renamed, field ids added)."""
    import pyarrow as pa

    return pa.chunked_array([chunk.view(physical_type) for chunk in column.chunks], type=physical_type)


def column_mapping_of(schema_json: Mapping[str, Any], configuration: Mapping[str, Optional[str]],
                      table: str) -> Optional[ColumnMapping]:
    """The table's :class:`ColumnMapping`, None when ``delta.columnMapping.mode`` is ``none`` (or unset).

    Raises
    ------
    UnsupportedTableFeatureError
        A mode other than ``none``, ``name`` and ``id``, or a field without its physical name or id
        (the log was written by a tool that does not follow the protocol).
    """
    mode = (configuration.get("delta.columnMapping.mode") or "none").lower()
    if mode == "none":
        return None
    if mode not in ("name", "id"):
        raise UnsupportedTableFeatureError(
            f"Delta table '{table}' has delta.columnMapping.mode='{mode}', which the Delta protocol does not "
            "define (none, name or id). Nothing was written and no offset moved"
        )
    return ColumnMapping(mode, _struct_nodes(schema_json, table))


def _struct_nodes(struct: Mapping[str, Any], table: str) -> Dict[str, Any]:
    nodes: Dict[str, Any] = {}
    for f in struct.get("fields", []):
        metadata = f.get("metadata") or {}
        physical, field_id = metadata.get(_PHYSICAL), metadata.get(_ID)
        if not isinstance(physical, str) or not physical or isinstance(field_id, bool) or not isinstance(field_id, int):
            raise UnsupportedTableFeatureError(
                f"column '{f.get('name')}' of column-mapped Delta table '{table}' has no valid physical name and "
                f"id in its metadata ({_PHYSICAL}, {_ID}): the table's log does not follow the Delta protocol. "
                "Nothing was written and no offset moved"
            )
        nodes[str(f["name"])] = (physical, field_id, _type_nodes(f.get("type"), table))
    return nodes


def _type_nodes(kind: Any, table: str) -> Dict[str, Any]:
    """The nested fields of a type: a struct's by name; an array's as ``element``, a map's as ``key``
    and ``value`` (each holding the struct fields found there)."""
    if not isinstance(kind, Mapping):
        return {}
    if kind.get("type") == "struct":
        return {"": _struct_nodes(kind, table)}
    if kind.get("type") == "array":
        return {"element": _type_nodes(kind.get("elementType"), table)}
    if kind.get("type") == "map":
        return {"key": _type_nodes(kind.get("keyType"), table), "value": _type_nodes(kind.get("valueType"), table)}
    return {}


def refuse_new_columns(table_path: str, mapping: Optional[ColumnMapping], added: Sequence[str]) -> None:
    """Refuse ``DeltaSink(merge_schema=True)`` adding ``added`` to a column-mapped table (see the module docstring).

    Raises
    ------
    UnsupportedTableFeatureError
        Names the columns and the fix; nothing was written.
    """
    if mapping is None or not added:
        return
    raise UnsupportedTableFeatureError(
        f"DeltaSink(merge_schema=True) would add column(s) {', '.join(added)} to Delta table '{table_path}', which "
        f"uses column mapping ({mapping.mode} mode): a new column there needs a physical name and id that delta-rs "
        "does not assign. Add the column(s) with delta-spark first (ALTER TABLE ... ADD COLUMNS), then restart the "
        "query. Nothing was written and no offset moved"
    )
