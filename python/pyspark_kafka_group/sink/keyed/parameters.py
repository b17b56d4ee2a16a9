"""``DeltaSink``'s keyed (AUTO CDC) parameters, checked when the sink is made (caller: ``DeltaSink.__init__``).

The names and values follow Databricks' AUTO CDC (``create_auto_cdc_flow``): ``keys``, ``column_list``,
``except_column_list`` and the ``track_history_*`` lists take column names or ``F.col("name")``;
``sequence_by`` a SQL expression string or a Column (``F.struct("ts", "lsn")`` orders field by field);
``stored_as_scd_type`` 1, 2, "1" or "2". The rules themselves: :class:`kafka_group.delta.keyed.change_rules.KeyedSpec`.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Mapping, Optional, Tuple

from kafka_group.delta.keyed.change_rules import KeyedSpec
from kafka_group.delta.keyed.create import created_properties
from kafka_group.delta.keyed.tombstones import DEFAULT_RETENTION_SECONDS, retention_seconds
from kafka_group.errors import ConfigError

__all__ = ["keyed_parameters", "keyed_table_properties"]

#: The keyed parameters and their defaults (all of them belong to the keyed mode).
DEFAULTS: Mapping[str, Any] = {
    "sequence_by": None, "apply_as_deletes": None, "apply_as_truncates": None, "column_list": None,
    "except_column_list": None, "stored_as_scd_type": 1, "ignore_null_updates": False,
    "track_history_column_list": None, "track_history_except_column_list": None, "tombstone_retention": None,
}
_NAME_LISTS = ("keys", "column_list", "except_column_list", "track_history_column_list",
               "track_history_except_column_list")
_COLUMN_NAME = re.compile(r"^Column<'([^'()]+)'>$")


def keyed_parameters(keys: Any, merge_schema: bool, given: Mapping[str, Any]) -> Tuple[Optional[KeyedSpec], float]:
    """The sink's :class:`KeyedSpec` (None: append mode) and its tombstones' retention in seconds.

    Raises
    ------
    ConfigError
        A parameter of the wrong kind or value (named, with the fix), a keyed parameter without ``keys``.
    """
    unknown = set(given) - set(DEFAULTS)
    if unknown:
        raise TypeError(f"unexpected keyed parameter(s) {sorted(unknown)}")
    values = {**DEFAULTS, **given}
    retention = values.pop("tombstone_retention")
    if keys is None:
        if any(not _same(values[k], v) for k, v in DEFAULTS.items() if k != "tombstone_retention") \
                or retention is not None:
            named = ", ".join(DEFAULTS)
            raise ConfigError(f"DeltaSink: {named} belong to the keyed mode: give keys=[...] too")
        return None, DEFAULT_RETENTION_SECONDS
    if merge_schema:
        raise ConfigError("DeltaSink(keys=..., merge_schema=True): the keyed mode does not merge schemas; "
                          "leave merge_schema out, or add the columns with ALTER TABLE ... ADD COLUMNS")
    names = {k: _column_names(k, keys if k == "keys" else values[k]) for k in _NAME_LISTS}
    sequence_by = values["sequence_by"]
    if sequence_by is not None and not isinstance(sequence_by, str) and not _is_column(sequence_by):
        raise ConfigError(f"DeltaSink(sequence_by=...) takes a SQL expression string or a Column, such as "
                          f"F.col('ts') or F.struct('ts', 'lsn'), got {type(sequence_by).__name__}")
    spec = KeyedSpec.build(names["keys"], sequence_by, values["apply_as_deletes"], names["column_list"],
                           names["except_column_list"], values["stored_as_scd_type"],
                           ignore_null_updates=values["ignore_null_updates"],
                           apply_as_truncates=values["apply_as_truncates"],
                           track_history_column_list=names["track_history_column_list"],
                           track_history_except_column_list=names["track_history_except_column_list"])
    return spec, DEFAULT_RETENTION_SECONDS if retention is None else retention_seconds(retention)


def keyed_table_properties(spec: Optional[KeyedSpec], table_properties: Optional[Mapping[str, Any]]
                           ) -> Optional[Dict[str, str]]:
    """``DeltaSink(table_properties=...)``, checked: the properties of the table the keyed sink's first batch
    creates (:func:`~kafka_group.delta.keyed.create.created_properties`), None in append mode."""
    if spec is None:
        if table_properties is not None:
            raise ConfigError("DeltaSink(table_properties=...) belongs to the keyed mode: give keys=[...] too")
        return None
    return created_properties(table_properties, spec)


def _same(a: Any, b: Any) -> bool:
    return a is b or (type(a) is type(b) and a == b)


def _is_column(value: Any) -> bool:
    from pyspark.sql import Column

    return isinstance(value, Column)


def _column_names(label: str, value: Any) -> Any:
    """A list of names or ``F.col("name")`` as names (AUTO CDC takes both); anything else as given (checked
    by :meth:`KeyedSpec.build`)."""
    if not isinstance(value, (list, tuple)):
        return value
    out = []
    for item in value:
        if _is_column(item):
            match = _COLUMN_NAME.match(str(item))
            if match is None or "." in match.group(1):
                raise ConfigError(f"DeltaSink({label}=...) takes column names or F.col('name') of a top-level "
                                  f"column (no qualifier, no expression), got {item}")
            item = match.group(1)
        out.append(item)
    return out
