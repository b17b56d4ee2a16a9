"""A Spark standalone cluster on loopback: one master and N workers, from the pip distribution of pyspark.

pyspark's pip package has Spark's jars and ``bin/spark-class`` but not the
``sbin/start-master.sh`` of a Spark download; ``spark-class`` runs the standalone
daemons directly. :class:`SparkStandalone` starts them the way the other
development launchers start their JVMs:

- every daemon on ``127.0.0.1`` only, on free loopback ports (RPC and web UI);
- its own temporary folder (``conf/`` left empty so no user ``spark-defaults.conf``
  is read, the workers' ``work/`` and ``local/`` folders where executors keep their
  logs, Python workers and temporary files), removed by :meth:`SparkStandalone.stop`;
- each daemon's output in ``<folder>/logs/<name>.log``;
- started with ``PR_SET_PDEATHSIG`` (``spark-class`` ends in ``exec java``, so the
  JVM keeps it), from the same long-lived launcher thread as the Kafka brokers, so
  the daemons die with the process that owns them; :meth:`SparkStandalone.stop`
  is registered with :mod:`atexit` and signals only the pids it started
  (SIGTERM, then SIGKILL), the workers first;
- :meth:`SparkStandalone.start` returns once the master's JSON endpoint
  (``http://127.0.0.1:<ui>/json/``) lists every worker as ``ALIVE``.

Development only: like Spark's own defaults, the master accepts applications without
authentication (no ``spark.authenticate``), so any local user who can reach its loopback
port can run code as the user who started it. Do not start it on a machine shared with
users you do not trust.

Each executor an application gets is a JVM of its own, forked by its worker;
:meth:`SparkStandalone.executor_pids` finds them (children of the workers' pids
whose command is ``CoarseGrainedExecutorBackend``), for tests that kill one.

Example::

    from kafka_group_devbroker.spark_standalone import SparkStandalone

    with SparkStandalone(workers=2, cores=1) as cluster:
        spark = (SparkSession.builder.master(cluster.master_url)
                 .config("spark.executor.cores", "1").config("spark.cores.max", "2").getOrCreate())
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from kafka_group.errors import EmbeddedBrokerError
from kafka_group_devbroker.apache_kafka import _free_port, _launch
from kafka_group_devbroker.lifecycle import ServerLifecycle, wait_or_signal

__all__ = ["ExecutorProcess", "SparkStandalone", "alive_workers", "executor_from_cmdline", "spark_class"]

logger = logging.getLogger(__name__)

_MASTER_CLASS = "org.apache.spark.deploy.master.Master"
_WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
_EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
#: Small heaps and a quick JIT for the daemons (not the executors: their options come from the application).
_DAEMON_JAVA_OPTS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
#: Variables of the launching process the daemons (and so their executors) do not inherit.
_NOT_INHERITED = frozenset({"PYTHONPATH", "PYTHONHOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME",
                            "SPARK_CONF_DIR", "VIRTUAL_ENV"})


@dataclass(frozen=True)
class ExecutorProcess:
    """One executor JVM of an application, as its worker started it.

    Attributes
    ----------
    pid : int
        The executor JVM's process id.
    app_id : str
        The application it serves (``app-...``).
    executor_id : str
        Spark's executor id (``"0"``, ``"1"``, ...).
    worker : int
        Index of the worker that forked it (0-based, in :attr:`SparkStandalone.worker_dirs` order).
    """

    pid: int
    app_id: str
    executor_id: str
    worker: int


def spark_class(spark_home: Optional[str] = None) -> str:
    """The ``bin/spark-class`` of ``spark_home``, else of the pip-installed pyspark.

    Raises
    ------
    EmbeddedBrokerError
        When there is no executable ``bin/spark-class`` there.
    """
    if spark_home is None:
        try:
            import pyspark
        except ImportError as exc:
            raise EmbeddedBrokerError("a Spark standalone cluster needs pyspark installed (pip install pyspark)") from exc
        spark_home = os.path.dirname(os.path.abspath(pyspark.__file__))
    path = os.path.join(spark_home, "bin", "spark-class")
    if not os.access(path, os.X_OK):
        raise EmbeddedBrokerError(f"no executable {path}: point spark_home at a Spark installation (SPARK_HOME)")
    return path


def alive_workers(status: Mapping[str, Any]) -> int:
    """How many workers the master's ``/json/`` answer lists as ``ALIVE``.

    Parameters
    ----------
    status : mapping
        The decoded JSON of ``http://<master ui>/json/``.
    """
    workers = status.get("workers")
    if not isinstance(workers, list):
        return 0
    return sum(1 for worker in workers if isinstance(worker, Mapping) and worker.get("state") == "ALIVE")


def executor_from_cmdline(argv: Sequence[str]) -> Optional[tuple[str, str]]:
    """``(app_id, executor_id)`` when ``argv`` is a standalone executor's command line, else None.

    Parameters
    ----------
    argv : sequence of str
        A process's arguments (``/proc/<pid>/cmdline`` split at NUL bytes).
    """
    if _EXECUTOR_CLASS not in argv:
        return None
    found: dict[str, str] = {}
    for flag, value in zip(argv, argv[1:]):
        if flag in ("--app-id", "--executor-id"):
            found[flag] = value
    if "--app-id" not in found or "--executor-id" not in found:
        return None
    return found["--app-id"], found["--executor-id"]


def _children(pid: int) -> list[int]:
    """The pids whose parent is ``pid`` (Linux ``/proc``)."""
    children: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ')'
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1 and fields[1] == str(pid):
            children.append(int(entry))
    return children


def _still_executor(executor: ExecutorProcess) -> bool:
    """Whether ``executor.pid`` still runs that executor (same application and executor id)."""
    try:
        raw = Path(f"/proc/{executor.pid}/cmdline").read_bytes()
    except OSError:
        return False
    parsed = executor_from_cmdline([part.decode("utf-8", "replace") for part in raw.split(b"\0") if part])
    return parsed == (executor.app_id, executor.executor_id)


class SparkStandalone(ServerLifecycle):
    """A Spark standalone master and ``workers`` workers on loopback, each worker its own JVM.

    Parameters
    ----------
    workers : int, default 2
        Number of workers.
    cores : int, default 1
        Cores each worker offers.
    memory : str, default "2g"
        Memory each worker offers to executors (``--memory``).
    spark_home : str, optional
        A Spark installation; default the pip-installed pyspark's folder.
    environment : mapping of str to str, optional
        Variables added to the daemons' environment (executors inherit their worker's). The
        daemons inherit this process's environment except its Python and Spark settings
        (``PYTHONPATH``, ``PYSPARK_PYTHON``, ``SPARK_HOME``, ...), as on a real node.
    start_timeout : float, default 120.0
        Seconds :meth:`start` waits for the master to list every worker as ALIVE.
    daemon_memory : str, default "256m"
        Heap of the master and worker JVMs (``SPARK_DAEMON_MEMORY``).

    Notes
    -----
    :meth:`start` and :meth:`stop` may be called from any thread; a lock
    serialises them. A ``with`` block starts the cluster and stops it.
    """

    def __init__(
        self,
        *,
        workers: int = 2,
        cores: int = 1,
        memory: str = "2g",
        spark_home: Optional[str] = None,
        environment: Optional[Mapping[str, str]] = None,
        start_timeout: float = 120.0,
        daemon_memory: str = "256m",
    ) -> None:
        if workers < 1 or cores < 1:
            raise EmbeddedBrokerError(f"a standalone cluster needs workers >= 1 and cores >= 1, got {workers} and {cores}")
        self._workers = workers
        self._cores = cores
        self._memory = memory
        self._spark_home = spark_home
        self._environment = dict(environment or {})
        self._start_timeout = start_timeout
        self._daemon_memory = daemon_memory
        self._lock = threading.RLock()
        self._folder: Optional[Path] = None
        self._master: Optional["subprocess.Popen[bytes]"] = None
        self._worker_processes: list["subprocess.Popen[bytes]"] = []
        self._port: Optional[int] = None
        self._ui_port: Optional[int] = None
        super().__init__()

    # -- state ----------------------------------------------------------------

    @property
    def master_url(self) -> str:
        """``spark://127.0.0.1:PORT``, what ``SparkSession.builder.master`` and ``--master`` take."""
        if self._port is None:
            raise EmbeddedBrokerError("the standalone cluster is not started")
        return f"spark://127.0.0.1:{self._port}"

    @property
    def ui_url(self) -> str:
        """The master's web UI, ``http://127.0.0.1:PORT`` (its JSON at ``/json/``)."""
        if self._ui_port is None:
            raise EmbeddedBrokerError("the standalone cluster is not started")
        return f"http://127.0.0.1:{self._ui_port}"

    @property
    def folder(self) -> Path:
        """The cluster's temporary folder (``logs/``, ``conf/``, ``worker-N/``)."""
        if self._folder is None:
            raise EmbeddedBrokerError("the standalone cluster is not started")
        return self._folder

    @property
    def worker_dirs(self) -> list[Path]:
        """Each worker's ``--work-dir``: ``<app id>/<executor id>/stderr`` are the executors' logs."""
        return [self.folder / f"worker-{index}" / "work" for index in range(self._workers)]

    @property
    def running(self) -> bool:
        """Whether the master and every worker JVM are alive."""
        processes = [self._master, *self._worker_processes]
        return self._master is not None and all(p is not None and p.poll() is None for p in processes)

    def status(self) -> dict[str, Any]:
        """The master's ``/json/`` answer: workers and their state, active and completed applications."""
        with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=5) as response:
            decoded = json.loads(response.read().decode("utf-8"))
        if not isinstance(decoded, dict):
            raise EmbeddedBrokerError(f"the master's /json/ answered {type(decoded).__name__}, not an object")
        return decoded

    def executor_pids(self, app_id: Optional[str] = None) -> list[ExecutorProcess]:
        """The executor JVMs the workers run now (of ``app_id`` only, when given).

        Only children of this cluster's worker pids are considered, so no other
        user's or cluster's process is ever named.
        """
        found: list[ExecutorProcess] = []
        for index, worker in enumerate(self._worker_processes):
            if worker.poll() is not None:
                continue
            for pid in _children(worker.pid):
                try:
                    raw = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                parsed = executor_from_cmdline([part.decode("utf-8", "replace") for part in raw.split(b"\0") if part])
                if parsed is not None and (app_id is None or parsed[0] == app_id):
                    found.append(ExecutorProcess(pid=pid, app_id=parsed[0], executor_id=parsed[1], worker=index))
        return sorted(found, key=lambda executor: (executor.app_id, int(executor.executor_id)
                                                   if executor.executor_id.isdigit() else -1))

    def output_tail(self, lines: int = 30) -> str:
        """The last lines of every daemon's log, for error messages."""
        if self._folder is None:
            return "(not started)"
        parts = []
        for log in sorted((self._folder / "logs").glob("*.log")):
            text = log.read_text(encoding="utf-8", errors="replace")
            parts.append(f"--- {log.name} ---\n" + "\n".join(text.splitlines()[-lines:]))
        return "\n".join(parts) or "(no log)"

    # -- lifecycle --------------------------------------------------------------

    def start(self) -> "SparkStandalone":
        """Start the master, then the workers, and wait until the master lists every worker as ALIVE.

        Returns
        -------
        SparkStandalone
            ``self``, for chaining.

        Raises
        ------
        EmbeddedBrokerError
            When ``spark-class`` is missing, a daemon exits, or the workers are not
            ALIVE within ``start_timeout``; the message ends with the daemons' log tails.
        """
        with self._lock:
            if self._master is not None:
                raise EmbeddedBrokerError("already started")
            launcher = spark_class(self._spark_home)
            self._folder = Path(tempfile.mkdtemp(prefix="kafka-group-spark-"))
            for sub in ("logs", "conf"):
                (self._folder / sub).mkdir()
            self._port = _free_port()
            self._ui_port = _free_port()
            self._register_atexit()
            started = time.monotonic()
            try:
                self._master = self._spawn("master", [launcher, _MASTER_CLASS, "--host", "127.0.0.1", "--port",
                                                      str(self._port), "--webui-port", str(self._ui_port)], {})
                for index in range(self._workers):
                    home = self._folder / f"worker-{index}"
                    (home / "work").mkdir(parents=True)
                    (home / "local").mkdir()
                    command = [launcher, _WORKER_CLASS, "--host", "127.0.0.1", "--cores", str(self._cores),
                               "--memory", self._memory, "--webui-port", str(_free_port()),
                               "--work-dir", str(home / "work"), self.master_url]
                    self._worker_processes.append(
                        self._spawn(f"worker-{index}", command, {"SPARK_LOCAL_DIRS": str(home / "local")}))
                self._await_workers(started + self._start_timeout)
            except BaseException:
                self.stop()
                raise
            logger.info("Spark standalone at %s (UI %s): %d workers of %d core(s) up in %.1f s, folder %s",
                        self.master_url, self.ui_url, self._workers, self._cores, time.monotonic() - started,
                        self._folder)
            return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the workers, then the master (SIGTERM, then SIGKILL after ``timeout``), and remove the folder.

        A worker's executors get SIGTERM from their worker; any that outlive it
        (already reparented) are SIGKILLed by pid. Idempotent; never raises when
        the JVMs are already gone.
        """
        with self._lock:
            executors = self.executor_pids() if self._worker_processes else []
            for process in [*self._worker_processes, self._master]:
                if process is not None and process.poll() is None:
                    process.send_signal(signal.SIGTERM)
            for process in [*self._worker_processes, self._master]:
                if process is None:
                    continue
                if not wait_or_signal(process, timeout, signal.SIGKILL, logger,
                                      "Spark daemon (pid %d) did not stop in %.0f s; sending SIGKILL",
                                      process.pid, timeout):
                    process.wait(timeout=30)
            for executor in executors:
                # An executor seen as this cluster's worker's child that outlived its worker; the pid is
                # signalled only while it still runs that executor (it may have exited and been reused).
                if _still_executor(executor):
                    try:
                        os.kill(executor.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            if self._master is not None:
                logger.info("Spark standalone at port %s stopped", self._port)
            if self._folder is not None:
                shutil.rmtree(self._folder, ignore_errors=True)
            self._master = None
            self._worker_processes = []
            self._folder = None
            self._port = None
            self._ui_port = None
            self._unregister_atexit()

    def _needs_start(self) -> bool:
        return self._master is None

    def __repr__(self) -> str:
        return f"SparkStandalone({self.master_url if self._port is not None else 'not started'})"

    # -- internals ----------------------------------------------------------------

    def _daemon_environment(self, extra: Mapping[str, str]) -> dict[str, str]:
        """The environment of one daemon: this process's, with Spark pointed at the cluster's folder."""
        assert self._folder is not None
        # A node's daemons do not share the launching process's Python or Spark settings: an application
        # names its interpreter (spark.pyspark.python) and its paths (spark.executorEnv.*) itself, and a
        # user's SPARK_HOME or SPARK_CONF_DIR would change what the daemons read.
        env = {key: value for key, value in os.environ.items() if key not in _NOT_INHERITED}
        env.update({
            "SPARK_CONF_DIR": str(self._folder / "conf"),
            "SPARK_LOG_DIR": str(self._folder / "logs"),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": self._daemon_memory,
            "SPARK_DAEMON_JAVA_OPTS": _DAEMON_JAVA_OPTS,
            "SPARK_NO_DAEMONIZE": "1",
        })
        env.update(self._environment)
        env.update(extra)
        return env

    def _spawn(self, name: str, command: list[str], extra_env: Mapping[str, str]) -> "subprocess.Popen[bytes]":
        """Start one daemon with its output in ``logs/<name>.log`` (through the launcher thread: PDEATHSIG)."""
        assert self._folder is not None
        env = self._daemon_environment(extra_env)
        logger.debug("starting %s: %s", name, shlex.join(command))
        return _launch(command, log_path=self._folder / "logs" / f"{name}.log", cwd=self._folder, env=env)

    def _await_workers(self, deadline: float) -> None:
        """Poll the master's ``/json/`` until every worker is ALIVE, a daemon exits, or the deadline passes."""
        while True:
            for process in [self._master, *self._worker_processes]:
                if process is not None and process.poll() is not None:
                    raise EmbeddedBrokerError(
                        f"a Spark daemon (pid {process.pid}) exited during start (status {process.returncode}):\n"
                        f"{self.output_tail()}")
            try:
                if alive_workers(self.status()) >= self._workers:
                    return
            except (urllib.error.URLError, OSError, ValueError) as exc:  # the UI not up yet
                logger.debug("waiting for the Spark master: %s", exc)
            if time.monotonic() > deadline:
                raise EmbeddedBrokerError(
                    f"the Spark master did not list {self._workers} ALIVE workers within {self._start_timeout:.0f} s:\n"
                    f"{self.output_tail()}")
            time.sleep(0.25)

