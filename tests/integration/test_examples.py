"""The examples run as a user runs them: the tour notebook headless, the scripts as processes.

Each starts its own embedded broker and Spark session, and checks its own
result; these tests assert on what they print, their exit status and the Delta
tables they leave.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, List, Optional

import pytest

from kafka_group_devbroker.secured_kafka import USERS, SecuredKafka
from tests.support import produce, unique_name
from tests.support_child_jvm import child_env

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"

#: A bound on one example's run (never asserted): generous for a loaded 2-core machine.
RUN_TIMEOUT_S = 300


def run_example(script: str, *args: str, cwd: Path) -> "subprocess.CompletedProcess[str]":
    """Run ``examples/<script>`` with this interpreter in a process group of its own, killed on timeout."""
    return run_command([sys.executable, str(EXAMPLES / script), *args], cwd=cwd)


def _absolute_pythonpath() -> str:
    """This run's PYTHONPATH with relative entries made absolute (the examples run in another folder)."""
    return os.pathsep.join(str(Path(p).resolve()) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)


def run_command(command: List[str], *, cwd: Path, env: Optional[Dict[str, str]] = None,
                script: str = "", timeout: float = RUN_TIMEOUT_S) -> "subprocess.CompletedProcess[str]":
    """Run ``command`` in a process group of its own (this run's environment with the short-lived JVMs' options of
    :func:`tests.support_child_jvm.child_env`, then ``env``), killed on timeout.

    Its stdin is empty and not a terminal, as in CI."""
    script = script or Path(command[1]).name
    env = child_env({"PYSPARK_PYTHON": sys.executable, "PYTHONPATH": _absolute_pythonpath(), **(env or {})})
    process = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        pytest.fail(f"{script} did not finish within {timeout} s; stdout tail:\n{out[-3000:]}\nstderr tail:\n"
                    f"{err[-3000:]}")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def table_rows(table: Path, columns: List[str]) -> Dict[str, List[Any]]:
    from deltalake import DeltaTable

    data = DeltaTable(str(table)).to_pyarrow_dataset().to_table(columns=columns)
    return {c: data.column(c).to_pylist() for c in columns}


def load_example(name: str) -> ModuleType:
    """Import ``examples/<name>.py`` (its module level imports no Spark)."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def execute_tour(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, where: Optional[str] = None,
                 kernel_env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """Run the tour notebook headless in a kernel of this interpreter (``where`` replaces the source of its
    section 0 cell, ``kernel_env`` is the kernel's environment on top of this run's and of the short-lived JVMs'
    options of :func:`tests.support_child_jvm.child_env`); returns its code cells by id, with their outputs."""
    nbclient = pytest.importorskip("nbclient", reason="the notebook test needs nbclient (pip install nbclient)")
    nbformat = pytest.importorskip("nbformat", reason="the notebook test needs nbformat (pip install nbformat)")
    pytest.importorskip("ipykernel", reason="the notebook test needs ipykernel (pip install ipykernel)")
    pytest.importorskip("matplotlib", reason="the notebook plots lag with matplotlib (pip install matplotlib)")

    # A kernelspec for this interpreter, so the notebook runs where the package is installed.
    kernel_name = "kafka-group-examples-test"
    spec_dir = tmp_path / "jupyter" / "kernels" / kernel_name
    spec_dir.mkdir(parents=True)
    spec: Dict[str, Any] = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "kafka-group test kernel", "language": "python",
    }
    # The kernel's JVMs (its Spark driver, the tour's embedded broker) live about a minute: C1 only.
    spec["env"] = {"JDK_JAVA_OPTIONS": child_env()["JDK_JAVA_OPTIONS"], **(kernel_env or {})}
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)

    notebook = nbformat.read(EXAMPLES / "kafka_group_tour.ipynb", as_version=4)
    if where is not None:
        [cell] = [c for c in notebook.cells if c.get("id") == "where"]
        cell.source = where
    client = nbclient.NotebookClient(notebook, kernel_name=kernel_name, timeout=RUN_TIMEOUT_S,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError naming the cell and its traceback if any cell fails

    return {cell.get("id"): cell for cell in notebook.cells if cell.cell_type == "code"}


def cell_text(cells: Dict[str, Any], cell_id: str) -> str:
    """What a code cell printed or showed as text."""
    parts = []
    for output in cells[cell_id].get("outputs", []):
        parts.append(output.get("text", ""))
        parts.append(output.get("data", {}).get("text/plain", ""))
    return "".join(parts)


def check_tour(cells: Dict[str, Any]) -> None:
    """What every run of the tour shows: exactly once, the group's split, the lag plot, the replay, the metrics."""

    def text(cell_id: str) -> str:
        return cell_text(cells, cell_id)

    check = text("check")
    assert "EXACTLY-ONCE CHECK" in check and "PASSED" in check, check

    owned = dict(re.findall(r"^(tour_[ab]): owns \[([\d, ]*)\]", text("rebalance"), flags=re.M))
    split = {name: {int(p) for p in found.split(",") if p.strip()} for name, found in owned.items()}
    assert set(split) == {"tour_a", "tour_b"}, text("rebalance")
    assert split["tour_a"] and split["tour_b"] and not split["tour_a"] & split["tour_b"]
    assert split["tour_a"] | split["tour_b"] == {0, 1, 2, 3}

    assert any("image/png" in output.get("data", {}) for output in cells["lag"]["outputs"]), "no lag plot"
    replay = re.search(r"replayed from \d+: (\d+) records, per partition (\{.*\})", text("replay"))
    assert replay is not None, text("replay")
    assert int(replay.group(1)) == 200 and replay.group(2) == "{0: 50, 1: 50, 2: 50, 3: 50}"  # the last 50 each
    scraped = text("metrics")
    assert "tour_a" in scraped and "tour_b" in scraped and "kafka_group_maxOffsetsBehindLatest" in scraped, scraped


def demo_entry() -> Path:
    """The Python file ``scripts/demo.sh`` runs (the README's first command)."""
    found = re.search(r'^exec "\$venv/bin/python" (\S+\.py)', (REPO / "scripts" / "demo.sh").read_text(), re.M)
    assert found, "scripts/demo.sh runs no Python file"
    return REPO / found.group(1)


#: A bound on the whole demo (never asserted; the demo bounds each step itself, 300 s by default): generous for a
#: loaded machine.
DEMO_TIMEOUT_S = 900


@pytest.mark.slow  # CI's first part runs this demo already (its exit code is the exactly-once check); ~90 s more here
def test_demo_shows_two_members_a_stop_a_kill_and_a_restart_and_lands_every_record_once(tmp_path: Path) -> None:
    """The README's demo: two members share the group, B is SIGKILLed and restarted, B stops (a rebalance), and every
    record lands once; the summary says so and nothing (no traceback, no warning) is printed after it."""
    output = tmp_path / "demo-output"
    result = run_command([sys.executable, str(demo_entry()), "--output", str(output)], cwd=tmp_path,
                         timeout=DEMO_TIMEOUT_S)
    assert result.returncode == 0, f"stdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}"
    steps = ["1. two members share the group", "2. B killed with SIGKILL", "3. B restarted from its checkpoint",
             "4. B stopped cleanly and left the group", "5. producer stopped"]
    missing = [s for s in steps if s not in result.stdout]
    assert missing == [], f"steps not shown: {missing}\nstdout:\n{result.stdout[-3000:]}"
    assert result.stdout.rstrip().endswith("every record landed exactly once: none missing, none twice")
    assert "Traceback" not in result.stderr and "warning" not in result.stderr.lower(), result.stderr[-3000:]
    rows = table_rows(output / "orders_bronze", ["partition", "offset", "landed_by"])
    landed = Counter(zip(rows["partition"], rows["offset"]))
    assert len(landed) == sum(landed.values()) > 0  # no record twice
    assert set(rows["landed_by"]) == {"A", "B"}  # both members landed records


def test_demo_asks_before_deleting_a_folder_or_writing_to_your_cluster(tmp_path: Path) -> None:
    """--output names a folder that is not an earlier demo's, --bootstrap-servers a user's cluster: --help says what
    each touches, and without a terminal to ask on, the demo refuses (naming --yes) and touches nothing."""
    demo = str(demo_entry())
    shown = run_command([sys.executable, demo, "--help"], cwd=tmp_path)
    assert shown.returncode == 0
    assert "DELETED" in shown.stdout and "WRITES" in shown.stdout and "--yes" in shown.stdout, shown.stdout
    mine = tmp_path / "my-folder"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    refused = run_command([sys.executable, demo, "--output", str(mine)], cwd=tmp_path)
    assert refused.returncode == 2 and "--yes" in refused.stderr, refused.stderr[-3000:]
    assert (mine / "notes.txt").read_text() == "keep me"
    refused = run_command([sys.executable, demo, "--bootstrap-servers", "127.0.0.1:9", "--output",
                           str(tmp_path / "out")], cwd=tmp_path)
    assert refused.returncode == 2 and "--yes" in refused.stderr and "orders" in refused.stderr, refused.stderr[-3000:]
    assert not (tmp_path / "out").exists()


def test_tour_notebook_runs_headless_and_lands_exactly_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cells = execute_tour(tmp_path, monkeypatch)
    check_tour(cells)
    assert "Kafka running: False" in cell_text(cells, "stop")


def test_tour_notebook_on_your_cluster_needs_no_local_kafka(
    kafka: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Section 0 filled in as a user does (YOUR_CLUSTER = True, the bootstrap servers, a root folder): the tour
    runs against the test broker as against any cluster, in a kernel where the development brokers cannot be
    imported, with the session SparkSession.builder.getOrCreate() gives."""
    where = "\n".join([
        "import uuid",
        "YOUR_CLUSTER = True",
        f"KAFKA = {{'bootstrap.servers': {kafka.bootstrap_servers!r}}}",
        f"CLUSTER_ROOT = {str(tmp_path / 'cluster')!r}",
        "STORAGE = {}",
        "RUN = uuid.uuid4().hex[:8]",
    ])
    # what a platform's kernel has: spark-submit's arguments for the session getOrCreate() builds (two cores, the
    # driver on loopback, workers connecting back over a Unix socket, as every session of the tests)
    env = {"PYTHONPATH": _without_devbroker(tmp_path), "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
           "PYSPARK_SUBMIT_ARGS": "--master local[2] --conf spark.python.unix.domain.socket.enabled=true "
                                  "--conf spark.ui.enabled=false pyspark-shell"}
    cells = execute_tour(tmp_path, monkeypatch, where=where, kernel_env=env)
    check_tour(cells)
    assert "are yours to remove" in cell_text(cells, "stop") and (tmp_path / "cluster").is_dir()


def test_scheduled_job_exits_0_when_everything_landed_and_1_with_the_reason_when_not(tmp_path: Path) -> None:
    table = tmp_path / "table"
    result = run_example("scheduled_job.py", "--embedded", "--demo-records", "1500", "--max-offsets-per-trigger",
                         "600", "--table", str(table), "--checkpoint", str(tmp_path / "checkpoint"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "landed 1500 records" in result.stderr
    # What it is doing from the first second (no minute of silence before the first batch).
    steps = ["starting an embedded Kafka cluster", "starting a local Spark session", "joining group 'scheduled-job'",
             "batch 0 landed"]
    assert [step for step in steps if step not in result.stderr] == [], result.stderr[-3000:]
    rows = table_rows(table, ["partition", "offset"])
    landed = Counter(zip(rows["partition"], rows["offset"]))
    assert sum(landed.values()) == len(landed) == 1500

    # The same table with another group: the run fails with the connector's own message on one line.
    result = run_example("scheduled_job.py", "--embedded", "--group", "another-group", "--table", str(table),
                         "--checkpoint", str(tmp_path / "checkpoint-other"), cwd=tmp_path)
    assert result.returncode == 1
    failed = [line for line in result.stderr.splitlines() if line.startswith("scheduled_job: FAILED: ")]
    assert len(failed) == 1, result.stderr[-3000:]
    assert "OffsetStoreError" in failed[0] and "holds the offsets of consumer group 'scheduled-job'" in failed[0]
    assert len(table_rows(table, ["offset"])["offset"]) == 1500  # nothing landed by the refused run


def test_scheduled_job_bad_arguments_exit_non_zero_with_the_reason(tmp_path: Path) -> None:
    result = run_example("scheduled_job.py", "--table", str(tmp_path / "t"), "--checkpoint", str(tmp_path / "c"),
                         cwd=tmp_path)
    assert result.returncode == 2
    assert "--topic, --group required (or --embedded" in result.stderr
    # the servers may come from a file or the environment, but from somewhere
    result = run_example("scheduled_job.py", "--topic", "t", "--group", "g", "--table", str(tmp_path / "t"),
                         "--checkpoint", str(tmp_path / "c"), cwd=tmp_path)
    assert result.returncode == 2 and "no Kafka bootstrap servers: give --bootstrap-servers" in result.stderr
    properties = tmp_path / "twice.properties"
    properties.write_text("bootstrap.servers=127.0.0.1:1\nsasl.password=Not-To-Be-Printed-41\n")
    result = run_command([sys.executable, str(EXAMPLES / "scheduled_job.py"), "--command-config", str(properties),
                          "--topic", "t", "--group", "g", "--table", str(tmp_path / "t"), "--checkpoint",
                          str(tmp_path / "c")], cwd=tmp_path, env={"KAFKA_GROUP_KAFKA_SASL_PASSWORD": "Also-Secret-42"})
    assert result.returncode == 2
    assert "Kafka setting 'sasl.password' is given by --command-config and by the environment" in result.stderr
    assert "Not-To-Be-Printed-41" not in result.stderr and "Also-Secret-42" not in result.stderr


def _without_devbroker(folder: Path) -> str:
    """A PYTHONPATH on which ``kafka_group_devbroker`` cannot be imported (a shadow that raises first), and the
    connector's sources: what a cluster without the development brokers has."""
    shadow = folder / "shadow" / "kafka_group_devbroker"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('the development brokers are not installed here')\n")
    return os.pathsep.join([str(folder / "shadow"), str(REPO / "connector"), str(REPO / "python")])


def test_scheduled_job_runs_on_your_cluster_from_flags_a_properties_file_and_the_environment(
    secured_kafka: SecuredKafka, tmp_path: Path,
) -> None:
    """The non-local path, twice on one table: a session it builds from --master local[2] with the Kafka settings
    in a properties file (Java names, SCRAM over SASL_PLAINTEXT), then spark-submit (the session Spark gives) with
    them in KAFKA_GROUP_KAFKA_* variables and --bootstrap-servers. Neither imports the development brokers; every
    record lands once; the password is printed by neither."""
    import pyspark

    topic, group = unique_name("job-topic"), unique_name("job-group")
    secured_kafka.create_topic(topic, 3)
    produce(secured_kafka.bootstrap_servers, topic, {0: 100, 1: 100, 2: 100})  # through the super-user door
    settings = {k[len("kafka."):]: v for k, v in secured_kafka.java_options("scram-sha-512").items()}
    password = USERS["alice"]
    assert password in settings["sasl.jaas.config"]
    properties = tmp_path / "client.properties"
    properties.write_text("".join(f"{k}={v}\n" for k, v in settings.items()), encoding="utf-8")
    table, checkpoint = tmp_path / "table", tmp_path / "checkpoint"
    common = ["--topic", topic, "--group", group, "--table", str(table), "--checkpoint", str(checkpoint)]
    # no development brokers; Spark's driver on loopback, as every session of the tests (local_session)
    no_devbroker = {"PYTHONPATH": _without_devbroker(tmp_path), "SPARK_LOCAL_IP": "127.0.0.1"}

    # Python workers connect back over a Unix socket, as in every session of the tests (local_session)
    unix_socket = "spark.python.unix.domain.socket.enabled=true"
    built = run_command([sys.executable, str(EXAMPLES / "scheduled_job.py"), "--master", "local[2]", "--conf",
                         unix_socket, "--command-config", str(properties), *common], cwd=tmp_path, env=no_devbroker)
    assert built.returncode == 0, built.stderr[-3000:]
    assert "landed 300 records" in built.stderr and "Spark master local[2]" in built.stderr

    produce(secured_kafka.bootstrap_servers, topic, {0: 50, 1: 50, 2: 50}, start=100)
    environment = {f"KAFKA_GROUP_KAFKA_{k.upper().replace('.', '_')}": v for k, v in settings.items()
                   if k != "bootstrap.servers"}
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    submitted = run_command([str(submit), "--master", "local[2]", "--conf", f"spark.pyspark.python={sys.executable}",
                             "--conf", unix_socket,
                             str(EXAMPLES / "scheduled_job.py"), "--bootstrap-servers", settings["bootstrap.servers"],
                             *common], cwd=tmp_path, env={**no_devbroker, **environment}, script="spark-submit")
    # spark-submit's PythonRunner merges the script's stderr into its own stdout
    said = submitted.stdout + submitted.stderr
    assert submitted.returncode == 0, said[-3000:]
    assert "landed 150 records" in said and "Spark master local[2]" in said

    rows = table_rows(table, ["partition", "offset"])
    landed = Counter(zip(rows["partition"], rows["offset"]))
    assert sum(landed.values()) == len(landed) == 450  # every record once, over both runs
    assert set(landed) == {(p, o) for p in range(3) for o in range(150)}
    for result in (built, submitted):
        assert password not in result.stdout + result.stderr


def test_scheduled_job_keeps_object_store_locations_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Pure (no Spark): the table and checkpoint of a cluster run are URIs; only local paths become absolute.
    job = load_example("scheduled_job")
    monkeypatch.chdir(tmp_path)
    args = job.parse_args(["--bootstrap-servers", "b:9092", "--topic", "t", "--group", "g",
                           "--table", "s3://lake/orders", "--checkpoint", "s3a://lake/_chk/orders"])
    assert (args.table, args.checkpoint) == ("s3://lake/orders", "s3a://lake/_chk/orders")
    args = job.parse_args(["--bootstrap-servers", "b:9092", "--topic", "t", "--group", "g",
                           "--table", "table", "--checkpoint", "dbfs:/chk/orders"])
    assert (args.table, args.checkpoint) == (str(tmp_path / "table"), "dbfs:/chk/orders")
    assert args.kafka == {"bootstrap.servers": "b:9092"}


def test_parse_with_quarantine_lands_good_and_malformed_records_once(tmp_path: Path) -> None:
    kinds = len(load_example("parse_with_quarantine").MALFORMED)
    good, bad_per_kind = 600, 2
    table = tmp_path / "orders"
    result = run_example("parse_with_quarantine.py", "--embedded", "--good-records", str(good), "--bad-per-kind",
                         str(bad_per_kind), "--table", str(table), "--checkpoint", str(tmp_path / "checkpoint"),
                         cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:] + result.stdout[-2000:]

    rows = table_rows(table, ["partition", "offset", "quarantined", "parse_error", "raw_value", "order_id"])
    quarantined = [i for i, q in enumerate(rows["quarantined"]) if q]
    parsed = [i for i, q in enumerate(rows["quarantined"]) if not q]
    assert len(parsed) == good
    assert len(quarantined) == kinds * bad_per_kind
    assert len(parsed) + len(quarantined) == good + kinds * bad_per_kind  # everything produced, nothing else
    assert len(set(zip(rows["partition"], rows["offset"]))) == len(rows["offset"])  # each record once
    assert all(rows["order_id"][i] is not None and rows["parse_error"][i] is None for i in parsed)
    assert all(rows["parse_error"][i] for i in quarantined)
    # The raw bytes are kept (a tombstone has none): malformed text can be inspected and replayed.
    assert sum(1 for i in quarantined if rows["raw_value"][i] is not None) == (kinds - 1) * bad_per_kind


def test_lag_history_reads_latest_and_end_offsets_of_recorded_progress() -> None:
    # Pure (no Spark): could live in tests/unit; kept next to the notebook that plots it.
    from pyspark_kafka_group.lag_plot import lag_history

    def event(at: str, latest: Dict[str, int], end: Dict[str, Any]) -> Dict[str, Any]:
        member = {"group": "g", "owned": {"orders": sorted(int(p) for p in latest)}}
        return {"timestamp": at, "sources": [{
            "latestOffset": json.dumps({"orders": latest, "@member": member, "@flow": {"paused": {}}}),
            "endOffset": json.dumps({"@group": "g", "@offsetsTable": "/t", "orders": end}),
        }]}

    progress: List[Any] = [
        {"timestamp": "2026-11-23T08:00:00.000Z", "sources": [{"latestOffset": None, "endOffset": None}]},
        event("2026-11-23T08:00:01.000Z", {"0": 300, "1": 40}, {"0": [0, 100], "1": [0, 40]}),
        json.dumps(event("2026-11-23T08:00:02.000Z", {"0": 300}, {"0": [100, 200], "1": 40})),  # p1 revoked
    ]
    rows = [(r.timestamp.second, r.topic, r.partition, r.lag) for r in lag_history(progress)]
    assert rows == [(1, "orders", 0, 200), (1, "orders", 1, 0), (2, "orders", 0, 100)]


def test_debezium_cdc_lands_the_databases_final_state_from_apache_kafka(kafka: Any, tmp_path: Path) -> None:
    """The Debezium example against the test broker: its demo topic (snapshot, creates, updates, deletes with
    their tombstones, then the connector's repeats) produced into Apache Kafka, landed by key in batches of 150;
    the table equals the state the example's simulated database ended in, read with delta-rs here again."""
    example = load_example("debezium_cdc")
    topic, group = unique_name("dbz-customers"), unique_name("dbz-group")
    kafka.create_topic(topic, 3)
    table = tmp_path / "customers"
    result = run_example("debezium_cdc.py", "--local", "--bootstrap-servers", kafka.bootstrap_servers,
                         "--produce-demo", "--topic", topic, "--group", group, "--customers", "40", "--changes",
                         "300", "--repeats", "30", "--max-offsets-per-trigger", "150", "--table", str(table),
                         "--checkpoint", str(tmp_path / "checkpoint"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:] + result.stdout[-2000:]
    assert "the table equals the database" in result.stdout
    _, expected = example.change_events(40, 300, 30, 36)
    assert example.read_table(str(table)) == expected
