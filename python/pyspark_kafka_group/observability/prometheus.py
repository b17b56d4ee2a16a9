"""Spark's Kafka lag metrics of ``kafka-group`` queries, for Prometheus, without the JVM.

One call registers a ``StreamingQueryListener`` that turns every progress event
of the session's queries into Prometheus metrics, and serves them over HTTP (for
Prometheus to scrape) or pushes them to a Pushgateway:

>>> from pyspark_kafka_group.prometheus import export_metrics
>>> export_metrics(spark, port=9108)                                        # doctest: +SKIP
>>> export_metrics(spark, port=9108, addr="0.0.0.0")                        # doctest: +SKIP
>>> export_metrics(spark, push_gateway="http://pushgateway:9091")           # doctest: +SKIP

The HTTP endpoint listens on ``127.0.0.1`` (this machine only) unless ``addr`` names
another address, and has no authentication: whoever reaches it reads every series
below (query ids and names, topic names, partition numbers, lags, counts; no record
data, no settings). Name an address only where the network limits who reaches it.

Metrics (labels ``query_id``, ``query_name``, ``source``; per partition also
``topic`` and ``partition``), named after Spark's Kafka source metrics so that
dashboards built for ``format("kafka")`` find them:

``kafka_group_minOffsetsBehindLatest``, ``kafka_group_maxOffsetsBehindLatest``, ``kafka_group_avgOffsetsBehindLatest``
    Over the partitions the member owns: the latest broker offset minus the
    position after the last batch (see :mod:`kafka_group.lag_metrics`).
``kafka_group_offsetsBehindLatest``
    The same, per ``topic`` and ``partition``.
``kafka_group_owned_partitions``, ``kafka_group_paused_partitions``
    Partitions the query's group member owns, and those of them paused by flow control.
``kafka_group_generation``
    The member's generation (it grows with every rebalance event).
``kafka_group_batch_id``, ``kafka_group_input_rows``
    The last micro-batch and the records it read from the source.

The series of a partition the member no longer owns, and every series of a query
that stopped, are removed. The listener works under Spark Connect too: Spark then
runs it on the Connect server (the driver), so the HTTP endpoint is served there
(on the server's loopback unless ``addr`` says otherwise);
its registry and server are created in the process that runs it, not pickled.
Spark's own metrics system (``spark.metrics.conf``) is reached through the JVM
shim instead (:mod:`pyspark_kafka_group.metrics`).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, Dict, Optional, Set, Tuple

from kafka_group.errors import ConfigError, FormatError
from kafka_group.lag_metrics import SourceMetrics, source_metrics
from pyspark.sql.streaming.listener import StreamingQueryListener

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry, Gauge
    from pyspark.sql import SparkSession

__all__ = ["KafkaGroupMetricsListener", "export_metrics"]

logger = logging.getLogger(__name__)

#: Where the HTTP endpoint listens unless the caller names an address: this machine only.
LOOPBACK = "127.0.0.1"
_PREFIX = "kafka_group_"
_QUERY_LABELS = ("query_id", "query_name", "source")
_PARTITION_LABELS = (*_QUERY_LABELS, "topic", "partition")

#: Per-source gauges: name, help, how to read it from SourceMetrics.
_SOURCE_GAUGES: Tuple[Tuple[str, str], ...] = (
    ("minOffsetsBehindLatest", "Least records any owned partition was behind its latest offset after the last batch"),
    ("maxOffsetsBehindLatest", "Most records any owned partition was behind its latest offset after the last batch"),
    ("avgOffsetsBehindLatest", "Average records the owned partitions were behind their latest offsets after the last "
                               "batch"),
    ("owned_partitions", "Partitions the query's consumer-group member owns"),
    ("paused_partitions", "Owned partitions paused by flow control"),
    ("generation", "The group member's generation (grows with every rebalance event)"),
    ("batch_id", "The last micro-batch"),
    ("input_rows", "Records the last micro-batch read from the source"),
)


def _source_value(name: str, metrics: SourceMetrics) -> Optional[float]:
    value: Optional[float] = {
        "minOffsetsBehindLatest": metrics.min_offsets_behind_latest,
        "maxOffsetsBehindLatest": metrics.max_offsets_behind_latest,
        "avgOffsetsBehindLatest": metrics.avg_offsets_behind_latest,
        "owned_partitions": metrics.owned,
        "paused_partitions": metrics.paused,
        "generation": metrics.generation,
        "batch_id": metrics.batch_id,
        "input_rows": metrics.input_rows,
    }[name]
    return value


class KafkaGroupMetricsListener(StreamingQueryListener):
    """A ``StreamingQueryListener`` publishing ``kafka-group`` lag metrics to Prometheus.

    Create it with :func:`export_metrics`, which also registers it.

    Parameters
    ----------
    port : int, optional
        Serve the metrics over HTTP on this port (``/metrics``; 0 picks a free port,
        see :attr:`port`).
    addr : str, default "127.0.0.1"
        The address the HTTP server binds: loopback by default (a scraper on the same
        machine); name another (``"0.0.0.0"``: every interface) for a scraper elsewhere.
        The endpoint has no authentication.
    push_gateway : str, optional
        A Prometheus Pushgateway URL; the metrics are pushed after every progress event,
        under ``job``.
    job : str
        The Pushgateway job name.

    Notes
    -----
    Spark calls the ``on*`` hooks on its listener thread (classic sessions: the driver's
    Python process; Spark Connect: a Python worker on the Connect server). The HTTP
    server answers scrapes on its own thread; ``prometheus_client``'s gauges are
    thread-safe.
    """

    def __init__(self, *, port: Optional[int] = None, addr: str = LOOPBACK,
                 push_gateway: Optional[str] = None, job: str = "kafka-group") -> None:
        if port is None and push_gateway is None:
            raise ConfigError("export_metrics needs port=<n> (an HTTP endpoint for Prometheus to scrape) or "
                              "push_gateway=<url> (a Pushgateway to push to); neither was given")
        if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535):
            raise ConfigError(f"export_metrics: port must be a TCP port number 0-65535, got {port!r}")
        if not isinstance(addr, str) or not addr.strip():  # "" would bind every interface
            raise ConfigError(f"export_metrics: addr must name the address to listen on (default {LOOPBACK}; "
                              f"'0.0.0.0' for every interface), got {addr!r}")
        if push_gateway is not None and (not isinstance(push_gateway, str) or not push_gateway.strip()):
            raise ConfigError(f"export_metrics: push_gateway must be the Pushgateway's URL, got {push_gateway!r}")
        self.requested_port = port
        self.addr = addr
        self.push_gateway = push_gateway
        self.job = job
        self._state: Optional[_Exporter] = None
        self._lock = threading.Lock()

    # -- pickling (Spark Connect sends the listener to the server) -----------------------

    def __getstate__(self) -> Dict[str, Any]:
        state = dict(self.__dict__)
        state["_state"] = None
        state.pop("_lock", None)
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    # -- the exporter --------------------------------------------------------------------

    def start(self) -> None:
        """Create the registry and start the HTTP server, if not done yet (idempotent).

        Caller: :func:`export_metrics` on the user's thread, or the first listener hook
        in a process the listener was sent to.
        """
        with self._lock:
            if self._state is None:
                self._state = _Exporter(self.requested_port, self.addr)

    @property
    def port(self) -> Optional[int]:
        """The port the HTTP endpoint listens on in this process (None before :meth:`start`
        or without ``port``)."""
        return None if self._state is None else self._state.port

    def stop(self) -> None:
        """Stop the HTTP server (the listener stays registered; remove it with
        ``spark.streams.removeListener``)."""
        with self._lock:
            if self._state is not None:
                self._state.close()
                self._state = None

    def _exporter(self) -> "_Exporter":
        self.start()
        assert self._state is not None
        return self._state

    # -- Spark's hooks -------------------------------------------------------------------

    def onQueryStarted(self, event: Any) -> None:
        """Spark's hook: nothing to publish before the first progress."""

    def onQueryProgress(self, event: Any) -> None:
        """Spark's hook: publish the metrics of every ``kafka-group`` source of the event."""
        try:
            sources = source_metrics(event.progress, what="a progress event")
        except FormatError as exc:  # a listener must not fail the query's listener bus
            logger.warning("kafka-group metrics: skipping a progress event: %s", exc)
            return
        exporter = self._exporter()
        for metrics in sources:
            exporter.publish(metrics)
        self._push(exporter)

    def onQueryIdle(self, event: Any) -> None:
        """Spark's hook: nothing changes while the query waits for data."""

    def onQueryTerminated(self, event: Any) -> None:
        """Spark's hook: drop every series of the stopped query."""
        if self._state is None:
            return
        self._state.forget_query(str(event.id))
        self._push(self._state)

    def _push(self, exporter: "_Exporter") -> None:
        if self.push_gateway is None:
            return
        from prometheus_client import push_to_gateway

        try:
            push_to_gateway(self.push_gateway, job=self.job, registry=exporter.registry)
        except OSError as exc:  # the gateway being down must not fail the query
            logger.warning("kafka-group metrics: pushing to the Pushgateway failed: %s", exc)


class _Exporter:
    """The registry, gauges and HTTP server of one process."""

    def __init__(self, port: Optional[int], addr: str) -> None:
        from prometheus_client import CollectorRegistry, Gauge, start_http_server

        self.registry: CollectorRegistry = CollectorRegistry()
        self._source: Dict[str, Gauge] = {
            name: Gauge(_PREFIX + name, help_text, _QUERY_LABELS, registry=self.registry)
            for name, help_text in _SOURCE_GAUGES
        }
        self._partition = Gauge(_PREFIX + "offsetsBehindLatest",
                                "Records the partition was behind its latest offset after the last batch",
                                _PARTITION_LABELS, registry=self.registry)
        self._partition_labels: Dict[Tuple[str, str, str], Set[Tuple[str, str]]] = {}
        self._source_labels: Set[Tuple[str, str, str]] = set()
        self._lock = threading.Lock()
        self._server: Any = None
        self.port: Optional[int] = None
        if port is not None:
            server, _thread = start_http_server(port, addr=addr, registry=self.registry)
            self._server = server
            self.port = int(server.server_port)
            logger.info("kafka-group metrics served on %s:%d/metrics", addr, self.port)

    def publish(self, metrics: SourceMetrics) -> None:
        """Set one source's gauges, and remove the partitions it no longer owns.

        Caller: Spark's listener thread.
        """
        key = (metrics.query_id, metrics.query_name, str(metrics.source))
        with self._lock:
            self._source_labels.add(key)
            for name, gauge in self._source.items():
                value = _source_value(name, metrics)
                if value is None:
                    try:
                        gauge.remove(*key)
                    except KeyError:
                        pass
                else:
                    gauge.labels(*key).set(value)
            now = {(tp.topic, str(tp.partition)) for tp in metrics.behind_latest}
            for topic, partition in self._partition_labels.get(key, set()) - now:
                self._partition.remove(*key, topic, partition)
            for tp, lag in metrics.behind_latest.items():
                self._partition.labels(*key, tp.topic, str(tp.partition)).set(lag)
            self._partition_labels[key] = now

    def forget_query(self, query_id: str) -> None:
        """Remove every series of ``query_id``. Caller: Spark's listener thread."""
        with self._lock:
            for key in [k for k in self._source_labels if k[0] == query_id]:
                self._source_labels.discard(key)
                for gauge in self._source.values():
                    try:
                        gauge.remove(*key)
                    except KeyError:
                        pass
                for topic, partition in self._partition_labels.pop(key, set()):
                    self._partition.remove(*key, topic, partition)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def export_metrics(spark: "SparkSession", *, port: Optional[int] = None, addr: str = LOOPBACK,
                   push_gateway: Optional[str] = None, job: str = "kafka-group") -> KafkaGroupMetricsListener:
    """Publish the lag metrics of the session's ``kafka-group`` queries to Prometheus.

    Parameters
    ----------
    spark : SparkSession
        The session whose streaming queries to follow (classic or Spark Connect).
    port : int, optional
        Serve ``/metrics`` over HTTP on this port (0: a free one, see the listener's ``port``).
    addr : str, default "127.0.0.1"
        The address to bind: loopback by default, so only this machine reaches the
        endpoint (it has no authentication); ``"0.0.0.0"`` or one interface's address
        for a scraper on another machine.
    push_gateway : str, optional
        Push to this Prometheus Pushgateway after every progress event instead, or as well.
    job : str
        The Pushgateway job name.

    Returns
    -------
    KafkaGroupMetricsListener
        The registered listener (``spark.streams.removeListener(listener)`` and
        ``listener.stop()`` undo this call).

    Raises
    ------
    ConfigError
        Neither ``port`` nor ``push_gateway`` given, or a bad value; ``prometheus_client``
        missing (``pip install 'pyspark-kafka-group[metrics]'``).
    """
    try:
        import prometheus_client  # noqa: F401
    except ImportError as exc:
        raise ConfigError("export_metrics needs the prometheus_client package: "
                          "pip install 'pyspark-kafka-group[metrics]' (or prometheus_client)") from exc
    listener = KafkaGroupMetricsListener(port=port, addr=addr, push_gateway=push_gateway, job=job)
    if not _is_connect(spark):
        listener.start()  # classic: the hooks run in this process; fail here if the port is taken
    spark.streams.addListener(listener)
    return listener


def _is_connect(spark: Any) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")
