"""Starting Spark for the demo, tests and notebooks: Java check, a local session and a local Spark Connect session."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from typing import Dict, Mapping, Optional, Sequence

from kafka_group.errors import JavaRuntimeError

__all__ = ["check_java", "is_connect_session", "local_connect_session", "local_session"]

_MIN_JAVA = 17
#: The Connect server's listening address (Spark 4.0+; unset, Spark binds every interface).
CONNECT_BINDING_ADDRESS = "spark.connect.grpc.binding.address"


def check_java() -> int:
    """Check that a Java runtime Spark can use is present; return its major version.

    Raises
    ------
    JavaRuntimeError
        No ``java`` on ``JAVA_HOME`` or ``PATH``, or one older than 17, with how to fix it.
    """
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.path.exists(java):
        raise JavaRuntimeError(
            "Spark needs Java 17 or newer and none was found (no JAVA_HOME, no 'java' on PATH): install "
            "it, for example 'apt-get install openjdk-17-jre-headless', or set JAVA_HOME"
        )
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JavaRuntimeError(f"could not run '{java} -version': {exc}") from exc
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        raise JavaRuntimeError(f"could not read the version of '{java}': {out.stderr.strip()[:200]}")
    major = int(match.group(1))
    if major == 1 and match.group(2):
        major = int(match.group(2))
    if major < _MIN_JAVA:
        raise JavaRuntimeError(
            f"Spark needs Java {_MIN_JAVA} or newer, but '{java}' is Java {major}: install Java 17 and "
            "point JAVA_HOME at it"
        )
    return major


def local_session(
    app_name: str,
    *,
    cores: int = 2,
    extra_conf: Optional[Mapping[str, str]] = None,
    extra_jars: Optional[Sequence[str]] = None,
) -> "SparkSession":  # type: ignore[name-defined]  # noqa: F821
    """A ``local[cores]`` SparkSession set up for this connector.

    Python workers use the current interpreter (``PYSPARK_PYTHON``), Parquet
    timestamps are written as ``TIMESTAMP_MICROS`` (what Delta readers expect),
    and the UI is off.

    Parameters
    ----------
    app_name : str
        Spark application name.
    cores : int, default 2
        Local cores (``local[cores]``) and shuffle partitions.
    extra_conf : mapping of str to str, optional
        More Spark settings, applied last.
    extra_jars : sequence of str, optional
        Local jar paths put on the driver's and executors' classpath
        (``spark.jars``), for example
        ``kafka_group_devbroker.jars.classpath("spark-kafka")`` so that Spark's
        own ``format("kafka")`` works in the same session. Joined with any
        ``spark.jars`` given in ``extra_conf``.

    Returns
    -------
    pyspark.sql.SparkSession
        The session (an existing one if ``getOrCreate`` finds it).
    """
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(f"local[{cores}]").appName(app_name)
    for key, value in _session_conf(cores, extra_conf, extra_jars).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    if is_connect_session(session):  # SPARK_CONNECT_MODE_ENABLED or spark.api.mode=connect in the environment
        return session
    session.sparkContext.setLogLevel("ERROR")
    return session


def local_connect_session(
    app_name: str,
    *,
    cores: int = 2,
    port: Optional[int] = None,
    extra_conf: Optional[Mapping[str, str]] = None,
    extra_jars: Optional[Sequence[str]] = None,
) -> "SparkSession":  # type: ignore[name-defined]  # noqa: F821
    """A Spark Connect session served by a local Connect server, set up like :func:`local_session`.

    Without ``port`` this is ``SparkSession.builder.remote("local[cores]")``:
    pyspark (with its ``connect`` extra) starts a Spark Connect server in a JVM
    of this process, on Spark Connect's default port 15002, and the session talks
    to it over gRPC. The whole process is in Spark Connect mode from then on.

    The server listens on ``127.0.0.1`` only (Spark's own default is every
    interface): a Connect client can run code as this process's user, and pyspark's
    local server checks only a token sent without TLS. Name another address with
    ``extra_conf={"spark.connect.grpc.binding.address": ...}`` to serve other machines.

    Parameters
    ----------
    app_name, cores, extra_conf, extra_jars
        As for :func:`local_session`; the settings go to the server.
    port : int, optional
        Serve on this port instead of 15002, so that several local servers can run
        on one machine (the tests run two: two "clusters" in one consumer group).
        pyspark's ``remote("local")`` always connects to 15002, so this starts the
        server through pyspark's own (private) ``_start_connect_server``, which
        ``remote("local")`` calls, and connects to ``sc://localhost:<port>``
        (pyspark sends the local server's token without TLS to ``localhost`` only).

    Returns
    -------
    pyspark.sql.connect.session.SparkSession
        The Connect session.
    """
    from pyspark.sql import SparkSession

    conf = _session_conf(cores, extra_conf, extra_jars)
    conf.setdefault(CONNECT_BINDING_ADDRESS, "127.0.0.1")  # unless extra_conf names an address
    if port is None:
        builder = SparkSession.builder.remote(f"local[{cores}]").appName(app_name)
        for key, value in conf.items():
            builder = builder.config(key, value)
        return builder.getOrCreate()
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    RemoteSparkSession._start_connect_server(
        f"local[{cores}]", {**conf, "spark.app.name": app_name, "spark.connect.grpc.binding.port": str(port)})
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    return RemoteSparkSession.builder.remote(f"sc://localhost:{port}").getOrCreate()


def is_connect_session(session: object) -> bool:
    """Whether ``session`` is a Spark Connect session (no driver JVM in this process to reach)."""
    return type(session).__module__.startswith("pyspark.sql.connect")


def _session_conf(cores: int, extra_conf: Optional[Mapping[str, str]],
                  extra_jars: Optional[Sequence[str]]) -> Dict[str, str]:
    check_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    settings = {
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": str(cores),
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        "spark.sql.execution.pyspark.udf.hideTraceback.enabled": "true",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        # Python workers connect back over a Unix domain socket, not a TCP port on
        # 127.0.0.1: a Kafka client still retrying a stopped broker's port once
        # reached a reused port of Spark's and failed a worker's start
        # ("Python worker failed to connect back ... Authentication failed").
        "spark.python.unix.domain.socket.enabled": "true",
    }
    conf = dict(extra_conf or {})
    jars = [jar for jar in conf.pop("spark.jars", "").split(",") if jar] + list(extra_jars or [])
    for jar in jars:
        if not os.path.isfile(jar):
            raise FileNotFoundError(f"extra jar {jar!r} does not exist")
    if jars:
        settings["spark.jars"] = ",".join(jars)
    settings.update(conf)
    return settings
