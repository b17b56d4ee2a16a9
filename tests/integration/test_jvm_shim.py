"""The JVM shim: kafka-group progress becomes gauges served by Spark's Prometheus servlet.

The Spark part runs in a child process (this file run as a script): a JVM holds one
SparkContext, and the suite's shared session has neither the shim nor the UI. The
child gates its second batch, so the gauges it scrapes then are those of batch 0's
progress, whose planned offsets are in the checkpoint: the lag they show must be
what the broker has minus where batch 0 ended. After the backlog drains, every
lag gauge must read 0.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys
from typing import TYPE_CHECKING, Any, Dict

import pytest

if TYPE_CHECKING:  # this file also runs as a script (the Spark child), where 'tests' is not importable
    from tests.support import Cluster, MakeTopic

pytestmark = pytest.mark.integration

QUERY = "shim_metrics"
PARTITIONS = {0: 200, 1: 100, 2: 40}
MAX_OFFSETS = 100
_REPO = pathlib.Path(__file__).resolve().parents[2]
_SOURCES = _REPO / "jvm-shim" / "src" / "main" / "java"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def kafka_group_gauges(text: str, query: str) -> Dict[str, float]:
    """The ``kafka_group`` gauges of ``query`` in a ``/metrics/prometheus`` page, by name after ``<query>_``.

    Spark's servlet writes ``metrics_<app id>_driver_kafka_group_<query>_<name>_<Number|Value>{type="gauges"} <v>``
    with every character outside ``[a-zA-Z0-9]`` turned into ``_``.
    """
    marker = "_driver_kafka_group_" + re.sub(r"[^a-zA-Z0-9]", "_", query) + "_"
    gauges: Dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or marker not in line or 'type="gauges"' not in line:
            continue
        name, _, value = line.rpartition(" ")
        name = name.split("{", 1)[0].split(marker, 1)[1]
        name = re.sub(r"_(Number|Value)$", "", name)
        gauges[name] = float(value)
    return gauges


def _lag_name(topic: str, partition: int) -> str:
    return re.sub(r"[^a-zA-Z0-9]", "_", topic) + f"_{partition}_lag"


def _has_javac() -> bool:
    """Whether the shim can be compiled: a ``javac`` in ``JAVA_HOME/bin`` or on ``PATH``."""
    java_home = os.environ.get("JAVA_HOME")
    return bool(java_home and os.path.exists(os.path.join(java_home, "bin", "javac"))) or bool(shutil.which("javac"))


@pytest.mark.skipif(not _has_javac(), reason="the JVM shim is compiled with javac: no JDK (javac) in JAVA_HOME or on PATH")
def test_prometheus_serves_lag_owned_and_generation_of_a_kafka_group_query(
    kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    from tests.support import produce, unique_name

    topic = make_topic(len(PARTITIONS))
    produce(kafka.bootstrap_servers, topic, PARTITIONS)
    result_path = tmp_path / "result.json"
    args = {
        "servers": kafka.bootstrap_servers, "topic": topic, "group": unique_name("shim-group"),
        "checkpoint": str(tmp_path / "checkpoint"), "cache_dir": str(tmp_path / "jar-cache"),
        "ui_port": _free_port(), "result": str(result_path),
    }
    # The checkout's sources, compiled on first use: whether the installed package also holds a jar compiled
    # when its wheel was built depends on the install (setup.py compiles one only where pyspark's jars were
    # already there), and that jar would be used instead (test_a_runtime_without_javac_... tests that path).
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               PYSPARK_KAFKA_GROUP_SHIM_SOURCES=str(_SOURCES))
    env.pop("PYSPARK_KAFKA_GROUP_SHIM_JAR", None)
    result = _run_child(args, env, tmp_path / "child.log")
    assert list((tmp_path / "jar-cache").glob("jvm-shim-*.jar")), "the shim jar was not built into the cache"
    _assert_gauges(result, topic)


@pytest.mark.skipif(not _has_javac(), reason="the wheel's shim jar is compiled with javac: no JDK here to build it")
def test_a_runtime_without_javac_gets_the_metrics_from_the_wheels_jar(
    kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    """Installed from the wheel (built here, where a JDK is), the shim runs on a machine whose PATH has
    ``java`` but no ``javac`` and no JAVA_HOME: nothing is compiled, the gauges are served (issue 34)."""
    import zipfile

    from tests.support import bin_without_javac, produce, unique_name

    project = tmp_path / "repo"
    shutil.copytree(_REPO, project, ignore=shutil.ignore_patterns(
        ".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", ".mypy_cache", ".pytest_cache",
        "spark-warehouse", "metastore_db", "demo-output"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "--disable-pip-version-check", "-w", str(tmp_path / "wheel"), str(project)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    [wheel] = (tmp_path / "wheel").glob("*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as whl:
        whl.extractall(site)  # what pip install puts in site-packages
    assert (site / "pyspark_kafka_group" / "jvm_shim" / "kafka-group-shim.jar").is_file()

    topic = make_topic(len(PARTITIONS))
    produce(kafka.bootstrap_servers, topic, PARTITIONS)
    args = {
        "servers": kafka.bootstrap_servers, "topic": topic, "group": unique_name("shim-jre-group"),
        "checkpoint": str(tmp_path / "checkpoint"), "cache_dir": str(tmp_path / "jar-cache"),
        "ui_port": _free_port(), "result": str(tmp_path / "result.json"),
    }
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAVA_HOME", "PYSPARK_KAFKA_GROUP_SHIM_JAR", "PYSPARK_KAFKA_GROUP_SHIM_SOURCES")}
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               PATH=str(bin_without_javac(tmp_path / "bin-without-javac")),
               # the installed packages, then the development brokers and the tests' helpers (no checkout source)
               PYTHONPATH=os.pathsep.join([str(site), str(_REPO / "devbroker"), str(_REPO)]))
    result = _run_child(args, env, tmp_path / "child.log")
    assert result["kafka_group_file"].startswith(str(site)), result["kafka_group_file"]
    assert not (tmp_path / "jar-cache").exists() or not list((tmp_path / "jar-cache").iterdir()), "compiled anyway"
    _assert_gauges(result, topic)


def _run_child(args: Dict[str, Any], env: Dict[str, str], log_path: pathlib.Path) -> Dict[str, Any]:
    """Run the Spark child (this file as a script) with ``env``; what it saw."""
    with open(log_path, "w") as log:
        code = subprocess.run([sys.executable, __file__, json.dumps(args)], cwd=_REPO, env=env,
                              stdout=log, stderr=subprocess.STDOUT, timeout=600).returncode  # for a broken child only
    assert code == 0, log_path.read_text()[-6000:]
    result: Dict[str, Any] = json.loads(pathlib.Path(args["result"]).read_text())
    return result


def _assert_gauges(result: Dict[str, Any], topic: str) -> None:
    """The gauges the child scraped: batch 0's lag while batch 1 runs, then every lag at 0."""
    # While batch 1 runs, the gauges show batch 0: lag = latest broker offset - where batch 0 ended.
    first, end0 = result["after_batch_0"], result["batch_0_end"]
    expected = {p: count - end0[str(p)] for p, count in PARTITIONS.items()}
    assert {p: first.get(_lag_name(topic, p)) for p in PARTITIONS} == expected, first
    assert sum(expected.values()) > 0, "batch 0 should leave a backlog (maxOffsetsPerTrigger)"
    assert first["lag"] == sum(expected.values())
    assert first["ownedPartitions"] == len(PARTITIONS)
    assert first["pausedPartitions"] == 0
    assert first["generation"] >= 1
    assert first["numInputRows"] == sum(end0.values())
    assert "inputRowsPerSecond" in first and "processedRowsPerSecond" in first

    # Drained: every partition's lag gauge reads 0, ownership unchanged.
    final = result["drained"]
    assert {p: final.get(_lag_name(topic, p)) for p in PARTITIONS} == {p: 0 for p in PARTITIONS}, final
    assert final["lag"] == 0
    assert final["ownedPartitions"] == len(PARTITIONS)
    assert final["generation"] == first["generation"]


def test_building_the_shim_without_javac_names_what_is_missing(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kafka_group.errors import JavaRuntimeError
    from pyspark_kafka_group.metrics import shim_jar

    monkeypatch.delenv("PYSPARK_KAFKA_GROUP_SHIM_JAR", raising=False)
    monkeypatch.setenv("PYSPARK_KAFKA_GROUP_SHIM_SOURCES", str(_SOURCES))  # compile, even beside a wheel's jar
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jre-only"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(JavaRuntimeError, match=r"no 'javac' is on PATH: install a JDK"):
        shim_jar(cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").iterdir())


# -- the child process --------------------------------------------------------------------------


def _child(args: Dict[str, Any]) -> None:
    """Run a kafka-group query with the shim, scrape /metrics/prometheus twice, write what was seen."""
    import threading
    import urllib.request

    from pyspark.sql import SparkSession

    from pyspark_kafka_group.metrics import configure_spark_with_kafka_group_metrics
    from tests.support import group_stream, wait_for

    builder = (
        SparkSession.builder.master("local[2]").appName("kafka-group-jvm-shim-test")
        .config("spark.ui.enabled", "true")
        .config("spark.ui.port", str(args["ui_port"]))
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.execution.pyspark.udf.hideTraceback.enabled", "true")
    )
    builder = configure_spark_with_kafka_group_metrics(builder, prometheus=True, cache_dir=args["cache_dir"])
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    url = f"{spark.sparkContext.uiWebUrl}/metrics/prometheus"
    topic = args["topic"]
    lag_names = [_lag_name(topic, p) for p in PARTITIONS]
    at_batch_1, release = threading.Event(), threading.Event()

    def land(df: Any, batch_id: int) -> None:
        df.count()
        if batch_id == 1:
            at_batch_1.set()
            release.wait(600)  # set once batch 0's gauges were scraped; the bound is for a broken run only

    def scrape() -> Dict[str, float]:
        with urllib.request.urlopen(url, timeout=10) as response:
            return kafka_group_gauges(response.read().decode(), QUERY)

    query = (
        group_stream(spark, args["servers"], topic, args["group"], maxOffsetsPerTrigger=MAX_OFFSETS).load()
        .writeStream.queryName(QUERY).option("checkpointLocation", args["checkpoint"])
        .foreachBatch(land).start()
    )
    try:
        wait_for(at_batch_1.is_set, "batch 1 to start", 120)
        seen: Dict[str, Dict[str, float]] = {}

        def batch_0_gauges() -> bool:
            seen["after_batch_0"] = scrape()
            return all(name in seen["after_batch_0"] for name in lag_names)

        wait_for(batch_0_gauges, "the gauges of batch 0's progress", 180)
        from kafka_group.formats import read_checkpoint_offsets

        batch_0 = read_checkpoint_offsets((pathlib.Path(args["checkpoint"]) / "offsets" / "0").read_text()).source(0)
        end0 = {str(tp.partition): position for tp, position in batch_0.positions.items() if tp.topic == topic}
        release.set()

        def drained() -> bool:
            assert query.isActive, f"the query stopped: {query.exception()}"
            seen["drained"] = scrape()
            return all(seen["drained"].get(name) == 0 for name in lag_names)

        wait_for(drained, "every lag gauge to read 0 after the backlog drained", 120)
        import kafka_group

        pathlib.Path(args["result"]).write_text(json.dumps({**seen, "batch_0_end": end0,
                                                            "kafka_group_file": kafka_group.__file__}))
    finally:
        release.set()
        query.stop()
        spark.stop()


if __name__ == "__main__":
    sys.path.insert(0, str(_REPO))
    _child(json.loads(sys.argv[1]))
