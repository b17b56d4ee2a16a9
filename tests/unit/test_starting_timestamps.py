"""Time-based starts: startingTimestamp, startingOffsetsByTimestamp and its strategy (Spark's names)."""

from __future__ import annotations

import pytest

from kafka_group.errors import ConfigError, NoOffsetForTimestampError
from kafka_group.offsets import EARLIEST, LATEST, AtTimestamp, StartingOffsets, TopicPartition
from kafka_group.plan.positioning import settle_times
from tests.unit.driver_fakes import T0, T1, FakeCluster, FakeMember, FakeStore, driver, options, with_table

# -- options -------------------------------------------------------------------------------------


def test_starting_timestamp_wins_over_the_others_as_in_spark() -> None:
    parsed = options(startingTimestamp="1000", startingOffsetsByTimestamp='{"t":{"0":5}}',
                     startingOffsets="earliest").starting_offsets
    assert parsed.for_partition(T0) == AtTimestamp(1000, "startingTimestamp")


def test_by_timestamp_wins_for_the_partitions_it_names_the_rest_follow_starting_offsets() -> None:
    parsed = options(startingOffsetsByTimestamp='{"t":{"0":5}}', startingOffsets='{"t":{"1":7}}').starting_offsets
    assert parsed.for_partition(T0) == AtTimestamp(5, "startingOffsetsByTimestamp")
    assert parsed.for_partition(T1) == 7
    assert parsed.for_partition(TopicPartition("t", 2)) == EARLIEST  # JSON startingOffsets: unnamed at earliest


def test_strategy_defaults_to_error_and_takes_latest() -> None:
    assert options().starting_offsets.on_no_match == "error"
    assert options(startingOffsetsByTimestampStrategy="LATEST").starting_offsets.on_no_match == "latest"


@pytest.mark.parametrize("name, value, message", [
    ("startingTimestamp", "yesterday", "'startingTimestamp' must be a time in milliseconds since the epoch"),
    ("startingTimestamp", "-5", "'startingTimestamp' must be a time in milliseconds"),
    ("startingOffsetsByTimestamp", '{"t":{"0":"noon"}}', "the timestamp of t-0 must be milliseconds since the epoch"),
    ("startingOffsetsByTimestamp", '{"t":[0]}', "topic 't' must map partition numbers to timestamps"),
    ("startingOffsetsByTimestamp", "{", "'startingOffsetsByTimestamp' is not valid JSON"),
    ("startingOffsetsByTimestampStrategy", "earliest", "must be one of error, latest, got 'earliest'"),
])
def test_bad_values_are_refused_naming_the_option(name: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        options(**{name: value})


def test_by_timestamp_naming_a_topic_not_subscribed_is_refused() -> None:
    with pytest.raises(ConfigError, match="'startingOffsetsByTimestamp' names topic 'other', which 'subscribe'"):
        options(startingOffsetsByTimestamp='{"other":{"0":5}}')


# -- the decision --------------------------------------------------------------------------------


def test_an_answered_time_becomes_its_offset_and_an_unanswered_one_waits() -> None:
    specs = {T0: AtTimestamp(5, "startingTimestamp"), T1: AtTimestamp(5, "startingTimestamp")}
    settled, waiting = settle_times(specs, {T0: 3}, "error")
    assert settled[T0] == 3 and waiting == [T1]


def test_no_record_that_recent_fails_with_strategy_error() -> None:
    specs = {T0: AtTimestamp(5000, "startingOffsetsByTimestamp")}
    with pytest.raises(NoOffsetForTimestampError,
                       match=r"'startingOffsetsByTimestamp': no record of t-0 has a timestamp at or after 5000 ms.*"
                             r"startingOffsetsByTimestampStrategy=latest"):
        settle_times(specs, {T0: None}, "error")


def test_no_record_that_recent_starts_at_latest_with_strategy_latest() -> None:
    settled, waiting = settle_times({T0: AtTimestamp(5000, "startingTimestamp")}, {T0: None}, "latest")
    assert settled == {T0: LATEST} and waiting == []


# -- the driver, end to end on fakes -------------------------------------------------------------


def _cluster() -> FakeCluster:
    cluster = FakeCluster({"t": 2})
    cluster.produce(T0, 5)
    cluster.produce(T1, 5)
    cluster.timestamps = {T0: [100, 200, 300, 400, 500], T1: [100, 100, 100, 100, 100]}
    return cluster


def test_a_new_query_starts_each_partition_at_its_first_record_that_recent() -> None:
    cluster, member = _cluster(), FakeMember()
    d = driver(options(startingTimestamp="250", startingOffsetsByTimestampStrategy="latest"), cluster, member)
    member.assign(T0, T1)
    assert dict(d.initial_offsets().positions) == {T0: 2, T1: 5}  # t-1 has nothing that recent: latest


def test_a_new_query_fails_by_default_when_a_partition_has_nothing_that_recent() -> None:
    cluster, member = _cluster(), FakeMember()
    d = driver(options(startingTimestamp="250"), cluster, member)
    member.assign(T0, T1)
    with pytest.raises(NoOffsetForTimestampError, match="no record of t-1"):
        d.initial_offsets()


def test_partitions_the_table_has_seen_ignore_the_time() -> None:
    cluster, member = _cluster(), FakeMember()
    store = FakeStore({T0: 4})
    d = driver(with_table(startingOffsetsByTimestamp='{"t":{"0":150,"1":101}}'), cluster, member, store)
    member.assign(T0, T1)
    # The table knows t-0: its time does not apply. The table reads topic t, so t-1, which neither the table
    # nor the group knows, is a partition added since: it starts at the earliest offset, not at its time
    # (issue 33, finding 4; before, it failed here, no record of t-1 being as recent as 101).
    assert dict(d.initial_offsets().positions) == {T0: 4, T1: 0}


def test_a_partition_starts_at_its_time_while_the_table_holds_only_recorded_starts_of_its_topic() -> None:
    cluster, member = _cluster(), FakeMember()
    store = FakeStore({T0: 4})
    store.recorded_starts[T0] = 4  # another new query's start: the table has read nothing of t
    d = driver(with_table(startingOffsetsByTimestamp='{"t":{"0":150,"1":101}}'), cluster, member, store)
    member.assign(T0, T1)
    with pytest.raises(NoOffsetForTimestampError, match="no record of t-1"):
        d.initial_offsets()


def test_starting_offsets_carry_all_three_settings() -> None:
    parsed = options(startingOffsetsByTimestamp='{"t":{"1":9}}', startingOffsetsByTimestampStrategy="latest")
    assert parsed.starting_offsets == StartingOffsets(EARLIEST, None, None, {T1: 9}, "latest")
