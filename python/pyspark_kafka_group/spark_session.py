"""Starting Spark for the demo, tests and notebooks: Java check and a local session."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from typing import Mapping, Optional, Sequence

from kafka_group.errors import JavaRuntimeError

__all__ = ["check_java", "local_session"]

_MIN_JAVA = 17


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

    check_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(cores))
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        .config("spark.sql.execution.pyspark.udf.hideTraceback.enabled", "true")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        # Python workers connect back over a Unix domain socket, not a TCP port on
        # 127.0.0.1: a Kafka client still retrying a stopped broker's port once
        # reached a reused port of Spark's and failed a worker's start
        # ("Python worker failed to connect back ... Authentication failed").
        .config("spark.python.unix.domain.socket.enabled", "true")
    )
    conf = dict(extra_conf or {})
    jars = [jar for jar in conf.pop("spark.jars", "").split(",") if jar] + list(extra_jars or [])
    for jar in jars:
        if not os.path.isfile(jar):
            raise FileNotFoundError(f"extra jar {jar!r} does not exist")
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
