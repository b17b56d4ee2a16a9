"""How an executor reads its ranges: the settings the Spark glue hands the read loop."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from kafka_group.read.batch_assembly import DEFAULT_MAX_BATCH_BYTES
from kafka_group.read.reader_pool import DEFAULT_IDLE_TIMEOUT_MS

__all__ = ["ReadSettings"]


@dataclass(frozen=True)
class ReadSettings:
    """How an executor reads a range.

    Attributes
    ----------
    client_config : dict
        Settings of the reader's Kafka client (see :func:`kafka_group.config.client_config.reader_config`).
    include_headers : bool
        Whether to return the ``headers`` column.
    fail_on_data_loss : bool
        Whether missing planned offsets fail the read (else they are skipped and logged).
    poll_timeout_ms : int
        The longest wait for the next planned record before the read fails.
    max_records_per_batch : int
        Records per returned Arrow batch.
    max_bytes_per_batch : int
        Bytes of keys, values and (with ``include_headers``) headers at which a returned batch is cut (:data:`~kafka_group.read.batch_assembly.DEFAULT_MAX_BATCH_BYTES`).
    client_idle_timeout_ms : int
        How long the reader's client stays open in the process's pool after its
        task, for the next task to reuse (``kafkaConsumer.cacheTimeoutMs``).
    """

    client_config: Mapping[str, str] = field(repr=False)
    include_headers: bool
    fail_on_data_loss: bool
    poll_timeout_ms: int
    max_records_per_batch: int
    client_idle_timeout_ms: int = DEFAULT_IDLE_TIMEOUT_MS
    max_bytes_per_batch: int = DEFAULT_MAX_BATCH_BYTES
