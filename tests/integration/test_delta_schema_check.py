"""A batch whose columns do not match the Delta table fails before anything is committed.

Issue 13, finding 6: the commit used the table's schema whatever the written files
held, so a changed transform appended files whose new columns were invisible and
whose retyped columns were read back wrongly or as NULL.
"""

from __future__ import annotations

import pathlib
from typing import Any, Callable

import pytest
from deltalake import DeltaTable
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from pyspark_kafka_group import DeltaSink
from tests.support import (
    Cluster,
    MakeTopic,
    delta_source,
    expected,
    keep_columns,
    land_available_now,
    produce,
    table_folder_files,
    table_records,
    unique_name,
)

pytestmark = pytest.mark.integration


def retyped(df: Any) -> Any:  # the offset as a string
    return df.selectExpr("CAST(value AS STRING) AS value", "topic", "partition", "CAST(offset AS STRING) AS offset")


def widened(df: Any) -> Any:  # a column the table does not have
    return keep_columns(df).selectExpr("*", "length(value) AS value_length")


def narrowed(df: Any) -> Any:  # a column of the table left out
    return df.selectExpr("topic", "partition", "offset")


@pytest.mark.parametrize("transform, merge_schema, named, says", [
    pytest.param(retyped, False, "offset", "is string in the batch but long in the table", id="retyped"),
    # a type change is refused even where new columns are merged (issue 15, item 4)
    pytest.param(retyped, True, "offset", "is string in the batch but long in the table", id="retyped-merge-schema"),
    pytest.param(widened, False, "value_length", "DeltaSink(..., merge_schema=True)", id="widened"),
    pytest.param(narrowed, False, "value", "merge_schema=True", id="narrowed"),
])
def test_batch_with_other_columns_is_refused_and_the_table_is_unchanged(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path,
    transform: Callable[[Any], Any], merge_schema: bool, named: str, says: str,
) -> None:
    topic, group, table = make_topic(1), unique_name("group"), tmp_path / "table"
    produce(kafka.bootstrap_servers, topic, {0: 10})
    land_available_now(delta_source(spark, kafka, topic, group, table), DeltaSink(str(table), transform=keep_columns),
                       tmp_path / "chk")
    version = DeltaTable(str(table)).version()
    files = table_folder_files(table)

    produce(kafka.bootstrap_servers, topic, {0: 10}, start=10)
    with pytest.raises(StreamingQueryException) as failure:
        land_available_now(delta_source(spark, kafka, topic, group, table),
                           DeltaSink(str(table), transform=transform, merge_schema=merge_schema), tmp_path / "chk")
    message = str(failure.value)
    assert "schema" in message and f"'{named}'" in message and says in message, message[-2000:]
    assert DeltaTable(str(table)).version() == version
    assert table_folder_files(table) == files, "the refused batch left files behind"

    # The user puts the transform back: the same batch lands, exactly once.
    land_available_now(delta_source(spark, kafka, topic, group, table), DeltaSink(str(table), transform=keep_columns),
                       tmp_path / "chk")
    assert table_records(table) == expected(topic, {0: 20})
