"""Pytest fixtures only (plain helpers live in ``tests/support.py``): Kafka clusters and a local
SparkSession, always stopped.

Unit tests (``tests/unit``) start no process; integration tests
(``tests/integration``) use a real broker over TCP, real Spark and real Delta.

The broker is Apache Kafka (KRaft, jars fetched by Maven on first use) unless
``KAFKA_GROUP_TEST_BROKER=mock`` selects librdkafka's mock cluster:

- ``kafka``: one node, for tests where replication does not matter;
- ``kafka_cluster``: three nodes, for broker faults and replication;
- ``mock_kafka``: always the mock cluster, for what only it can do (pushed
  protocol errors); each such test says so;
- ``secured_kafka``: Apache Kafka with SASL, TLS, mTLS and ACLs (one node, one
  per test module that asks for it, whatever the engine above).

``schema_registry`` is a real Schema Registry (Apicurio Registry serving Confluent's
API, in-memory; fetched by Maven on first use, needs a Java 21+) for the whole run,
started on first use and stopped at its end. ``hostile_registry`` (``tests/hostile_registry.py``)
is a Schema Registry of our own that misbehaves on demand, one per test.

``spark`` is one local session for the whole run; every streaming query a test
started on it is stopped when that test ends, passed or failed.

When the run's first integration test starts, the class-data archive of the short-lived child
drivers (``tests/jvm_class_archive.py``) is built in the background if it does not exist yet; the
build is stopped at the end of the run if still running.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from typing import TYPE_CHECKING, Callable, Dict, Iterator, List, Tuple

import pytest

from kafka_group_devbroker import EmbeddedKafka
from kafka_group_devbroker.schema_registry import SchemaRegistry
from kafka_group_devbroker.secured_kafka import SecuredKafka
from tests.hostile_registry import hostile_registry  # noqa: F401 (a fixture: a hostile Schema Registry)
from tests.support import (
    BROKER_ENGINE, DELTA_SPARK_CONF, REPO, RUN_CLUSTER, RUN_SLOW, Cluster, S3Server, create_topic, mock,
)
from tests.support_child_jvm import class_archive

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_log = logging.getLogger(__name__)

_clusters: Dict[Tuple[str, int], Cluster] = {}


#: The integration files that took longest in CI (``--durations``, November 2026), longest first. A run
#: starts with them and ends with the unit tests, so that two workers (``scripts/test.sh``) finish together:
#: whichever is free last takes small files, never a long one alone at the end.
LONGEST_FILES = (
    "test_exactly_once_delta.py", "test_cdc_delta.py", "test_catalog_tables.py", "test_cdc_deletion_vectors.py",
    "test_delta_writer_features.py", "test_examples.py", "test_delta_spark.py", "test_group_protocols.py",
    "test_chaos.py", "test_broker_faults.py", "test_delta_mapped_and_checked_tables.py",
    "test_broker_disk_full.py", "test_group_membership.py", "test_group_failover_delta.py", "test_retention.py",
    "test_revoke_waits_for_running_batch.py", "test_delta_commit_failure.py", "test_schema_evolution.py",
    "test_object_store.py", "test_available_now_after_crash.py", "test_cluster_view_faults.py",
    "test_cluster_sizing.py",
)


def _run_order(item: pytest.Item) -> int:
    """Where ``item``'s file runs: :data:`LONGEST_FILES` in their order, the other integration files, then
    the rest (the unit tests). Within a file, and among equals, pytest's own order stays."""
    if item.path.parent.name != "integration":
        return len(LONGEST_FILES) + 1
    name = item.path.name
    return LONGEST_FILES.index(name) if name in LONGEST_FILES else len(LONGEST_FILES)


def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    """Order the run by :func:`_run_order`; skip the ``slow`` tier unless ``KAFKA_GROUP_SLOW_TESTS=1``, and the
    ``cluster`` tier unless ``KAFKA_GROUP_CLUSTER_TESTS=1`` (it runs in a pytest process of its own,
    ``scripts/test-cluster.sh``: a process holds one SparkContext, and the rest of the suite's is ``local[2]``)."""
    items.sort(key=_run_order)  # stable: a file's tests keep their order
    skip_slow = pytest.mark.skip(reason="long tier: set KAFKA_GROUP_SLOW_TESTS=1 to run it")
    skip_cluster = pytest.mark.skip(reason="standalone-cluster tier: bash scripts/test-cluster.sh runs it")
    for item in items:
        if "slow" in item.keywords and not RUN_SLOW:
            item.add_marker(skip_slow)
        if "cluster" in item.keywords and not RUN_CLUSTER:
            item.add_marker(skip_cluster)


def _cluster(engine: str, brokers: int) -> Cluster:
    """A session-wide cluster of ``engine`` with ``brokers`` brokers, started on first use."""
    from kafka_group_devbroker import start_cluster

    key = (engine, brokers)
    if key not in _clusters:
        _clusters[key] = start_cluster(engine, brokers)
    return _clusters[key]


@pytest.fixture(scope="session", autouse=True)
def _stop_clusters() -> Iterator[None]:
    """Stop every cluster the run started, whatever happened."""
    try:
        yield
    finally:
        for cluster in _clusters.values():
            cluster.stop()
        _clusters.clear()


@pytest.fixture(scope="session")
def kafka() -> Cluster:
    """The run's Kafka: Apache Kafka with one node (or the 3-broker mock with ``KAFKA_GROUP_TEST_BROKER=mock``)."""
    return _cluster(BROKER_ENGINE, 1 if BROKER_ENGINE == "kafka" else 3)


@pytest.fixture(scope="session")
def kafka_cluster() -> Cluster:
    """Three brokers (Apache Kafka, or the mock with ``KAFKA_GROUP_TEST_BROKER=mock``): faults, replication."""
    return _cluster(BROKER_ENGINE, 3)


@pytest.fixture(scope="session")
def mock_kafka() -> EmbeddedKafka:
    """librdkafka's 3-broker mock cluster, for what only it can do (pushed protocol errors)."""
    return mock(_cluster("mock", 3))


@pytest.fixture(scope="module")
def secured_kafka() -> Iterator[SecuredKafka]:
    """Apache Kafka with every secured listener (SASL_PLAINTEXT, SASL_SSL, mTLS) and ACLs, for one module;
    stopped when the module ends, whatever happened."""
    cluster = SecuredKafka()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def schema_registry() -> Iterator[SchemaRegistry]:
    """Apicurio Registry on loopback (Confluent's API at ``schema_registry.url``), for the whole run;
    stopped when the run ends, whatever happened. Subjects outlive a test: name them uniquely."""
    registry = SchemaRegistry()
    try:
        registry.start()
        yield registry
    finally:
        registry.stop()


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """An S3-compatible server (moto) on loopback, for one module; stopped when the module ends."""
    server = S3Server(tmp_path_factory.mktemp("moto") / "moto.log")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def _spark_session() -> Iterator["SparkSession"]:
    """A local[2] SparkSession whose Python workers use this interpreter, for the whole run.

    Spark's own Kafka source (``format("kafka")``, for the parity tests) and delta-spark (for
    ``test_delta_spark.py``: its SQL extension and catalog, as users configure them) are on its
    classpath, their jars fetched by Maven on first use. One JVM for the run keeps the suite fast;
    delta-spark's catalog hands every non-Delta table to Spark's own, and the sink writes its
    Parquet files with ``DataFrame.write.parquet``, which delta-spark does not touch.
    """
    import pyspark

    from kafka_group_devbroker.jars import SPARK_VERSION, classpath
    from pyspark_kafka_group.spark_session import local_session

    os.environ["PYSPARK_PYTHON"] = sys.executable
    if pyspark.__version__ == SPARK_VERSION:
        session = local_session(
            "pyspark-kafka-group-tests",
            extra_jars=classpath("spark-kafka") + classpath("delta-spark"),
            extra_conf={
                **DELTA_SPARK_CONF,
                # The JVM's default compilers (C2 included), unlike the short-lived children's C1 only:
                # over a whole run on two workers with C1 only (November 2026), the tests that work in
                # this session took 2.7x to 4.5x their one-process C2 times (delta-spark's OPTIMIZE and
                # VACUUM 681 s against 151), the child-driver tests 1.6x.
            },
        )
    else:
        # The newest-pyspark tier (scripts/test-newest.sh): the jars of Spark's Kafka source and of
        # delta-spark exist for the pinned Spark only, and that tier runs no test of theirs.
        _log.info("pyspark %s is not the pinned %s: no Spark Kafka source or delta-spark jars",
                  pyspark.__version__, SPARK_VERSION)
        session = local_session("pyspark-kafka-group-tests")
    try:
        yield session
    finally:
        _stop_streaming_queries(session)
        session.stop()


@pytest.fixture(autouse=True)
def _child_driver_classes(request: pytest.FixtureRequest) -> None:
    """An integration test (the ones that start child drivers) has the archive's build started first."""
    if request.node.get_closest_marker("integration") is not None:
        request.getfixturevalue("_class_archive_build")


@pytest.fixture(scope="session")
def _class_archive_build() -> Iterator[None]:
    """Build the child drivers' class-data archive in the background (``tests.jvm_class_archive``, in a process
    group of its own) unless it exists; killed with its JVM at the end of the run if still running."""
    archive = class_archive()
    if archive is None or os.path.lexists(archive):
        yield
        return
    process = subprocess.Popen([sys.executable, "-m", "tests.jvm_class_archive"], cwd=REPO, start_new_session=True,
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        if process.returncode != 0:
            _log.info("the class-data archive of the child drivers was not built (exit status %s): they start "
                      "without it", process.returncode)


@pytest.fixture()
def spark(_spark_session: "SparkSession") -> Iterator["SparkSession"]:
    """The run's SparkSession; every streaming query still active when the test ends is stopped,
    whether the test passed or failed, so that no query runs on into the next test."""
    try:
        yield _spark_session
    finally:
        _stop_streaming_queries(_spark_session)


def _stop_streaming_queries(session: "SparkSession") -> None:
    """Stop every active streaming query of ``session``; a query that fails to stop is logged, not raised."""
    for query in session.streams.active:
        try:
            query.stop()
        except Exception:  # noqa: BLE001 - teardown: stop the others whatever this one does
            _log.warning("could not stop streaming query %s", query.id, exc_info=True)


@pytest.fixture()
def make_topic(kafka: Cluster) -> Callable[[int], str]:
    """Create a fresh topic of ``kafka`` with the given partition count; returns its name."""

    def create(partitions: int) -> str:
        return create_topic(kafka, partitions)

    return create
