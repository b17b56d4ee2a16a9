"""Schema evolution: whether a batch's columns fit a Delta table, and the table's schema after it.

A pure rule on Delta schemas in their JSON form (the ``schemaString`` of a Delta ``metaData``
action, as ``deltalake.Schema.to_json()`` gives it), so it is tested without a table.

The rule (``DeltaSink(..., merge_schema=...)``)
-----------------------------------------------
- A column of the batch the table lacks (at the top level or as a field of a struct, also inside
  arrays and maps) is **added** to the table's schema when ``merge_schema`` is true, as
  delta-spark's ``mergeSchema`` does: nullable, after the table's own columns. Without it the batch
  is refused, naming ``DeltaSink(..., merge_schema=True)`` as the fix.
- A column of the table the batch lacks is read as NULL for the batch's rows when ``merge_schema``
  is true (as delta-spark writes it; Delta readers fill a column a file does not hold with NULL),
  unless the table declares it NOT NULL (``nullable: false``): that is refused. Without
  ``merge_schema`` a missing column is refused (most often the transform changed by mistake).
- A column whose **type** differs is refused, with or without ``merge_schema``: Delta changes a
  column's type only through the ``typeWidening`` table feature or a rewrite, and a file of the
  new type committed under the old one is read back wrongly or as NULL.
- Names are compared as Delta compares them, case-insensitively: a batch column that differs from
  a table column only in case (``ID`` and ``id``) is refused rather than matched or added. delta-spark
  would take it as the same column, but readers that match Parquet columns by exact name
  (delta-rs) would read NULL from the batch's files. Two batch columns that differ only in case
  are refused too.
- Nullability of columns both sides have is not compared: Spark writes every column nullable.

:func:`batch_merge`, :func:`merge_or_raise` and :func:`describe_schema_mismatch` apply the rule to
a deltalake table schema and a batch's Arrow schema (deltalake is imported when they are called).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

from kafka_group.errors import SchemaMismatchError

__all__ = [
    "SchemaMerge", "batch_merge", "describe_schema_mismatch", "merge_or_raise", "merge_schemas", "merged_columns",
    "type_name",
]

#: What a refused new column's message names as the fix.
MERGE_FIX = "DeltaSink(..., merge_schema=True)"


@dataclass(frozen=True)
class SchemaMerge:
    """How a batch's schema meets a table's: the table's schema after the batch, or why it cannot land."""

    schema: Dict[str, Any]
    """The table's schema after the batch (Delta JSON); the table's own when nothing is added."""
    added: List[str] = field(default_factory=list)
    """Dotted paths of the columns and struct fields the batch adds (empty without ``merge_schema``)."""
    filled_with_null: List[str] = field(default_factory=list)
    """Dotted paths of the table's columns the batch lacks, read as NULL for its rows."""
    problems: List[str] = field(default_factory=list)
    """Why the batch cannot land, one entry per column; empty when it can."""

    @property
    def changes_table(self) -> bool:
        """Whether the table's schema must change before the batch's files are committed."""
        return not self.problems and bool(self.added)


def merge_schemas(table: Mapping[str, Any], batch: Mapping[str, Any], *, merge_schema: bool) -> SchemaMerge:
    """The table's schema after landing a batch, or the problems that refuse the batch.

    Parameters
    ----------
    table : mapping
        The table's schema, Delta JSON (``{"type": "struct", "fields": [...]}``).
    batch : mapping
        The batch's schema, Delta JSON.
    merge_schema : bool
        Whether new columns are added and missing ones read as NULL (see the module docstring).

    Returns
    -------
    SchemaMerge
        ``problems`` empty when the batch can land; ``schema`` is then the schema to commit under.
    """
    result = _Merge(merge_schema)
    merged = result.struct(table, batch, "")
    return SchemaMerge(schema=merged, added=result.added, filled_with_null=result.filled,
                       problems=result.problems)


def type_name(kind: Any) -> str:
    """A Delta type as users read it: ``long``, ``decimal(10,2)``, or compact JSON without nullability."""
    if isinstance(kind, str):
        return kind
    return json.dumps(_without_nullability(kind), separators=(",", ":"))


class _Merge:
    def __init__(self, merge_schema: bool) -> None:
        self.merge_schema = merge_schema
        self.added: List[str] = []
        self.filled: List[str] = []
        self.problems: List[str] = []

    def struct(self, table: Mapping[str, Any], batch: Mapping[str, Any], prefix: str) -> Dict[str, Any]:
        """Merge two struct types; returns the merged struct (the table's fields first, in its order)."""
        table_fields: List[Dict[str, Any]] = [dict(f) for f in table.get("fields", [])]
        by_lower = {f["name"].lower(): f for f in table_fields}
        seen: Dict[str, str] = {}
        merged_fields = [copy.deepcopy(f) for f in table_fields]
        merged_by_name = {f["name"]: f for f in merged_fields}
        for b in batch.get("fields", []):
            name, path = b["name"], prefix + b["name"]
            twin = seen.get(name.lower())
            if twin is not None:
                self.problems.append(f"columns '{prefix}{twin}' and '{path}' of the batch differ only in case: Delta "
                                     "column names are case-insensitive. Rename one in the transform")
                continue
            seen[name.lower()] = name
            t = by_lower.get(name.lower())
            if t is None:
                if self.merge_schema:
                    new = {"name": name, "type": _nullable(b["type"]), "nullable": True, "metadata": {}}
                    merged_fields.append(new)
                    self.added.append(path)
                else:
                    self.problems.append(f"column '{path}' is not in the table (pass {MERGE_FIX} to add it to the "
                                         "table's schema, or leave it out in the transform)")
                continue
            if t["name"] != name:
                self.problems.append(f"column '{path}' of the batch is '{prefix}{t['name']}' in the table (the names "
                                     f"differ only in case; Delta readers that match names exactly would read NULL): "
                                     f"rename it to '{t['name']}' in the transform")
                continue
            merged_by_name[name]["type"] = self.kind(t["type"], b["type"], path)
        for t in table_fields:
            if t["name"].lower() in seen:
                continue
            path = prefix + t["name"]
            if not self.merge_schema:
                self.problems.append(f"column '{path}' of the table is missing from the batch (produce it in the "
                                     f"transform, or pass {MERGE_FIX} to write NULL in it)")
            elif not t.get("nullable", True):
                self.problems.append(f"column '{path}' of the table is NOT NULL and missing from the batch: produce "
                                     "it in the transform")
            else:
                self.filled.append(path)
        return {**{k: v for k, v in table.items() if k != "fields"}, "type": "struct", "fields": merged_fields}

    def kind(self, table: Any, batch: Any, path: str) -> Any:
        """Merge two Delta types at ``path``; a difference other than new struct fields is a problem."""
        t_kind, b_kind = _kind_of(table), _kind_of(batch)
        if t_kind == b_kind == "struct":
            return self.struct(table, batch, path + ".")
        if t_kind == b_kind == "array":
            return {**table, "elementType": self.kind(table["elementType"], batch["elementType"], path + ".element")}
        if t_kind == b_kind == "map":
            return {**table, "keyType": self.kind(table["keyType"], batch["keyType"], path + ".key"),
                    "valueType": self.kind(table["valueType"], batch["valueType"], path + ".value")}
        if _without_nullability(table) != _without_nullability(batch):
            self.problems.append(
                f"column '{path}' is {type_name(batch)} in the batch but {type_name(table)} in the table: the sink "
                "never changes a column's type (not even with merge_schema=True; Delta changes types only "
                "through its typeWidening table feature or a rewrite). Cast it back in the transform"
                + (f" (CAST({path} AS {_sql_name(table)}))" if "." not in path and isinstance(table, str) else "")
                + ", or land into a new table")
        return table


def _kind_of(kind: Any) -> str:
    if isinstance(kind, Mapping):
        return str(kind.get("type"))
    return "primitive"


def _nullable(kind: Any) -> Any:
    """``kind`` with every nested field, element and value nullable (what an added column holds)."""
    if not isinstance(kind, Mapping):
        return kind
    k = _kind_of(kind)
    if k == "struct":
        return {**kind, "fields": [{**f, "type": _nullable(f["type"]), "nullable": True} for f in kind["fields"]]}
    if k == "array":
        return {**kind, "elementType": _nullable(kind["elementType"]), "containsNull": True}
    if k == "map":
        return {**kind, "keyType": _nullable(kind["keyType"]), "valueType": _nullable(kind["valueType"]),
                "valueContainsNull": True}
    return dict(kind)


def _without_nullability(node: Any) -> Any:
    """A Delta type as JSON data with every nullability flag and field metadata left out, at any depth."""
    if isinstance(node, Mapping):
        return {k: _without_nullability(v) for k, v in node.items()
                if k not in ("nullable", "containsNull", "valueContainsNull", "metadata")}
    if isinstance(node, list):
        return [_without_nullability(v) for v in node]
    return node


def _sql_name(kind: Any) -> str:
    """A Spark SQL name for a Delta type (for the suggested CAST)."""
    names = {"long": "BIGINT", "integer": "INT", "short": "SMALLINT", "byte": "TINYINT", "string": "STRING",
             "double": "DOUBLE", "float": "FLOAT", "boolean": "BOOLEAN", "binary": "BINARY", "date": "DATE",
             "timestamp": "TIMESTAMP", "timestamp_ntz": "TIMESTAMP_NTZ"}
    return names.get(kind, kind.upper()) if isinstance(kind, str) else "the table's type"


def merged_columns(table: Mapping[str, Any], merged: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """The top-level fields of ``merged`` that are new or changed against ``table`` (Delta JSON):
    what an ``ADD COLUMN`` commit (``DeltaTable.alter.add_columns``) passes to turn ``table`` into ``merged``."""
    before = {f["name"]: f for f in table.get("fields", [])}
    return [dict(f) for f in merged.get("fields", []) if before.get(f["name"]) != f]


# -- against a deltalake table ---------------------------------------------------------


def describe_schema_mismatch(table_schema: Any, arrow_schema: Any, *, merge_schema: bool = False) -> List[str]:
    """How a batch's Arrow schema differs from a Delta table's schema (empty when it fits);
    the rule is :func:`merge_schemas`."""
    return batch_merge(table_schema, arrow_schema, merge_schema).problems


def batch_merge(table_schema: Any, arrow_schema: Any, merge_schema: bool) -> SchemaMerge:
    """:func:`merge_schemas` of a deltalake table schema and a batch's Arrow schema."""
    from deltalake.schema import Schema

    try:
        batch = json.loads(Schema.from_arrow(arrow_schema).to_json())
    except Exception as exc:  # deltalake refuses names equal but for case, types Delta lacks
        raise SchemaMismatchError(f"the batch's columns cannot be a Delta schema: {exc}. Nothing was committed and "
                                  "no offset moved; rename or cast the columns in the transform") from exc
    return merge_schemas(json.loads(table_schema.to_json()), batch, merge_schema=merge_schema)


def merge_or_raise(table_path: str, table_schema: Any, arrow_schema: Any, batch: str,
                    merge_schema: bool) -> SchemaMerge:
    """:func:`batch_merge`, refusing a batch that does not fit (``batch`` names it in the error)."""
    merge = batch_merge(table_schema, arrow_schema, merge_schema)
    if merge.problems:
        raise SchemaMismatchError(
            f"{batch} does not fit the schema of Delta table '{table_path}': " + "; ".join(merge.problems)
            + ". Nothing was committed and no offset moved"
        )
    return merge
