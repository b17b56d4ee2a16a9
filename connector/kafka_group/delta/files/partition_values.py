"""Partition values and file names of the sink's data files.

Partition values serialized per the Delta protocol (:func:`partition_value`), Hive-style folder
names (:func:`escape_path_name`, Spark's escaping), the partition columns the sink accepts
(:func:`check_partition_columns`), and a new file's path
``data/[<col>=<value>/...]part-<batch>-<uuid>.snappy.parquet`` relative to the table root
(:func:`data_file_path`; delta-rs percent-encodes it into the ``add`` action's ``path``).
"""

from __future__ import annotations

import uuid
from typing import Any, Optional, Sequence, Tuple

from kafka_group.delta.storage.table_location import DATA_FOLDER
from kafka_group.errors import ConfigError

__all__ = ["HIVE_DEFAULT_PARTITION", "check_partition_columns", "data_file_path", "escape_path_name", "partition_value"]

#: Folder name of a null partition value (Hive's and Spark's).
HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"

# Spark's ExternalCatalogUtils.escapePathName: these and the control characters become %XX.
_ESCAPED = frozenset('"#%\'*/:=?\\\x7f{[]^')


def escape_path_name(text: str) -> str:
    """``text`` as a Hive-style folder name component (Spark's ``escapePathName``)."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED or ord(c) < 0x20 else c for c in text)


def partition_value(value: Any, arrow_type: Any, column: str) -> Optional[str]:
    """One partition value as the Delta protocol serializes it in ``partitionValues``.

    Parameters
    ----------
    value : object
        The column's value (a Python scalar, as ``pyarrow`` returns it), or None.
    arrow_type : pyarrow.DataType
        The column's type.
    column : str
        The column's name, for the error.

    Returns
    -------
    str or None
        Strings as they are (the empty string is null, as in Spark), integers in
        decimal, booleans ``true``/``false``, dates ``YYYY-MM-DD``; None for null.

    Raises
    ------
    ConfigError
        The type is not one the sink partitions by (see :func:`check_partition_columns`).
    """
    import pyarrow as pa

    _check_partition_type(column, arrow_type)
    if value is None:
        return None
    if pa.types.is_boolean(arrow_type):
        return "true" if value else "false"
    if pa.types.is_integer(arrow_type):
        return str(int(value))
    if pa.types.is_date(arrow_type):
        return f"{value.year:04d}-{value.month:02d}-{value.day:02d}"
    text = str(value)
    return text if text else None


def _check_partition_type(column: str, arrow_type: Any) -> None:
    import pyarrow as pa

    if not (pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type) or pa.types.is_integer(arrow_type)
            or pa.types.is_boolean(arrow_type) or pa.types.is_date(arrow_type)):
        raise ConfigError(
            f"DeltaSink(partition_by=...) names column '{column}' of type {arrow_type}: partition by a string, "
            "integer, boolean or date column (derive one in the transform, e.g. to_date(timestamp) AS date)"
        )


def check_partition_columns(arrow_schema: Any, partition_by: Sequence[str], *, table: str) -> None:
    """Refuse a ``partition_by`` that names a missing column, a column twice, every column, or
    a type the sink does not partition by, before anything is written.

    Raises
    ------
    ConfigError
        The message names the column and the fix.
    """
    names = list(arrow_schema.names)
    seen: set[str] = set()
    for column in partition_by:
        if column not in names:
            raise ConfigError(
                f"DeltaSink('{table}', partition_by=...) names column '{column}', which the batch does not have "
                f"(its columns: {', '.join(names)}): partition by columns the transform produces"
            )
        if column in seen:
            raise ConfigError(f"DeltaSink('{table}', partition_by=...) names column '{column}' twice")
        seen.add(column)
        _check_partition_type(column, arrow_schema.field(column).type)
    if partition_by and len(seen) == len(names):
        raise ConfigError(
            f"DeltaSink('{table}', partition_by=...) names every column of the batch: keep at least one data column"
        )


def data_file_path(batch_id: int, partition: Sequence[Tuple[str, Optional[str]]] = ()) -> str:
    """A new data file's path relative to the table root (not percent-encoded).

    ``partition`` holds ``(column, serialized value)`` pairs, in ``partition_by`` order.
    """
    folders = "".join(
        f"{escape_path_name(column)}={HIVE_DEFAULT_PARTITION if value is None else escape_path_name(value)}/"
        for column, value in partition
    )
    return f"{DATA_FOLDER}/{folders}part-{batch_id:08d}-{uuid.uuid4().hex}.snappy.parquet"
