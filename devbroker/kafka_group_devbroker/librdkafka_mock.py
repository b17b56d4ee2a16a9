"""A thin, typed ``ctypes`` binding to librdkafka's mock cluster.

The shared library is the one shipped inside the confluent-kafka wheel (the
``confluent_kafka.libs`` folder next to the ``confluent_kafka`` package), so the
mock brokers speak exactly the protocol versions the Python client expects.
Set ``KAFKA_GROUP_LIBRDKAFKA`` to the path of another ``librdkafka.so`` to
override the lookup.

A mock cluster lives inside the process that created it (its brokers are
threads of that process): create it in the process meant to host it, see
:mod:`kafka_group_devbroker.broker_host`.

The C signatures follow ``src/rdkafka_mock.h`` and ``src/rdkafka.h`` of
librdkafka 2.16. The mock API is experimental upstream and not covered by the
ABI guarantees: every function is looked up when the cluster is created, and
optional ones (``rd_kafka_mock_partition_delete_records``,
``rd_kafka_mock_topic_delete``) are reported as unavailable instead of failing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import importlib.util
import logging
import os
import threading
from pathlib import Path
from typing import Optional, Sequence

from kafka_group.errors import EmbeddedBrokerError

__all__ = ["MockCluster", "find_librdkafka", "load_librdkafka"]

logger = logging.getLogger(__name__)

#: Environment variable naming an explicit librdkafka shared library.
LIBRDKAFKA_ENV = "KAFKA_GROUP_LIBRDKAFKA"

_RD_KAFKA_PRODUCER = 0  # rd_kafka_type_t
_RD_KAFKA_CONF_OK = 0  # rd_kafka_conf_res_t
_ERRSTR_SIZE = 512

_c_char_p = ctypes.c_char_p
_c_void_p = ctypes.c_void_p
_c_int = ctypes.c_int
_c_int16 = ctypes.c_int16
_c_int32 = ctypes.c_int32
_c_int64 = ctypes.c_int64
_c_size_t = ctypes.c_size_t

# name -> (restype, argtypes). ``None`` restype means ``void``.
# rd_kafka_resp_err_t and rd_kafka_conf_res_t are C enums: ``int``.
_SIGNATURES: dict[str, tuple[Optional[type], list[type]]] = {
    # rdkafka.h
    "rd_kafka_version_str": (_c_char_p, []),
    "rd_kafka_err2str": (_c_char_p, [_c_int]),
    "rd_kafka_conf_new": (_c_void_p, []),
    "rd_kafka_conf_destroy": (None, [_c_void_p]),
    "rd_kafka_conf_set": (_c_int, [_c_void_p, _c_char_p, _c_char_p, _c_char_p, _c_size_t]),
    "rd_kafka_new": (_c_void_p, [_c_int, _c_void_p, _c_char_p, _c_size_t]),
    "rd_kafka_destroy": (None, [_c_void_p]),
    # rdkafka_mock.h
    "rd_kafka_mock_cluster_new": (_c_void_p, [_c_void_p, _c_int]),
    "rd_kafka_mock_cluster_destroy": (None, [_c_void_p]),
    "rd_kafka_mock_cluster_bootstraps": (_c_char_p, [_c_void_p]),
    "rd_kafka_mock_topic_create": (_c_int, [_c_void_p, _c_char_p, _c_int, _c_int]),
    "rd_kafka_mock_broker_set_down": (_c_int, [_c_void_p, _c_int32]),
    "rd_kafka_mock_broker_set_up": (_c_int, [_c_void_p, _c_int32]),
    "rd_kafka_mock_push_request_errors_array": (
        None,
        [_c_void_p, _c_int16, _c_size_t, ctypes.POINTER(_c_int)],
    ),
    "rd_kafka_mock_clear_request_errors": (None, [_c_void_p, _c_int16]),
    "rd_kafka_mock_coordinator_set": (_c_int, [_c_void_p, _c_char_p, _c_char_p, _c_int32]),
    "rd_kafka_mock_group_initial_rebalance_delay_ms": (None, [_c_void_p, _c_int32]),
}

# Newer additions to the mock API; bound when the library exports them.
_OPTIONAL_SIGNATURES: dict[str, tuple[Optional[type], list[type]]] = {
    "rd_kafka_mock_topic_delete": (_c_int, [_c_void_p, _c_char_p]),
    "rd_kafka_mock_partition_delete_records": (
        _c_int,
        [_c_void_p, _c_char_p, _c_int32, _c_int64],
    ),
}

_lib_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None


def find_librdkafka() -> str:
    """Locate the librdkafka shared library to load.

    Returns
    -------
    str
        Path (or linker name) of the library: ``$KAFKA_GROUP_LIBRDKAFKA`` when
        set, else the ``librdkafka-*.so*`` inside ``confluent_kafka.libs``, else
        whatever the system linker knows as ``rdkafka``.

    Raises
    ------
    EmbeddedBrokerError
        When no library can be found.
    """
    explicit = os.environ.get(LIBRDKAFKA_ENV)
    if explicit:
        return explicit
    spec = importlib.util.find_spec("confluent_kafka")  # does not import it
    if spec is not None and spec.origin:
        site_dir = Path(spec.origin).resolve().parent.parent
        for pattern in ("confluent_kafka.libs/librdkafka-*.so*", "confluent_kafka.libs/librdkafka*.dylib"):
            hits = sorted(glob.glob(str(site_dir / pattern)))
            if hits:
                return hits[0]
    system = ctypes.util.find_library("rdkafka")
    if system:
        return system
    raise EmbeddedBrokerError(
        "librdkafka was not found: install confluent-kafka (its wheel ships librdkafka "
        f"in confluent_kafka.libs) or set {LIBRDKAFKA_ENV} to the library's path."
    )


def _bind(lib: ctypes.CDLL, name: str, restype: Optional[type], argtypes: list[type]) -> None:
    func = getattr(lib, name)
    func.restype = restype
    func.argtypes = argtypes


def load_librdkafka() -> ctypes.CDLL:
    """Load librdkafka once per process and declare the signatures used here.

    Returns
    -------
    ctypes.CDLL
        The loaded library with ``restype``/``argtypes`` set.

    Raises
    ------
    EmbeddedBrokerError
        When the library cannot be loaded or lacks a required mock function.
    """
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        path = find_librdkafka()
        try:
            lib = ctypes.CDLL(path)
        except OSError as exc:
            raise EmbeddedBrokerError(f"could not load librdkafka from {path}: {exc}") from exc
        for name, (restype, argtypes) in _SIGNATURES.items():
            try:
                _bind(lib, name, restype, argtypes)
            except AttributeError as exc:
                raise EmbeddedBrokerError(
                    f"{path} does not export {name}: it was built without the mock cluster, "
                    "use the librdkafka of a confluent-kafka wheel (2.x)."
                ) from exc
        for name, (restype, argtypes) in _OPTIONAL_SIGNATURES.items():
            try:
                _bind(lib, name, restype, argtypes)
            except AttributeError:
                logger.debug("%s does not export %s", path, name)
        version = lib.rd_kafka_version_str()
        logger.debug("loaded librdkafka %s from %s", version.decode() if version else "?", path)
        _lib = lib
        return lib


def _has(lib: ctypes.CDLL, name: str) -> bool:
    try:
        getattr(lib, name)
    except AttributeError:
        return False
    return True


class MockCluster:
    """A librdkafka mock cluster owned by this process.

    Parameters
    ----------
    brokers : int
        Number of mock brokers; their ids are ``1..brokers``.
    config : dict of str to str, optional
        Extra librdkafka properties for the owning handle (e.g. ``log_level``).

    Raises
    ------
    EmbeddedBrokerError
        When the library cannot be loaded or the cluster cannot be created.

    Notes
    -----
    The cluster's brokers listen on ``127.0.0.1`` ephemeral ports and live as
    threads of the creating process; they stop with :meth:`close` or with the
    process. All methods are safe to call from several threads.
    """

    def __init__(self, brokers: int = 1, config: Optional[dict[str, str]] = None) -> None:
        if brokers < 1:
            raise EmbeddedBrokerError(f"brokers must be at least 1, got {brokers}")
        self._lib = load_librdkafka()
        self._lock = threading.Lock()
        self._broker_count = brokers
        self._rk: Optional[int] = None
        self._mcluster: Optional[int] = None
        self._rk = self._new_owner_handle(config or {})
        mcluster = self._lib.rd_kafka_mock_cluster_new(self._rk, brokers)
        if not mcluster:
            self._lib.rd_kafka_destroy(self._rk)
            self._rk = None
            raise EmbeddedBrokerError(f"rd_kafka_mock_cluster_new failed for {brokers} broker(s)")
        self._mcluster = int(mcluster)
        raw = self._lib.rd_kafka_mock_cluster_bootstraps(self._mcluster)
        self._bootstraps: str = raw.decode() if raw else ""
        logger.info("mock cluster with %d broker(s) at %s", brokers, self._bootstraps)

    def _new_owner_handle(self, config: dict[str, str]) -> int:
        lib = self._lib
        errstr = ctypes.create_string_buffer(_ERRSTR_SIZE)
        conf = lib.rd_kafka_conf_new()
        settings = {"client.id": "kafka-group-embedded-owner", **config}
        for key, value in settings.items():
            res = lib.rd_kafka_conf_set(conf, key.encode(), value.encode(), errstr, _ERRSTR_SIZE)
            if res != _RD_KAFKA_CONF_OK:
                lib.rd_kafka_conf_destroy(conf)
                raise EmbeddedBrokerError(
                    f"librdkafka rejected {key}={value!r}: {errstr.value.decode(errors='replace')}"
                )
        rk = lib.rd_kafka_new(_RD_KAFKA_PRODUCER, conf, errstr, _ERRSTR_SIZE)
        if not rk:
            lib.rd_kafka_conf_destroy(conf)  # not taken over on failure
            raise EmbeddedBrokerError(
                f"rd_kafka_new failed: {errstr.value.decode(errors='replace')}"
            )
        return int(rk)

    # -- helpers -------------------------------------------------------------

    def _cluster(self) -> int:
        if self._mcluster is None:
            raise EmbeddedBrokerError("the mock cluster is closed")
        return self._mcluster

    def _check(self, err: int, what: str) -> None:
        if err:
            raw = self._lib.rd_kafka_err2str(err)
            text = raw.decode(errors="replace") if raw else "unknown error"
            raise EmbeddedBrokerError(f"{what} failed: {text} (error {err})", kafka_error_code=int(err))

    # -- properties ----------------------------------------------------------

    @property
    def bootstraps(self) -> str:
        """str : The ``bootstrap.servers`` list of the mock brokers."""
        return self._bootstraps

    @property
    def broker_count(self) -> int:
        """int : Number of brokers the cluster was created with."""
        return self._broker_count

    @property
    def closed(self) -> bool:
        """bool : Whether :meth:`close` has run."""
        return self._mcluster is None

    @property
    def supports_delete_records(self) -> bool:
        """bool : Whether the library exports ``rd_kafka_mock_partition_delete_records``."""
        return _has(self._lib, "rd_kafka_mock_partition_delete_records")

    @property
    def supports_delete_topic(self) -> bool:
        """bool : Whether the library exports ``rd_kafka_mock_topic_delete``."""
        return _has(self._lib, "rd_kafka_mock_topic_delete")

    # -- operations ----------------------------------------------------------

    def create_topic(self, topic: str, partitions: int, replication_factor: int = 1) -> None:
        """Create a topic on the mock cluster.

        Parameters
        ----------
        topic : str
            Topic name.
        partitions : int
            Partition count (at least 1).
        replication_factor : int, default 1
            Replicas per partition, at most the broker count.

        Raises
        ------
        EmbeddedBrokerError
            When librdkafka refuses (e.g. the topic exists, bad counts).
        """
        if partitions < 1:
            raise EmbeddedBrokerError(f"topic {topic!r}: partitions must be at least 1, got {partitions}")
        if not 1 <= replication_factor <= self._broker_count:
            raise EmbeddedBrokerError(
                f"topic {topic!r}: replication_factor must be 1..{self._broker_count}, "
                f"got {replication_factor}"
            )
        with self._lock:
            err = self._lib.rd_kafka_mock_topic_create(
                self._cluster(), topic.encode(), partitions, replication_factor
            )
        self._check(err, f"create_topic({topic!r}, {partitions})")

    def delete_topic(self, topic: str) -> None:
        """Delete a topic and its records.

        Parameters
        ----------
        topic : str
            Topic name.

        Raises
        ------
        EmbeddedBrokerError
            When the topic does not exist or the library lacks the function.
        """
        if not self.supports_delete_topic:
            raise EmbeddedBrokerError("this librdkafka has no rd_kafka_mock_topic_delete")
        with self._lock:
            err = self._lib.rd_kafka_mock_topic_delete(self._cluster(), topic.encode())
        self._check(err, f"delete_topic({topic!r})")

    def broker_down(self, broker_id: int) -> None:
        """Disconnect a broker and refuse new connections (no leader change).

        Parameters
        ----------
        broker_id : int
            Broker id ``1..brokers``, or -1 for every broker.
        """
        with self._lock:
            err = self._lib.rd_kafka_mock_broker_set_down(self._cluster(), broker_id)
        self._check(err, f"broker_down({broker_id})")

    def broker_up(self, broker_id: int) -> None:
        """Let a broker accept connections again.

        Parameters
        ----------
        broker_id : int
            Broker id ``1..brokers``, or -1 for every broker.
        """
        with self._lock:
            err = self._lib.rd_kafka_mock_broker_set_up(self._cluster(), broker_id)
        self._check(err, f"broker_up({broker_id})")

    def push_request_errors(self, api_key: int, error_codes: Sequence[int]) -> None:
        """Make the next requests of one type fail, cluster-wide.

        Parameters
        ----------
        api_key : int
            Kafka protocol ApiKey (0 Produce, 1 Fetch, 2 ListOffsets, 3 Metadata,
            8 OffsetCommit, 11 JoinGroup, ...).
        error_codes : sequence of int
            One error code per future request, used in order. librdkafka's
            ``-195`` (``_TRANSPORT``) makes the broker drop the connection.
        """
        codes = [int(c) for c in error_codes]
        if not codes:
            return
        array = (ctypes.c_int * len(codes))(*codes)
        with self._lock:
            self._lib.rd_kafka_mock_push_request_errors_array(
                self._cluster(), api_key, len(codes), array
            )

    def clear_request_errors(self, api_key: int) -> None:
        """Drop the errors pushed for ``api_key`` that were not used yet.

        Parameters
        ----------
        api_key : int
            Kafka protocol ApiKey.
        """
        with self._lock:
            self._lib.rd_kafka_mock_clear_request_errors(self._cluster(), api_key)

    def delete_records(self, topic: str, partition: int, before_offset: int) -> None:
        """Delete a partition's records below an offset (moves the low watermark).

        Parameters
        ----------
        topic : str
            Topic name.
        partition : int
            Partition number.
        before_offset : int
            New log start offset; at most the high watermark.

        Raises
        ------
        EmbeddedBrokerError
            Unknown topic or partition, offset beyond the end, or a library
            without ``rd_kafka_mock_partition_delete_records``.
        """
        if not self.supports_delete_records:
            raise EmbeddedBrokerError("this librdkafka has no rd_kafka_mock_partition_delete_records")
        with self._lock:
            err = self._lib.rd_kafka_mock_partition_delete_records(
                self._cluster(), topic.encode(), partition, before_offset
            )
        self._check(err, f"delete_records({topic!r}, {partition}, {before_offset})")

    def set_coordinator(self, key_type: str, key: str, broker_id: int) -> None:
        """Pin the group or transaction coordinator for a key.

        Parameters
        ----------
        key_type : {"group", "transaction"}
            Kind of coordinator.
        key : str
            The ``group.id`` or ``transactional.id``.
        broker_id : int
            Broker that coordinates it.
        """
        with self._lock:
            err = self._lib.rd_kafka_mock_coordinator_set(
                self._cluster(), key_type.encode(), key.encode(), broker_id
            )
        self._check(err, f"set_coordinator({key_type!r}, {key!r}, {broker_id})")

    def set_group_initial_rebalance_delay_ms(self, delay_ms: int) -> None:
        """Set the brokers' ``group.initial.rebalance.delay.ms``.

        Parameters
        ----------
        delay_ms : int
            How long a new group waits for more members before its first
            assignment; 0 makes a lone member's join fast.
        """
        with self._lock:
            self._lib.rd_kafka_mock_group_initial_rebalance_delay_ms(self._cluster(), delay_ms)

    def close(self) -> None:
        """Destroy the mock cluster and its owning handle. Idempotent."""
        with self._lock:
            mcluster, rk = self._mcluster, self._rk
            self._mcluster = None
            self._rk = None
            if mcluster is not None:
                self._lib.rd_kafka_mock_cluster_destroy(mcluster)
            if rk is not None:
                self._lib.rd_kafka_destroy(rk)
        if mcluster is not None:
            logger.info("mock cluster at %s destroyed", self._bootstraps)

    def __enter__(self) -> "MockCluster":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
