"""describe_schema_mismatch: a batch's columns against a Delta table's schema (no process, no table)."""

from __future__ import annotations

import pyarrow as pa
from deltalake.schema import Schema

from kafka_group.delta.rules.schema_evolution import describe_schema_mismatch

TABLE = Schema.from_arrow(pa.schema([("value", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
                                     ("timestamp", pa.timestamp("us", tz="UTC"))]))


def test_same_columns_fit_whatever_the_arrow_string_flavour_or_nullability() -> None:
    batch = pa.schema([pa.field("value", pa.large_string(), nullable=False), ("partition", pa.int32()),
                       ("offset", pa.int64()), ("timestamp", pa.timestamp("us", tz="UTC"))])
    assert describe_schema_mismatch(TABLE, batch) == []


def test_each_difference_is_named() -> None:
    batch = pa.schema([("value", pa.string()), ("partition", pa.int64()), ("offset", pa.int64()), ("extra", pa.bool_())])
    assert [p.split(" (")[0].split(": the sink")[0] for p in describe_schema_mismatch(TABLE, batch)] == [
        "column 'partition' is long in the batch but integer in the table",
        "column 'extra' is not in the table",
        "column 'timestamp' of the table is missing from the batch",
    ]


def test_nullability_inside_nested_types_is_not_a_difference() -> None:
    table = Schema.from_arrow(pa.schema([("tags", pa.list_(pa.field("item", pa.string(), nullable=False)))]))
    assert describe_schema_mismatch(table, pa.schema([("tags", pa.list_(pa.string()))])) == []
    [problem] = describe_schema_mismatch(table, pa.schema([("tags", pa.list_(pa.int32()))]))
    assert problem.startswith("column 'tags.element' is integer in the batch but string in the table")
