"""The rules of one query landing many tables (kafka_group.delta.offsets.table_routes), pure: route resolution,
template validation, where a partition starts, and each table's share of a batch (docs/exactly-once.md,
"Many tables")."""

from __future__ import annotations

from typing import Dict, Mapping

import pytest

from kafka_group.config.options import parse_source_options
from kafka_group.delta.offsets.table_routes import (
    TableRoutes,
    TableShare,
    check_template,
    fill_template,
    first_sights,
    parse_routes,
    route_shares,
    routes_key,
    start_positions,
    topic_tables,
)
from kafka_group.errors import ConfigError
from kafka_group.offsets import OffsetRange, TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
DLQ = "/lake/_dlq"
ROUTES = TableRoutes(template="/lake/{topic}", shared=(DLQ,))


def held(**tables: Mapping[TopicPartition, int]) -> Dict[str, Mapping[TopicPartition, int]]:
    names = {"a": "/lake/a", "b": "/lake/b", "dlq": DLQ}
    return {names[k]: v for k, v in tables.items()}


def test_template_routes_each_topic_to_its_folder_and_every_partition_to_the_shared_tables() -> None:
    assert ROUTES.tables_of(A0) == ["/lake/a", DLQ]
    assert TableRoutes(mapping={"a": "/x/orders"}).tables_of(A1) == ["/x/orders"]
    assert TableRoutes(mapping={"a": "/x/orders"}, shared=("/x/all",)).tables_of(B0) == ["/x/all"]
    assert fill_template("s3://bucket/bronze/raw_{topic}", "db.public.orders", where="w") == (
        "s3://bucket/bronze/raw_db.public.orders")
    # a bucket or container is a folder of the template's own
    for template in ("s3://bucket/{topic}", "abfss://c@acct.dfs.core.windows.net/{topic}", "file:///lake/{topic}"):
        assert check_template(template, where="w") == template


@pytest.mark.parametrize("template, says", [
    ("/lake/orders", "without '{topic}'"),
    ("{topic}", "must come after a folder"),
    ("s3://{topic}/t", "must come after a folder"),
    ("/{topic}", "must come after a folder"),
    ("file:/{topic}", "must come after a folder"),  # the root of this machine's file system, as '/{topic}'
    ("file:///{topic}", "must come after a folder"),
    ("file://localhost/{topic}", "must come after a folder"),
    ("dbfs:/{topic}", "must come after a folder"),
    ("hdfs:///{topic}", "must come after a folder"),
    ("/lake/{topic}/{x}", "only the field"),
])
def test_a_bad_template_is_refused_naming_the_option(template: str, says: str) -> None:
    with pytest.raises(ConfigError, match="option 'offsets.table'") as error:
        check_template(template, where="option 'offsets.table'")
    assert says in str(error.value)


@pytest.mark.parametrize("topic", ["..", ".", "a/b", "../etc", "a b", "x" * 250, "", "orders\n", "ordérs", "Ｏrders"])
def test_a_topic_name_that_could_leave_the_folder_is_refused(topic: str) -> None:
    with pytest.raises(ConfigError, match="not a legal Kafka topic name"):
        fill_template("/lake/{topic}", topic, where="RoutedDeltaSink")


def test_the_source_option_takes_a_template_a_mapping_and_shared_tables() -> None:
    base = {"kafka.bootstrap.servers": "h:9092", "subscribePattern": "db[.].*", "kafka.group.id": "g"}
    parsed = parse_source_options({**base, "offsets.table": "/lake/{topic}", "offsets.table.shared": DLQ})
    assert parse_routes(parsed.offsets_table or "", parsed.offsets_table_shared) == ROUTES
    with pytest.raises(ConfigError, match="option 'offsets.table'.*without '{topic}'"):
        parse_source_options({**base, "offsets.table": "/lake/{topics}"})
    with pytest.raises(ConfigError, match="option 'offsets.table'.*not a legal Kafka topic name"):
        parse_source_options({**base, "offsets.table": '{"..": "/lake/x"}'})
    with pytest.raises(ConfigError, match="'offsets.table.shared' needs 'offsets.table'"):
        parse_source_options({**base, "offsets.table.shared": DLQ})
    assert parse_routes("/lake/one") is None  # one table, as before
    assert parse_routes("/lake/one", ["/lake/two"]) == TableRoutes(shared=("/lake/one", "/lake/two"))
    assert parse_routes('{"a": "/x/a"}') == TableRoutes(mapping={"a": "/x/a"})
    assert routes_key("/lake/one") == "/lake/one"
    assert routes_key("/lake/{topic}", [DLQ]) != routes_key("/lake/{topic}")


def test_a_partition_starts_at_the_lowest_position_of_the_tables_that_saw_it() -> None:
    positions = start_positions(held(a={A0: 50, A1: 7}, dlq={A0: 40}), [A0, A1, B0], ROUTES)
    assert positions == {A0: 40, A1: 7}  # A1: the dead-letter table never saw it; B0: no table did


def test_a_replay_after_a_crash_between_tables_lands_only_in_the_table_that_missed_it() -> None:
    ranges = [OffsetRange(A0, 10, 20), OffsetRange(B0, 0, 5)]
    shares = route_shares(held(a={A0: 20}, b={B0: 0}, dlq={A0: 20, B0: 5}), ranges, ROUTES)
    assert shares == {"/lake/a": TableShare([]), "/lake/b": TableShare([OffsetRange(B0, 0, 5)]), DLQ: TableShare([])}
    shares = route_shares(held(a={A0: 20}, b={B0: 0}, dlq={A0: 10, B0: 0}), ranges, ROUTES)
    assert shares == {"/lake/a": TableShare([]), "/lake/b": TableShare([OffsetRange(B0, 0, 5)]), DLQ: TableShare(ranges)}


def test_a_table_ahead_inside_the_range_lands_from_its_position_only_beside_a_table_at_the_start() -> None:
    """A lost checkpoint: the range is planned from the dead-letter table (behind); the topic's table, ahead,
    lands only its rows from its position on."""
    r = OffsetRange(A0, 10, 30)
    shares = route_shares(held(a={A0: 25}, dlq={A0: 10}), [r], ROUTES)
    assert shares["/lake/a"] == TableShare([OffsetRange(A0, 25, 30)], {A0: 25})
    assert shares[DLQ] == TableShare([r])


def test_a_table_inside_the_range_without_a_table_at_its_start_is_left_a_conflict() -> None:
    r = OffsetRange(A0, 10, 30)
    shares = route_shares(held(a={A0: 25}, dlq={A0: 12}), [r], ROUTES)
    assert shares["/lake/a"] == TableShare([r])  # its own offset check reports 25 as a conflict
    alone = route_shares(held(a={A0: 25}), [r], TableRoutes(template="/lake/{topic}"))
    assert alone["/lake/a"] == TableShare([r])


def test_a_table_added_to_the_route_gets_every_range_whole() -> None:
    r = OffsetRange(A0, 10, 30)
    assert route_shares(held(a={A0: 10}), [r], ROUTES) == {"/lake/a": TableShare([r]), DLQ: TableShare([r])}


def test_a_table_beyond_the_range_beside_a_table_at_its_start_holds_it() -> None:
    """A lost checkpoint, re-planned with a smaller range than the one the dead-letter table landed."""
    r = OffsetRange(A0, 10, 20)
    shares = route_shares(held(a={A0: 10}, dlq={A0: 35}), [r], ROUTES)
    assert shares == {"/lake/a": TableShare([r]), DLQ: TableShare([])}
    assert route_shares(held(a={A0: 35}), [r], TableRoutes(template="/lake/{topic}"))["/lake/a"] == TableShare([r])


def test_a_table_removed_from_the_route_no_longer_counts() -> None:
    """The dead-letter table left the route while the query was stopped: its positions (behind) are not read."""
    without = TableRoutes(template="/lake/{topic}")
    assert start_positions(held(a={A0: 50}, dlq={A0: 10}), [A0], without) == {A0: 50}


def test_a_changed_route_starts_at_the_other_tables_of_the_route_or_none() -> None:
    """Topic a's table moved from /lake/a to /new/a: the new table never saw a's partitions."""
    moved = TableRoutes(template="/new/{topic}", shared=(DLQ,))
    old = held(a={A0: 50}, dlq={A0: 50})
    assert start_positions(old, [A0], moved) == {A0: 50}  # where the dead-letter table is
    assert start_positions(old, [A0], TableRoutes(template="/new/{topic}")) == {}  # none: startingOffsets


def test_a_table_records_the_partitions_it_never_saw_at_their_start_before_any_table_lands() -> None:
    r, s = OffsetRange(A0, 10, 30), OffsetRange(B0, 0, 5)
    h = held(a={A0: 10}, dlq={A0: 10})
    shares = route_shares(h, [r, s], ROUTES)
    assert first_sights(h, shares) == {"/lake/b": TableShare([OffsetRange(B0, 0, 0)]),
                                       DLQ: TableShare([OffsetRange(B0, 0, 0)])}


@pytest.mark.parametrize("dead_letters", ["/lake/_dlq/", "file:///lake/_dlq", "/lake//_dlq"])
def test_a_topic_whose_table_is_the_dead_letter_table_in_another_spelling_is_refused(dead_letters: str) -> None:
    # Topic '_dlq' routes to '/lake/_dlq', the dead-letter table spelt otherwise: one physical table, which must
    # neither count twice in the route nor take the topic's rows.
    routes = TableRoutes(template="/lake/{topic}", shared=(dead_letters,))
    assert routes.tables_of(TopicPartition("_dlq", 0)) == ["/lake/_dlq"]
    with pytest.raises(ConfigError, match="would land in the dead-letter table"):
        topic_tables(routes, ["orders", "_dlq"], where="RoutedDeltaSink")
    assert topic_tables(routes, ["orders"], where="RoutedDeltaSink") == {"orders": "/lake/orders"}
