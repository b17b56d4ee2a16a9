"""Executor side: a per-process pool of the Kafka clients that read planned ranges.

A Spark Python worker is reused across tasks (``spark.python.worker.reuse``, on by
default) and runs one task at a time. Creating a ``confluent_kafka.Consumer`` per
range cost a client start (threads, a bootstrap connection, metadata) and a close
per range; the pool keeps the reader clients of a process and hands one to each
task, as Spark's own Kafka source does with its consumer cache
(``spark.kafka.consumer.cache.*``).

The rules:

* **Keyed by the full client config.** Two queries (or two settings of one
  query) never share a client. The key holds secrets (SASL passwords): it has no
  readable ``repr`` and is never logged.
* **Exclusive checkout.** :meth:`ReaderPool.client` is a context manager; the
  client it yields is held by that caller alone until the block ends, so a client
  is never used by two threads at once. The pool's own state is under one lock.
* **Returned clean, or closed.** When the block ends normally, or with
  ``GeneratorExit`` (Spark stops consuming a task's iterator early), the client is
  ``unassign()``-ed before it is parked: an idle client left assigned would keep
  prefetching, up to ``queued.max.messages.kbytes`` (64 MB for readers,
  :func:`kafka_group.config.client_config.reader_config`), while nobody reads it. On any
  other exception the client is closed, not returned: its state is unknown.
* **Idle clients are closed** after the idle timeout (the source option
  ``kafkaConsumer.cacheTimeoutMs``, default 5 minutes like Spark's
  ``spark.kafka.consumer.cache.timeout``) by a daemon thread the pool starts
  when it first parks a client (a Spark worker sits blocked between tasks, so
  closing cannot wait for the next checkout); the thread ends when nothing is idle.
* **Bounded.** At most :data:`MAX_IDLE_PER_KEY` idle clients per config and
  :data:`MAX_IDLE` in all are kept; returning one more closes the least recently
  used idle client. A Python worker runs one task at a time, so one idle client per
  config is the usual case; Spark's JVM cache holds 64 for all the tasks of an
  executor, where ours is per worker process.
* **Re-assigning is cheap only with a short long poll.** A client has one fetch in
  flight per broker; after a range reaches its partition's end that fetch waits up
  to ``fetch.wait.max.ms`` for new records, and the next range's first fetch waits
  behind it. Readers set it to 5 ms (librdkafka's default is 500 ms; see
  :func:`kafka_group.config.client_config.reader_config`).
* **Parked clients hold nothing.** ``unassign()`` stops fetching but leaves what
  was fetched (and error events of the old assignment) in the client's queue
  until the next ``consume()``; the pool consumes it away, without waiting, before
  parking the client.
* **Fork-safe.** PySpark's daemon forks its workers. A pool records its process
  id; in another process it forgets what it inherited without closing it (the
  clients' librdkafka threads do not exist in the child, and closing would wait
  on them) and keeps a reference to it for good: dropping the last one would run
  confluent-kafka's destructor, which does the same.
* **Re-entrant returns.** The garbage collector may finalize an abandoned read
  (a generator holding a checkout) while this thread holds the pool's lock; such
  a return is queued and handled before the lock is released, never waited for.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict, deque
from contextlib import contextmanager
from types import TracebackType
from typing import Any, Callable, Deque, Dict, Iterator, List, Mapping, Optional, Tuple, Type

from kafka_group.read.pool_clients import INHERITED, ConfigKey, IdleClient, PoolStats

__all__ = [
    "ReaderPool",
    "DEFAULT_IDLE_TIMEOUT_MS",
    "MAX_IDLE_PER_KEY",
    "MAX_IDLE",
]

logger = logging.getLogger(__name__)

#: The idle timeout when the caller gives none (``kafkaConsumer.cacheTimeoutMs``'s default).
DEFAULT_IDLE_TIMEOUT_MS = 300_000
#: Idle clients kept per client config.
MAX_IDLE_PER_KEY = 2
#: Idle clients kept in all, over every config.
MAX_IDLE = 8
#: The reaper's longest sleep: ``Condition.wait`` overflows on timeouts of centuries.
_MAX_REAPER_WAIT_S = 3600.0
#: ``consume()`` calls that empty a parked client's queue, at most (10,000 messages each).
_MAX_DRAIN_CALLS = 100

class ReaderPool:
    """Reader clients of one process, checked out one caller at a time.

    Parameters
    ----------
    factory : callable
        ``factory(config) -> client``: makes a client of a config dict (``confluent_kafka.Consumer``).
    max_idle_per_key : int
        Idle clients kept per config.
    max_idle : int
        Idle clients kept in all.
    clock : callable
        Seconds, monotonic (tests pass their own).
    getpid : callable
        The current process id (tests pass their own to stand for a fork).
    start_reaper : bool
        Whether to close idle clients from a daemon thread; tests that drive
        :meth:`close_expired` themselves pass False.
    """

    def __init__(
        self,
        factory: Callable[[Dict[str, str]], Any],
        *,
        max_idle_per_key: int = MAX_IDLE_PER_KEY,
        max_idle: int = MAX_IDLE,
        clock: Callable[[], float] = time.monotonic,
        getpid: Callable[[], int] = os.getpid,
        start_reaper: bool = True,
    ) -> None:
        self._factory = factory
        self._max_idle_per_key = max_idle_per_key
        self._max_idle = max_idle
        self._clock = clock
        self._getpid = getpid
        self._start_reaper = start_reaper
        self._reset()

    def _reset(self) -> None:
        """Fresh state for this process (at construction, and in a forked child)."""
        if getattr(self, "_idle", None):
            INHERITED.extend(entry.client for entry in self._idle.values())
        self._pid = self._getpid()
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        # The thread holding the lock (see _locked), and returns queued while it held it.
        self._owner: Optional[int] = None
        self._pending: Deque[Tuple[ConfigKey, Any, float, bool]] = deque()
        # Least recently returned first.
        self._idle: "OrderedDict[int, IdleClient]" = OrderedDict()
        self._in_use = 0
        self._created = 0
        self._reused = 0
        self._closed = 0
        self._reaper: Optional[threading.Thread] = None

    @contextmanager
    def _locked(self) -> Iterator[List[Any]]:
        """Hold the pool's lock; yields a list of clients to close once it is released.

        Returns queued meanwhile by this thread (see :meth:`_give_back`) are parked
        before the lock is released.
        """
        evicted: List[Any] = []
        try:
            with self._lock:
                self._owner = threading.get_ident()
                try:
                    yield evicted
                finally:
                    while self._pending:
                        evicted.extend(self._park(*self._pending.popleft()))
                    self._owner = None
        finally:
            self._close(evicted)

    def _check_process(self) -> None:
        """In a forked child, forget the clients inherited from the parent without closing them."""
        if self._getpid() != self._pid:
            inherited = len(self._idle)
            self._reset()
            logger.debug("reader pool: process changed (fork); forgot %d inherited idle clients", inherited)

    def client(self, config: Mapping[str, str], *, idle_timeout_ms: int = DEFAULT_IDLE_TIMEOUT_MS) -> "_Checkout":
        """Check out a client of ``config`` for the duration of a ``with`` block.

        Parameters
        ----------
        config : mapping
            The client's full config; clients are shared only between equal configs.
        idle_timeout_ms : int
            How long the client may stay idle after this checkout before it is closed.

        Returns
        -------
        context manager
            ``with pool.client(config) as consumer:``; on a normal exit (or
            ``GeneratorExit``) the client is unassigned and parked, on any other
            exception it is closed.

        Notes
        -----
        Caller: any thread (a Spark task's thread; benchmark threads). The client is
        the caller's alone until the block ends.
        """
        return _Checkout(self, ConfigKey(config), dict(config), idle_timeout_ms / 1000)

    def _take(self, key: ConfigKey, config: Dict[str, str]) -> Any:
        self._check_process()
        with self._locked():
            for token in reversed(self._idle):  # the most recently returned: its connections are warmest
                if self._idle[token].key == key:
                    entry = self._idle.pop(token)
                    self._in_use += 1
                    self._reused += 1
                    return entry.client
            self._in_use += 1
        try:
            client = self._factory(config)
        except BaseException:
            with self._locked():
                self._in_use -= 1
            raise
        with self._locked():
            self._created += 1
        return client

    def _give_back(self, key: ConfigKey, client: Any, idle_timeout_s: float, clean: bool) -> None:
        """Park a returned client (emptied first), or close it.

        Notes
        -----
        Caller: the thread that checked the client out; or the garbage collector finalizing
        an abandoned read, in whatever thread it runs, possibly inside a locked section of
        this pool (then the return is queued for that section to finish).
        """
        interrupted: Optional[BaseException] = None
        if clean:
            try:
                client.unassign()
                for _ in range(_MAX_DRAIN_CALLS):  # what was fetched for the old assignment, and its stale events
                    if not client.consume(num_messages=10_000, timeout=0):
                        break
            except Exception:  # a client that cannot unassign is not fit to be reused
                logger.warning("reader pool: unassign failed; closing the client", exc_info=True)
                clean = False
            except BaseException as exc:  # KeyboardInterrupt, SystemExit: release the client, then go on raising
                clean, interrupted = False, exc
        if self._owner == threading.get_ident():
            self._pending.append((key, client, idle_timeout_s, clean))
        else:
            with self._locked() as evicted:
                evicted.extend(self._park(key, client, idle_timeout_s, clean))
        if interrupted is not None:
            raise interrupted

    def _park(self, key: ConfigKey, client: Any, idle_timeout_s: float, clean: bool) -> List[Any]:
        """Park a returned client under the lock; return the clients to close. Called under the lock."""
        self._in_use -= 1
        if not clean:
            return [client]
        evicted: List[Any] = []
        self._idle[id(client)] = IdleClient(client, key, self._clock() + idle_timeout_s)
        same = [t for t, e in self._idle.items() if e.key == key]
        for token in same[: max(0, len(same) - self._max_idle_per_key)]:
            evicted.append(self._idle.pop(token).client)
        while len(self._idle) > self._max_idle:
            evicted.append(self._idle.popitem(last=False)[1].client)
        self._ensure_reaper()
        self._wake.notify_all()
        return evicted

    def _close(self, clients: List[Any]) -> None:
        """Close clients outside the lock (a close may take a while)."""
        for client in clients:
            try:
                client.close()
            except Exception:
                logger.debug("reader pool: closing a client failed", exc_info=True)
        if clients:
            with self._locked():
                self._closed += len(clients)
            logger.debug("reader pool: closed %d client(s)", len(clients))

    def close_expired(self) -> int:
        """Close the idle clients whose idle timeout has passed; return how many.

        Notes
        -----
        Caller: the pool's reaper thread; tests.
        """
        self._check_process()
        with self._locked() as evicted:
            now = self._clock()
            expired = [t for t, e in self._idle.items() if e.expires_at <= now]
            evicted.extend(self._idle.pop(t).client for t in expired)
            closing = len(expired)
        return closing

    def close_all(self) -> None:
        """Close every idle client (a checked-out one is parked or closed when its holder returns it).

        Notes
        -----
        Caller: ``atexit``; tests.
        """
        self._check_process()
        with self._locked() as evicted:
            evicted.extend(e.client for e in self._idle.values())
            self._idle.clear()
            self._wake.notify_all()

    def stats(self) -> PoolStats:
        """The pool's counters now.

        Notes
        -----
        Caller: any thread.
        """
        self._check_process()
        with self._locked():
            return PoolStats(self._created, self._reused, self._closed, len(self._idle), self._in_use)

    def __repr__(self) -> str:
        return f"ReaderPool({self.stats()})"

    # -- the reaper ------------------------------------------------------------------

    def _ensure_reaper(self) -> None:
        """Start the reaper thread if it is not running. Called under the lock."""
        if not self._start_reaper or (self._reaper is not None and self._reaper.is_alive()):
            return
        self._reaper = threading.Thread(target=self._reap, name="kafka-group-reader-pool-reaper", daemon=True)
        self._reaper.start()

    def _reap(self) -> None:
        """Close idle clients as their timeouts pass; end when none is idle.

        Notes
        -----
        Caller: the reaper thread.
        """
        me = threading.current_thread()
        while True:
            with self._locked():
                if self._reaper is not me:
                    return  # the pool was reset (fork): this thread is not the pool's any more
                if not self._idle:
                    self._reaper = None
                    return
                wait = min(e.expires_at for e in self._idle.values()) - self._clock()
                if wait > 0:
                    self._owner = None  # the wait releases the lock
                    self._wake.wait(min(wait, _MAX_REAPER_WAIT_S))
                    self._owner = threading.get_ident()
                    continue
            self.close_expired()


class _Checkout:
    """The context manager of :meth:`ReaderPool.client`."""

    def __init__(self, pool: ReaderPool, key: ConfigKey, config: Dict[str, str], idle_timeout_s: float) -> None:
        self._pool = pool
        self._key = key
        self._config = config
        self._idle_timeout_s = idle_timeout_s
        self._client: Any = None
        self._pid = 0

    def __enter__(self) -> Any:
        if self._client is not None:
            raise RuntimeError("a reader pool checkout is not reentrant")
        self._client = self._pool._take(self._key, self._config)
        self._pid = self._pool._getpid()
        return self._client

    def __exit__(
        self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        client, self._client = self._client, None
        if self._pool._getpid() != self._pid:
            INHERITED.append(client)  # checked out before a fork: the parent's threads; never park, close or free it
            return
        clean = exc_type is None or issubclass(exc_type, GeneratorExit)
        self._pool._give_back(self._key, client, self._idle_timeout_s, clean)


