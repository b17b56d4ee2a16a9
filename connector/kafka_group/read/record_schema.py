"""The record schema: identical to Spark's built-in Kafka source, in Spark DDL and in Arrow.

The Arrow schema is what executors return to Spark; it must match the declared
Spark schema exactly (``TimestampType`` is ``timestamp[us, tz=UTC]``, every
column nullable, as Spark's Kafka source declares them).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

# pyarrow is imported where a schema is built, not here: Spark's data source lookup imports the data source
# module in Python workers that never see a record (lookup, creation), and pyarrow is a tenth of a second of
# CPU at every such start.

__all__ = ["spark_ddl", "arrow_schema", "header_type", "TIMESTAMP_TYPE_BY_LIBRDKAFKA"]

_BASE_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
_HEADERS_DDL = "headers array<struct<key: string, value: binary>>"

#: librdkafka's timestamp types mapped to Kafka's Java ``TimestampType`` ids, as Spark shows them:
#: not available -> -1, create time -> 0, log append time -> 1.
TIMESTAMP_TYPE_BY_LIBRDKAFKA = {0: -1, 1: 0, 2: 1}


@functools.cache
def header_type() -> pa.DataType:
    """The Arrow type of the ``headers`` column: a list of (string key, binary value) structs (built once: the
    batch builders ask for it at every batch)."""
    import pyarrow as pa

    return pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))


def spark_ddl(include_headers: bool) -> str:
    """The Spark schema of the source's rows, as a DDL string.

    Parameters
    ----------
    include_headers : bool
        Whether the ``headers`` column is part of the schema (option ``includeHeaders``).
    """
    return f"{_BASE_DDL}, {_HEADERS_DDL}" if include_headers else _BASE_DDL


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema of the record batches returned to Spark."""
    import pyarrow as pa

    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", header_type()))
    return pa.schema(fields)
