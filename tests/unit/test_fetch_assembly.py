"""The executor's read path with one assignment per task: its pure parts, and its loop on a scripted client.

``read_ranges`` assigns every range of a task at once and splits what the client
delivers into runs of one partition; these tests check the grouping of ranges into
assignments, the run splitting, batches of several partitions, and the loop's
demultiplexing (two topics sharing a partition number, records past a range's end,
records of partitions not planned, the batch cap, errors of no partition, the poll
timeout) against a client that delivers scripted ``confluent_kafka.Message`` lists.
The real client and broker are in tests/integration/test_reader_pool.py.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple, Union

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kafka_group.errors import DataLossError, FetchError
from kafka_group.offsets import OffsetRange, TopicPartition
from kafka_group.read import fetch
from kafka_group.read.batch_assembly import MixedBatchBuilder, partition_runs, take_contiguous
from kafka_group.read.passes import read_passes
from kafka_group.read.read_settings import ReadSettings
from kafka_group.read.record_schema import arrow_schema

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def rec(topic: str, partition: int, offset: int, *,
        headers: Optional[List[Tuple[str, Union[str, bytes, None]]]] = None) -> Message:
    return Message(topic=topic, partition=partition, offset=offset, key=b"k%d" % offset,
                   value=b"%s-%d-%d" % (topic.encode(), partition, offset), timestamp=(1, 1000 + offset),
                   headers=headers)


def recs(tp: TopicPartition, start: int, until: int) -> List[Message]:
    return [rec(tp.topic, tp.partition, o) for o in range(start, until)]


def eof(tp: TopicPartition, offset: int) -> Message:
    return Message(topic=tp.topic, partition=tp.partition, offset=offset,
                   error=KafkaError(KafkaError._PARTITION_EOF))


def rows(batches: Sequence[pa.RecordBatch]) -> List[Tuple[str, int, int]]:
    return [(t, p, o) for b in batches for t, p, o in zip(b.column("topic").to_pylist(),
                                                          b.column("partition").to_pylist(),
                                                          b.column("offset").to_pylist())]


# --- grouping a task's ranges into assignments ---------------------------------------------------

def test_adjacent_pieces_of_a_partition_are_read_as_one_range_in_any_order() -> None:
    assert read_passes([OffsetRange(A0, 10, 20), OffsetRange(A1, 0, 5), OffsetRange(A0, 0, 10)]) == [
        [OffsetRange(A0, 0, 20), OffsetRange(A1, 0, 5)]]


def test_pieces_of_a_partition_that_do_not_touch_go_to_later_assignments() -> None:
    passes = read_passes([OffsetRange(A0, 30, 40), OffsetRange(B0, 0, 5), OffsetRange(A0, 0, 10),
                          OffsetRange(A0, 10, 20), OffsetRange(A0, 50, 60)])
    assert passes == [[OffsetRange(A0, 0, 20), OffsetRange(B0, 0, 5)], [OffsetRange(A0, 30, 40)],
                      [OffsetRange(A0, 50, 60)]]


def test_overlapping_pieces_are_each_read_and_empty_ranges_dropped() -> None:
    # The planner never overlaps pieces; if it did, each planned record is still returned per range.
    assert read_passes([OffsetRange(A0, 0, 40), OffsetRange(A0, 15, 25), OffsetRange(A1, 5, 5)]) == [
        [OffsetRange(A0, 0, 40)], [OffsetRange(A0, 15, 25)]]
    assert read_passes([OffsetRange(A0, 3, 3)]) == []


# --- runs of one partition ----------------------------------------------------------------------

def test_runs_follow_the_delivery_order_and_events_of_no_partition_are_their_own_run() -> None:
    transport = Message(error=KafkaError(KafkaError._TRANSPORT))
    delivered = recs(A0, 0, 3) + recs(A1, 0, 2) + [transport] + recs(A0, 3, 4) + recs(B0, 0, 2)
    runs = [(p, [(m.topic(), m.offset()) for m in run]) for p, run in partition_runs(delivered)]
    assert runs == [(0, [("a", 0), ("a", 1), ("a", 2)]), (1, [("a", 0), ("a", 1)]), (None, [(None, None)]),
                    # one partition number, two topics: one run, told apart by the topic check
                    (0, [("a", 3), ("b", 0), ("b", 1)])]


def test_the_fast_path_takes_only_a_run_of_its_topic_continuing_at_the_next_offset() -> None:
    run = recs(A0, 5, 10)
    taken = take_contiguous(run, "a", 0, 5, 8)
    assert taken is not None and taken[1] == [5, 6, 7] and len(taken[0]) == 3
    assert take_contiguous(run, "a", 0, 4, 8) is None  # a gap before it
    mixed = recs(A0, 5, 7) + [rec("b", 0, 7)] + recs(A0, 8, 10)  # a record of another topic inside
    assert take_contiguous(mixed, "a", 0, 5, 10) is None
    assert take_contiguous(run + [eof(A0, 10)], "a", 0, 5, 20) is None


# --- batches of several partitions ---------------------------------------------------------------

def test_a_mixed_batch_has_each_records_topic_partition_and_columns() -> None:
    builder = MixedBatchBuilder(include_headers=True)
    builder.add_run("a", 0, recs(A0, 0, 2))
    builder.add_run("a", 0, recs(A0, 2, 3))  # continues the same run
    builder.add_run("b", 0, [rec("b", 0, 7, headers=[("h", b"v")])], offsets=[7])
    builder.add_run("a", 1, recs(A1, 4, 6))
    builder.add_run("a", 1, [])
    assert len(builder) == 6
    batch = builder.build()
    assert batch.schema == arrow_schema(True)
    assert rows([batch]) == [("a", 0, 0), ("a", 0, 1), ("a", 0, 2), ("b", 0, 7), ("a", 1, 4), ("a", 1, 5)]
    assert batch.column("value").to_pylist()[3] == b"b-0-7"
    assert batch.column("key").to_pylist()[4] == b"k4"
    assert batch.column("headers").to_pylist()[3] == [{"key": "h", "value": b"v"}]
    assert batch.column("timestamp").cast(pa.int64()).to_pylist() == [
        (1000 + o) * 1000 for o in (0, 1, 2, 7, 4, 5)]
    assert set(batch.column("timestampType").to_pylist()) == {0}
    assert len(builder) == 0 and builder.build().num_rows == 0


def test_a_mixed_batch_of_one_topic_and_a_batch_of_one_partition() -> None:
    builder = MixedBatchBuilder(include_headers=False)
    builder.add_run("a", 1, recs(A1, 0, 2))
    builder.add_run("a", 0, recs(A0, 0, 1))
    assert rows([builder.build()]) == [("a", 1, 0), ("a", 1, 1), ("a", 0, 0)]
    single = MixedBatchBuilder(include_headers=False)
    single.add_run("b", 0, recs(B0, 3, 5))
    batch = single.build()
    assert batch.schema == arrow_schema(False) and rows([batch]) == [("b", 0, 3), ("b", 0, 4)]


# --- the read loop on a scripted client ----------------------------------------------------------

class ScriptedClient:
    """Delivers scripted message lists (at most ``num_messages`` at a time) and records calls."""

    def __init__(self, deliveries: List[List[Message]], watermarks: Optional[Dict[Tuple[str, int], Tuple[int, int]]]
                 = None) -> None:
        self.deliveries = deliveries
        self.watermarks = watermarks or {}
        self.calls: List[Tuple[str, List[Tuple[str, int, int]]]] = []
        self.asked: List[int] = []

    def _note(self, name: str, tps: List[KafkaTopicPartition]) -> None:
        self.calls.append((name, [(tp.topic, tp.partition, tp.offset) for tp in tps]))

    def assign(self, tps: List[KafkaTopicPartition]) -> None:
        self._note("assign", tps)

    def incremental_assign(self, tps: List[KafkaTopicPartition]) -> None:
        self._note("incremental_assign", tps)

    def incremental_unassign(self, tps: List[KafkaTopicPartition]) -> None:
        self._note("incremental_unassign", tps)

    def consume(self, num_messages: int, timeout: float) -> List[Message]:
        self.asked.append(num_messages)
        if not self.deliveries:
            return []
        head = self.deliveries.pop(0)
        if len(head) > num_messages:
            self.deliveries.insert(0, head[num_messages:])
        return head[:num_messages]

    def get_watermark_offsets(self, tp: KafkaTopicPartition, timeout: float, cached: bool) -> Tuple[int, int]:
        return self.watermarks[(tp.topic, tp.partition)]


def settings(*, cap: int = 1000, poll_timeout_ms: int = 30_000, fail_on_data_loss: bool = True) -> ReadSettings:
    return ReadSettings(client_config={"bootstrap.servers": "b:9092"}, include_headers=False,
                        fail_on_data_loss=fail_on_data_loss, poll_timeout_ms=poll_timeout_ms,
                        max_records_per_batch=cap)


def read(client: ScriptedClient, ranges: List[OffsetRange], s: ReadSettings) -> List[pa.RecordBatch]:
    return list(fetch._read_passes(client, read_passes(ranges), s))  # type: ignore[arg-type]


def test_one_assignment_reads_interleaved_partitions_and_topics_exactly_once() -> None:
    ranges = [OffsetRange(A0, 0, 5), OffsetRange(A1, 10, 13), OffsetRange(B0, 100, 103)]
    stale = recs(TopicPartition("old", 0), 0, 2) + recs(TopicPartition("a", 7), 0, 2)  # not planned
    client = ScriptedClient([
        stale + recs(A0, 0, 2) + recs(A1, 10, 11),
        # a and b share partition number 0: one run, two topics
        recs(A0, 2, 4) + recs(B0, 100, 102) + recs(A1, 11, 13),
        recs(A1, 13, 20) + recs(B0, 102, 110) + recs(A0, 4, 9),  # past every range's end
    ])
    batches = read(client, ranges, settings())
    got = rows(batches)
    assert sorted(got) == sorted([("a", 0, o) for o in range(0, 5)] + [("a", 1, o) for o in range(10, 13)]
                                 + [("b", 0, o) for o in range(100, 103)])
    assert len(got) == len(set(got))
    assert client.calls[0] == ("assign", [("a", 0, 0), ("a", 1, 10), ("b", 0, 100)])
    # each range's partition stops being fetched once its range is done
    unassigned = [tp[:2] for name, tps in client.calls if name == "incremental_unassign" for tp in tps]
    assert sorted(unassigned) == [("a", 0), ("a", 1), ("b", 0)]


def test_batches_hold_at_most_the_cap_and_a_second_pass_reads_other_pieces() -> None:
    ranges = [OffsetRange(A0, 0, 10), OffsetRange(A0, 20, 25), OffsetRange(A1, 0, 10)]
    client = ScriptedClient([recs(A0, 0, 6) + recs(A1, 0, 10) + recs(A0, 6, 10), recs(A0, 20, 25)])
    batches = read(client, ranges, settings(cap=4))
    assert all(b.num_rows <= 4 for b in batches)
    got = rows(batches)
    assert sorted(got) == sorted([("a", 0, o) for o in list(range(10)) + list(range(20, 25))]
                                 + [("a", 1, o) for o in range(10)])
    assert [c for c in client.calls if c[0] == "assign"] == [
        ("assign", [("a", 0, 0), ("a", 1, 0)]), ("assign", [("a", 0, 20)])]
    assert max(client.asked) <= 4  # never more than fits in the batch


def test_a_range_ended_by_partition_eof_and_a_gap_of_markers() -> None:
    # [0, 6) of a transactional partition: records 0, 2, 4 and their commit markers.
    ranges = [OffsetRange(A0, 0, 6), OffsetRange(A1, 0, 2)]
    client = ScriptedClient([[rec("a", 0, 0), rec("a", 0, 2)] + recs(A1, 0, 2), [rec("a", 0, 4), eof(A0, 6)]],
                            watermarks={("a", 0): (0, 6)})
    assert sorted(rows(read(client, ranges, settings()))) == [("a", 0, 0), ("a", 0, 2), ("a", 0, 4),
                                                              ("a", 1, 0), ("a", 1, 1)]


def test_a_data_loss_skip_repositions_only_its_partition() -> None:
    ranges = [OffsetRange(A0, 0, 10), OffsetRange(A1, 0, 3)]
    out_of_range = Message(topic="a", partition=0, offset=0, error=KafkaError(KafkaError.OFFSET_OUT_OF_RANGE))
    client = ScriptedClient([recs(A1, 0, 1) + [out_of_range], recs(A1, 1, 3) + recs(A0, 6, 10)],
                            watermarks={("a", 0): (6, 10)})
    assert sorted(rows(read(client, ranges, settings(fail_on_data_loss=False)))) == sorted(
        [("a", 0, o) for o in range(6, 10)] + [("a", 1, o) for o in range(3)])
    assert ("incremental_assign", [("a", 0, 6)]) in client.calls
    assert [c for c in client.calls if c[0] == "assign"] == [("assign", [("a", 0, 0), ("a", 1, 0)])]


def test_errors_of_no_partition_warn_when_retriable_and_fail_otherwise(caplog: pytest.LogCaptureFixture) -> None:
    retriable = Message(error=KafkaError(KafkaError._TRANSPORT, retriable=True))
    client = ScriptedClient([[retriable] + recs(A0, 0, 2)])
    assert rows(read(client, [OffsetRange(A0, 0, 2)], settings())) == [("a", 0, 0), ("a", 0, 1)]
    assert "retriable error reading a-0" in caplog.text
    fatal = Message(error=KafkaError(KafkaError._ALL_BROKERS_DOWN))
    with pytest.raises(FetchError, match=r"reading a-0 failed: .*[Bb]roker"):
        read(ScriptedClient([[fatal]]), [OffsetRange(A0, 0, 2)], settings())


def test_an_error_of_a_topic_with_no_partition_is_an_error_of_each_of_its_pending_ranges() -> None:
    # Issue 26 item 5: UNKNOWN_TOPIC_OR_PART is confirmed with the partitions' offsets; they still
    # hold the planned records (a leader move), so nothing is skipped and reading goes on.
    gone = Message(topic="a", error=KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
    ranges = [OffsetRange(A0, 0, 5), OffsetRange(A1, 0, 5), OffsetRange(B0, 0, 2)]
    client = ScriptedClient([recs(A0, 0, 2) + [gone] + recs(B0, 0, 2), recs(A0, 2, 5) + recs(A1, 0, 5)],
                            watermarks={("a", 0): (0, 5), ("a", 1): (0, 5)})
    assert sorted(rows(read(client, ranges, settings(fail_on_data_loss=False)))) == sorted(
        [("a", 0, o) for o in range(5)] + [("a", 1, o) for o in range(5)] + [("b", 0, 0), ("b", 0, 1)])
    assert ("incremental_assign", [("a", 0, 2)]) in client.calls and ("incremental_assign", [("a", 1, 0)]) in client.calls


class UnknownPartitions(ScriptedClient):
    """A client whose cluster answers ListOffsets for the partitions not in ``watermarks`` as unknown."""

    def __init__(self, deliveries: List[List[Message]]) -> None:
        super().__init__(deliveries)
        self.metadata_asked = 0

    def get_watermark_offsets(self, tp: KafkaTopicPartition, timeout: float, cached: bool) -> Tuple[int, int]:
        if (tp.topic, tp.partition) not in self.watermarks:
            raise KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
        return super().get_watermark_offsets(tp, timeout, cached)

    def list_topics(self, topic: str, timeout: float) -> None:
        self.metadata_asked += 1


def test_a_partition_that_stays_unknown_fails_the_task_as_retriable_and_is_never_skipped() -> None:
    for code in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC):
        gone = Message(topic="a", partition=0, offset=2, error=KafkaError(code))
        client = UnknownPartitions([recs(A0, 0, 2) + [gone]])
        with pytest.raises(FetchError, match=r"a-0 of the planned range \[0, 5\) is unknown to the cluster") as e:
            read(client, [OffsetRange(A0, 0, 5)], settings(fail_on_data_loss=False, poll_timeout_ms=500))
        assert e.value.retriable and client.metadata_asked >= 1


def test_an_unknown_partition_at_eof_is_not_read_as_recreated() -> None:
    # The watermarks of an unknown partition were read as (0, 0): "the partition now ends at offset 0".
    client = UnknownPartitions([recs(A0, 0, 2) + [eof(A0, 2)]])
    with pytest.raises(FetchError, match="unknown to the cluster"):
        read(client, [OffsetRange(A0, 0, 5)], settings(fail_on_data_loss=False, poll_timeout_ms=500))


def test_the_poll_timeout_names_every_partition_still_pending() -> None:
    ranges = [OffsetRange(A0, 0, 5), OffsetRange(A1, 0, 2), OffsetRange(B0, 7, 9)]
    client = ScriptedClient([recs(A1, 0, 2) + recs(A0, 0, 1)])
    with pytest.raises(FetchError, match=r"no planned record of 2 partition\(s\) arrived for 0 ms: "
                                         r"a-0 at offset 1 of \[0, 5\), b-0 at offset 7 of \[7, 9\)"):
        read(client, ranges, settings(poll_timeout_ms=0))


def test_records_of_a_planned_partition_with_no_topic_are_not_taken() -> None:
    odd = Message(partition=0, offset=0, value=b"?")  # no topic: never a planned record
    client = ScriptedClient([[odd] + recs(A0, 0, 2)])
    assert rows(read(client, [OffsetRange(A0, 0, 2)], settings())) == [("a", 0, 0), ("a", 0, 1)]


def test_read_range_still_reads_one_range() -> None:
    client = ScriptedClient([recs(B0, 3, 8)])
    batches = list(fetch.read_range(OffsetRange(B0, 3, 6), settings(cap=2), consumer=client))  # type: ignore[arg-type]
    assert [b.num_rows for b in batches] == [2, 1] and rows(batches) == [("b", 0, 3), ("b", 0, 4), ("b", 0, 5)]
