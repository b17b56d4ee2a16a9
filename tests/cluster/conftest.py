"""Fixtures of the standalone-cluster tier (``-m cluster``, ``scripts/test-cluster.sh``).

``standalone`` is a Spark standalone cluster on loopback for the whole run: a master and two
workers of one core each (:class:`~kafka_group_devbroker.spark_standalone.SparkStandalone`,
Spark's own daemons from the pip pyspark), stopped when the run ends, whatever happened.

``cluster_spark`` is the tier's one driver session on it: two executors of one core, each its
own JVM with its own Python workers (the virtualenv's interpreter, ``spark.pyspark.python``), the
Prometheus servlet and the metrics shim loaded (``configure_spark_with_kafka_group_metrics``).
Every streaming query still active when a test ends is stopped. A test that needs the
cluster's cores for applications of its own (``spark-submit`` of a user's job) calls
``cluster_spark_holder.release()`` first; the next test asking for ``cluster_spark`` gets a new
session.

The tier runs in its own pytest process: a Python process holds one SparkContext, and the
rest of the suite's is ``local[2]``.
"""

from __future__ import annotations

import logging
import os
import pathlib
import sys
from typing import TYPE_CHECKING, Dict, Iterator, Optional

import pytest

from kafka_group_devbroker.spark_standalone import SparkStandalone

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_log = logging.getLogger(__name__)
_REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def standalone() -> Iterator[SparkStandalone]:
    """A master and two one-core workers on 127.0.0.1 for the whole run; stopped at its end, whatever happened."""
    cluster = SparkStandalone(workers=2, cores=1, memory="2g")
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def _python_path() -> str:
    """This process's ``PYTHONPATH`` made absolute, with the checkout (for ``tests``) first: the executors'
    Python workers start in their executor's work folder, where relative entries mean nothing."""
    entries = [str(_REPO)] + [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join(dict.fromkeys(entries))


def cluster_conf(cluster: SparkStandalone, ui_port: Optional[int] = None) -> Dict[str, str]:
    """Spark settings of a driver on ``cluster``: two one-core executors running this interpreter."""
    conf = {
        "spark.executor.cores": "1",
        "spark.cores.max": "2",
        "spark.executor.memory": "1g",
        "spark.pyspark.python": sys.executable,
        "spark.executorEnv.PYTHONPATH": _python_path(),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        "spark.sql.execution.pyspark.udf.hideTraceback.enabled": "true",
        "spark.python.unix.domain.socket.enabled": "true",
    }
    if ui_port is not None:
        conf.update({"spark.ui.enabled": "true", "spark.ui.port": str(ui_port)})
    else:
        conf["spark.ui.enabled"] = "false"
    return conf


class SessionHolder:
    """The tier's driver session, made on first use and stopped by :meth:`release` or at the run's end.

    Caller: the test thread only.
    """

    def __init__(self, cluster: SparkStandalone) -> None:
        self._cluster = cluster
        self._session: Optional["SparkSession"] = None

    def get(self) -> "SparkSession":
        if self._session is None:
            from pyspark.sql import SparkSession

            from kafka_group_devbroker.apache_kafka import _free_port
            from pyspark_kafka_group.metrics import configure_spark_with_kafka_group_metrics

            os.environ["PYSPARK_PYTHON"] = sys.executable
            builder = SparkSession.builder.master(self._cluster.master_url).appName("kafka-group-cluster-tier")
            for key, value in cluster_conf(self._cluster, ui_port=_free_port()).items():
                builder = builder.config(key, value)
            builder = configure_spark_with_kafka_group_metrics(builder, prometheus=True)  # the shim jar, cached in ~/.cache
            self._session = builder.getOrCreate()
            self._session.sparkContext.setLogLevel("ERROR")
        return self._session

    def release(self) -> None:
        """Stop the session (its queries first), freeing the cluster's cores."""
        if self._session is not None:
            stop_queries(self._session)
            self._session.stop()
            self._session = None


@pytest.fixture(scope="session")
def cluster_spark_holder(standalone: SparkStandalone) -> Iterator[SessionHolder]:
    holder = SessionHolder(standalone)
    try:
        yield holder
    finally:
        holder.release()


@pytest.fixture()
def cluster_spark(cluster_spark_holder: SessionHolder) -> Iterator["SparkSession"]:
    """The tier's driver session on the standalone cluster; its streaming queries are stopped after each test."""
    session = cluster_spark_holder.get()
    try:
        yield session
    finally:
        stop_queries(session)


def stop_queries(session: "SparkSession") -> None:
    """Stop every active streaming query of ``session``; a query that fails to stop is logged, not raised."""
    for query in session.streams.active:
        try:
            query.stop()
        except Exception:  # noqa: BLE001 - teardown: stop the others whatever this one does
            _log.warning("could not stop streaming query %s", query.id, exc_info=True)
