"""The compiled read path (``read.path=native``) against the Python one, on the same planned ranges of real Kafka.

Both must return the same rows (every column, headers included) and raise the same errors:
transactions (committed, aborted, markers as gaps) under both isolation levels, several ranges of
one partition (passes), several partitions and topics in one task, the record and byte caps, records
deleted under the plan (data loss, failed or skipped), a plan past the partition's end, a record whose
timestamp Spark cannot hold and a header key that is not UTF-8 (the compiled path's own record checks),
a plan past what a transaction left open holds back (read_committed), planned records that never arrive.
The compiled path's client pool is exercised across tasks: a parked client serves the next task's
other ranges and header setting, and a client whose task failed is closed, not reused.

(A record over one Arrow batch's 2 GiB, the one record check left, is compared in
``tests/unit/test_native_errors.py``: real Kafka would have to hold and serve 2 GiB.)
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
from kafka_group.errors import DataLossError, FetchError, RecordError
from kafka_group.offsets import OffsetRange, TopicPartition
from kafka_group.read.native_client import NativeConsumer
from kafka_group.read.native_fetch import read_ranges_native
from kafka_group.read.read_path import native_module
from kafka_group.read.reader_pool import ReaderPool
from kafka_group.read.read_settings import ReadSettings
from kafka_group.read.record_schema import arrow_schema
from tests.raw_kafka import leader, produce_raw
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


def _same_error(ranges: List[OffsetRange], settings: ReadSettings, kind: type) -> str:
    """Read ``ranges`` by both paths; both must raise ``kind`` with the same message, which is returned."""
    python, native = _error(ranges, settings, "python"), _error(ranges, settings, "native")
    assert isinstance(python, kind), repr(python)
    assert type(native) is type(python), repr(native)
    assert str(native) == str(python)
    return str(python)


def test_a_timestamp_spark_cannot_hold_fails_both_paths_alike(kafka: Cluster) -> None:
    if kafka.engine != "kafka":
        pytest.skip("needs Apache Kafka (topic configs)")
    # Kafka takes any time its topic allows: this one lets records be far in the future.
    topic = create_topic(kafka, 1, "parity-time", config={"message.timestamp.after.max.ms": str(2 ** 63 - 1)})
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    far = 10 ** 16  # ms: its microseconds overflow Spark's 64-bit timestamp (|ms| <= 9.2e15)
    for i in range(5):
        producer.produce(topic, partition=0, value=b"%d" % i, timestamp=far if i == 3 else int(time.time() * 1000))
    assert producer.flush(30) == 0
    message = _same_error([OffsetRange(TopicPartition(topic, 0), 0, 5)], _settings(kafka.bootstrap_servers),
                          RecordError)
    assert f"{topic}-0 at offset 3 has timestamp {far} ms (type 0)" in message and "startingOffsets" in message
    # The records before it are readable on both paths alike.
    python, native = _both([OffsetRange(TopicPartition(topic, 0), 0, 3)], _settings(kafka.bootstrap_servers))
    assert _rows(native) == _rows(python) and len(_rows(native)) == 3


def test_a_header_key_that_is_not_utf8_fails_both_paths_alike(kafka: Cluster) -> None:
    topic = create_topic(kafka, 1, "parity-header")
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    producer.produce(topic, partition=0, value=b"fine", headers=[("h", b"v")])
    assert producer.flush(30) == 0
    # No client library writes such a key (they take keys as text): a raw Produce request does.
    produce_raw(leader(kafka.bootstrap_servers, topic, 0), topic, 0, b"bad", [(b"ok", b"1"), (b"k\xff", b"v")],
                int(time.time() * 1000))
    ranges = [OffsetRange(TopicPartition(topic, 0), 0, 2)]
    message = _same_error(ranges, _settings(kafka.bootstrap_servers), RecordError)
    assert f"{topic}-0 at offset 1 has a header key that is not UTF-8" in message and "'includeHeaders'" in message
    # Without headers, the fix the message names, both read it.
    without = ReadSettings(client_config=_settings(kafka.bootstrap_servers).client_config, include_headers=False,
                           fail_on_data_loss=True, poll_timeout_ms=30_000, max_records_per_batch=10_000)
    python, native = _both(ranges, without)
    assert _rows(native) == _rows(python) and [r["value"] for r in _rows(native)] == [b"fine", b"bad"]


def test_a_plan_past_what_an_open_transaction_holds_back_fails_both_paths_alike(kafka: Cluster) -> None:
    """Under read_committed the partition ends, for a reader, at its last stable offset: a plan past it (a
    transaction still open) meets that end on both paths, which fail alike (as data loss today)."""
    if kafka.engine != "kafka":
        pytest.skip("needs Apache Kafka: transactions")
    topic = create_topic(kafka, 1, "parity-open")
    plain = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    plain.produce(topic, partition=0, value=b"committed")
    assert plain.flush(30) == 0
    open_txn = Producer({"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": unique_name("open")})
    open_txn.init_transactions(60)
    open_txn.begin_transaction()
    try:
        for i in range(2):
            open_txn.produce(topic, partition=0, value=b"open %d" % i)
        assert open_txn.flush(30) == 0
        ranges = [OffsetRange(TopicPartition(topic, 0), 0, 3)]  # offsets 1 and 2 wait for the commit
        python, native = _error(ranges, _settings(kafka.bootstrap_servers), "python"), \
            _error(ranges, _settings(kafka.bootstrap_servers), "native")
        assert python is not None and type(native) is type(python) and str(native) == str(python), (python, native)
        # Under read_uncommitted both read them.
        rows = _both(ranges, _settings(kafka.bootstrap_servers, isolation="read_uncommitted"))
        assert [r["value"] for r in _rows(rows[1])] == [r["value"] for r in _rows(rows[0])] == \
            [b"committed", b"open 0", b"open 1"]
    finally:
        open_txn.abort_transaction(60)


def test_planned_records_that_never_arrive_stall_both_paths_alike() -> None:
    """No broker answers (a closed port): both paths wait ``kafkaConsumer.pollTimeoutMs`` for the planned
    records, then fail with the same FetchError naming the brokers and the option."""
    import socket

    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        servers = f"127.0.0.1:{probe.getsockname()[1]}"
    config = reader_config({"bootstrap.servers": servers, "client.id": unique_name("nobody")}, None)
    settings = ReadSettings(client_config=config, include_headers=True, fail_on_data_loss=True,
                            poll_timeout_ms=3_000, max_records_per_batch=10_000)
    message = _same_error([OffsetRange(TopicPartition("nowhere", 0), 0, 3)], settings, FetchError)
    assert "for 3000 ms" in message and servers in message and "pollTimeoutMs" in message


def test_the_compiled_paths_pool_reuses_a_client_across_tasks_and_closes_a_failed_one(kafka: Cluster) -> None:
    """Tasks of one executor take turns on its pooled clients: a parked client keeps librdkafka's state
    (assignment, prefetched records, the last task's header setting) that the next task must not see."""
    native = native_module()
    assert native is not None
    first, second = create_topic(kafka, 2, "pool-a"), create_topic(kafka, 1, "pool-b")
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for i in range(60):
        producer.produce(first, partition=i % 2, key=b"%d" % i, value=b"a%d" % i, headers=[("n", b"%d" % i)])
        producer.produce(second, partition=0, value=b"b%d" % i)
    assert producer.flush(30) == 0
    produce_raw(leader(kafka.bootstrap_servers, second, 0), second, 0, b"bad", [(b"\xfe", b"")], int(time.time() * 1000))
    pool = ReaderPool(lambda config: NativeConsumer(native, config))
    settings = _settings(kafka.bootstrap_servers)
    no_headers = ReadSettings(client_config=settings.client_config, include_headers=False, fail_on_data_loss=True,
                              poll_timeout_ms=30_000, max_records_per_batch=7)
    tasks = [
        ([OffsetRange(TopicPartition(first, 0), 0, 10)], settings),  # stops early in a partition it fetched ahead
        ([OffsetRange(TopicPartition(first, 0), 10, 30), OffsetRange(TopicPartition(second, 0), 5, 25)], no_headers),
        ([OffsetRange(TopicPartition(first, 1), 0, 30), OffsetRange(TopicPartition(first, 0), 0, 5)], settings),
    ]
    try:
        for number, (ranges, task_settings) in enumerate(tasks):
            native_batches = list(read_ranges_native(ranges, task_settings, native, pool=pool))
            python_batches = list(read_planned(ranges, task_settings, "python"))
            assert _rows(native_batches) == _rows(python_batches), f"task {number}"
            assert all(b.schema == arrow_schema(task_settings.include_headers) for b in native_batches)
            assert len(_rows(native_batches)) == sum(r.until_offset - r.from_offset for r in ranges)
            stats = pool.stats()
            assert (stats.created, stats.reused, stats.in_use, stats.idle) == (1, number, 0, 1), stats
        # A task that fails closes its client; the next task gets a new one and reads right.
        with pytest.raises(RecordError, match="not UTF-8"):
            list(read_ranges_native([OffsetRange(TopicPartition(second, 0), 55, 61)], settings, native, pool=pool))
        stats = pool.stats()
        assert (stats.created, stats.reused, stats.closed, stats.idle) == (1, 3, 1, 0), stats
        ranges = [OffsetRange(TopicPartition(second, 0), 0, 60)]
        assert _rows(list(read_ranges_native(ranges, settings, native, pool=pool))) == \
            _rows(list(read_planned(ranges, settings, "python")))
        assert pool.stats().created == 2
    finally:
        pool.close_all()
