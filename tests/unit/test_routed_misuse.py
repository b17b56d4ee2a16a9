"""A routed source (``offsets.table`` a location template or a mapping) feeding a plain ``DeltaSink``: refused at
the batch's plan, before anything lands, naming ``RoutedDeltaSink``."""

from __future__ import annotations

import json

import pytest

from kafka_group.errors import ConfigError
from pyspark_kafka_group.sink.sink_checkpoint import batch_plan


def _offsets_text(offsets_table: str) -> str:
    doc = {"@group": "g", "@offsetsTable": offsets_table, "orders": {"0": [0, 10]}}
    return "v1\n" + json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 0, "conf": {}}) + "\n" + json.dumps(doc) + "\n"


@pytest.mark.parametrize("offsets_table", [
    "/lake/{topic}",
    '{"offsets.table": "/lake/{topic}", "offsets.table.shared": ["/lake/dead"]}',
    '{"orders":"/lake/orders"}',
])
def test_a_plain_delta_sink_at_the_literal_template_path_is_refused(offsets_table: str) -> None:
    # DeltaSink("/lake/{topic}") used to match the source's template as the same location and land every topic in
    # one folder literally named '{topic}', while the source positions from the topics' own tables.
    with pytest.raises(ConfigError, match="RoutedDeltaSink"):
        batch_plan(_offsets_text(offsets_table), 0, offsets_table)


def test_a_plain_delta_sink_under_a_routed_source_is_refused_naming_the_routed_sink() -> None:
    with pytest.raises(ConfigError, match="RoutedDeltaSink"):
        batch_plan(_offsets_text("/lake/{topic}"), 0, "/lake/orders")
