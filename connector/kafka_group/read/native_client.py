"""The compiled reader client (``kafka_group._native``) behind the interface the Python read path uses.

:class:`NativeConsumer` wraps :class:`kafka_group._native.Client` (librdkafka, built into the
extension) with the few ``confluent_kafka.Consumer`` methods that the reader pool
(:mod:`kafka_group.read.reader_pool`) and the gap and loss handling (:mod:`kafka_group.read.gaps`)
call, with confluent-kafka's types and errors, so those modules serve both read paths unchanged:
``assign``, ``incremental_assign``/``incremental_unassign``, ``unassign``, ``consume`` (only to
empty a parked client), ``get_watermark_offsets``, ``list_topics`` and ``close``.

librdkafka's error callback is collected by the extension and raised or logged here, after each
call, as :func:`kafka_group.auth.access_errors.raising_error_callback` does for a Python reader: a
refused login or a missing ACL fails the task with the connector's own error.

Caller: the Spark task's thread that checked the client out of the pool (one at a time).
"""

from __future__ import annotations

import logging
from types import ModuleType
from typing import Any, Dict, List, Optional, Sequence, Tuple

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kafka_group.auth.access_errors import raising_error_callback
from kafka_group.auth.clients import librdkafka_logger
from kafka_group.errors import ConfigError, FetchError, RecordError
from kafka_group.read.batch_assembly import DEFAULT_MAX_BATCH_BYTES
from kafka_group.read.record_schema import TIMESTAMP_TYPE_BY_LIBRDKAFKA
from kafka_group.redaction import register_client_secrets

__all__ = ["NativeConsumer", "internal_error", "kafka_error", "record_error"]

logger = logging.getLogger(__name__)

_MAX_TIMESTAMP_MS = (2 ** 63 - 1) // 1000

#: librdkafka's syslog levels as Python's, as confluent-kafka maps them for its ``logger`` setting.
_SYSLOG_LEVELS = {0: logging.CRITICAL, 1: logging.CRITICAL, 2: logging.CRITICAL, 3: logging.ERROR,
                  4: logging.WARNING, 5: logging.INFO, 6: logging.INFO, 7: logging.DEBUG}


def kafka_error(code: int, reason: str) -> KafkaError:
    """confluent-kafka's error object for a librdkafka ``code`` and ``reason`` (fatal only for ``_FATAL``)."""
    return KafkaError(code, reason, fatal=code == KafkaError._FATAL)


def record_error(args: Sequence[Any]) -> RecordError:
    """The connector's error for the extension's ``RecordProblem(kind, topic, partition, offset, detail)``,
    worded as the Python builder words it (:mod:`kafka_group.read.batch_assembly`)."""
    kind, topic, partition, offset, detail = args
    if kind == "timestamp":
        stamp_type, ms = detail
        return RecordError(
            f"the record of {topic}-{partition} at offset {offset} has timestamp {ms} ms "
            f"(type {TIMESTAMP_TYPE_BY_LIBRDKAFKA.get(stamp_type, -1)}), outside what a Spark timestamp holds "
            f"(|ms| <= {_MAX_TIMESTAMP_MS}); Spark's own Kafka source fails on it too. Fix the producer's "
            "timestamp, or start the query past this offset (startingOffsets, or the offsets of the group or table)"
        )
    if kind == "too_large":
        size, entries = detail
        return RecordError(
            f"the record of {topic}-{partition} at offset {offset} holds {size} bytes of key, value and headers "
            f"in {entries} headers, more than one Arrow batch holds (2 GiB, 2^31 headers). Set option "
            "'includeHeaders' to 'false' if its headers are the cause, or start the query past this offset"
        )
    try:
        bytes(detail).decode("utf-8")
        reason, start = "invalid UTF-8", 0
    except UnicodeDecodeError as exc:
        reason, start = exc.reason, exc.start
    return RecordError(
        f"the record of {topic}-{partition} at offset {offset} has a header key that is not UTF-8 "
        f"({reason} at byte {start}), which the Kafka client cannot decode. Set option "
        "'includeHeaders' to 'false' to read the records without their headers, fix the producer, or "
        "start the query past this offset"
    )


def internal_error(args: Sequence[Any]) -> FetchError:
    """The connector's error for the extension's ``InternalProblem(call, detail)``: a Rust panic (a bug of the
    compiled read path), caught where Python called in."""
    call, detail = args
    return FetchError(
        f"the compiled read path failed inside its call '{call}' ({detail}): a bug of the connector, please "
        "report it. The task fails and its Kafka client is closed; set option 'read.path' to 'python' to read "
        "with confluent-kafka instead")


class NativeConsumer:
    """A reader client of the compiled read path, with confluent-kafka's consumer interface where shared.

    Parameters
    ----------
    native : module
        ``kafka_group._native``.
    config : dict
        librdkafka settings (:func:`kafka_group.config.client_config.reader_config`), strings only.

    Raises
    ------
    ConfigError
        librdkafka refused a setting (named, its value left out).
    """

    def __init__(self, native: ModuleType, config: Dict[str, str]) -> None:
        register_client_secrets(config)  # an executor learns the secrets here: scrubbed from what it emits
        self._native = native
        self._config = dict(config)
        self._on_error = raising_error_callback(self._config, client="reader")
        try:
            self.client: Any = native.Client(sorted(self._config.items()), False, DEFAULT_MAX_BATCH_BYTES)
        except native.InternalProblem as exc:
            raise internal_error(exc.args) from None
        except native.ConfigProblem as exc:
            key, reason = exc.args
            named = f"setting '{key}'" if key else "the settings"
            raise ConfigError(
                f"the compiled read path's Kafka client refused {named} ({reason}); set option 'read.path' "
                "to 'python' to read with confluent-kafka instead") from None

    # -- errors ------------------------------------------------------------------------------

    def raise_reported(self) -> None:
        """Log librdkafka's own lines, then raise (refused login, missing ACL) or log what its error
        callback reported."""
        self.log_lines()
        for code, _name, reason in self.client.take_errors():
            self._on_error(kafka_error(code, reason))

    def log_lines(self) -> None:
        """Log librdkafka's lines queued since the last call to :data:`LIBRDKAFKA_LOGGER`, as
        confluent-kafka's ``logger`` setting does for the Python clients (its format, its levels)."""
        lines = self.client.take_logs()
        if not lines:
            return
        logger = librdkafka_logger()
        for level, facility, name, message in lines:
            logger.log(_SYSLOG_LEVELS.get(level, logging.DEBUG), "%s [%s] %s", facility, name, message)

    def _call(self, method: str, *args: Any) -> Any:
        try:
            result = getattr(self.client, method)(*args)
        except self._native.KafkaProblem as exc:
            code, _name, reason = exc.args
            raise KafkaException(kafka_error(code, reason)) from None
        except self._native.InternalProblem as exc:
            raise internal_error(exc.args) from None
        finally:
            self.raise_reported()
        return result

    # -- confluent-kafka's interface, as the pool and gaps.py use it -------------------------------

    def assign(self, partitions: List[KafkaTopicPartition]) -> None:
        """Replace the assignment (each partition at its offset)."""
        self._call("assign", [(tp.topic, tp.partition, tp.offset) for tp in partitions])

    def incremental_assign(self, partitions: List[KafkaTopicPartition]) -> None:
        """Add partitions at their offsets."""
        self._call("incremental_assign", [(tp.topic, tp.partition, tp.offset) for tp in partitions])

    def incremental_unassign(self, partitions: List[KafkaTopicPartition]) -> None:
        """Remove partitions."""
        self._call("incremental_unassign", [(tp.topic, tp.partition) for tp in partitions])

    def unassign(self) -> None:
        """Drop the assignment."""
        self._call("unassign")

    def consume(self, num_messages: int = 1, timeout: float = -1) -> List[None]:
        """Drop up to ``num_messages`` queued messages without waiting (the pool empties a parked
        client so); returns one placeholder per dropped message."""
        return [None] * int(self._call("drain", max(1, num_messages)))

    def get_watermark_offsets(self, partition: KafkaTopicPartition, timeout: Optional[float] = None,
                              cached: bool = False) -> Tuple[int, int]:
        """The partition's ``(low, high)`` watermarks from the broker (never cached)."""
        timeout_ms = -1 if timeout is None else int(timeout * 1000)
        low, high = self._call("watermarks", partition.topic, partition.partition, timeout_ms)
        return int(low), int(high)

    def list_topics(self, topic: Optional[str] = None, timeout: float = -1) -> None:
        """Refresh the client's metadata of ``topic`` (gaps.py only needs the refresh)."""
        if topic is not None:
            self._call("refresh_metadata", topic, -1 if timeout < 0 else int(timeout * 1000))

    def close(self) -> None:
        """Close the client (no group to leave), then log the lines librdkafka wrote until it closed."""
        try:
            self.client.close()
        finally:
            self.log_lines()
