"""Transactional producers on real Apache Kafka: aborted records never land, committed ones all
land once, and an open transaction is waited for (issue 13 finding 3).

librdkafka's mock cluster does not filter aborted records, so these tests need
Apache Kafka. A second transactional producer leaves a transaction open on
partition 0 while a first one keeps committing and aborting transactions on both
partitions; the query must land every committed record before the open
transaction, none after it on that partition until it commits, and all of them
once it has.
"""

from __future__ import annotations

import pathlib
import threading
from typing import Any, Dict, List, Optional, Tuple

import pytest
from confluent_kafka import Producer
from pyspark.sql import SparkSession

from kafka_group.formats.progress import read_progress
from kafka_group.offsets import TopicPartition
from tests.support import Cluster, create_topic, group_stream, unique_name, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _real_kafka(kafka: Cluster) -> None:
    if kafka.engine != "kafka":
        pytest.skip("needs Apache Kafka: the mock cluster does not filter aborted transactions for read_committed")


def transactional(servers: str) -> Any:
    # The broker aborts a transaction open longer than transaction.timeout.ms (librdkafka: 60 s); the open
    # one must outlive the query's start and the waits below.
    producer = Producer({"bootstrap.servers": servers, "transactional.id": unique_name("txn"), "linger.ms": 5,
                         "transaction.timeout.ms": 600000})
    producer.init_transactions(30)
    return producer


def transaction(producer: Any, topic: str, label: str, partitions: Tuple[int, ...], count: int,
                commit: bool) -> List[Tuple[int, bytes]]:
    """One transaction of ``count`` records per partition; returns (partition, value) of each record."""
    producer.begin_transaction()
    sent = []
    for p in partitions:
        for i in range(count):
            value = f"{label}-p{p}-{i}".encode()
            producer.produce(topic, value=value, partition=p)
            sent.append((p, value))
    producer.flush(30)  # in the log before the end marker: an aborted one is there to be (not) read
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)
    return sent


class Collector:
    """A foreachBatch function keeping each batch's (partition, value) rows by batch id (a replay replaces)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._batches: Dict[int, List[Tuple[int, bytes]]] = {}

    def __call__(self, batch: Any, batch_id: int) -> None:
        found = [(r.partition, bytes(r.value)) for r in batch.select("partition", "value").collect()]
        with self._lock:
            self._batches[batch_id] = found

    def rows(self) -> List[Tuple[int, bytes]]:
        with self._lock:
            return [row for _, rows in sorted(self._batches.items()) for row in rows]

    def batches(self) -> int:
        with self._lock:
            return len(self._batches)


def alive(query: Any, name: str = "the query") -> None:
    """Fail at once with the query's own error when it died (``name`` says which)."""
    if not query.isActive:
        raise AssertionError(f"{name} stopped: {query.exception()}")


def planned_partition_0(query: Any, topic: str) -> Dict[int, int]:
    """Where each batch in the query's recent progress planned partition 0 of ``topic`` to, by batch id
    (a batch: an event whose positions moved; an idle trigger's event repeats the last positions)."""
    planned = {}
    for event in query.recentProgress:
        progress = read_progress(event)
        source = progress.sources[0] if progress.sources else None
        if progress.batch_id is None or source is None or source.end is None:
            continue
        if source.start is not None and dict(source.start.positions) == dict(source.end.positions):
            continue
        end = source.end.positions.get(TopicPartition(topic, 0))
        if end is not None:
            planned[progress.batch_id] = end
    return planned


#: The option sets the transactions are read with, one query each over the same topic and transactions.
OPTION_SETS: Dict[str, Dict[str, str]] = {
    "defaults": {}, "failOnDataLoss-false": {"failOnDataLoss": "false"},
    "read_committed": {"kafka.isolation.level": "read_committed"},
}


def test_aborted_never_land_and_an_open_transaction_is_waited_for(spark: SparkSession, kafka: Cluster) -> None:
    """One query per entry of :data:`OPTION_SETS` (each its own group), all over one topic: the transactions
    are produced once and every query must land the same committed records, wait at the same open one."""
    servers = kafka.bootstrap_servers
    topic = create_topic(kafka, 2, "txn-topic")
    busy, holder = transactional(servers), transactional(servers)
    committed: List[Tuple[int, bytes]] = []
    aborted: List[Tuple[int, bytes]] = []
    for i in range(6):  # interleaved: c0 a1 c2 a3 c4 a5
        sent = transaction(busy, topic, f"before{i}", (0, 1), 5, commit=i % 2 == 0)
        (committed if i % 2 == 0 else aborted).extend(sent)
    landable_while_open = list(committed)
    # Left open on partition 0 while batches are planned; its records are in the log.
    holder.begin_transaction()
    held = []
    open_offsets: List[int] = []
    for i in range(4):
        value = f"open-p0-{i}".encode()
        holder.produce(topic, value=value, partition=0, on_delivery=lambda _, m: open_offsets.append(m.offset()))
        held.append((0, value))
    holder.flush(30)
    last_stable = min(open_offsets)  # partition 0's last stable offset while the transaction is open
    for i in range(6):  # more after the open one, on both partitions
        sent = transaction(busy, topic, f"after{i}", (0, 1), 5, commit=i % 2 == 1)
        (committed if i % 2 == 1 else aborted).extend(sent)
        if i % 2 == 1:
            landable_while_open.extend(row for row in sent if row[0] == 1)  # partition 1 has no open transaction

    lands = {name: Collector() for name in OPTION_SETS}
    queries: Dict[str, Any] = {}
    try:
        for name, options in OPTION_SETS.items():
            queries[name] = (group_stream(spark, servers, topic, unique_name("group"), maxOffsetsPerTrigger="7",
                                          **options).load()
                             .writeStream.foreachBatch(lands[name]).trigger(processingTime="500 milliseconds")
                             .queryName(f"txn-{name}").start())

        def landed_while_open() -> bool:
            for name, query in queries.items():
                alive(query, name)
            return all(sorted(land.rows()) == sorted(landable_while_open) for land in lands.values())

        try:
            wait_for(landed_while_open, "every committed record not behind the open transaction", 180)
        except AssertionError:
            for name, land in lands.items():
                rows = land.rows()
                print(f"{name}, after 180 s: {len(rows)} rows landed, {len(landable_while_open)} expected; missing "
                      f"{sorted(set(landable_while_open) - set(rows))[:5]}; not expected "
                      f"{sorted(set(rows) - set(landable_while_open))[:5]}")
            raise
        batches = {name: land.batches() for name, land in lands.items()}
        # Later plans run while the transaction is still open: they add nothing and fail nothing.
        busy_more = transaction(busy, topic, "later", (1,), 3, commit=True)
        committed.extend(busy_more)
        landable_while_open.extend(busy_more)
        wait_for(landed_while_open, "a later committed transaction on partition 1 while 0 waits", 180)
        assert all(lands[name].batches() > batches[name] for name in lands), batches
        # At most 7 offsets a batch: the 108 offsets before the open transaction on partition 0 and on
        # partition 1 take at least 16 batches, the later transaction one more. Every one of them is planned
        # while the transaction is open, and partition 0's plans stop at its last stable offset.
        def planned_17() -> bool:  # a batch's progress is posted after its foreachBatch returned
            for name, query in queries.items():
                alive(query, name)
            return all(len(planned_partition_0(query, topic)) >= 17 for query in queries.values())

        try:
            wait_for(planned_17, "the progress of 17 batches planned while the transaction is open", 120)
        except AssertionError as error:
            raise AssertionError(f"{error}; batches planned while open: "
                                 f"{ {n: planned_partition_0(q, topic) for n, q in queries.items()} }") from None
        for name, query in queries.items():
            planned = planned_partition_0(query, topic)
            assert lands[name].batches() >= 17, f"{name}: {lands[name].batches()} batches landed while open"
            assert max(planned.values()) == last_stable, (
                f"{name}: partition 0's plans while open end at {planned}, not at the last stable offset "
                f"{last_stable}")
        print(f"while open: {[(len(land.rows()), land.batches()) for land in lands.values()]} (rows, batches), "
              "none of the open transaction")
        holder.commit_transaction(30)
        committed.extend(held)

        def landed_all() -> bool:
            for name, query in queries.items():
                alive(query, name)
            return all(len(land.rows()) >= len(committed) for land in lands.values())

        wait_for(landed_all, "the committed records of the transaction that was open", 180)
        for name, query in queries.items():
            alive(query, name)
    finally:
        for query in queries.values():
            query.stop()
    for name, land in lands.items():
        rows = land.rows()
        assert not set(rows) & set(aborted), f"{name}: aborted records landed"
        assert sorted(rows) == sorted(committed), f"{name}: committed records missing or repeated"
    print(f"each query landed {len(committed)} committed rows once, none of {len(aborted)} aborted")


def test_read_uncommitted_is_an_explicit_choice_and_lands_aborted_records(spark: SparkSession, kafka: Cluster) -> None:
    """``kafka.isolation.level=read_uncommitted`` (Spark's Kafka default) plans and reads everything, aborted too."""
    servers = kafka.bootstrap_servers
    topic = create_topic(kafka, 1, "txn-topic")
    producer = transactional(servers)
    sent: List[Tuple[int, bytes]] = []
    for i in range(4):
        sent.extend(transaction(producer, topic, f"t{i}", (0,), 3, commit=i % 2 == 0))
    land = Collector()
    query: Optional[Any] = None
    try:
        query = (group_stream(spark, servers, topic, unique_name("group"),
                              **{"kafka.isolation.level": "read_uncommitted"}).load()
                 .writeStream.foreachBatch(land).trigger(availableNow=True).start())
        assert query.awaitTermination(180)
        assert query.exception() is None
    finally:
        if query is not None:
            query.stop()
    assert sorted(land.rows()) == sorted(sent)


def test_alignment_does_not_hold_a_partition_whose_backlog_is_only_a_transaction_marker(
    spark: SparkSession, kafka: Cluster, tmp_path: pathlib.Path
) -> None:
    """Issue 26, item 4: with ``flow.alignment.maxDrift``, a partition whose backlog holds no visible record
    (a committed transaction's end marker after its records, or an aborted transaction) was held as if its next
    record were unknown, and every ``Trigger.AvailableNow`` run on a transactional topic ended in
    ``AvailableNowIncompleteError``."""
    servers = kafka.bootstrap_servers
    topic = create_topic(kafka, 2, "txn-topic")
    producer = transactional(servers)
    committed: List[Tuple[int, bytes]] = []
    for i in range(3):
        committed.extend(transaction(producer, topic, f"c{i}", (0, 1), 4, commit=True))
    transaction(producer, topic, "aborted", (1,), 3, commit=False)  # partition 1 ends in an aborted transaction

    for run in range(2):  # the run after a complete one, with nothing new, ends at once too
        land = Collector()
        query: Optional[Any] = None
        try:
            # A held partition fails the run after availableNowTimeoutMs (within the wait below).
            query = (group_stream(spark, servers, topic, f"{topic}-group", maxOffsetsPerTrigger="5",
                                  availableNowTimeoutMs="60000", **{"flow.alignment.maxDrift": "1 hour"}).load()
                     .writeStream.foreachBatch(land).option("checkpointLocation", str(tmp_path / "chk"))
                     .trigger(availableNow=True).start())
            assert query.awaitTermination(180), "the AvailableNow run did not end"
            assert query.exception() is None, f"run {run}: {query.exception()}"
        finally:
            if query is not None:
                query.stop()
        assert sorted(land.rows()) == (sorted(committed) if run == 0 else []), f"run {run}"
