"""A real Schema Registry on loopback: Apicurio Registry, serving Confluent's API.

`Apicurio Registry <https://www.apicur.io/registry/>`_ 3.x answers Confluent's
Schema Registry REST API at ``/apis/ccompat/v7``, which Confluent's own clients
(``confluent_kafka.schema_registry``: ``AvroSerializer``, ``ProtobufSerializer``,
``JSONSerializer`` and their deserializers) talk to. :class:`SchemaRegistry`
starts one, pinned to :data:`~kafka_group_devbroker.jars.APICURIO_VERSION`:

- fetched on first use from Maven Central (the ``apicurio-registry-app`` release's
  Quarkus application, :func:`kafka_group_devbroker.jars.distribution`); nothing
  is committed or downloaded by hand;
- on ``127.0.0.1`` only (its HTTP and management ports both free loopback ports);
- in-memory storage (an H2 database in the JVM: every start is an empty registry);
- its log in a file under a temporary folder that :meth:`SchemaRegistry.stop` removes;
- one JVM, started with ``PR_SET_PDEATHSIG`` like the Kafka brokers, so it dies
  with the process that owns it; :meth:`SchemaRegistry.stop` is also registered
  with :mod:`atexit`, and only that JVM's pid is ever signalled.

Apicurio 3.3 is compiled for Java 21: :func:`find_java` picks ``JAVA_HOME``, the
``java`` on ``PATH``, or the newest JDK under ``/usr/lib/jvm``, whichever is 21 or newer.

Example::

    from kafka_group_devbroker.schema_registry import SchemaRegistry

    with SchemaRegistry() as registry:
        conf = {"url": registry.url}   # confluent_kafka.schema_registry.SchemaRegistryClient(conf)

From a shell: ``kafka-group-registry`` prints ``schema.registry.url = http://127.0.0.1:PORT/apis/ccompat/v7``
and runs until Ctrl-C.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Mapping, Optional, Sequence

from kafka_group_devbroker.apache_kafka import _free_port, _launch
from kafka_group_devbroker.jars import APICURIO_VERSION, distribution
from kafka_group_devbroker.lifecycle import ServerLifecycle, wait_or_signal
from kafka_group.errors import EmbeddedBrokerError

__all__ = ["SchemaRegistry", "find_java", "CCOMPAT_PATH", "MIN_JAVA"]

logger = logging.getLogger(__name__)

#: Where Apicurio serves Confluent's Schema Registry API (the URL Confluent's clients take).
CCOMPAT_PATH = "/apis/ccompat/v7"
#: The oldest Java that runs Apicurio Registry 3.3 (its classes are Java 21 bytecode).
MIN_JAVA = 21

#: Quarkus and Apicurio settings, as system properties (they override the application's own).
_BASE_SETTINGS: dict[str, str] = {
    "quarkus.http.host": "127.0.0.1",
    "quarkus.management.host": "127.0.0.1",
    # In-memory storage, said explicitly (it is also Apicurio's default): a fresh registry per start.
    "apicurio.storage.kind": "sql",
    "apicurio.storage.sql.kind": "h2",
    # A small pool: the default opens 20 connections at start.
    "apicurio.datasource.jdbc.initial-size": "2",
    "apicurio.datasource.jdbc.min-size": "2",
    "apicurio.datasource.jdbc.max-size": "20",
    "quarkus.otel.sdk.disabled": "true",
    # Quarkus logs to the console, which the launcher writes to registry.log; the access log (one line
    # per HTTP request, Apicurio's own default, which tests use to count registry calls) goes only there.
    "quarkus.log.console.enabled": "true",
    "quarkus.http.access-log.enabled": "true",
}

_JVM_OPTIONS = ("-Xms64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")


def _java_major(java: str) -> Optional[int]:
    """The feature release of a ``java`` executable (17, 21, 25), from its JDK's ``release`` file or ``-version``."""
    release = Path(os.path.realpath(java)).parent.parent / "release"
    try:
        match = re.search(r'^JAVA_VERSION="(\d+)', release.read_text(encoding="utf-8"), re.MULTILINE)
        if match:
            return int(match.group(1))
    except OSError:
        pass
    try:
        output = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', output)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def find_java(minimum: int = MIN_JAVA) -> str:
    """A ``java`` executable of at least ``minimum``.

    Parameters
    ----------
    minimum : int, default :data:`MIN_JAVA`
        The oldest acceptable feature release.

    Returns
    -------
    str
        ``$JAVA_HOME/bin/java``, else the ``java`` on ``PATH``, else the newest
        ``/usr/lib/jvm/*/bin/java``: the first of these that is new enough.

    Raises
    ------
    EmbeddedBrokerError
        When none is new enough; the message lists what was found.
    """
    candidates: list[str] = []
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidates.append(os.path.join(java_home, "bin", "java"))
    on_path = shutil.which("java")
    if on_path:
        candidates.append(on_path)
    jvm_root = Path("/usr/lib/jvm")
    installed = sorted(jvm_root.glob("*/bin/java")) if jvm_root.is_dir() else []
    ranked = sorted(((_java_major(str(j)) or 0, str(j)) for j in installed if os.access(j, os.X_OK)), reverse=True)
    candidates.extend(path for _, path in ranked)
    seen: list[str] = []
    for java in candidates:
        if not os.access(java, os.X_OK):
            continue
        major = _java_major(java)
        if major is not None and major >= minimum:
            return java
        seen.append(f"{java} ({major})")
    raise EmbeddedBrokerError(
        f"Apicurio Registry {APICURIO_VERSION} needs Java {minimum} or newer; found only: {', '.join(seen) or 'none'}. "
        f"Install a JDK {minimum}+ (e.g. apt-get install openjdk-21-jdk-headless) or point JAVA_HOME at one"
    )


class SchemaRegistry(ServerLifecycle):
    """Apicurio Registry in one JVM on loopback, answering Confluent's Schema Registry API.

    Parameters
    ----------
    settings : dict of str to str, optional
        Further Quarkus or Apicurio settings (``-Dkey=value``), over the defaults.
    start_timeout : float, default 240.0
        Seconds :meth:`start` waits for the API to answer (a cold start on two
        busy cores took about 25 s).
    heap : str, default "384m"
        The JVM's ``-Xmx``.

    Notes
    -----
    :meth:`start` and :meth:`stop` may be called from any thread; a lock
    serialises them. A ``with`` block starts the registry and stops it.
    """

    def __init__(
        self, *, settings: Optional[Mapping[str, str]] = None, start_timeout: float = 240.0, heap: str = "384m"
    ) -> None:
        self._extra_settings = dict(settings or {})
        self._start_timeout = start_timeout
        self._heap = heap
        self._lock = threading.RLock()
        self._process: Optional["subprocess.Popen[bytes]"] = None
        self._folder: Optional[Path] = None
        self._port: Optional[int] = None
        self._management_port: Optional[int] = None
        super().__init__()

    # -- state ----------------------------------------------------------------

    @property
    def url(self) -> str:
        """Confluent API base URL (``http://127.0.0.1:PORT/apis/ccompat/v7``), what ``SchemaRegistryClient`` takes."""
        if self._port is None:
            raise EmbeddedBrokerError("the schema registry is not started")
        return f"http://127.0.0.1:{self._port}{CCOMPAT_PATH}"

    @property
    def ports(self) -> tuple[int, int]:
        """The HTTP port (the API) and Quarkus's management port (health, metrics), both on 127.0.0.1."""
        if self._port is None or self._management_port is None:
            raise EmbeddedBrokerError("the schema registry is not started")
        return self._port, self._management_port

    @property
    def running(self) -> bool:
        """Whether the JVM is alive."""
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int:
        """The JVM's process id."""
        if self._process is None:
            raise EmbeddedBrokerError("the schema registry is not started")
        return self._process.pid

    @property
    def log_path(self) -> Path:
        """The registry's log file (the JVM's output: Quarkus's log, access log included)."""
        if self._folder is None:
            raise EmbeddedBrokerError("the schema registry is not started")
        return self._folder / "registry.log"

    def access_log(self) -> list[str]:
        """The paths of the HTTP requests the registry has logged so far, oldest first.

        Returns
        -------
        list of str
            ``"METHOD PATH"`` per request, such as ``"GET /apis/ccompat/v7/schemas/ids/1"``.
        """
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        return [f"{m.group(1)} {m.group(2)}" for m in re.finditer(r'method="(\w+)" path="([^"]*)"', text)]

    def output_tail(self, lines: int = 40) -> str:
        """The last lines of the registry's log, for error messages."""
        try:
            return "\n".join(self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
        except (FileNotFoundError, EmbeddedBrokerError):
            return "(no log)"

    # -- lifecycle --------------------------------------------------------------

    def start(self) -> "SchemaRegistry":
        """Fetch the registry if needed, start its JVM and wait until the Confluent API answers.

        Returns
        -------
        SchemaRegistry
            ``self``, for chaining.

        Raises
        ------
        EmbeddedBrokerError
            When Maven or a Java 21+ is missing, or the registry does not answer
            within ``start_timeout``; the message ends with its log tail.
        """
        with self._lock:
            if self._process is not None:
                raise EmbeddedBrokerError("already started")
            home = distribution("schema-registry")
            java = find_java()
            self._folder = Path(tempfile.mkdtemp(prefix="kafka-group-registry-"))
            self._port = _free_port()
            self._management_port = _free_port()
            settings = dict(_BASE_SETTINGS)
            settings.update({
                "quarkus.http.port": str(self._port),
                "quarkus.management.port": str(self._management_port),
                "apicurio.datasource.url": f"jdbc:h2:mem:registry_{self._port}",
                # where Apicurio would write storage snapshots: inside our folder, not /tmp
                "apicurio.storage.snapshot.location": str(self._folder),
            })
            settings.update(self._extra_settings)
            command = [java, f"-Xmx{self._heap}", *_JVM_OPTIONS,
                       *(f"-D{key}={value}" for key, value in settings.items()),
                       "-jar", str(home / "quarkus-run.jar")]
            self._register_atexit()
            started = time.monotonic()
            try:
                self._process = _launch(command, log_path=self.log_path, cwd=self._folder)
                self._await_api(started + self._start_timeout)
            except BaseException:
                self.stop()
                raise
            logger.info("Apicurio Registry %s at %s (pid %d, up in %.1f s, folder %s)",
                        APICURIO_VERSION, self.url, self._process.pid, time.monotonic() - started, self._folder)
            return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the JVM (SIGTERM, then SIGKILL after ``timeout``) and remove its folder.

        Idempotent; never raises when the JVM is already gone.
        """
        with self._lock:
            process = self._process
            if process is not None:
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)
                if not wait_or_signal(process, timeout, signal.SIGKILL, logger,
                                      "schema registry (pid %d) did not stop in %.0f s; sending SIGKILL",
                                      process.pid, timeout):
                    process.wait(timeout=30)
                logger.info("Apicurio Registry at port %s stopped", self._port)
            if self._folder is not None:
                shutil.rmtree(self._folder, ignore_errors=True)
            self._process = None
            self._folder = None
            self._port = None
            self._management_port = None
            self._unregister_atexit()

    def _needs_start(self) -> bool:
        return self._process is None

    def __repr__(self) -> str:
        return f"SchemaRegistry({self.url if self._port is not None else 'not started'})"

    # -- internals ----------------------------------------------------------------

    def _await_api(self, deadline: float) -> None:
        """Poll ``GET /subjects`` until it answers 200, the JVM exits, or the deadline passes."""
        assert self._process is not None
        probe = f"{self.url}/subjects"
        while True:
            if self._process.poll() is not None:
                raise EmbeddedBrokerError(
                    f"Apicurio Registry exited during start (status {self._process.returncode}):\n{self.output_tail()}"
                )
            try:
                with urllib.request.urlopen(probe, timeout=5) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError) as exc:  # refused or 503 while Quarkus starts
                logger.debug("waiting for the schema registry: %s", exc)
            if time.monotonic() > deadline:
                raise EmbeddedBrokerError(
                    f"Apicurio Registry did not answer at {probe} within {self._start_timeout:.0f} s:\n{self.output_tail()}"
                )
            time.sleep(0.25)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``kafka-group-registry``: run a registry in the foreground, print its URL, stop on Ctrl-C or SIGTERM.

    Parameters
    ----------
    argv : sequence of str, optional
        Command-line arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status: 0 after a clean stop, 1 when the registry could not start.
    """
    parser = argparse.ArgumentParser(
        prog="kafka-group-registry",
        description=f"Run Apicurio Registry {APICURIO_VERSION} (Confluent's Schema Registry API, in-memory) "
        "on 127.0.0.1 until Ctrl-C. The first line of stdout is 'schema.registry.url = URL'.",
    )
    parser.add_argument("--log-level", default="INFO", help="this launcher's log level (default INFO)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    try:
        with SchemaRegistry() as registry:
            sys.stdout.write(f"schema.registry.url = {registry.url}\n")
            sys.stdout.flush()
            try:
                while not stop.is_set() and registry.running:
                    stop.wait(0.5)
            except KeyboardInterrupt:
                pass
            if not registry.running and not stop.is_set():
                logger.error("the registry exited:\n%s", registry.output_tail())
                return 1
    except EmbeddedBrokerError as exc:
        logger.error("%s", exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
