"""A real broker fault: the disk under Apache Kafka's log folder fills up.

Kafka takes a log folder that fails a write offline; with its only folder gone the
broker halts. After space is freed and the broker restarts on its data, a query
into Delta lands every record the producer had acknowledged exactly once.
"""

from __future__ import annotations

import itertools
import os
import pathlib
from collections import Counter
from typing import Iterator, List, Optional, Set, Tuple

import pytest
from confluent_kafka import KafkaError, Message, Producer

from tests.support import table_offsets, tmpfs, unique_name, wait_for
from tests.integration.test_delta_commit_failure import run_query

pytestmark = pytest.mark.integration



@pytest.fixture
def broker_disk(tmp_path: pathlib.Path) -> Iterator[pathlib.Path]:
    """A 64 MiB tmpfs for a broker's log folder (needs root, as in CI); skipped where it cannot be mounted."""
    with tmpfs(tmp_path / "kafka-disk", "64m") as mount:
        yield mount


def test_broker_halts_on_a_full_log_disk_and_after_restart_every_acked_record_lands_once(
    tmp_path: pathlib.Path, broker_disk: pathlib.Path
) -> None:
    from tests.support import BROKER_ENGINE

    if BROKER_ENGINE != "kafka":
        pytest.skip("a broker's own disk exists only on Apache Kafka")
    from kafka_group_devbroker import ApacheKafka

    topic, group = unique_name("diskfull"), unique_name("group")
    table, checkpoint, log = tmp_path / "table", tmp_path / "chk", tmp_path / "query.log"
    acked: Set[Tuple[int, int]] = set()
    failures: List[str] = []

    def on_delivery(error: Optional[KafkaError], message: Message) -> None:
        if error is not None:
            failures.append(error.str())
            return
        partition, offset = message.partition(), message.offset()
        assert partition is not None and offset is not None, message
        acked.add((partition, offset))

    with ApacheKafka(brokers=1, broker_config={"log.dirs": str(broker_disk)}) as kafka:
        kafka.create_topic(topic, 2)
        servers = kafka.bootstrap_servers
        producer = Producer({"bootstrap.servers": servers, "acks": "all", "linger.ms": 5,
                             "message.timeout.ms": 20000, "retries": 0})
        for i in range(200):
            producer.produce(topic, value=f"before-{i}".encode(), partition=i % 2, on_delivery=on_delivery)
        assert producer.flush(30) == 0
        assert run_query(servers, topic, group, table, checkpoint, log) == 0
        assert table_offsets(table) == Counter(acked)

        # Fill the disk, leaving a little room, then write 10 KiB records until the broker fails.
        with open(broker_disk / "filler", "wb", buffering=0) as filler:
            try:
                while True:
                    filler.write(b"\0" * (1 << 20))
            except OSError:
                pass
        os.truncate(broker_disk / "filler", (broker_disk / "filler").stat().st_size - (2 << 20))
        payload = b"x" * 10_240
        numbers = itertools.count()

        def broker_halted() -> bool:
            i = next(numbers)
            producer.produce(topic, value=payload + str(i).encode(), partition=i % 2, on_delivery=on_delivery)
            producer.poll(0.01)
            return not kafka.running

        try:
            wait_for(broker_halted, "the broker to halt on its full disk", 120, interval_s=0)
        finally:
            producer.flush(30)
        assert not kafka.running, "the broker should halt when its only log folder fails"
        assert failures, "some records must have failed with the broker"

        (broker_disk / "filler").unlink()
        kafka.start_broker(1)
        for j in range(100):
            producer.produce(topic, value=f"after-{j}".encode(), partition=j % 2, on_delivery=on_delivery)
        assert producer.flush(60) == 0
        wait_for(lambda: run_query(servers, topic, group, table, checkpoint, log) == 0,
                 "a drain of the restarted broker to succeed", 300)
        landed = table_offsets(table)
        assert max(landed.values()) == 1, "a record landed twice"
        assert acked <= set(landed), sorted(acked - set(landed))[:10]
        print(f"acked {len(acked)}, landed {len(landed)}, failed deliveries {len(failures)}")
