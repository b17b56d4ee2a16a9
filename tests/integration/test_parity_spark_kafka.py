"""Parity with Spark's own Kafka source: the same topics read with ``format("kafka")`` and ``format("kafka-group")``.

Spark's source (spark-sql-kafka-0-10, jars fetched by Maven, on the ``spark``
fixture's classpath) is the reference. Each test reads one topic with both
formats as a ``Trigger.AvailableNow`` stream into a ``foreachBatch`` collector
and compares schemas, rows (every column, headers included) and, for the
shared options, batch counts, rows per batch and input partitions.

Where the connector deliberately differs, a test here pins the difference and
docs/differences.md says so.
"""

from __future__ import annotations

import pathlib
import datetime
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

import pytest
from confluent_kafka import Producer, TopicPartition
from pyspark.sql import SparkSession

from tests.support import (
    BROKER_ENGINE,
    Cluster,
    MakeTopic,
    apache,
    create_topic,
    group_committed,
    group_stream,
    new_consumer,
    produce,
    unique_name,
    wait_for,
)

pytestmark = [
    pytest.mark.integration,
    # Topic configs (LogAppendTime, compaction), DeleteRecords and aborted-record filtering are
    # Apache Kafka's; the mock cluster has none of them (docs/brokers.md).
    pytest.mark.skipif(BROKER_ENGINE != "kafka", reason="parity with format('kafka') needs Apache Kafka"),
]

#: Bound on one AvailableNow run (a bound for a loaded 2-core machine, never asserted as a duration).
RUN_TIMEOUT_S = 600

Record = Tuple[Any, ...]


# -- helpers ------------------------------------------------------------------------------------


def spark_stream(spark: SparkSession, servers: str, topic: str, **options: Any) -> Any:
    """A ``format("kafka")`` stream reader (not loaded) subscribed to ``topic`` from the earliest offsets."""
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader


def _record(row: Any) -> Record:
    """A collected row as a plain tuple: binary as bytes, headers as a tuple of (key, value) pairs."""
    out: List[Any] = []
    for name, value in zip(row.__fields__, row):
        if name == "headers":
            value = None if value is None else tuple(
                (h["key"], None if h["value"] is None else bytes(h["value"])) for h in value
            )
        elif isinstance(value, (bytearray, memoryview)):
            value = bytes(value)
        out.append(value)
    return tuple(out)


@dataclass
class Run:
    """What one AvailableNow run delivered, per batch id."""

    columns: List[str] = field(default_factory=list)
    batches: Dict[int, List[Record]] = field(default_factory=dict)
    partitions: Dict[int, int] = field(default_factory=dict)

    @property
    def rows(self) -> List[Record]:
        """Every delivered row, sorted."""
        return sorted((r for rows in self.batches.values() for r in rows), key=repr)

    @property
    def sizes(self) -> List[int]:
        """Rows per non-empty batch, in batch order."""
        return [len(self.batches[b]) for b in sorted(self.batches) if self.batches[b]]

    @property
    def input_partitions(self) -> List[int]:
        """Spark input partitions of each non-empty batch, in batch order."""
        return [self.partitions[b] for b in sorted(self.batches) if self.batches[b]]


def run_available_now(reader: Any, *, checkpoint: Optional[str] = None, count_partitions: bool = False) -> Run:
    """Load ``reader`` and run it with ``Trigger.AvailableNow`` into a collector; the query is always stopped.

    Raises whatever the query failed with (``StreamingQueryException``).
    """
    df = reader.load()
    run = Run(columns=list(df.columns))

    def land(batch: Any, batch_id: int) -> None:
        # A batch Spark replays replaces its first delivery.
        run.batches[batch_id] = [_record(r) for r in batch.collect()]
        if count_partitions:
            run.partitions[batch_id] = batch.rdd.getNumPartitions()

    writer = df.writeStream.foreachBatch(land).trigger(availableNow=True)
    if checkpoint is not None:
        writer = writer.option("checkpointLocation", checkpoint)
    query = writer.start()
    try:
        finished = query.awaitTermination(RUN_TIMEOUT_S)
        assert finished, f"the AvailableNow run of {reader} did not end within {RUN_TIMEOUT_S} s"
    finally:
        query.stop()
    return run


def read_both(
    spark: SparkSession, kafka: Cluster, topic: str, *, checkpoints: Optional[Tuple[str, str]] = None,
    count_partitions: bool = False, group: Optional[str] = None, dotted: Optional[Mapping[str, str]] = None,
    **options: Any,
) -> Tuple[Run, Run]:
    """``topic`` read by Spark's source and by kafka-group with the same ``options`` and ``dotted`` options
    (names such as ``kafka.isolation.level`` that are no Python keywords): (spark, group)."""
    options = {**options, **(dotted or {})}
    reference = run_available_now(
        spark_stream(spark, kafka.bootstrap_servers, topic, **options),
        checkpoint=checkpoints[0] if checkpoints else None, count_partitions=count_partitions,
    )
    ours = run_available_now(
        group_stream(spark, kafka.bootstrap_servers, topic, group or unique_name("parity"), **options),
        checkpoint=checkpoints[1] if checkpoints else None, count_partitions=count_partitions,
    )
    return reference, ours


def assert_same_rows(reference: Run, ours: Run) -> None:
    """Same columns and the same multiset of rows; on a difference, show the rows only one side has."""
    assert ours.columns == reference.columns
    ref_rows, our_rows = reference.rows, ours.rows
    if ref_rows != our_rows:
        only_ref = [r for r in ref_rows if r not in our_rows][:10]
        only_ours = [r for r in our_rows if r not in ref_rows][:10]
        pytest.fail(
            f"rows differ: format('kafka') {len(ref_rows)} rows, format('kafka-group') {len(our_rows)} rows\n"
            f"only in kafka: {only_ref}\nonly in kafka-group: {only_ours}"
        )


def partition_offsets(servers: str, topic: str, partition: int, isolation: str = "read_uncommitted") -> List[int]:
    """Every offset a plain consumer reads from ``topic[partition]``, earliest to the end."""
    consumer = new_consumer(servers, {"enable.auto.commit": False, "isolation.level": isolation,
                                      "enable.partition.eof": True})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
        if low >= high:
            return []
        consumer.assign([TopicPartition(topic, partition, low)])
        offsets: List[int] = []
        while True:
            message = consumer.poll(120)
            assert message is not None, f"no record from {topic}[{partition}] within 120 s"
            error = message.error()
            if error:
                if error.code() == -191:  # _PARTITION_EOF
                    return offsets
                raise AssertionError(f"reading {topic}[{partition}]: {error}")
            offset = message.offset()
            assert offset is not None, message
            offsets.append(offset)
    finally:
        consumer.close()


# -- schema -------------------------------------------------------------------------------------


@pytest.mark.parametrize("include_headers", ["true", "false"])
def test_schema_is_identical(spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, include_headers: str) -> None:
    topic = make_topic(1)
    reference = spark_stream(spark, kafka.bootstrap_servers, topic, includeHeaders=include_headers).load().schema
    ours = group_stream(spark, kafka.bootstrap_servers, topic, unique_name("parity"),
                        includeHeaders=include_headers).load().schema
    print(f"includeHeaders={include_headers}: {ours.simpleString()}")
    assert ours == reference
    assert ours.jsonValue() == reference.jsonValue()  # nullability and metadata too


# -- rows ---------------------------------------------------------------------------------------


def test_rows_null_keys_values_headers_and_create_time(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic
) -> None:
    """Null keys and values, headers (null values, repeated keys, none) and producer-set CreateTime timestamps."""
    topic = make_topic(2)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 5})
    # An hour ago, at an odd millisecond: not the broker's clock, and within the topic's retention
    # (records older than retention.ms are deleted at once, the active segment too).
    base_ms = (int(time.time()) - 3600) * 1000 + 123
    cases: List[Tuple[Optional[bytes], Optional[bytes], List[Tuple[str, Optional[bytes]]]]] = [
        (None, b"value, no key", []),
        (b"key, no value", None, []),
        (None, None, []),
        (b"", b"", []),
        (b"k", b"v", [("h1", b"a"), ("h2", None), ("h1", b"b"), ("empty", b"")]),
        (None, b"\x00\xff binary", [("only-null", None)]),
    ]
    for partition in (0, 1):
        for i, (key, value, headers) in enumerate(cases * 3):
            producer.produce(topic, key=key, value=value, partition=partition, headers=list(headers),
                             timestamp=base_ms + 1000 * i + partition)
    assert producer.flush(30) == 0
    reference, ours = read_both(spark, kafka, topic, includeHeaders="true")
    print(f"{len(ours.rows)} rows; first: {ours.rows[0]}")
    assert len(reference.rows) == 2 * 3 * len(cases)
    assert_same_rows(reference, ours)
    stamps = sorted({r[ours.columns.index("timestamp")] for r in ours.rows})
    assert stamps[0] == datetime.datetime.fromtimestamp(base_ms / 1000)  # session time zone = local
    assert {r[ours.columns.index("timestampType")] for r in ours.rows} == {0}


def test_rows_log_append_time(spark: SparkSession, kafka: Cluster) -> None:
    topic = create_topic(apache(kafka), 2, "logappend", config={"message.timestamp.type": "LogAppendTime"})
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 5})
    for i in range(20):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2,
                         timestamp=1_000_000_000_000)  # the broker replaces it
    assert producer.flush(30) == 0
    reference, ours = read_both(spark, kafka, topic)
    assert_same_rows(reference, ours)
    assert {r[ours.columns.index("timestampType")] for r in ours.rows} == {1}
    assert min(r[ours.columns.index("timestamp")] for r in ours.rows).year >= 2026
    print(f"{len(ours.rows)} rows, timestampType 1, first {ours.rows[0]}")


def test_rows_compacted_topic_with_offset_gaps(spark: SparkSession, kafka: Cluster) -> None:
    topic = create_topic(apache(kafka), 1, "compacted", config={
        "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
    })
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 0})
    written = [0]

    def write_and_check_gaps() -> bool:
        # Each write rolls the previous segment (older than segment.ms), so the cleaner has work.
        for key in (b"hot", b"hot", f"cold-{written[0]}".encode(), b"hot"):
            producer.produce(topic, key=key, value=f"v{written[0]}".encode(), partition=0)
            written[0] += 1
        if written[0] % 20 == 0:
            producer.produce(topic, key=b"tomb", value=None, partition=0)  # a tombstone (kept 24 h)
            written[0] += 1
        assert producer.flush(30) == 0
        offsets = partition_offsets(kafka.bootstrap_servers, topic, 0)
        return len(offsets) + 10 <= offsets[-1] + 1  # at least 10 offsets compacted away

    wait_for(write_and_check_gaps, "the log cleaner to compact away offsets", timeout_s=300)
    # Freeze the log: no more cleaning (and nothing deleted), then wait until a pass in progress is done.
    apache(kafka).alter_topic_config(topic, {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"})
    seen: List[List[int]] = [[]]

    def stable() -> bool:
        now = partition_offsets(kafka.bootstrap_servers, topic, 0)
        same, seen[0] = now == seen[0], now
        return same

    wait_for(stable, "the compacted log to stop changing", timeout_s=120)
    offsets = seen[0]
    reference, ours = read_both(spark, kafka, topic)
    assert_same_rows(reference, ours)
    assert sorted(r[ours.columns.index("offset")] for r in ours.rows) == offsets  # the gaps a consumer sees
    print(f"{written[0]} written, {len(offsets)} left after compaction, last offset {offsets[-1]}")


def _transactional_topic(kafka: Cluster, partitions: int = 2) -> Tuple[str, List[bytes], List[bytes]]:
    """A topic with committed and aborted transactions interleaved; returns (topic, committed, aborted)."""
    topic = unique_name("txn")
    kafka.create_topic(topic, partitions)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": unique_name("txn-id")})
    producer.init_transactions(60)
    committed: List[bytes] = []
    aborted: List[bytes] = []
    for t in range(6):
        producer.begin_transaction()
        values = [f"t{t}-{i}".encode() for i in range(5)]
        for i, value in enumerate(values):
            producer.produce(topic, key=f"k{i}".encode(), value=value, partition=i % partitions)
        producer.flush(30)
        if t % 2 == 0:
            producer.commit_transaction(60)
            committed.extend(values)
        else:
            producer.abort_transaction(60)
            aborted.extend(values)
    # One more, non-transactional producer's records between the transactions' markers and the end.
    produce(kafka.bootstrap_servers, topic, {0: 2})
    return topic, committed, aborted


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_rows_transactions_same_isolation_level(spark: SparkSession, kafka: Cluster, isolation: str) -> None:
    topic, committed, aborted = _transactional_topic(kafka)
    reference, ours = read_both(spark, kafka, topic, dotted={"kafka.isolation.level": isolation})
    assert_same_rows(reference, ours)
    values = {r[ours.columns.index("value")] for r in ours.rows}
    assert set(committed) <= values
    assert bool(set(aborted) & values) == (isolation == "read_uncommitted")
    print(f"{isolation}: {len(ours.rows)} rows, aborted records included: {bool(set(aborted) & values)}")


def test_rows_transaction_open_at_planning_read_committed(
    spark: SparkSession, kafka: Cluster, tmp_path: pathlib.Path
) -> None:
    """An open transaction under read_committed: both stop before it, then read it once it commits."""
    topic = create_topic(kafka, 1, "txn-open")
    done = Producer({"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": unique_name("txn-id")})
    done.init_transactions(60)
    done.begin_transaction()
    for i in range(3):
        done.produce(topic, value=f"committed-{i}".encode(), partition=0)
    done.commit_transaction(60)
    open_txn = Producer({"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": unique_name("txn-id")})
    open_txn.init_transactions(60)
    open_txn.begin_transaction()
    committed = False
    try:
        for i in range(2):
            open_txn.produce(topic, value=f"open-{i}".encode(), partition=0)
        assert open_txn.flush(30) == 0
        produce(kafka.bootstrap_servers, topic, {0: 2})  # after the open transaction: above the stable offset
        checkpoints = (str(tmp_path / "kafka"), str(tmp_path / "group"))
        group = unique_name("parity")
        options = {"kafka.isolation.level": "read_committed"}
        first = read_both(spark, kafka, topic, checkpoints=checkpoints, group=group, dotted=options)
        open_txn.commit_transaction(60)
        committed = True
    finally:
        if not committed:
            open_txn.abort_transaction(30)  # leave no transaction open behind a failed test
    second = read_both(spark, kafka, topic, checkpoints=checkpoints, group=group, dotted=options)
    value = first[0].columns.index("value")
    print(f"while open: kafka {[r[value] for r in first[0].rows]}, kafka-group {[r[value] for r in first[1].rows]}; "
          f"after the commit: {len(second[0].rows)} and {len(second[1].rows)} more")
    assert_same_rows(*first)
    assert_same_rows(*second)
    assert sorted(r[value] for r in first[1].rows) == [b"committed-0", b"committed-1", b"committed-2"]
    assert sorted(r[value] for r in second[1].rows) == sorted([b"open-0", b"open-1"] + [
        f'{{"n":{i},"p":0}}'.encode() for i in range(2)])


def test_rows_transactions_default_isolation_level_differs_deliberately(spark: SparkSession, kafka: Cluster) -> None:
    """A deliberate difference (docs/differences.md): with no
    isolation level set, Spark's source reads uncommitted (aborted records land) and
    kafka-group reads committed (they never do); every committed record is in both."""
    topic, committed, aborted = _transactional_topic(kafka)
    reference, ours = read_both(spark, kafka, topic)
    ref_values = {r[reference.columns.index("value")] for r in reference.rows}
    our_values = {r[ours.columns.index("value")] for r in ours.rows}
    print(f"default level: kafka {len(reference.rows)} rows (aborted: {bool(set(aborted) & ref_values)}), "
          f"kafka-group {len(ours.rows)} rows (aborted: {bool(set(aborted) & our_values)})")
    assert set(aborted) <= ref_values and not set(aborted) & our_values
    assert set(committed) <= our_values and our_values == ref_values - set(aborted)


# -- shared options -----------------------------------------------------------------------------


def test_starting_offsets_json(spark: SparkSession, kafka: Cluster, make_topic: MakeTopic) -> None:
    topic = make_topic(3)
    produce(kafka.bootstrap_servers, topic, {0: 10, 1: 10, 2: 10})
    starting = f'{{"{topic}":{{"0":5,"1":-2,"2":-1}}}}'
    reference, ours = read_both(spark, kafka, topic, startingOffsets=starting)
    assert_same_rows(reference, ours)
    offsets = sorted((r[ours.columns.index("partition")], r[ours.columns.index("offset")]) for r in ours.rows)
    assert offsets == [(0, o) for o in range(5, 10)] + [(1, o) for o in range(10)]
    print(f"startingOffsets {starting}: {len(ours.rows)} rows in both")


def test_default_starting_offsets_is_latest_in_both(spark: SparkSession, kafka: Cluster, make_topic: MakeTopic) -> None:
    topic = make_topic(1)
    produce(kafka.bootstrap_servers, topic, {0: 5})
    reference = run_available_now(spark.readStream.format("kafka")
                                  .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
                                  .option("subscribe", topic))
    ours = run_available_now(spark.readStream.format("kafka-group")
                             .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
                             .option("subscribe", topic).option("kafka.group.id", unique_name("parity")))
    assert reference.rows == ours.rows == []


def test_max_offsets_per_trigger_even_backlog(spark: SparkSession, kafka: Cluster, make_topic: MakeTopic) -> None:
    topic = make_topic(2)
    produce(kafka.bootstrap_servers, topic, {0: 25, 1: 25})
    reference, ours = read_both(spark, kafka, topic, maxOffsetsPerTrigger="20")
    print(f"rows per batch: kafka {reference.sizes}, kafka-group {ours.sizes}")
    assert_same_rows(reference, ours)
    assert ours.sizes == reference.sizes == [20, 20, 10]


def test_max_offsets_per_trigger_skewed_backlog(spark: SparkSession, kafka: Cluster, make_topic: MakeTopic) -> None:
    """Difference (pinned): Spark shares the budget by backlog; kafka-group's default ``fair`` shares it equally.

    ``flow.budgetSharing=proportional`` gives Spark's batches.
    """
    topic = make_topic(2)
    produce(kafka.bootstrap_servers, topic, {0: 40, 1: 8})
    reference = run_available_now(spark_stream(spark, kafka.bootstrap_servers, topic, maxOffsetsPerTrigger="12"))
    fair = run_available_now(group_stream(spark, kafka.bootstrap_servers, topic, unique_name("parity"),
                                          maxOffsetsPerTrigger="12"))
    proportional = run_available_now(group_stream(spark, kafka.bootstrap_servers, topic, unique_name("parity"),
                                                  maxOffsetsPerTrigger="12",
                                                  **{"flow.budgetSharing": "proportional"}))

    def per_partition(run: Run) -> List[Tuple[int, ...]]:
        p = run.columns.index("partition")
        return [(sum(r[p] == 0 for r in run.batches[b]), sum(r[p] == 1 for r in run.batches[b]))
                for b in sorted(run.batches) if run.batches[b]]

    print(f"(p0, p1) per batch: kafka {per_partition(reference)}, kafka-group fair {per_partition(fair)}, "
          f"proportional {per_partition(proportional)}")
    assert_same_rows(reference, fair)
    assert_same_rows(reference, proportional)
    assert per_partition(proportional) == per_partition(reference)
    assert per_partition(fair) != per_partition(reference)
    assert per_partition(fair)[0] == (6, 6)  # an equal share for each partition with a backlog


def test_min_partitions(spark: SparkSession, kafka: Cluster, make_topic: MakeTopic) -> None:
    """Both split a batch into at least ``minPartitions`` tasks; the counts differ when Spark rounds up.

    Difference (pinned): Spark gives each Kafka partition ``round(size / total * minPartitions)``
    pieces (two equal partitions and ``minPartitions=5``: 3 + 3 = 6 tasks); kafka-group cuts the
    batch into exactly ``minPartitions`` pieces of about equal size (5).
    """
    topic = make_topic(2)
    produce(kafka.bootstrap_servers, topic, {0: 100, 1: 100})
    counts = {}
    for min_partitions in ("4", "5"):
        reference, ours = read_both(spark, kafka, topic, count_partitions=True, minPartitions=min_partitions)
        assert_same_rows(reference, ours)
        assert len(ours.rows) == 200
        counts[min_partitions] = (reference.input_partitions, ours.input_partitions)
    print(f"input partitions per batch (kafka, kafka-group) by minPartitions: {counts}")
    assert counts["4"] == ([4], [4])
    assert counts["5"] == ([6], [5])


@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_fail_on_data_loss(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path, fail_on_data_loss: str
) -> None:
    """Records deleted below the checkpointed position while the query is stopped."""
    from pyspark.errors import StreamingQueryException

    topic = make_topic(1)
    produce(kafka.bootstrap_servers, topic, {0: 20})
    checkpoints = (str(tmp_path / "kafka"), str(tmp_path / "group"))
    group = unique_name("parity")
    first = read_both(spark, kafka, topic, checkpoints=checkpoints, group=group, failOnDataLoss=fail_on_data_loss)
    assert [len(r.rows) for r in first] == [20, 20]
    produce(kafka.bootstrap_servers, topic, {0: 20}, start=20)
    kafka.delete_records(topic, 0, 30)  # offsets 20..29 were never read
    results: Dict[str, Any] = {}
    for name in ("kafka", "kafka-group"):
        try:
            if name == "kafka":
                results[name] = run_available_now(
                    spark_stream(spark, kafka.bootstrap_servers, topic, failOnDataLoss=fail_on_data_loss),
                    checkpoint=checkpoints[0])
            else:
                results[name] = run_available_now(
                    group_stream(spark, kafka.bootstrap_servers, topic, group, failOnDataLoss=fail_on_data_loss),
                    checkpoint=checkpoints[1])
        except StreamingQueryException as exc:
            results[name] = exc
    print({k: (v.rows and [r[4] for r in v.rows][:3]) if isinstance(v, Run) else str(v).splitlines()[0][:300]
           for k, v in results.items()})
    if fail_on_data_loss == "true":
        assert isinstance(results["kafka"], StreamingQueryException)
        assert isinstance(results["kafka-group"], StreamingQueryException)
        # Difference (pinned): Spark finds the loss when a task reads the batch; kafka-group when it plans it.
        assert "FOREACH_BATCH_USER_FUNCTION_ERROR" in str(results["kafka"])  # a task of the batch failed
        assert "Some data may have been lost" in str(results["kafka"])
        assert "latestOffset" in str(results["kafka-group"])
        assert f"data loss in {topic}-0: offsets [20, 30)" in str(results["kafka-group"])
    else:
        assert isinstance(results["kafka"], Run) and isinstance(results["kafka-group"], Run)
        assert_same_rows(results["kafka"], results["kafka-group"])
        assert sorted(r[results["kafka"].columns.index("offset")] for r in results["kafka"].rows) == list(range(30, 40))


# -- deliberate differences ---------------------------------------------------------------------


def test_difference_group_id_required(spark: SparkSession, kafka: Cluster, make_topic: MakeTopic) -> None:
    """Spark's source makes up a group per query; kafka-group joins the group you name, so it needs one."""
    topic = make_topic(1)
    (spark.readStream.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
     .option("subscribe", topic).load())  # no error
    with pytest.raises(Exception, match="(?i)group.id"):
        (spark.readStream.format("kafka-group").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
         .option("subscribe", topic).load())


def _timed_topic(kafka: Cluster, make_topic: MakeTopic) -> Tuple[str, int]:
    """A topic of 2 partitions whose record ``i`` of each has the CreateTime ``base + 1000 * i`` (10 records
    in partition 0, 6 in partition 1); returns the topic and ``base``."""
    topic = make_topic(2)
    base = (int(time.time()) - 3600) * 1000
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for partition, count in ((0, 10), (1, 6)):
        for i in range(count):
            producer.produce(topic, value=f"{partition}-{i}".encode(), partition=partition, timestamp=base + 1000 * i)
    assert producer.flush(30) == 0
    return topic, base


def _offsets(run: Run) -> List[Tuple[int, int]]:
    return sorted((r[run.columns.index("partition")], r[run.columns.index("offset")]) for r in run.rows)


def test_starting_timestamp(spark: SparkSession, kafka: Cluster, make_topic: MakeTopic) -> None:
    """Every partition starts at its first record at or after the time (between records 3 and 4 here)."""
    topic, base = _timed_topic(kafka, make_topic)
    reference, ours = read_both(spark, kafka, topic, startingTimestamp=str(base + 3500))
    assert_same_rows(reference, ours)
    assert _offsets(ours) == [(0, o) for o in range(4, 10)] + [(1, 4), (1, 5)]


def test_starting_offsets_by_timestamp(spark: SparkSession, kafka: Cluster, make_topic: MakeTopic) -> None:
    """A time per partition (Spark needs every partition named); an exact record time starts at that record."""
    topic, base = _timed_topic(kafka, make_topic)
    spec = f'{{"{topic}":{{"0":{base + 8000},"1":{base + 2000}}}}}'
    reference, ours = read_both(spark, kafka, topic, startingOffsetsByTimestamp=spec)
    assert_same_rows(reference, ours)
    assert _offsets(ours) == [(0, 8), (0, 9)] + [(1, o) for o in range(2, 6)]


def test_starting_timestamp_after_every_record(spark: SparkSession, kafka: Cluster, make_topic: MakeTopic) -> None:
    """No record that recent: strategy ``error`` (the default) fails both queries naming the time, ``latest``
    starts both at the end."""
    from pyspark.errors import StreamingQueryException

    topic, base = _timed_topic(kafka, make_topic)
    later = str(base + 60_000)
    for fmt, reader in (("kafka", spark_stream(spark, kafka.bootstrap_servers, topic, startingTimestamp=later)),
                        ("kafka-group", group_stream(spark, kafka.bootstrap_servers, topic, unique_name("parity"),
                                                     startingTimestamp=later))):
        with pytest.raises(StreamingQueryException) as failure:
            run_available_now(reader)
        print(f"{fmt}: {str(failure.value).splitlines()[0][:300]}")
        if fmt == "kafka-group":
            assert "no record of" in str(failure.value) and "startingOffsetsByTimestampStrategy=latest" in str(
                failure.value)
    reference, ours = read_both(spark, kafka, topic, startingTimestamp=later,
                                startingOffsetsByTimestampStrategy="latest")
    assert reference.rows == ours.rows == []


def test_difference_starting_offsets_json_missing_partition(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic
) -> None:
    """Spark refuses a ``startingOffsets`` JSON that leaves out a partition; kafka-group starts it at earliest."""
    from pyspark.errors import StreamingQueryException

    topic = make_topic(2)
    produce(kafka.bootstrap_servers, topic, {0: 10, 1: 4})
    starting = f'{{"{topic}":{{"0":7}}}}'
    error: Optional[BaseException] = None
    try:
        reference = run_available_now(spark_stream(spark, kafka.bootstrap_servers, topic, startingOffsets=starting))
    except StreamingQueryException as exc:
        error = exc
    ours = run_available_now(group_stream(spark, kafka.bootstrap_servers, topic, unique_name("parity"),
                                          startingOffsets=starting))
    offsets = sorted((r[ours.columns.index("partition")], r[ours.columns.index("offset")]) for r in ours.rows)
    print(f"kafka: {str(error).splitlines()[0][:300] if error else reference.rows}; kafka-group: {offsets}")
    assert error is not None and "specify all TopicPartitions" in str(error)
    assert offsets == [(0, 7), (0, 8), (0, 9)] + [(1, o) for o in range(4)]


# -- batch reads (spark.read) ---------------------------------------------------------------------------------


def read_batch(spark: SparkSession, fmt: str, servers: str, topic: str, **options: str) -> Run:
    """``spark.read.format(fmt)`` of ``topic`` with ``options``, collected."""
    reader = spark.read.format(fmt).option("kafka.bootstrap.servers", servers).option("subscribe", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    df = reader.load()
    return Run(columns=list(df.columns), batches={0: [_record(r) for r in df.collect()]},
               partitions={0: df.rdd.getNumPartitions()})


def test_batch_read_defaults_and_headers(spark: SparkSession, kafka: Cluster, make_topic: MakeTopic) -> None:
    """Earliest to latest of every partition, the same schema and rows; no group is joined or committed."""
    topic = make_topic(3)
    produce(kafka.bootstrap_servers, topic, {0: 40, 1: 7, 2: 0}, headers=[("h", b"1"), ("n", None)])
    group = unique_name("batch")
    reference = read_batch(spark, "kafka", kafka.bootstrap_servers, topic, includeHeaders="true")
    ours = read_batch(spark, "kafka-group", kafka.bootstrap_servers, topic, includeHeaders="true",
                      endingOffsets="latest", **{"kafka.group.id": group})
    assert_same_rows(reference, ours)
    assert len(ours.rows) == 47
    assert group_committed(kafka.bootstrap_servers, group, topic, 3) == {0: None, 1: None, 2: None}


def test_batch_read_json_and_timestamp_ends(spark: SparkSession, kafka: Cluster, make_topic: MakeTopic) -> None:
    """Explicit offsets at both ends, then times at both ends (Spark needs every partition named)."""
    topic, base = _timed_topic(kafka, make_topic)
    servers = kafka.bootstrap_servers
    by_offsets = {"startingOffsets": f'{{"{topic}":{{"0":2,"1":1}}}}',
                  "endingOffsets": f'{{"{topic}":{{"0":7,"1":-1}}}}'}
    reference = read_batch(spark, "kafka", servers, topic, **by_offsets)
    ours = read_batch(spark, "kafka-group", servers, topic, **by_offsets)
    assert_same_rows(reference, ours)
    assert _offsets(ours) == [(0, o) for o in range(2, 7)] + [(1, o) for o in range(1, 6)]
    by_time = {"startingOffsetsByTimestamp": f'{{"{topic}":{{"0":{base + 1000},"1":{base + 4500}}}}}',
               "endingOffsetsByTimestamp": f'{{"{topic}":{{"0":{base + 3000},"1":{base + 60_000}}}}}'}
    reference = read_batch(spark, "kafka", servers, topic, **by_time)
    ours = read_batch(spark, "kafka-group", servers, topic, **by_time)
    assert_same_rows(reference, ours)
    assert _offsets(ours) == [(0, 1), (0, 2), (1, 5)]


def test_batch_read_splits_like_the_stream(spark: SparkSession, kafka: Cluster, make_topic: MakeTopic) -> None:
    """``minPartitions`` pieces, as a stream's batch of the same ranges gets."""
    topic = make_topic(2)
    produce(kafka.bootstrap_servers, topic, {0: 30, 1: 30})
    ours = read_batch(spark, "kafka-group", kafka.bootstrap_servers, topic, endingOffsets="latest", minPartitions="5")
    stream = run_available_now(group_stream(spark, kafka.bootstrap_servers, topic, unique_name("parity"),
                                            minPartitions="5"), count_partitions=True)
    assert ours.rows == stream.rows and ours.input_partitions == stream.input_partitions == [5]


def test_batch_read_refuses_stream_options_before_reading(spark: SparkSession, kafka: Cluster,
                                                          make_topic: MakeTopic) -> None:
    topic = make_topic(1)
    with pytest.raises(Exception, match="'offsets.table' is for streams"):
        read_batch(spark, "kafka-group", kafka.bootstrap_servers, topic, endingOffsets="latest",
                   **{"offsets.table": "/tmp/never-written", "kafka.group.id": "g"})
    with pytest.raises(Exception, match="'startingOffsets' cannot be latest"):
        read_batch(spark, "kafka-group", kafka.bootstrap_servers, topic, startingOffsets="latest",
                   endingOffsets="latest")


# -- task layout (issue 26 item 8a) -----------------------------------------------------------


def task_partitions(spark: SparkSession, reader: Any) -> Dict[int, List[Tuple[int, int]]]:
    """One AvailableNow run of ``reader``: per ``spark_partition_id()``, the (Kafka partition, rows) it read."""
    from pyspark.sql.functions import spark_partition_id

    seen: Dict[int, List[Tuple[int, int]]] = {}

    def land(batch: Any, batch_id: int) -> None:
        rows = batch.groupBy(spark_partition_id().alias("task"), "partition").count().collect()
        seen.clear()  # one batch: AvailableNow without a limit
        for row in rows:
            seen.setdefault(row["task"], []).append((row["partition"], row["count"]))

    query = reader.load().writeStream.foreachBatch(land).trigger(availableNow=True).start()
    try:
        assert query.awaitTermination(RUN_TIMEOUT_S), "the AvailableNow run did not end"
    finally:
        query.stop()
    return {task: sorted(parts) for task, parts in sorted(seen.items())}


def test_task_layout_partition_maps_spark_tasks_to_kafka_partitions_as_spark_does(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic
) -> None:
    """``fetch.taskLayout=partition``: one Spark input partition per Kafka partition, as ``format("kafka")``.

    Difference (pinned, the default ``packed``): small batches run as few tasks, each reading
    several Kafka partitions interleaved.
    """
    topic = make_topic(5)
    produce(kafka.bootstrap_servers, topic, {p: 10 + p for p in range(5)})
    reference = task_partitions(spark, spark_stream(spark, kafka.bootstrap_servers, topic))
    ours = task_partitions(spark, group_stream(spark, kafka.bootstrap_servers, topic, unique_name("layout"),
                                               **{"fetch.taskLayout": "partition"}))
    packed = task_partitions(spark, group_stream(spark, kafka.bootstrap_servers, topic, unique_name("layout")))
    print(f"spark_partition_id -> [(Kafka partition, rows)]: kafka {reference}; kafka-group partition {ours}; "
          f"kafka-group packed {packed}")
    for layout in (reference, ours):
        assert all(len(parts) == 1 for parts in layout.values()), layout  # one Kafka partition per task
        assert sorted(p for parts in layout.values() for p in parts) == [(p, 10 + p) for p in range(5)]
    assert len(ours) == len(reference) == 5
    # kafka-group numbers its tasks in topic-partition order; compare with Spark's own numbering.
    assert ours == {i: [(i, 10 + i)] for i in range(5)}
    assert sorted(reference.values()) == sorted(ours.values())
    assert len(packed) < 5 and any(len(parts) > 1 for parts in packed.values())


def test_task_layout_partition_splits_for_min_partitions_as_spark_does(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic
) -> None:
    """With ``fetch.taskLayout=partition``, ``minPartitions=5`` over two equal partitions gives Spark's 3 + 3
    tasks (the packed layout gives exactly 5: ``test_min_partitions``), each of one Kafka partition."""
    topic = make_topic(2)
    produce(kafka.bootstrap_servers, topic, {0: 100, 1: 100})
    reference = task_partitions(spark, spark_stream(spark, kafka.bootstrap_servers, topic, minPartitions="5"))
    ours = task_partitions(spark, group_stream(spark, kafka.bootstrap_servers, topic, unique_name("layout"),
                                               minPartitions="5", **{"fetch.taskLayout": "partition"}))
    print(f"minPartitions=5: kafka {reference}; kafka-group partition {ours}")
    assert sorted(reference.values()) == sorted(ours.values())
    assert all(len(parts) == 1 for parts in ours.values()) and len(ours) == 6


def test_batch_read_of_nothing_is_zero_rows_as_in_spark(spark: SparkSession, kafka: Cluster,
                                                        make_topic: MakeTopic) -> None:
    """Issue 33, finding 6: an empty topic, or ends equal to the starts, is an empty DataFrame (a bare
    ``AssertionError`` before: pyspark hands ``read()`` one ``InputPartition(None)`` for no partitions)."""
    empty = make_topic(2)
    reference = read_batch(spark, "kafka", kafka.bootstrap_servers, empty)
    ours = read_batch(spark, "kafka-group", kafka.bootstrap_servers, empty, endingOffsets="latest")
    assert reference.columns == ours.columns and reference.rows == ours.rows == []
    topic = make_topic(1)
    produce(kafka.bootstrap_servers, topic, {0: 5})
    same = {"startingOffsets": f'{{"{topic}":{{"0":3}}}}', "endingOffsets": f'{{"{topic}":{{"0":3}}}}'}
    assert read_batch(spark, "kafka", kafka.bootstrap_servers, topic, **same).rows == []
    assert read_batch(spark, "kafka-group", kafka.bootstrap_servers, topic, **same).rows == []


def test_batch_read_of_a_missing_topic_fails_as_in_spark_naming_the_topic(spark: SparkSession, kafka: Cluster) -> None:
    """Issue 33, finding 6: Spark's source fails when the read is planned (``UnknownTopicOrPartitionException``
    from its admin client); so does the connector, naming the topic and the option (a bare ``AssertionError``
    before)."""
    missing = unique_name("missing")
    with pytest.raises(Exception, match="UnknownTopicOrPartitionException"):
        read_batch(spark, "kafka", kafka.bootstrap_servers, missing)
    with pytest.raises(Exception, match=rf"option 'subscribe' names topic '{missing}', which does not exist"):
        read_batch(spark, "kafka-group", kafka.bootstrap_servers, missing, endingOffsets="latest")
