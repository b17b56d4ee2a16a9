"""Bounded batch reads: the options' rules and the ranges between the two ends (on a fake cluster)."""

from __future__ import annotations

from typing import Dict, Tuple

import pytest

from kafka_group.config.option_rules import check_batch_options, check_stream_options
from kafka_group.config.options import parse_source_options
from kafka_group.config.source_options import SourceOptions
from kafka_group.errors import ConfigError, DataLossError, NoOffsetForTimestampError, UnknownTopicOrPartitionError
from kafka_group.offsets import TopicPartition
from kafka_group.plan.batch_read import batch_ranges
from tests.unit.driver_fakes import T0, T1, FakeCluster


def batch_options(**settings: str) -> SourceOptions:
    """Options subscribing to ``t`` unless ``settings`` name another subscription (an empty value drops one)."""
    raw = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t", **settings}
    return parse_source_options({k.lower(): v for k, v in raw.items() if v}, stream=False)


def cluster() -> FakeCluster:
    c = FakeCluster({"t": 2})
    c.produce(T0, 10)
    c.produce(T1, 6)
    c.timestamps = {T0: [100 * i for i in range(10)], T1: [100 * i for i in range(6)]}
    return c


def ranges(opts: SourceOptions, c: FakeCluster) -> Dict[TopicPartition, Tuple[int, int]]:
    return {r.topic_partition: (r.from_offset, r.until_offset)
            for r in batch_ranges(opts, check_batch_options(opts), c)}


def test_defaults_read_everything_from_earliest_to_latest() -> None:
    assert ranges(batch_options(endingOffsets="latest"), cluster()) == {T0: (0, 10), T1: (0, 6)}


def test_json_ends_and_starts_unnamed_partitions_from_earliest_to_latest() -> None:
    opts = batch_options(startingOffsets='{"t":{"0":3}}', endingOffsets='{"t":{"0":7}}')
    assert ranges(opts, cluster()) == {T0: (3, 7), T1: (0, 6)}


def test_times_at_both_ends() -> None:
    opts = batch_options(startingTimestamp="250", endingOffsetsByTimestamp='{"t":{"0":650}}')
    assert ranges(opts, cluster()) == {T0: (3, 7), T1: (3, 6)}


def test_an_end_time_no_record_reaches_ends_at_latest() -> None:
    assert ranges(batch_options(endingTimestamp="99999"), cluster()) == {T0: (0, 10), T1: (0, 6)}


def test_a_start_time_no_record_reaches_follows_the_strategy() -> None:
    with pytest.raises(NoOffsetForTimestampError, match="no record of t-0, t-1"):
        ranges(batch_options(startingTimestamp="99999", endingOffsets="latest"), cluster())
    opts = batch_options(startingTimestamp="99999", endingOffsets="latest", startingOffsetsByTimestampStrategy="latest")
    assert ranges(opts, cluster()) == {}


def test_a_start_below_earliest_is_data_loss_unless_allowed() -> None:
    c = cluster()
    c.earliest = {T0: 4}
    opts = batch_options(startingOffsets='{"t":{"0":1}}', endingOffsets="latest")
    with pytest.raises(DataLossError, match="t-0 offsets 1 to 3"):
        ranges(opts, c)
    allowed = batch_options(startingOffsets='{"t":{"0":1}}', endingOffsets="latest", failOnDataLoss="false")
    assert ranges(allowed, c)[T0] == (4, 10)


@pytest.mark.parametrize("settings, error, message", [
    ({"startingOffsets": '{"t":{"0":8}}', "endingOffsets": '{"t":{"0":5}}'}, ConfigError,
     "would start t-0 at 8, after its end 5"),
    ({"endingOffsets": '{"t":{"0":50}}'}, ConfigError, r"ends t-0 at 50, past its end \(10\)"),
    ({"endingOffsets": '{"t":{"7":5}}'}, UnknownTopicOrPartitionError, "names t-7"),
])
def test_impossible_ends_fail_naming_the_partition(settings: Dict[str, str], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        ranges(batch_options(**settings), cluster())


# -- which options go with which kind of read ------------------------------------------------------


def test_a_batch_read_needs_no_group_but_a_stream_does() -> None:
    opts = batch_options(endingOffsets="latest")
    check_batch_options(opts)
    with pytest.raises(ConfigError, match="'kafka.group.id' is required with 'subscribe'"):
        check_stream_options(opts)


def test_without_an_end_the_group_is_required_at_load_and_the_error_points_batch_reads_to_ending_offsets() -> None:
    with pytest.raises(ConfigError, match="A batch read \\(spark.read\\) needs no group: give it 'endingOffsets'"):
        batch_options()


def test_a_stream_refuses_ending_offsets() -> None:
    opts = batch_options(endingOffsets="latest", **{"kafka.group.id": "g"})
    with pytest.raises(ConfigError, match="'endingOffsets' is for batch reads"):
        check_stream_options(opts)


@pytest.mark.parametrize("settings, message", [
    ({"startingOffsets": "latest"}, "'startingOffsets' cannot be latest"),
    ({"startingOffsets": '{"t":{"0":-1}}'}, "'startingOffsets' cannot be latest"),
    ({"endingOffsets": '{"t":{"0":-2}}'}, "'endingOffsets' cannot be earliest"),
    ({"offsets.table": "/tmp/x"}, "'offsets.table' is for streams"),
    ({"maxOffsetsPerPartition": "5"}, "'maxOffsetsPerPartition' is for streams"),
    ({"flow.budgetSharing": "fair"}, "'flow.budgetSharing' is for streams"),
])
def test_batch_reads_refuse_what_cannot_apply(settings: Dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        check_batch_options(batch_options(**{"endingOffsets": "latest", "kafka.group.id": "g", **settings}))


def test_sparks_stream_only_options_are_ignored_by_batch_reads_as_in_spark() -> None:
    check_batch_options(batch_options(endingOffsets="latest", maxOffsetsPerTrigger="5", minOffsetsPerTrigger="2"))


def test_every_refused_stream_option_is_a_declared_option() -> None:
    from kafka_group.config.option_catalog import OPTIONS
    from kafka_group.config.option_rules import _STREAM_ONLY

    assert set(_STREAM_ONLY) <= {o.key for o in OPTIONS}


def test_an_empty_topic_or_an_empty_range_is_no_range() -> None:
    """Issue 33, finding 6: nothing to read is an empty read (zero rows), never an error."""
    assert ranges(batch_options(endingOffsets="latest"), FakeCluster({"t": 2})) == {}
    same = batch_options(startingOffsets='{"t":{"0":4,"1":6}}', endingOffsets='{"t":{"0":4,"1":6}}')
    assert ranges(same, cluster()) == {}
    assert ranges(batch_options(subscribePattern="none-.*", subscribe="", endingOffsets="latest"), cluster()) == {}


@pytest.mark.parametrize("settings, message", [
    ({"subscribe": "t,gone"}, r"option 'subscribe' names topic 'gone', which does not exist"),
    ({"subscribe": "", "assign": '{"gone":[0]}'}, r"option 'assign' names topic 'gone', which does not exist"),
    ({"subscribe": "", "assign": '{"t":[5]}'}, r"option 'assign' names partition 5 of topic 't'.*0 to 1"),
])
def test_a_topic_that_does_not_exist_fails_naming_it_and_the_option(settings: Dict[str, str], message: str) -> None:
    """Issue 33, finding 6: as Spark's source fails (UnknownTopicOrPartitionException), with the topic named."""
    with pytest.raises(UnknownTopicOrPartitionError, match=message):
        ranges(batch_options(endingOffsets="latest", **settings), cluster())
