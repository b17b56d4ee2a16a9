"""Issue 26 item 8a: Spark's task layout, one input partition per Kafka partition, as an option.

By default a Spark task reads several Kafka partitions interleaved (``pack_ranges``);
``fetch.taskLayout=partition`` gives each Kafka partition's range its own task, as
Spark's ``KafkaOffsetRangeCalculator`` does, so ``foreachPartition``/``mapPartitions``
code keyed on one Kafka partition per task keeps its meaning.
"""

from __future__ import annotations

import pytest

from kafka_group.errors import ConfigError
from kafka_group.offsets import OffsetRange, TopicPartition
from kafka_group.config.plan_options import TaskSizing
from kafka_group.plan.planning import pack_ranges
from tests.unit.driver_fakes import options

A0, A1, A2, B0 = (TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("a", 2), TopicPartition("b", 0))
RANGES = [OffsetRange(B0, 0, 10), OffsetRange(A1, 5, 8), OffsetRange(A0, 0, 100_000), OffsetRange(A2, 3, 3)]


def test_the_option_parses_and_defaults_to_packed() -> None:
    assert options().task_sizing.layout == "packed"
    assert options(**{"fetch.taskLayout": "Partition"}).task_sizing.layout == "partition"
    with pytest.raises(ConfigError, match=r"option 'fetch.taskLayout' must be one of packed, partition"):
        options(**{"fetch.taskLayout": "spark"})


def test_partition_layout_is_one_task_per_kafka_partition_in_topic_partition_order() -> None:
    tasks = pack_ranges(RANGES, TaskSizing(layout="partition", max_tasks=1))
    assert tasks == [[OffsetRange(A0, 0, 100_000)], [OffsetRange(A1, 5, 8)], [OffsetRange(B0, 0, 10)]]


def test_packed_layout_still_mixes_partitions() -> None:
    assert pack_ranges(RANGES, TaskSizing(max_tasks=1)) == [
        [OffsetRange(A0, 0, 100_000), OffsetRange(A1, 5, 8), OffsetRange(B0, 0, 10)]]


def test_partition_layout_splits_by_max_records_per_partition_as_spark_does() -> None:
    # Spark: ceil(size / maxRecordsPerPartition) near-equal pieces of the range, each its own task.
    tasks = pack_ranges([OffsetRange(A0, 0, 10), OffsetRange(A1, 0, 3)],
                        TaskSizing(layout="partition", max_records_per_task=4))
    assert tasks == [[OffsetRange(A0, 0, 3)], [OffsetRange(A0, 3, 6)], [OffsetRange(A0, 6, 10)],
                     [OffsetRange(A1, 0, 3)]]


def test_partition_layout_splits_large_ranges_for_min_partitions_each_task_still_one_partition() -> None:
    tasks = pack_ranges([OffsetRange(A0, 0, 90), OffsetRange(A1, 0, 10)], TaskSizing(layout="partition", min_tasks=4))
    assert len(tasks) >= 4
    assert all(len(task) == 1 for task in tasks)
    covered = sorted((r.topic_partition, r.from_offset, r.until_offset) for task in tasks for r in task)
    assert [c for c in covered if c[0] == A1] == [(A1, 0, 10)]
    a0 = [c for c in covered if c[0] == A0]
    assert a0[0][1] == 0 and a0[-1][2] == 90 and all(x[2] == y[1] for x, y in zip(a0, a0[1:]))
