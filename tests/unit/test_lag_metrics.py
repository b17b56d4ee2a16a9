"""Spark's Kafka lag metrics from progress events, and their Prometheus exposition."""

from __future__ import annotations

import json
import pathlib
import urllib.request
from types import SimpleNamespace
from typing import Any, Dict, FrozenSet, Tuple

import pytest

from kafka_group.errors import ConfigError
from kafka_group.lag_metrics import source_metrics
from kafka_group.offsets import TopicPartition

SAMPLES = pathlib.Path(__file__).resolve().parents[1] / "data" / "formats"


def _event() -> Dict[str, Any]:
    doc: Dict[str, Any] = json.loads((SAMPLES / "progress_event.json").read_text())
    return doc


def test_lag_is_latest_minus_position_over_owned_partitions() -> None:
    (metrics,) = source_metrics(_event())
    # latest {0: 620, 1: 230, 2: 90}; end positions {0: 500, 1: 230, 2: 75}
    assert metrics.behind_latest == {TopicPartition("orders", 0): 120, TopicPartition("orders", 1): 0,
                                     TopicPartition("orders", 2): 15}
    assert (metrics.min_offsets_behind_latest, metrics.max_offsets_behind_latest) == (0, 120)
    assert metrics.avg_offsets_behind_latest == pytest.approx(45.0)
    assert metrics.spark_metrics() == {"minOffsetsBehindLatest": "0", "maxOffsetsBehindLatest": "120",
                                       "avgOffsetsBehindLatest": "45.0"}


def test_membership_and_query_identity_come_along() -> None:
    (metrics,) = source_metrics(_event())
    assert metrics.query_id == "5b8cfa2e-7f2b-4c55-9a40-3f0c2d7a1e11"
    assert metrics.query_name == "orders_to_delta"
    assert (metrics.source, metrics.batch_id, metrics.group, metrics.generation) == (0, 7, "orders-etl", 3)
    assert (metrics.owned, metrics.paused, metrics.input_rows) == (3, 1, 150)


def test_the_other_source_of_the_event_is_skipped() -> None:
    assert [m.source for m in source_metrics(_event())] == [0]  # source 1 is Spark's own Kafka source


def test_first_batch_has_no_lag_yet() -> None:
    # Batch 0's event has no latestOffset report yet (its source's endOffset carries no positions): the source
    # is left out, so no metric says it is behind (a loop over the result would check nothing here).
    event = json.loads((SAMPLES / "progress_event_first_batch.json").read_text())
    assert event["sources"][0]["latestOffset"] is None
    assert source_metrics(event) == []
    # A later event whose report names owned partitions but no positions yet: no lag, and no metric for Spark.
    later = _event()
    report = later["sources"][0]["latestOffset"]
    report["@member"]["owned"] = {}
    (metrics,) = source_metrics(later)
    assert metrics.behind_latest == {}
    assert metrics.spark_metrics() == {}
    assert metrics.min_offsets_behind_latest is None


def test_a_partition_no_longer_owned_is_left_out() -> None:
    event = _event()
    latest = json.loads(json.dumps(event["sources"][0]["latestOffset"]))
    latest["@member"]["owned"] = {"orders": [0, 2]}
    event["sources"][0]["latestOffset"] = latest
    (metrics,) = source_metrics(event)
    assert set(metrics.behind_latest) == {TopicPartition("orders", 0), TopicPartition("orders", 2)}


def test_json_text_and_progress_objects_are_read_alike() -> None:
    event = _event()
    as_object = SimpleNamespace(json=json.dumps(event))
    assert source_metrics(json.dumps(event)) == source_metrics(event) == source_metrics(as_object)


# -- the Prometheus exporter, fed events directly (no Spark) -------------------------------------------------


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return str(response.read().decode())


QUERY = {"query_id": "5b8cfa2e-7f2b-4c55-9a40-3f0c2d7a1e11", "query_name": "orders_to_delta", "source": "0"}


def _samples(port: int) -> Dict[Tuple[str, FrozenSet[Tuple[str, str]]], float]:
    """Every sample of a scrape, by metric name and label set."""
    from prometheus_client.parser import text_string_to_metric_families

    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(_scrape(port)) for sample in family.samples}


def _key(name: str, **labels: str) -> Tuple[str, FrozenSet[Tuple[str, str]]]:
    return name, frozenset({**QUERY, **labels}.items())


def test_exporter_serves_the_metrics_and_forgets_what_is_gone() -> None:
    pytest.importorskip("prometheus_client")
    from pyspark_kafka_group.prometheus import KafkaGroupMetricsListener

    listener = KafkaGroupMetricsListener(port=0, addr="127.0.0.1")
    listener.start()
    try:
        assert listener.port
        listener.onQueryProgress(SimpleNamespace(progress=json.dumps(_event())))
        samples = _samples(listener.port)
        assert samples[_key("kafka_group_maxOffsetsBehindLatest")] == 120
        assert samples[_key("kafka_group_minOffsetsBehindLatest")] == 0
        assert samples[_key("kafka_group_avgOffsetsBehindLatest")] == 45
        assert samples[_key("kafka_group_offsetsBehindLatest", topic="orders", partition="2")] == 15
        assert samples[_key("kafka_group_paused_partitions")] == 1
        assert samples[_key("kafka_group_generation")] == 3

        # Partition 1 moves to another member: its series goes.
        event = _event()
        event["sources"][0]["latestOffset"]["@member"]["owned"] = {"orders": [0, 2]}
        listener.onQueryProgress(SimpleNamespace(progress=json.dumps(event)))
        samples = _samples(listener.port)
        assert _key("kafka_group_offsetsBehindLatest", topic="orders", partition="1") not in samples
        assert samples[_key("kafka_group_owned_partitions")] == 2

        listener.onQueryTerminated(SimpleNamespace(id="5b8cfa2e-7f2b-4c55-9a40-3f0c2d7a1e11"))
        assert "5b8cfa2e" not in _scrape(listener.port)
    finally:
        listener.stop()


def test_a_malformed_event_is_skipped_not_raised() -> None:
    pytest.importorskip("prometheus_client")
    from pyspark_kafka_group.prometheus import KafkaGroupMetricsListener

    listener = KafkaGroupMetricsListener(port=0, addr="127.0.0.1")
    try:
        listener.onQueryProgress(SimpleNamespace(progress='{"sources": 3}'))  # a listener never fails the bus
    finally:
        listener.stop()


def test_exporter_needs_a_destination_and_a_real_port() -> None:
    pytest.importorskip("prometheus_client")
    from pyspark_kafka_group.prometheus import KafkaGroupMetricsListener

    with pytest.raises(ConfigError, match="port=<n>.*push_gateway=<url>"):
        KafkaGroupMetricsListener()
    with pytest.raises(ConfigError, match="port must be a TCP port"):
        KafkaGroupMetricsListener(port=70000)


def test_listener_pickles_without_its_server() -> None:
    pytest.importorskip("prometheus_client")
    import pickle

    from pyspark_kafka_group.prometheus import KafkaGroupMetricsListener

    listener = KafkaGroupMetricsListener(port=0, addr="127.0.0.1")
    listener.start()
    try:
        copy = pickle.loads(pickle.dumps(listener))
        assert copy.port is None and copy.requested_port == 0  # the copy starts its own where it runs
    finally:
        listener.stop()
