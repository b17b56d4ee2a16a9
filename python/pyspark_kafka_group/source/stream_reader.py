"""The micro-batch stream reader: Spark's hooks, delegated to the connector's core.

Spark constructs this reader more than once per query: in the long-lived
process that serves the query's planning calls (``initialOffset``,
``latestOffset``, ``partitions``, ``commit``), and again in a planning worker
that pickles it into the ``read()`` closure. The group member is therefore
created lazily, on the first planning call, and kept out of the pickled state:
a copy that joined the group would take partitions away from the real member.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from kafka_group.config.client_config import reader_config
from kafka_group.config.source_options import SourceOptions
from kafka_group.formats import read_offset_document, write_latest_report, write_offset_document
from kafka_group.offsets import OffsetRange
from kafka_group.plan.planning import pack_ranges

if TYPE_CHECKING:
    from kafka_group.read.read_settings import ReadSettings
    from kafka_group.registry.decoding import DecodePlan

__all__ = ["KafkaGroupStreamReader", "OffsetRangesPartition", "read_settings", "read_task"]

logger = logging.getLogger(__name__)


class OffsetRangesPartition(InputPartition):
    """One Spark task: one or more planned ranges ``[from_offset, until_offset)``, read in turn."""

    def __init__(self, offset_ranges: List[OffsetRange]) -> None:
        super().__init__(offset_ranges)
        self.offset_ranges = offset_ranges


class KafkaGroupStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans micro-batches from the consumer group's assignment and reads them on executors.

    Parameters
    ----------
    options : SourceOptions
        The validated source options.
    decode_plan : DecodePlan, optional
        The registry decoding of key and value (resolved when the query was loaded); None: raw.
    """

    def __init__(self, options: SourceOptions, decode_plan: Optional["DecodePlan"] = None) -> None:
        self._options = options
        self._decode_plan = decode_plan
        self._driver: Any = None

    def __getstate__(self) -> Dict[str, Any]:
        state = self.__dict__.copy()
        state["_driver"] = None
        return state

    def _source_driver(self) -> Any:
        if self._driver is None:
            from kafka_group.log_setup import configure_from_env
            from kafka_group.group.sigterm import leave_group_on_sigterm

            configure_from_env()
            from kafka_group.driver_factory import build_source_driver

            self._driver = build_source_driver(self._options)
            leave_group_on_sigterm(self._driver.close)
        return self._driver

    # -- planning (driver) ------------------------------------------------------------

    def initialOffset(self) -> dict:  # type: ignore[type-arg]
        """Positions of the partitions this query owns when it starts."""
        return write_offset_document(self._source_driver().initial_offsets())  # type: ignore[no-any-return]

    def getDefaultReadLimit(self) -> ReadLimit:
        """``maxOffsetsPerTrigger`` as Spark's ``ReadMaxRows``, else ``maxBytesPerTrigger`` as ``ReadMaxBytes``,
        else all available (Python sources have no composite limit: with both, the bytes come from the options)."""
        if self._options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self._options.max_offsets_per_trigger)
        if self._options.max_bytes_per_trigger is not None:
            return ReadMaxBytes(self._options.max_bytes_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:  # type: ignore[type-arg]
        """The end of the next micro-batch: the owned partitions' ranges within ``limit``.

        Returns ``start`` unchanged when there is nothing new to read.
        """
        max_records = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        max_bytes = (limit.max_bytes if isinstance(limit, ReadMaxBytes)
                     else self._options.max_bytes_per_trigger if isinstance(limit, ReadMaxRows) else None)
        end = self._source_driver().next_offsets(read_offset_document(start), max_records, max_bytes)
        return start if end is None else write_offset_document(end)

    def prepareForTriggerAvailableNow(self) -> None:
        """Record the latest offsets of now: an AvailableNow run reads up to them and stops."""
        self._source_driver().prepare_available_now()

    def reportLatestOffset(self) -> Optional[dict]:  # type: ignore[type-arg]
        """Shown as ``latestOffset`` in query progress: the latest broker offsets of the owned
        partitions, and under ``@member`` this query's group membership (member id,
        generation, owned partitions, last rebalance and its cause), and under ``@flow`` the
        pauses, the partitions held back by a flow rule and the control channel."""
        if self._driver is None:
            return None
        return write_latest_report(  # type: ignore[no-any-return]
            self._driver.latest_report(), self._driver.membership_report(), self._driver.flow_report())

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:  # type: ignore[type-arg]
        """The batch's ranges packed onto a few tasks of near-equal size (see ``pack_ranges``):
        a Spark task has a fixed cost, so small batches run as one task and large
        ones, even of one partition, as up to ``fetch.maxTasks``."""
        if start == end:
            return []
        batch = read_offset_document(end)
        if self._driver is not None:  # the planning runner: a revoke must wait for this batch
            self._driver.on_batch_running(batch)
        ranges: List[OffsetRange] = batch.planned_ranges()
        return [OffsetRangesPartition(task) for task in pack_ranges(ranges, self._options.task_sizing)]

    def commit(self, end: dict) -> None:  # type: ignore[type-arg]
        """Spark has completed the batch: commit its positions to the Kafka group for lag tools."""
        if self._driver is not None:
            self._driver.on_batch_committed(read_offset_document(end))

    def stop(self) -> None:
        """Leave the group."""
        if self._driver is not None:
            self._driver.close()
            self._driver = None

    # -- reading (executors) --------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Read a task's planned ranges and return Arrow record batches of Spark's Kafka schema
        (with the decoded key or value of ``keyFormat``/``valueFormat``)."""
        assert isinstance(partition, OffsetRangesPartition)
        return read_task(partition, self._options, self._decode_plan)


def read_task(partition: OffsetRangesPartition, options: SourceOptions,
              decode_plan: Optional["DecodePlan"]) -> Iterator[Any]:
    """A task's Arrow batches: its ranges read (by the compiled read path or the Python one, per option
    ``read.path``: :func:`kafka_group.read.read_path.choose_native`), then decoded by ``decode_plan`` when
    there is one (on the compiled path, Avro in Rust where exact: :mod:`kafka_group.registry.native_decoding`).
    Caller: an executor (streams and batch reads alike)."""
    from kafka_group.log_setup import configure_from_env
    from kafka_group.read.read_path import READ_PATH_OPTION, choose_native

    configure_from_env()
    settings = read_settings(options)
    native = choose_native(options.read_path, settings.client_config,
                           explicit=READ_PATH_OPTION in options.given)
    if native is not None:
        from kafka_group.read.native_fetch import read_ranges_native

        batches = read_ranges_native(partition.offset_ranges, settings, native)
    else:
        from kafka_group.read.fetch import read_ranges

        batches = read_ranges(partition.offset_ranges, settings)
    if decode_plan is None:
        return batches
    from kafka_group.read.record_schema import arrow_schema
    from kafka_group.registry.decoding import decode_batch, decoded_arrow_schema

    schema = decoded_arrow_schema(arrow_schema(options.include_headers), decode_plan)
    # on the compiled read path, registry Avro is decoded in Rust where that is exact
    return (decode_batch(batch, decode_plan, schema, native) for batch in batches)


def read_settings(options: SourceOptions) -> "ReadSettings":
    """How an executor reads planned ranges (streams and batch reads alike)."""
    from kafka_group.read.read_settings import ReadSettings

    return ReadSettings(
        client_config=reader_config(options.client_config, options.group_id),
        include_headers=options.include_headers,
        fail_on_data_loss=options.fail_on_data_loss,
        poll_timeout_ms=options.poll_timeout_ms,
        max_records_per_batch=options.max_records_per_arrow_batch,
        client_idle_timeout_ms=options.reader_cache_timeout_ms,
    )

