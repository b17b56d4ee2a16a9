"""Kafka-group gauges in Spark's metrics system: build the JVM shim and configure a session with it.

The shim (``jvm-shim/`` in the repository) is a Spark ``StreamingQueryListener``
written in Java. It turns each progress event of a ``kafka-group`` source into
gauges of a Spark metrics source named ``kafka_group`` (lag per topic-partition,
records per second, owned and paused partitions, group generation), which every
configured sink exposes: Spark's Prometheus servlet at ``/metrics/prometheus`` on
the UI port, JMX, and the others. The gauge names are listed in
``docs/metrics.md``.

It is optional: the connector never needs it. It is compiled with ``javac``
against the jars inside the pyspark installation on first use and cached in
``~/.cache/pyspark-kafka-group/jvm-shim-<hash>.jar``; a prebuilt jar can be
named with ``PYSPARK_KAFKA_GROUP_SHIM_JAR`` instead.

Examples
--------
>>> from pyspark.sql import SparkSession
>>> from pyspark_kafka_group.metrics import configure_spark_with_kafka_group_metrics
>>> builder = SparkSession.builder.master("local[2]").config("spark.ui.port", "4050")
>>> spark = configure_spark_with_kafka_group_metrics(builder).getOrCreate()  # doctest: +SKIP

Then ``curl http://127.0.0.1:4050/metrics/prometheus | grep kafka_group``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pathlib
import shutil
import subprocess
import tempfile
import zipfile
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Union

from kafka_group.errors import JavaRuntimeError

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

_JAR_ENV = "PYSPARK_KAFKA_GROUP_SHIM_JAR"
_SOURCES_ENV = "PYSPARK_KAFKA_GROUP_SHIM_SOURCES"
_JAVA_RELEASE = "17"

PathLike = Union[str, "os.PathLike[str]"]


def _source_dir() -> pathlib.Path:
    """The folder holding the shim's Java sources.

    Looked up in this order: ``PYSPARK_KAFKA_GROUP_SHIM_SOURCES``, a ``jvm_shim``
    folder shipped inside this package, the ``jvm-shim/src`` folder of the
    repository checkout this module is installed from (editable installs).
    """
    candidates: List[pathlib.Path] = []
    configured = os.environ.get(_SOURCES_ENV)
    if configured:
        candidates.append(pathlib.Path(configured))
    here = pathlib.Path(__file__).resolve().parent
    candidates.append(here / "jvm_shim")
    candidates.append(here.parent.parent / "jvm-shim" / "src")
    for candidate in candidates:
        if candidate.is_dir() and any(candidate.rglob("*.java")):
            return candidate
    raise JavaRuntimeError(
        "the kafka-group JVM shim's Java sources were not found (looked in "
        + ", ".join(str(c) for c in candidates)
        + "): install pyspark-kafka-group from a checkout with 'pip install -e .', point "
        f"{_SOURCES_ENV} at the checkout's jvm-shim/src folder, or set {_JAR_ENV} to a prebuilt jar"
    )


def _spark_jars_dir() -> pathlib.Path:
    """The ``jars`` folder of the Spark the session will run: ``$SPARK_HOME/jars``, else the pyspark wheel's."""
    spark_home = os.environ.get("SPARK_HOME")
    if spark_home and (pathlib.Path(spark_home) / "jars").is_dir():
        return pathlib.Path(spark_home) / "jars"
    import pyspark

    jars = pathlib.Path(pyspark.__file__).resolve().parent / "jars"
    if not jars.is_dir():
        raise JavaRuntimeError(
            f"no Spark jars folder found to compile the kafka-group JVM shim against ({jars} does not exist): "
            "install pyspark from PyPI or set SPARK_HOME to a Spark distribution"
        )
    return jars


def _find_javac() -> str:
    """The ``javac`` of ``JAVA_HOME``, else the one on ``PATH``.

    Raises
    ------
    JavaRuntimeError
        Neither has a ``javac`` (a JRE without the JDK), with how to fix it.
    """
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        javac = pathlib.Path(java_home) / "bin" / "javac"
        if javac.exists():
            return str(javac)
    found = shutil.which("javac")
    if found:
        return found
    where = f"JAVA_HOME ({java_home}) has no bin/javac and " if java_home else ""
    raise JavaRuntimeError(
        f"building the kafka-group metrics shim needs a Java {_JAVA_RELEASE}+ compiler, but {where}"
        "no 'javac' is on PATH: install a JDK (for example 'apt-get install openjdk-17-jdk-headless') "
        f"or point JAVA_HOME at one, or set {_JAR_ENV} to a prebuilt shim jar. The kafka-group source "
        "itself does not need the shim."
    )


def _cache_dir() -> pathlib.Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "pyspark-kafka-group"


def _build_key(sources: List[pathlib.Path], root: pathlib.Path, jars: pathlib.Path) -> str:
    """A hash of the Java sources and the Spark jars they compile against."""
    digest = hashlib.sha256()
    for source in sources:
        digest.update(str(source.relative_to(root)).encode())
        digest.update(b"\0")
        digest.update(source.read_bytes())
        digest.update(b"\0")
    for jar in sorted(p.name for p in jars.glob("*.jar")):
        digest.update(jar.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def shim_jar(*, cache_dir: Optional[PathLike] = None) -> pathlib.Path:
    """The shim jar, compiled on first use.

    ``PYSPARK_KAFKA_GROUP_SHIM_JAR`` names a prebuilt jar and skips the build.
    Otherwise the jar is ``<cache_dir>/jvm-shim-<hash>.jar``, where the hash
    covers the Java sources and the names of the Spark jars: it is compiled with
    ``javac --release 17`` against those jars when it does not exist yet, and
    written atomically, so concurrent first uses are safe.

    Parameters
    ----------
    cache_dir : str or path-like, optional
        Where built jars are kept. Default ``$XDG_CACHE_HOME/pyspark-kafka-group``
        (``~/.cache/pyspark-kafka-group``).

    Returns
    -------
    pathlib.Path
        The jar to put on the driver's classpath.

    Raises
    ------
    JavaRuntimeError
        No ``javac`` (install a JDK), the sources or Spark's jars were not found,
        or the compilation failed (the compiler's output is in the message).
    """
    prebuilt = os.environ.get(_JAR_ENV)
    if prebuilt:
        jar = pathlib.Path(prebuilt)
        if not jar.is_file():
            raise JavaRuntimeError(f"{_JAR_ENV} names {jar}, which is not a file: build it or unset {_JAR_ENV}")
        return jar
    root = _source_dir()
    jars = _spark_jars_dir()
    sources = sorted(root.rglob("*.java"))
    target_dir = pathlib.Path(cache_dir) if cache_dir is not None else _cache_dir()
    jar = target_dir / f"jvm-shim-{_build_key(sources, root, jars)}.jar"
    if jar.is_file():
        return jar
    javac = _find_javac()
    target_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kafka-group-shim-") as work:
        classes = pathlib.Path(work) / "classes"
        command = [
            javac, "--release", _JAVA_RELEASE, "-encoding", "UTF-8", "-nowarn", "-Xlint:-path",
            "-cp", str(jars / "*"), "-d", str(classes), *(str(s) for s in sources),
        ]
        logger.info("compiling the kafka-group JVM shim (%d sources) into %s", len(sources), jar)
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise JavaRuntimeError(f"could not run '{javac}' to build the kafka-group JVM shim: {exc}") from exc
        if result.returncode != 0:
            raise JavaRuntimeError(
                f"'{javac}' failed (exit {result.returncode}) compiling the kafka-group JVM shim from {root} "
                f"against {jars}; is it Java {_JAVA_RELEASE} or newer? Output:\n"
                + (result.stderr or result.stdout).strip()[-4000:]
            )
        partial = pathlib.Path(work) / jar.name
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\nCreated-By: pyspark-kafka-group\r\n\r\n")
            for path in sorted(classes.rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())
        staged = target_dir / f".{jar.name}.{os.getpid()}.tmp"
        shutil.copyfile(partial, staged)
        os.replace(staged, jar)
    return jar


def _append(existing: Optional[str], value: str, separator: str) -> str:
    """``existing`` with ``value`` appended (once) to its ``separator``-separated list."""
    items = [item for item in (existing or "").split(separator) if item.strip()]
    if value not in (item.strip() for item in items):
        items.append(value)
    return separator.join(items)


def kafka_group_metrics_conf(
    *,
    jar: Optional[PathLike] = None,
    prometheus: bool = True,
    jmx: bool = False,
    existing: Optional[Dict[str, str]] = None,
    cache_dir: Optional[PathLike] = None,
) -> Dict[str, str]:
    """The Spark settings that load the shim, register its listener and enable the sinks.

    Parameters
    ----------
    jar : str or path-like, optional
        The shim jar; default :func:`shim_jar` (built on first use).
    prometheus : bool, default True
        Enable Spark's Prometheus servlet at ``/metrics/prometheus`` on the UI port
        (the UI must be enabled: ``spark.ui.enabled`` true, its default).
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
        conf["spark.ui.prometheus.enabled"] = "true"
        conf["spark.metrics.conf.*.sink.prometheusServlet.class"] = "org.apache.spark.metrics.sink.PrometheusServlet"
        conf["spark.metrics.conf.*.sink.prometheusServlet.path"] = PROMETHEUS_PATH
    if jmx:
        conf["spark.metrics.conf.*.sink.jmx.class"] = "org.apache.spark.metrics.sink.JmxSink"
    return conf


def configure_spark_with_kafka_group_metrics(
    builder: "SparkSession.Builder",
    *,
    prometheus: bool = True,
    jmx: bool = False,
    cache_dir: Optional[PathLike] = None,
) -> "SparkSession.Builder":
    """Configure a ``SparkSession.builder`` to publish kafka-group gauges, like ``configure_spark_with_delta_pip``.

    Builds the shim jar if needed (:func:`shim_jar`), puts it on the driver's
    classpath and in ``spark.jars``, registers the listener with
    ``spark.sql.streaming.streamingQueryListeners`` and enables Spark's
    Prometheus servlet (and, optionally, the JMX sink). Call it before
    ``getOrCreate()``: a JVM that is already running keeps its classpath.

    Parameters
    ----------
    builder : SparkSession.Builder
        The builder to configure.
    prometheus : bool, default True
        Serve the gauges at ``http://<driver>:<ui port>/metrics/prometheus``.
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
    >>> spark = configure_spark_with_kafka_group_metrics(builder).getOrCreate()  # doctest: +SKIP
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
    jsession = getattr(spark, "_jsparkSession", None)
    jvm = getattr(spark, "_jvm", None)
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
