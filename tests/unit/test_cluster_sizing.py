"""How many tasks a batch runs as follows the cluster, never the driver's CPUs (issue 34, item 3).

A Python data source is planned in Python workers of the driver that have no session: the
cluster's parallelism reaches them as the ``fetch.clusterParallelism`` option
(``pyspark_kafka_group.cluster_options(spark)`` reads it from the session). ``fetch.maxTasks``
defaults to twice it; without it, to one task per Kafka partition of the batch (Spark's Kafka
source's count); ``fetch.maxTasks`` given wins.
"""

from __future__ import annotations

import os
from typing import Dict, List

import pytest

from kafka_group.config.options import parse_source_options
from kafka_group.config.plan_options import TaskSizing
from kafka_group.errors import ConfigError
from kafka_group.offsets import OffsetRange, TopicPartition
from kafka_group.plan.planning import pack_ranges

BASE = {"kafka.bootstrap.servers": "h:9092", "subscribe": "orders", "kafka.group.id": "g",
        "fetch.minRecordsPerTask": "1"}
#: Eight Kafka partitions of 100 records each: enough records for any cap below.
RANGES = [OffsetRange(TopicPartition("orders", p), 0, 100) for p in range(8)]


def _tasks(options: Dict[str, str], ranges: List[OffsetRange] = RANGES) -> int:
    return len(pack_ranges(ranges, parse_source_options(options).task_sizing))


@pytest.fixture
def big_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 64-core driver: no default may follow it."""
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)


def test_the_default_follows_the_clusters_parallelism_not_the_driver(big_driver: None) -> None:
    assert _tasks({**BASE, "fetch.clusterParallelism": "3"}) == 6
    assert _tasks({**BASE, "fetch.clusterParallelism": "1"}) == 2
    assert _tasks({**BASE, "fetch.clusterParallelism": "100"}) == 200  # hot partitions cut into pieces


def test_without_the_clusters_parallelism_a_batch_runs_one_task_per_kafka_partition(big_driver: None) -> None:
    assert _tasks(BASE) == len(RANGES)
    one_hot_partition = [OffsetRange(TopicPartition("orders", 0), 0, 1_000)]
    assert _tasks(BASE, one_hot_partition) == 1
    assert _tasks(BASE, RANGES + [OffsetRange(TopicPartition("orders", 9), 5, 5)]) == len(RANGES)  # empty: none


def test_fetch_max_tasks_overrides_the_clusters_parallelism(big_driver: None) -> None:
    assert _tasks({**BASE, "fetch.clusterParallelism": "3", "fetch.maxTasks": "5"}) == 5
    assert _tasks({**BASE, "fetch.maxTasks": "12"}) == 12


def test_the_cap_is_resolved_by_task_sizing() -> None:
    assert TaskSizing(max_tasks=7, cluster_parallelism=2).task_cap(ranges=3) == 7
    assert TaskSizing(cluster_parallelism=2).task_cap(ranges=3) == 4
    assert TaskSizing().task_cap(ranges=3) == 3
    assert TaskSizing().task_cap(ranges=0) == 1


def test_a_bad_cluster_parallelism_names_the_option() -> None:
    with pytest.raises(ConfigError, match="option 'fetch.clusterParallelism'"):
        parse_source_options({**BASE, "fetch.clusterParallelism": "0"})
