"""A variant of the ``kafka-group`` source whose micro-batches run as a few packed tasks.

Benchmark-only (``format("kafka-group-packed")``, registered by :func:`register`):
it measures a proposed planning change without touching the connector. The
source is the real one; only ``partitions()`` and ``read()`` differ: the
batch's ranges are split into pieces of at most ``total / tasks`` records and
packed, largest first, onto ``tasks`` Spark tasks, each reading its ranges in
turn with :func:`kafka_group.fetch.read_ranges`. ``tasks`` is
``min(pack.tasks, ceil(total / pack.minRecordsPerTask))``, at least 1.
"""

from __future__ import annotations

import heapq
from typing import Any, Iterator, List, Sequence

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from kafka_group.offsets import BatchOffsets, OffsetRange
from pyspark_kafka_group.data_source import KafkaGroupDataSource
from pyspark_kafka_group.stream_reader import KafkaGroupStreamReader

__all__ = ["pack_ranges", "register", "PackedDataSource"]

_OWN_OPTIONS = ("pack.tasks", "pack.minrecordspertask")


def pack_ranges(ranges: Sequence[OffsetRange], tasks: int, min_records_per_task: int) -> List[List[OffsetRange]]:
    """Split and pack ``ranges`` onto at most ``tasks`` tasks of near-equal record counts."""
    total = sum(r.size for r in ranges)
    if total == 0:
        return []
    tasks = max(1, min(tasks, -(-total // max(1, min_records_per_task))))
    limit = -(-total // tasks)
    pieces: List[OffsetRange] = []
    for r in ranges:
        start = r.from_offset
        while start < r.until_offset:
            end = min(r.until_offset, start + limit)
            pieces.append(OffsetRange(r.topic_partition, start, end))
            start = end
    heap = [(0, i) for i in range(tasks)]
    packed: List[List[OffsetRange]] = [[] for _ in range(tasks)]
    for piece in sorted(pieces, key=lambda p: -p.size):
        load, i = heapq.heappop(heap)
        packed[i].append(piece)
        heapq.heappush(heap, (load + piece.size, i))
    return [sorted(task, key=lambda p: (p.topic_partition, p.from_offset)) for task in packed if task]


class PackedRangesPartition(InputPartition):
    """One Spark task reading several ranges."""

    def __init__(self, ranges: List[OffsetRange]) -> None:
        super().__init__(ranges)
        self.ranges = ranges


class PackedStreamReader(KafkaGroupStreamReader):
    """The real stream reader with packed tasks."""

    def __init__(self, options: Any, tasks: int, min_records_per_task: int) -> None:
        super().__init__(options)
        self._tasks = tasks
        self._min_records = min_records_per_task

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:  # type: ignore[type-arg]
        if start == end:
            return []
        ranges = BatchOffsets.from_json_dict(end).planned_ranges()
        return [PackedRangesPartition(t) for t in pack_ranges(ranges, self._tasks, self._min_records)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from kafka_group.client_config import reader_config
        from kafka_group.fetch import ReadSettings, read_ranges

        assert isinstance(partition, PackedRangesPartition)
        settings = ReadSettings(
            client_config=reader_config(self._options.client_config, self._options.group_id),
            include_headers=self._options.include_headers,
            fail_on_data_loss=self._options.fail_on_data_loss,
            poll_timeout_ms=self._options.poll_timeout_ms,
            max_records_per_batch=self._options.max_records_per_arrow_batch,
        )
        return read_ranges(partition.ranges, settings)


class PackedDataSource(KafkaGroupDataSource):
    """``format("kafka-group-packed")``: options ``pack.tasks`` (default 4) and
    ``pack.minRecordsPerTask`` (default 50000) besides the source's own."""

    def __init__(self, options: dict) -> None:  # type: ignore[type-arg]
        own = {k.lower(): v for k, v in options.items()}
        self.pack_tasks = int(own.get("pack.tasks", 4))
        self.pack_min_records = int(own.get("pack.minrecordspertask", 50_000))
        super().__init__({k: v for k, v in options.items() if k.lower() not in _OWN_OPTIONS})

    @classmethod
    def name(cls) -> str:
        return "kafka-group-packed"

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return PackedStreamReader(self.source_options, self.pack_tasks, self.pack_min_records)


def register(spark: Any) -> None:
    """Register ``kafka-group-packed`` with ``spark`` (pickled by value, so workers need no ``bench``)."""
    import sys

    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]
    spark.dataSource.register(PackedDataSource)
