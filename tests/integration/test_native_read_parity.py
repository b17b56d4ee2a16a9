"""The compiled read path (``read.path=native``) against the Python one, on the same planned ranges of real Kafka.

Both must return the same rows (every column, headers included) and raise the same errors:
transactions (committed, aborted, markers as gaps) under both isolation levels, several ranges of
one partition (passes), several partitions and topics in one task, the record and byte caps, records
deleted under the plan (data loss, failed or skipped), a plan past the partition's end.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Tuple

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from kafka_group.config.client_config import reader_config
from kafka_group.errors import DataLossError
from kafka_group.offsets import OffsetRange, TopicPartition
from kafka_group.read.read_path import native_module
from kafka_group.read.read_settings import ReadSettings
from kafka_group.read.record_schema import arrow_schema
from tests.support import Cluster, create_topic, new_consumer, read_planned, unique_name

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _needs_native() -> None:
    if native_module() is None:
        pytest.skip("the compiled read path is not built here (python native/build_native.py --inplace)")


def _settings(servers: str, *, isolation: str = "read_committed", fail_on_data_loss: bool = True,
              records: int = 10_000, max_bytes: int = 256 << 20) -> ReadSettings:
    config = reader_config({"bootstrap.servers": servers, "isolation.level": isolation}, None)
    return ReadSettings(client_config=config, include_headers=True, fail_on_data_loss=fail_on_data_loss,
                        poll_timeout_ms=30_000, max_records_per_batch=records, max_bytes_per_batch=max_bytes)


def _both(ranges: List[OffsetRange], settings: ReadSettings) -> Tuple[List[pa.RecordBatch], List[pa.RecordBatch]]:
    return list(read_planned(ranges, settings, "python")), list(read_planned(ranges, settings, "native"))


def _rows(batches: List[pa.RecordBatch]) -> List[Dict[str, Any]]:
    rows = [row for batch in batches for row in batch.to_pylist()]
    return sorted(rows, key=lambda r: (r["topic"], r["partition"], r["offset"]))


def _error(ranges: List[OffsetRange], settings: ReadSettings, path: str) -> Optional[BaseException]:
    try:
        list(read_planned(ranges, settings, path))
    except Exception as exc:  # the error is what is compared
        return exc
    return None


def _seed(kafka: Cluster) -> Tuple[str, str, Dict[int, int]]:
    """Two topics: ``txn`` (3 partitions) with committed and aborted transactions, headers of every
    shape, null and empty keys and values; ``plain`` (1 partition) without transactions."""
    txn, plain = create_topic(kafka, 3, "parity-txn"), create_topic(kafka, 1, "parity-plain")
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": unique_name("parity")})
    producer.init_transactions(60)
    now_ms = int(time.time() * 1000)  # a time older than the topic's retention would be deleted under the test
    headers: List[Any] = [None, [("h", b"v")], [("h", None), ("h", b"2"), ("é", b"")], []]
    for t in range(6):
        producer.begin_transaction()
        for i in range(9):
            producer.produce(txn, partition=i % 3, key=None if i % 4 == 0 else b"k%d" % i,
                             value=None if i == 5 else (b"" if i == 6 else b"v%d-%d" % (t, i) * (1 + i)),
                             headers=headers[i % 4], timestamp=now_ms - 1000 + i)
        if t == 3:
            producer.abort_transaction(60)
        else:
            producer.commit_transaction(60)
    plain_producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for i in range(40):
        plain_producer.produce(plain, partition=0, key=b"p%d" % i, value=b"x" * (i * 7))
    assert plain_producer.flush(30) == 0
    consumer = new_consumer(kafka.bootstrap_servers)
    try:
        ends = {p: int(consumer.get_watermark_offsets(KafkaTopicPartition(txn, p), timeout=30)[1]) for p in range(3)}
    finally:
        consumer.close()
    return txn, plain, ends


def test_both_read_paths_return_the_same_rows(kafka: Cluster) -> None:
    if kafka.engine != "kafka":
        pytest.skip("needs Apache Kafka: the mock cluster writes no transaction markers")
    txn, plain, ends = _seed(kafka)
    ranges = [
        OffsetRange(TopicPartition(txn, 0), 0, 7),
        OffsetRange(TopicPartition(txn, 0), 11, ends[0]),  # a second range of partition 0: a second pass
        OffsetRange(TopicPartition(txn, 1), 0, ends[1]),
        OffsetRange(TopicPartition(txn, 2), 2, ends[2]),
        OffsetRange(TopicPartition(plain, 0), 3, 40),
    ]
    for settings in (_settings(kafka.bootstrap_servers),
                     _settings(kafka.bootstrap_servers, isolation="read_uncommitted"),
                     _settings(kafka.bootstrap_servers, records=7, max_bytes=300)):
        python, native = _both(ranges, settings)
        assert _rows(native) == _rows(python)
        assert all(b.schema == arrow_schema(True) for b in native)
        assert all(b.num_rows <= settings.max_records_per_batch for b in native)
        # The byte cap: a batch over it holds one record (a record above the cap is a batch of its own).
        for batch in native:
            size = sum(len(v or b"") for v in batch.column("value").to_pylist()) + \
                sum(len(k or b"") for k in batch.column("key").to_pylist())
            assert size <= settings.max_bytes_per_batch or batch.num_rows == 1
    committed = _rows(list(read_planned(ranges, _settings(kafka.bootstrap_servers), "native")))
    assert all(not r["value"] or not r["value"].startswith(b"v3-") for r in committed)  # the aborted one
    assert any(r["headers"] and ("é", b"") in [(h["key"], h["value"]) for h in r["headers"]] for r in committed)


def test_both_read_paths_raise_the_same_errors_and_skip_the_same_offsets(kafka: Cluster) -> None:
    if kafka.engine != "kafka":
        pytest.skip("needs Apache Kafka: the mock cluster deletes no records")
    topic = create_topic(kafka, 1, "parity-loss")
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for i in range(30):
        producer.produce(topic, partition=0, value=b"%d" % i)
    assert producer.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    deleted = admin.delete_records([KafkaTopicPartition(topic, 0, 10)])
    for future in deleted.values():
        future.result()
    lost = [OffsetRange(TopicPartition(topic, 0), 0, 30)]
    past_end = [OffsetRange(TopicPartition(topic, 0), 10, 35)]
    strict = _settings(kafka.bootstrap_servers)
    for ranges in (lost, past_end):
        python, native = _error(ranges, strict, "python"), _error(ranges, strict, "native")
        assert isinstance(python, DataLossError) and type(native) is type(python)
        assert str(native) == str(python)
    lenient = _settings(kafka.bootstrap_servers, fail_on_data_loss=False)
    for ranges in (lost, past_end):
        python_rows, native_rows = _both(ranges, lenient)
        assert _rows(native_rows) == _rows(python_rows)
        assert [r["offset"] for r in _rows(native_rows)] == list(range(10, 30))
