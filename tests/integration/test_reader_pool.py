"""Executors' reader clients reused across ranges and tasks, on real Kafka (issue 17, item 3).

A task reads all its ranges with one client from the process's pool
(kafka_group.read.reader_pool) and one assignment of all their partitions (pieces of a
partition that do not touch in a later assignment); the next task of the same
process reuses the client. What it reads must still be exactly the planned
records: an earlier range of a partition read after a later one, a range after a
data-loss skip, a task stopped early by Spark, a task of many partitions and two
topics. Records of one partition come in offset order; partitions interleave.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Dict, Generator, Iterator, List, Sequence, Tuple, cast

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from kafka_group.config.client_config import reader_config
from kafka_group.errors import DataLossError
from kafka_group.offsets import OffsetRange, TopicPartition
from kafka_group.read.default_pool import default_pool
from kafka_group.read.fetch import read_ranges
from kafka_group.read.pool_clients import PoolStats
from kafka_group.read.read_settings import ReadSettings
from tests.support import Cluster, create_topic, produce, unique_name

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True, scope="module")
def _close_idle_readers() -> Iterator[None]:
    yield
    default_pool().close_all()  # before the run's broker stops: idle clients would log its absence

Read = List[Tuple[int, int, int]]  # (partition, offset, the record's number "n")


def _settings(kafka: Cluster, *, fail_on_data_loss: bool = True) -> ReadSettings:
    # A client.id of its own: this test's clients are the only ones of their config in the pool.
    config = reader_config({"bootstrap.servers": kafka.bootstrap_servers, "client.id": unique_name("pool")}, None)
    return ReadSettings(client_config=config, include_headers=False, fail_on_data_loss=fail_on_data_loss,
                        poll_timeout_ms=30_000, max_records_per_batch=7)


def _rows(batches: Sequence[pa.RecordBatch]) -> Read:
    out: Read = []
    for batch in batches:
        for p, o, v in zip(batch.column("partition").to_pylist(), batch.column("offset").to_pylist(),
                           batch.column("value").to_pylist()):
            out.append((p, o, json.loads(v)["n"]))
    return out


def _planned(partition: int, start: int, until: int) -> Read:
    return [(partition, o, o) for o in range(start, until)]


def _delta(before: PoolStats, after: PoolStats) -> Dict[str, int]:
    return {"created": after.created - before.created, "reused": after.reused - before.reused,
            "closed": after.closed - before.closed}


def test_tasks_of_one_process_share_one_client_and_read_exactly_their_ranges(kafka: Cluster) -> None:
    topic = create_topic(kafka, 2, "pool")
    produce(kafka.bootstrap_servers, topic, {0: 50, 1: 30})
    settings = _settings(kafka)
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    before = default_pool().stats()

    first = _rows(list(read_ranges([OffsetRange(p0, 20, 40), OffsetRange(p1, 0, 30)], settings)))
    # The next task: an earlier range of partition 0 after the later one, and its tail.
    second = _rows(list(read_ranges([OffsetRange(p0, 0, 20), OffsetRange(p0, 40, 50)], settings)))

    assert sorted(first) == _planned(0, 20, 40) + _planned(1, 0, 30)
    assert second == _planned(0, 0, 20) + _planned(0, 40, 50)  # one partition: in offset order
    # Spark stops reading a task early: the client goes back to the pool, and serves the next task.
    stopped = read_ranges([OffsetRange(p1, 0, 30)], settings)
    assert _rows([next(stopped)]) == _planned(1, 0, 7)
    cast(Generator[pa.RecordBatch, None, None], stopped).close()
    third = _rows(list(read_ranges([OffsetRange(p1, 10, 20)], settings)))
    assert third == _planned(1, 10, 20)

    after = default_pool().stats()
    assert _delta(before, after) == {"created": 1, "reused": 3, "closed": 0}
    assert after.in_use == 0


def test_a_reused_client_reads_a_range_that_ends_on_a_transaction_marker_again(kafka: Cluster) -> None:
    # Such a range ends only at the client's partition-EOF event (no record reaches the end):
    # a reused client re-assigned to the same partition must report EOF again.
    if kafka.engine != "kafka":
        pytest.skip("needs Apache Kafka: the mock cluster writes no transaction markers")
    topic = create_topic(kafka, 1, "pool-txn")
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": unique_name("txn")})
    producer.init_transactions(60)
    for i in range(5):  # offsets 0-9: a record, then its commit marker
        producer.begin_transaction()
        producer.produce(topic, value=b'{"n":%d}' % (2 * i), partition=0)
        producer.commit_transaction(60)
    settings = _settings(kafka)
    whole = [OffsetRange(TopicPartition(topic, 0), 0, 10)]
    before = default_pool().stats()
    reads = [_rows(list(read_ranges(whole, settings))) for _ in range(2)]
    assert reads[0] == reads[1] == [(0, o, o) for o in range(0, 10, 2)]
    assert _delta(before, default_pool().stats()) == {"created": 1, "reused": 1, "closed": 0}


def test_a_range_after_a_data_loss_skip_reads_exactly_its_records(kafka: Cluster) -> None:
    if kafka.engine != "kafka":
        pytest.skip("needs Apache Kafka: DeleteRecords")
    topic = create_topic(kafka, 2, "pool-loss")
    produce(kafka.bootstrap_servers, topic, {0: 40, 1: 20})
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    for future in admin.delete_records([KafkaTopicPartition(topic, 0, 15)]).values():
        future.result(30)
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    ranges = [OffsetRange(p0, 0, 40), OffsetRange(p1, 0, 20), OffsetRange(p0, 15, 25)]

    skipping = _settings(kafka, fail_on_data_loss=False)
    before = default_pool().stats()
    read = _rows(list(read_ranges(ranges, skipping)))
    # [0, 40) and [15, 25) of partition 0 overlap (the planner never does that): each is read.
    assert sorted(read) == sorted(_planned(0, 15, 40) + _planned(1, 0, 20) + _planned(0, 15, 25))
    assert _delta(before, default_pool().stats()) == {"created": 1, "reused": 0, "closed": 0}

    # With failOnDataLoss the task fails, and its client is closed rather than returned.
    failing = _settings(kafka, fail_on_data_loss=True)
    before = default_pool().stats()
    with pytest.raises(DataLossError, match=r"offsets \[0, 15\)"):
        list(read_ranges(ranges, failing))
    assert sorted(_rows(list(read_ranges(ranges[1:], failing)))) == _planned(0, 15, 25) + _planned(1, 0, 20)
    assert _delta(before, default_pool().stats()) == {"created": 2, "reused": 0, "closed": 1}


def test_a_task_of_many_partitions_and_two_topics_reads_each_planned_record_once(kafka: Cluster) -> None:
    # One assignment of 40 partitions (one with a data-loss gap skipped) and a range of another topic.
    if kafka.engine != "kafka":
        pytest.skip("needs Apache Kafka: DeleteRecords")
    topic, other = create_topic(kafka, 40, "pool-many"), create_topic(kafka, 2, "pool-other")
    sizes = {p: 200 + 10 * p for p in range(40)}
    produce(kafka.bootstrap_servers, topic, sizes)
    produce(kafka.bootstrap_servers, other, {0: 300, 1: 50})
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    for future in admin.delete_records([KafkaTopicPartition(topic, 7, 120)]).values():
        future.result(30)
    # Partition 3 in two adjacent pieces and a third one apart (a second assignment), partition 0 of
    # both topics (one partition number, two topics).
    ranges = [OffsetRange(TopicPartition(topic, p), 5, sizes[p]) for p in range(40) if p != 3]
    ranges += [OffsetRange(TopicPartition(topic, 3), 100, 150), OffsetRange(TopicPartition(topic, 3), 0, 100),
               OffsetRange(TopicPartition(topic, 3), 180, 200), OffsetRange(TopicPartition(other, 0), 20, 290)]
    settings = dataclasses.replace(_settings(kafka, fail_on_data_loss=False), max_records_per_batch=1_000)
    batches = list(read_ranges(ranges, settings))

    got: List[Tuple[str, int, int, int, int]] = []  # (topic, partition, offset, the record's "p" and "n")
    for batch in batches:
        assert batch.num_rows <= 1_000
        for t, p, o, v in zip(batch.column("topic").to_pylist(), batch.column("partition").to_pylist(),
                              batch.column("offset").to_pylist(), batch.column("value").to_pylist()):
            record = json.loads(v)
            got.append((t, p, o, record["p"], record["n"]))
    planned = [(topic, p, o, p, o) for p in range(40) if p not in (3, 7) for o in range(5, sizes[p])]
    planned += [(topic, 7, o, 7, o) for o in range(120, sizes[7])]  # [5, 120) deleted: skipped
    planned += [(topic, 3, o, 3, o) for o in list(range(0, 150)) + list(range(180, 200))]
    planned += [(other, 0, o, 0, o) for o in range(20, 290)]
    assert len(got) == len(set(got))
    assert sorted(got) == sorted(planned)
    for tp in {(t, p) for t, p, *_ in got}:  # each partition's records in offset order
        offsets = [o for t, p, o, *_ in got if (t, p) == tp]
        assert offsets == sorted(offsets)
