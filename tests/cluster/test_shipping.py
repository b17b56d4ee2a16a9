"""The package arriving on a cluster as a user ships it, with the commands docs/install.md and docs/deploy.md give.

One virtualenv per run (``shipped_env``, under the run's temporary folder): the wheel ``KAFKA_GROUP_WHEEL``
names (CI's, built once by ``scripts/wheel.sh``), else one built from a copy of the checkout
(``python -m pip wheel --no-deps -w dist .``), installed into a fresh ``python -m venv`` that
has no pyspark (the cluster's Spark brings it: ``spark-submit`` puts its ``pyspark.zip`` on the path), then
packed with ``venv-pack``. Each test submits ``tests/cluster/shipped_job.py`` with the Spark's own
``spark-submit`` to the standalone cluster, from an environment without this checkout's paths, so the
package is found only where the commands put it:

(a) the wheel installed on every node: ``spark.pyspark.python`` names the virtualenv's interpreter;
(b) the packed virtualenv shipped with ``--archives env.tar.gz#environment`` and
    ``spark.pyspark.python=./environment/bin/python``: each executor unpacks it in its work folder.

With (a), the executors read with the wheel's compiled read path and the driver loads the wheel's metrics shim
jar (``test_executors_read_with_the_wheels_compiled_path_and_the_driver_loads_its_shim_jar``).
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import time
import zipfile
from collections import Counter
from typing import Any, Dict, List, NamedTuple, Optional

import pytest

from kafka_group_devbroker.spark_standalone import SparkStandalone
from tests.cluster.conftest import SessionHolder
from tests.support import REPO, Cluster, MakeTopic, produce, table_offsets, unique_name

pytestmark = pytest.mark.cluster

#: Not copied: what runs and builds leave, and the compiled module next to the sources (``_native*``: CI's unit
#: tests may be replacing it, through a temporary file, while this tier copies the checkout).
_NOT_SOURCES = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".mypy_cache",
                                      ".pytest_cache", "demo-output", "spark-warehouse", "metastore_db", "_native*")
#: What the submitting shell must not carry: this checkout's paths and this run's interpreter.
_NOT_PASSED = ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME", "VIRTUAL_ENV")


class ShippedEnv(NamedTuple):
    venv: pathlib.Path       # the fresh virtualenv holding the wheel (what "every node" has)
    packed: pathlib.Path     # venv-pack's archive of it
    wheel: pathlib.Path


def _run(command: List[str], log: pathlib.Path, cwd: pathlib.Path, timeout: float = 900,
         spark_home: Optional[pathlib.Path] = None, python: Optional[str] = None) -> float:
    """Run ``command`` (output to ``log``); fail with the log's tail unless it exits 0; return its seconds."""
    started = time.monotonic()
    with open(log, "ab") as out:
        out.write(f"$ {' '.join(command)}\n".encode())
        out.flush()
        code = subprocess.run(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, timeout=timeout,
                              env=_clean_environment(spark_home, python)).returncode
    if code != 0:
        text = log.read_text(errors="replace").splitlines()
        errors = [line for line in text if ("Error" in line or "Exception" in line) and not line.lstrip().startswith("at ")]
        pytest.fail(f"{command[:4]} exited {code}; see {log}. Errors:\n" + "\n".join(errors[:20])
                    + "\nTail:\n" + "\n".join(text[-30:]))
    return time.monotonic() - started


def _clean_environment(spark_home: Optional[pathlib.Path], python: Optional[str] = None) -> Dict[str, str]:
    """This process's environment without its Python paths; ``SPARK_HOME`` and ``PYSPARK_PYTHON`` when given."""
    env = {key: value for key, value in os.environ.items() if key not in _NOT_PASSED}
    if spark_home is not None:
        env["SPARK_HOME"] = str(spark_home)
    if python is not None:
        env["PYSPARK_PYTHON"] = python
    return env


@pytest.fixture(scope="session")
def shipped_env(tmp_path_factory: pytest.TempPathFactory) -> ShippedEnv:
    """The wheel, a fresh virtualenv with it installed, and that virtualenv packed: built once per run."""
    root = tmp_path_factory.mktemp("shipped")
    log = root / "build.log"
    given = os.environ.get("KAFKA_GROUP_WHEEL")
    took: Dict[str, float] = {}
    if given:
        wheel = pathlib.Path(given)
    else:
        checkout = root / "checkout"
        shutil.copytree(REPO, checkout, ignore=_NOT_SOURCES)
        took["wheel"] = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", "dist", "."], log, checkout)
        [wheel] = (checkout / "dist").glob("pyspark_kafka_group-*.whl")
    venv = root / "kafka-group"
    took["venv"] = _run([sys.executable, "-m", "venv", str(venv)], log, root)
    took["install"] = _run([str(venv / "bin" / "pip"), "install", str(wheel)],
                           log, root)
    packed = root / "kafka-group-env.tar.gz"
    took["pack"] = _run([str(pathlib.Path(sys.executable).parent / "venv-pack"), "-p", str(venv), "-o", str(packed)],
                        log, root)
    print(f"shipped_env: {', '.join(f'{step} {seconds:.0f} s' for step, seconds in took.items())}; "
          f"archive {packed.stat().st_size / 2**20:.0f} MiB")
    return ShippedEnv(venv, packed, wheel)


def _submit(standalone: SparkStandalone, holder: SessionHolder, kafka: Cluster, make_topic: MakeTopic,
            tmp_path: pathlib.Path, python: str, options: List[str], read_path: str = "auto") -> Dict[str, Any]:
    """Submit the job with ``options`` and ``PYSPARK_PYTHON=python`` exported; check that it landed every
    record once; return what it reported.

    The export is needed: Spark 4.2 looks up Python data sources (``pyspark_*`` modules) in a Python
    worker on the driver started with the ``PYSPARK_PYTHON`` of the driver JVM's environment (else
    ``python3``), not with ``spark.pyspark.python``; without it ``format("kafka-group")`` fails with
    ``DATA_SOURCE_NOT_FOUND`` (seen here: both settings given, the variable unset).
    """
    holder.release()  # the tier's own session holds both cores; the job needs them
    topic, table = make_topic(2), tmp_path / "table"
    produce(kafka.bootstrap_servers, topic, {0: 120, 1: 80})
    job = tmp_path / "job" / "shipped_job.py"  # outside the checkout: its folder is the driver's sys.path[0]
    job.parent.mkdir()
    shutil.copy(pathlib.Path(__file__).with_name("shipped_job.py"), job)
    import pyspark

    spark_home = pathlib.Path(pyspark.__file__).parent  # the Spark the cluster runs ($SPARK_HOME on a node)
    result = tmp_path / "result.json"
    _run([str(spark_home / "bin" / "spark-submit"), "--master", standalone.master_url,
          "--conf", "spark.executor.cores=1", "--conf", "spark.cores.max=2", "--conf", "spark.executor.memory=1g",
          "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
          "--conf", "spark.ui.enabled=false", *options,
          str(job), kafka.bootstrap_servers, topic, unique_name("group"), str(table), str(tmp_path / "chk"),
          str(result), read_path], tmp_path / "submit.log", job.parent, timeout=600, spark_home=spark_home,
         python=python)
    assert table_offsets(table) == Counter((p, o) for p, n in {0: 120, 1: 80}.items() for o in range(n))
    found: Dict[str, Any] = json.loads(result.read_text())
    assert found["rows"] == 200
    return found


def test_wheel_installed_on_every_node_runs_a_query(
    shipped_env: ShippedEnv, standalone: SparkStandalone, cluster_spark_holder: SessionHolder, kafka: Cluster,
    make_topic: MakeTopic, tmp_path: pathlib.Path,
) -> None:
    python = str(shipped_env.venv / "bin" / "python")
    found = _submit(standalone, cluster_spark_holder, kafka, make_topic, tmp_path, python,
                    ["--conf", f"spark.pyspark.python={python}", "--conf", f"spark.pyspark.driver.python={python}"])
    site = str(shipped_env.venv / "lib")
    assert found["driver"][0] == python and found["driver"][1].startswith(site), found
    assert found["executors"] and all(e[0] == python and e[1].startswith(site) for e in found["executors"]), found


def test_packed_virtualenv_shipped_with_spark_archives_runs_a_query(
    shipped_env: ShippedEnv, standalone: SparkStandalone, cluster_spark_holder: SessionHolder, kafka: Cluster,
    make_topic: MakeTopic, tmp_path: pathlib.Path,
) -> None:
    driver_python = str(shipped_env.venv / "bin" / "python")
    found = _submit(standalone, cluster_spark_holder, kafka, make_topic, tmp_path, driver_python,
                    ["--archives", f"{shipped_env.packed}#environment",
                     "--conf", "spark.pyspark.python=./environment/bin/python",
                     "--conf", f"spark.pyspark.driver.python={driver_python}"])
    # Every executor ran the archive's interpreter and imported the package from the copy it unpacked in
    # its worker's folders; the driver kept the virtualenv it was given.
    assert found["executors"], found
    for interpreter, origin in found["executors"]:
        assert interpreter.endswith("environment/bin/python"), found
        assert "/environment/lib/" in origin and origin.startswith(str(standalone.folder)), found
    assert found["driver"][0] == driver_python, found


#: The compiled read path and the metrics shim's jar, as the wheel holds them.
NATIVE_MODULE = "kafka_group/_native.abi3.so"
SHIPPED_JAR = "pyspark_kafka_group/jvm_shim/kafka-group-shim.jar"


def test_executors_read_with_the_wheels_compiled_path_and_the_driver_loads_its_shim_jar(
    shipped_env: ShippedEnv, standalone: SparkStandalone, cluster_spark_holder: SessionHolder, kafka: Cluster,
    make_topic: MakeTopic, tmp_path: pathlib.Path,
) -> None:
    """The wheel on every node brings the compiled read path and the metrics shim compiled: the query reads with
    ``read.path=native`` (a task where the module does not load fails), every executor's Python worker reports
    the wheel's module and the native path for ``auto``, and the driver's JVM runs the shim's listener from the
    jar installed with the wheel (no javac needed). CI installs a wheel built where no Rust toolchain is
    reachable from this tier (.ci/run)."""
    with zipfile.ZipFile(shipped_env.wheel) as whl:
        names = set(whl.namelist())
    if NATIVE_MODULE not in names:
        assert os.environ.get("PYSPARK_KAFKA_GROUP_NATIVE") != "1", f"{shipped_env.wheel.name} has no {NATIVE_MODULE}"
        pytest.skip(f"{shipped_env.wheel.name} was built without the compiled read path (no Rust toolchain)")
    assert SHIPPED_JAR in names, sorted(names)
    python = str(shipped_env.venv / "bin" / "python")
    [jar] = (shipped_env.venv / "lib").glob(f"python*/site-packages/{SHIPPED_JAR}")
    found = _submit(standalone, cluster_spark_holder, kafka, make_topic, tmp_path, python,
                    ["--conf", f"spark.pyspark.python={python}", "--conf", f"spark.pyspark.driver.python={python}",
                     "--driver-class-path", str(jar),
                     "--conf", "spark.sql.streaming.streamingQueryListeners=kafkagroup.metrics.KafkaGroupMetricsListener"],
                    read_path="native")
    print(f"executors' read paths: {found['executor_read_paths']}; the shim: {found['shim']}")
    site = str(shipped_env.venv / "lib")
    assert found["executor_read_paths"], found
    for interpreter, path, module in found["executor_read_paths"]:
        assert interpreter == python and path.startswith("native (kafka_group._native"), found
        assert module.startswith(site) and module.endswith("_native.abi3.so"), found
    assert found["shim"] is not None and found["shim"]["registered"] == "True", found
    assert pathlib.Path(found["shim"]["jar"]).resolve() == jar.resolve(), found
