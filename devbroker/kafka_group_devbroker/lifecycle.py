"""What the development servers do alike: a ``with`` block and a stop at interpreter exit; the clusters' size and first topics.

:class:`~kafka_group_devbroker.apache_kafka.ApacheKafka` (JVMs) and
:class:`~kafka_group_devbroker.cluster.EmbeddedKafka` (a mock-cluster host process)
start and stop their processes differently, but both must stop them when the
interpreter exits without :meth:`stop` having been called, must not keep that
hook once they are stopped, and start on entering a ``with`` block and stop on
leaving it; both take a broker count and the topics to create at start.
:class:`ClusterLifecycle` holds that once. The other development servers
(:class:`~kafka_group_devbroker.schema_registry.SchemaRegistry`,
:class:`~kafka_group_devbroker.spark_standalone.SparkStandalone`) share its first half,
:class:`ServerLifecycle`. :func:`wait_or_signal` is the step they all repeat when a process
does not exit: wait, then escalate to a signal.
"""

from __future__ import annotations

import atexit
import logging
import subprocess
from abc import ABC, abstractmethod
from types import TracebackType
from typing import Mapping, Optional, TypeVar

from kafka_group.errors import EmbeddedBrokerError

__all__ = ["ClusterLifecycle", "ServerLifecycle", "wait_or_signal"]

_Server = TypeVar("_Server", bound="ServerLifecycle")


class ServerLifecycle(ABC):
    """Base of the development servers: a context manager and an :mod:`atexit` stop.

    Notes
    -----
    A subclass implements :meth:`start` and :meth:`stop`, calls
    :meth:`_register_atexit` once its processes exist and
    :meth:`_unregister_atexit` once they are gone, and says through
    :meth:`_needs_start` and :meth:`_stops_on_exit` what a ``with`` block does.
    """

    def __init__(self) -> None:
        self._atexit_registered = False

    @abstractmethod
    def start(self) -> "ServerLifecycle":
        """Start the server's processes and return ``self``."""

    @abstractmethod
    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server's processes; idempotent."""

    def _needs_start(self) -> bool:
        """Whether entering a ``with`` block starts the server (it is not running yet)."""
        return True

    def _stops_on_exit(self) -> bool:
        """Whether leaving a ``with`` block stops the server."""
        return True

    def _stop_at_exit(self) -> None:
        """What :mod:`atexit` calls while the hook is registered: :meth:`stop` unless overridden."""
        self.stop()

    def _register_atexit(self) -> None:
        if not self._atexit_registered:
            atexit.register(self._stop_at_exit)
            self._atexit_registered = True

    def _unregister_atexit(self) -> None:
        if self._atexit_registered:
            atexit.unregister(self._stop_at_exit)
            self._atexit_registered = False

    def __enter__(self: _Server) -> _Server:
        if self._needs_start():
            self.start()
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if self._stops_on_exit():
            self.stop()


class ClusterLifecycle(ServerLifecycle):
    """Base of the development clusters: broker count and first topics, on :class:`ServerLifecycle`.

    Parameters
    ----------
    brokers : int
        Number of brokers, at least 1.
    topics : dict of str to int, optional
        Topics to create at start, name to partition count.

    Raises
    ------
    EmbeddedBrokerError
        When ``brokers`` is less than 1.
    """

    def __init__(self, brokers: int, topics: Optional[Mapping[str, int]]) -> None:
        if brokers < 1:
            raise EmbeddedBrokerError(f"brokers must be at least 1, got {brokers}")
        super().__init__()
        self._brokers = brokers
        self._initial_topics = dict(topics or {})


def wait_or_signal(
    process: "subprocess.Popen[bytes]", timeout: float, signum: int, log: logging.Logger, message: str, *args: object
) -> bool:
    """Wait up to ``timeout`` seconds for ``process`` to exit; if it does not, warn and send it ``signum``.

    Parameters
    ----------
    process : subprocess.Popen
        The child process.
    timeout : float
        Seconds to wait.
    signum : int
        The signal sent when it is still running after ``timeout``.
    log : logging.Logger
        The caller's logger, for the warning.
    message, *args
        The warning (``%``-style, with its arguments).

    Returns
    -------
    bool
        True when the process exited in time; False when it was signalled.
    """
    try:
        process.wait(timeout=timeout)
        return True
    except subprocess.TimeoutExpired:
        log.warning(message, *args)
        process.send_signal(signum)  # nothing when it has exited meanwhile
        return False
