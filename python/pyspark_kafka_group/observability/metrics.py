"""Kafka-group gauges in Spark's metrics system: build the JVM shim and configure a session with it.

The shim (``jvm-shim/`` in the repository) is a Spark ``StreamingQueryListener``
written in Java. It turns each progress event of a ``kafka-group`` source into
gauges of a Spark metrics source named ``kafka_group`` (lag per topic-partition,
records per second, owned and paused partitions, group generation), which every
sink Spark is configured with exposes: by default Spark's JSON servlet at
``/metrics/json`` on the UI port; Spark's Prometheus servlet at ``/metrics/prometheus``
when asked for (``prometheus=True``), JMX (``jmx=True``), and any other sink set in
``spark.metrics.conf``. The gauge names are listed in ``docs/metrics.md``.

Endpoints: this module opens no port. ``prometheus=True`` adds a path to Spark's UI,
which Spark serves on every interface unless ``SPARK_LOCAL_IP`` names one, to
whoever reaches it (Spark's ``spark.ui.filters`` and ACLs apply); the gauges name
queries, topics and partitions and hold lags and counts, no records and no settings.
Nothing here changes Spark's own switches (``spark.ui.prometheus.enabled``, for the
executors' metrics, stays as the user or Spark's default has it).

It is optional: the connector never needs it. This module is the Spark side
(the settings that load the jar, register the listener and enable the sinks);
making the jar (finding ``javac``, compiling against the jars inside the pyspark
installation on first use, caching it in
``~/.cache/pyspark-kafka-group/jvm-shim-<hash>.jar``, or taking a prebuilt jar
named by ``PYSPARK_KAFKA_GROUP_SHIM_JAR``) is :mod:`pyspark_kafka_group.observability.shim_build`.
:func:`shim_jar` is re-exported here.

Examples
--------
>>> from pyspark.sql import SparkSession
>>> from pyspark_kafka_group.metrics import configure_spark_with_kafka_group_metrics
>>> builder = SparkSession.builder.master("local[2]").config("spark.ui.port", "4050")
>>> spark = configure_spark_with_kafka_group_metrics(builder, prometheus=True).getOrCreate()  # doctest: +SKIP

Then ``curl http://127.0.0.1:4050/metrics/prometheus | grep kafka_group``.
"""

from __future__ import annotations

import logging
import os
import pathlib
from typing import TYPE_CHECKING, Any, Dict, Optional, Union

from kafka_group.errors import JavaRuntimeError
from pyspark_kafka_group.observability.shim_build import shim_jar

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "LISTENER_CLASS",
    "SOURCE_NAME",
    "add_metrics_listener",
    "configure_spark_with_kafka_group_metrics",
    "kafka_group_metrics_conf",
    "shim_jar",
]

logger = logging.getLogger(__name__)

#: The listener's class name, for ``spark.sql.streaming.streamingQueryListeners``.
LISTENER_CLASS = "kafkagroup.metrics.KafkaGroupMetricsListener"
#: The Spark metrics source name: the segment before the query in every gauge name.
SOURCE_NAME = "kafka_group"
#: Where Spark's Prometheus servlet answers, on the UI port.
PROMETHEUS_PATH = "/metrics/prometheus"

PathLike = Union[str, "os.PathLike[str]"]


def _append(existing: Optional[str], value: str, separator: str) -> str:
    """``existing`` with ``value`` appended (once) to its ``separator``-separated list."""
    items = [item for item in (existing or "").split(separator) if item.strip()]
    if value not in (item.strip() for item in items):
        items.append(value)
    return separator.join(items)


def kafka_group_metrics_conf(
    *,
    jar: Optional[PathLike] = None,
    prometheus: bool = False,
    jmx: bool = False,
    existing: Optional[Dict[str, str]] = None,
    cache_dir: Optional[PathLike] = None,
) -> Dict[str, str]:
    """The Spark settings that load the shim, register its listener and enable the sinks.

    Parameters
    ----------
    jar : str or path-like, optional
        The shim jar; default :func:`shim_jar` (built on first use).
    prometheus : bool, default False
        Add Spark's Prometheus servlet at ``/metrics/prometheus`` on the UI port (a path
        of the UI, no new port; the UI must be enabled: ``spark.ui.enabled`` true, its
        default). It serves all of the driver's Spark metrics, the gauges included,
        without authentication beyond the UI's own, to whoever reaches the UI.
        Off by default: the gauges then reach the sinks Spark is already configured with.
    jmx : bool, default False
        Also enable Spark's JMX sink.
    existing : dict of str to str, optional
        Settings already made; list-valued ones (``spark.jars``, the driver's
        extra classpath, the listener list) are extended rather than replaced.
    cache_dir : str or path-like, optional
        Passed to :func:`shim_jar`.

    Returns
    -------
    dict of str to str
        Settings to apply with ``SparkSession.builder.config``, before the session
        starts: they take effect only when the driver's JVM starts.
    """
    existing = existing or {}
    jar_path = str(pathlib.Path(jar) if jar is not None else shim_jar(cache_dir=cache_dir))
    conf = {
        "spark.jars": _append(existing.get("spark.jars"), jar_path, ","),
        "spark.driver.extraClassPath": _append(existing.get("spark.driver.extraClassPath"), jar_path, os.pathsep),
        "spark.sql.streaming.streamingQueryListeners": _append(
            existing.get("spark.sql.streaming.streamingQueryListeners"), LISTENER_CLASS, ","
        ),
    }
    if prometheus:
        conf["spark.metrics.conf.*.sink.prometheusServlet.class"] = "org.apache.spark.metrics.sink.PrometheusServlet"
        conf["spark.metrics.conf.*.sink.prometheusServlet.path"] = PROMETHEUS_PATH
    if jmx:
        conf["spark.metrics.conf.*.sink.jmx.class"] = "org.apache.spark.metrics.sink.JmxSink"
    return conf


def configure_spark_with_kafka_group_metrics(
    builder: "SparkSession.Builder",
    *,
    prometheus: bool = False,
    jmx: bool = False,
    cache_dir: Optional[PathLike] = None,
) -> "SparkSession.Builder":
    """Configure a ``SparkSession.builder`` to publish kafka-group gauges, like ``configure_spark_with_delta_pip``.

    Builds the shim jar if needed (:func:`shim_jar`), puts it on the driver's
    classpath and in ``spark.jars``, registers the listener with
    ``spark.sql.streaming.streamingQueryListeners`` and, when asked, enables
    Spark's Prometheus servlet and the JMX sink. Call it before
    ``getOrCreate()``: a JVM that is already running keeps its classpath.
    Settings already on the builder are kept (list-valued ones are extended).

    Parameters
    ----------
    builder : SparkSession.Builder
        The builder to configure.
    prometheus : bool, default False
        Also serve the gauges (and Spark's other driver metrics) at
        ``http://<driver>:<ui port>/metrics/prometheus``, a path of Spark's UI: reachable
        by whoever reaches the UI (see the module docstring). Without it the gauges
        reach the sinks Spark is configured with (by default ``/metrics/json`` on the UI).
    jmx : bool, default False
        Also publish them over JMX.
    cache_dir : str or path-like, optional
        Where the built jar is cached (see :func:`shim_jar`).

    Returns
    -------
    SparkSession.Builder
        The same builder, configured.

    Raises
    ------
    JavaRuntimeError
        The shim could not be built (no ``javac``, for example); the message says how to fix it.

    Examples
    --------
    >>> builder = SparkSession.builder.appName("orders").config("spark.ui.port", "4050")  # doctest: +SKIP
    >>> spark = configure_spark_with_kafka_group_metrics(builder, prometheus=True).getOrCreate()  # doctest: +SKIP
    """
    options: Dict[str, Any] = getattr(builder, "_options", None) or {}
    existing = {str(k): str(v) for k, v in options.items()}
    if prometheus and existing.get("spark.ui.enabled", "true").strip().lower() == "false":
        logger.warning(
            "spark.ui.enabled is false: Spark's Prometheus servlet (%s) is served by the UI and will not be "
            "reachable; set spark.ui.enabled=true",
            PROMETHEUS_PATH,
        )
    for key, value in kafka_group_metrics_conf(
        prometheus=prometheus, jmx=jmx, existing=existing, cache_dir=cache_dir
    ).items():
        builder = builder.config(key, value)
    return builder


def add_metrics_listener(spark: "SparkSession") -> None:
    """Register the shim's listener on a running classic SparkSession.

    For a session started without ``spark.sql.streaming.streamingQueryListeners``.
    The shim jar must already be on the driver's classpath (see
    :func:`kafka_group_metrics_conf`); the sinks are configured at start only.

    Parameters
    ----------
    spark : SparkSession
        A classic (not Spark Connect) session.

    Raises
    ------
    JavaRuntimeError
        The listener class is not on the driver's classpath, or the session has no JVM.
    """
    from pyspark_kafka_group.session.spark_session import is_connect_session

    # A Connect session raises JVM_ATTRIBUTE_NOT_SUPPORTED for these attributes: say what to do instead.
    jsession = None if is_connect_session(spark) else getattr(spark, "_jsparkSession", None)
    jvm = None if jsession is None else getattr(spark, "_jvm", None)
    if jsession is None or jvm is None:
        raise JavaRuntimeError(
            "add_metrics_listener needs a classic SparkSession with a driver JVM (not Spark Connect): "
            "set the settings of kafka_group_metrics_conf() on the server instead"
        )
    try:
        listener = jvm.kafkagroup.metrics.KafkaGroupMetricsListener()
    except Exception as exc:  # py4j: "'JavaPackage' object is not callable" when the class is missing
        raise JavaRuntimeError(
            f"the kafka-group metrics listener {LISTENER_CLASS} is not on the driver's classpath ({exc}): "
            "start the session with configure_spark_with_kafka_group_metrics(builder)"
        ) from exc
    jsession.streams().addListener(listener)
    logger.info("kafka-group metrics listener registered")
