"""RoutedDeltaSink: topics a mapping routes to one table must not have different options (the table would take
one topic's arguments for the other's rows, silently), and two spellings of one location are one table."""

from __future__ import annotations

import pytest

from kafka_group.errors import ConfigError
from pyspark_kafka_group import RoutedDeltaSink


def test_topics_routed_to_one_table_with_different_options_are_refused_when_the_sink_is_made() -> None:
    with pytest.raises(ConfigError, match="one table"):
        RoutedDeltaSink({"a": "/x/t", "b": "/x/t/"}, options={"a": {"keys": ["id"]}, "b": {}})


def test_topics_routed_to_one_table_with_different_options_from_a_function_are_refused_before_anything_lands(
) -> None:
    sink = RoutedDeltaSink({"a": "/x/t", "b": "file:///x/t"},
                           options=lambda topic: {"keys": ["id"]} if topic == "a" else {})
    with pytest.raises(ConfigError, match="one table"):
        sink._sinks_of({"a": "/x/t", "b": "file:///x/t"})


def test_topics_routed_to_one_table_with_the_same_options_share_one_sink() -> None:
    sink = RoutedDeltaSink({"a": "/x/t", "b": "/x/t/"}, options={"a": {"keys": ["id"]}, "b": {"keys": ["id"]}})
    sinks = sink._sinks_of({"a": "/x/t", "b": "/x/t/"})
    assert sinks["a"] is sinks["b"]


def test_a_dead_letter_location_with_a_comma_reaches_the_source_as_one_table() -> None:
    """``source_options()`` hands the source its shared tables; a location may hold a comma (a folder named
    ``dead,letters``), which a comma-separated list would cut in two."""
    from kafka_group.config.options import parse_source_options
    from kafka_group.delta.offsets.table_routes import parse_routes

    sink = RoutedDeltaSink("/lake/{topic}", dead_letters="/lake/dead,letters")
    parsed = parse_source_options({"kafka.bootstrap.servers": "h:9092", "subscribePattern": "db[.].*",
                                   "kafka.group.id": "g", **sink.source_options()})
    assert parsed.offsets_table_shared == ("/lake/dead,letters",)
    assert parse_routes(parsed.offsets_table or "", parsed.offsets_table_shared) == sink.routes
