"""The batch reader: ``spark.read.format("kafka-group")`` between two ends, outside any group.

Spark calls :meth:`KafkaGroupBatchReader.partitions` once on the driver when it
plans the read, and :meth:`~KafkaGroupBatchReader.read` on executors, one call
per task, with the reader pickled. The cluster client lives only inside
``partitions``; executors read their ranges with ``assign()``, like a stream's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, Optional, Sequence

from pyspark.sql.datasource import DataSourceReader, InputPartition

from kafka_group.config.source_options import SourceOptions
from kafka_group.offsets import StartingOffsets
from kafka_group.plan.planning import pack_ranges
from pyspark_kafka_group.source.stream_reader import OffsetRangesPartition, read_task

if TYPE_CHECKING:
    from kafka_group.registry.decoding import DecodePlan

__all__ = ["KafkaGroupBatchReader"]


class KafkaGroupBatchReader(DataSourceReader):
    """Reads the records between a batch read's ends; joins no group and commits nothing.

    Parameters
    ----------
    options : SourceOptions
        The read's options, checked by :func:`kafka_group.config.option_rules.check_batch_options`.
    starting : StartingOffsets
        Where the read starts (``earliest`` unless set).
    decode_plan : DecodePlan, optional
        The registry decoding of key and value; None: raw.
    """

    def __init__(self, options: SourceOptions, starting: StartingOffsets,
                 decode_plan: Optional["DecodePlan"] = None) -> None:
        self._options = options
        self._starting = starting
        self._decode_plan = decode_plan

    def partitions(self) -> Sequence[InputPartition]:
        """The read's ranges, packed onto tasks like a stream's (none: nothing to read). Caller: Spark's
        planning, on the driver."""
        from kafka_group.plan.batch_read import batch_ranges
        from kafka_group.group.cluster_metadata import ClusterView
        from kafka_group.log_setup import configure_from_env

        configure_from_env()
        cluster = ClusterView(self._options.client_config, self._options.connect_timeout_ms)
        ranges = batch_ranges(self._options, self._starting, cluster)
        return [OffsetRangesPartition(task) for task in pack_ranges(ranges, self._options.task_sizing)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Read a task's ranges as Arrow record batches of Spark's Kafka schema (decoded by
        ``keyFormat``/``valueFormat``). Caller: an executor.

        A read with no ranges gets one task all the same: pyspark turns an empty partition list into one
        ``InputPartition(None)``; that task reads nothing (zero rows)."""
        if not isinstance(partition, OffsetRangesPartition):
            if getattr(partition, "value", None) is None:
                return iter(())
            raise TypeError(f"the kafka-group batch reader got a partition it did not plan: {type(partition).__name__}")
        return read_task(partition, self._options, self._decode_plan)
