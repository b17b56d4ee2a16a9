"""Endpoints the connector opens listen on loopback unless the user names an address (issue 27, item 2).

The Prometheus exporter's HTTP server is checked where the kernel keeps it: the listening
socket's local address in ``/proc/net/tcp`` (and ``tcp6``), found by its port. The JVM shim's
settings are checked as the Spark settings they are: nothing turns on an endpoint of Spark's
that the user did not ask for, nor overrides a choice the user made on the builder.
"""

from __future__ import annotations

import pathlib
import pickle
from types import SimpleNamespace
from typing import Any, List

import pytest

from tests.support import listening_addresses

pytestmark = pytest.mark.skipif(not pathlib.Path("/proc/net/tcp").exists(), reason="reads /proc/net/tcp (Linux)")


class _Streams:
    def __init__(self) -> None:
        self.listeners: List[Any] = []

    def addListener(self, listener: Any) -> None:  # noqa: N802 - Spark's name
        self.listeners.append(listener)


def test_the_exporter_listens_on_loopback_by_default() -> None:
    pytest.importorskip("prometheus_client")
    from pyspark_kafka_group.prometheus import export_metrics

    session = SimpleNamespace(streams=_Streams())  # a classic session: the exporter starts in this process
    listener = export_metrics(session, port=0)  # type: ignore[arg-type]
    try:
        assert listener.port
        assert listening_addresses(listener.port) == {"127.0.0.1"}
    finally:
        listener.stop()


def test_the_listener_sent_to_a_connect_server_listens_on_loopback_there() -> None:
    pytest.importorskip("prometheus_client")
    from pyspark_kafka_group.prometheus import KafkaGroupMetricsListener

    # Under Spark Connect the listener is pickled to the server and starts there on its first hook.
    copy = pickle.loads(pickle.dumps(KafkaGroupMetricsListener(port=0)))
    copy.start()
    try:
        assert copy.port and listening_addresses(copy.port) == {"127.0.0.1"}
    finally:
        copy.stop()


def test_the_exporter_listens_where_the_user_names_an_address() -> None:
    pytest.importorskip("prometheus_client")
    from pyspark_kafka_group.prometheus import export_metrics

    listener = export_metrics(SimpleNamespace(streams=_Streams()), port=0, addr="0.0.0.0")  # type: ignore[arg-type]
    try:
        assert listener.port and listening_addresses(listener.port) == {"0.0.0.0"}
    finally:
        listener.stop()


def test_an_empty_address_is_refused_not_read_as_every_interface() -> None:
    pytest.importorskip("prometheus_client")
    from kafka_group.errors import ConfigError
    from pyspark_kafka_group.prometheus import KafkaGroupMetricsListener

    for addr in ("", "  "):  # the socket module binds "" to every interface
        with pytest.raises(ConfigError, match="addr must name the address"):
            KafkaGroupMetricsListener(port=0, addr=addr)


def test_the_shim_settings_turn_on_no_endpoint_unless_asked(tmp_path: pathlib.Path) -> None:
    from pyspark_kafka_group.metrics import kafka_group_metrics_conf

    jar = tmp_path / "shim.jar"
    conf = kafka_group_metrics_conf(jar=jar)
    assert conf["spark.sql.streaming.streamingQueryListeners"] == "kafkagroup.metrics.KafkaGroupMetricsListener"
    assert [key for key in conf if key.startswith(("spark.ui.", "spark.metrics.conf."))] == []

    # Asked for: Spark's Prometheus servlet on the UI's port (no new port); Spark's own switch for
    # the executors' endpoint is not the connector's to set.
    servlet = kafka_group_metrics_conf(jar=jar, prometheus=True)
    assert servlet["spark.metrics.conf.*.sink.prometheusServlet.class"] == (
        "org.apache.spark.metrics.sink.PrometheusServlet")
    assert servlet["spark.metrics.conf.*.sink.prometheusServlet.path"] == "/metrics/prometheus"
    assert [key for key in servlet if key.startswith("spark.ui.")] == []


def test_configuring_a_builder_keeps_the_users_ui_settings(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyspark.sql import SparkSession

    from pyspark_kafka_group.metrics import configure_spark_with_kafka_group_metrics

    jar = tmp_path / "shim.jar"
    jar.write_bytes(b"")
    monkeypatch.setenv("PYSPARK_KAFKA_GROUP_SHIM_JAR", str(jar))
    builder = SparkSession.Builder().config("spark.ui.prometheus.enabled", "false")
    options = configure_spark_with_kafka_group_metrics(builder, prometheus=True)._options
    assert options["spark.ui.prometheus.enabled"] == "false"
    assert options["spark.metrics.conf.*.sink.prometheusServlet.class"].endswith("PrometheusServlet")
