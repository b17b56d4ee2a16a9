"""Option validation: every bad input fails with the option's name and the fix."""

from __future__ import annotations

from typing import Dict

import pytest

from kafka_group.config.options import parse_source_options
from kafka_group.config.source_options import SubscriptionKind
from kafka_group.errors import ConfigError, OffsetFormatError
from kafka_group.offsets import EARLIEST, LATEST, TopicPartition

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "orders", "kafka.group.id": "g"}


def opts(**changes: str) -> Dict[str, str]:
    merged = dict(BASE)
    for key, value in changes.items():
        key = key.replace("__", ".")
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return {k.lower(): v for k, v in merged.items()}


def without(*keys: str, **changes: str) -> Dict[str, str]:
    merged = opts(**changes)
    for key in keys:
        merged.pop(key.lower(), None)
    return merged


def test_valid_subscribe_options() -> None:
    parsed = parse_source_options(opts(maxOffsetsPerTrigger="100", startingOffsets="earliest"))
    assert parsed.subscription_kind == SubscriptionKind.SUBSCRIBE
    assert parsed.topics == ("orders",)
    assert parsed.group_id == "g"
    assert parsed.max_offsets_per_trigger == 100
    assert parsed.starting_offsets.default == EARLIEST
    assert parsed.fail_on_data_loss is True
    assert parsed.include_headers is False


def test_keys_are_case_insensitive() -> None:
    parsed = parse_source_options({"KAFKA.BOOTSTRAP.SERVERS": "h:1", "Assign": '{"t":[0,1]}'})
    assert parsed.assigned == (TopicPartition("t", 0), TopicPartition("t", 1))


def test_missing_bootstrap_servers_names_the_option() -> None:
    with pytest.raises(ConfigError, match="kafka.bootstrap.servers"):
        parse_source_options(without("kafka.bootstrap.servers"))


@pytest.mark.parametrize(
    "options",
    [
        without("subscribe"),
        opts(subscribePattern="orders-.*"),
        opts(assign='{"orders":[0]}'),
    ],
)
def test_exactly_one_subscription_option(options: Dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="exactly one of 'subscribe', 'subscribePattern' or 'assign'"):
        parse_source_options(options)


def test_subscribe_needs_group_id() -> None:
    with pytest.raises(ConfigError, match="'kafka.group.id' is required with 'subscribe'"):
        parse_source_options(without("kafka.group.id"))


def test_pattern_needs_group_id() -> None:
    with pytest.raises(ConfigError, match="'kafka.group.id' is required with 'subscribePattern'"):
        parse_source_options(without("kafka.group.id", "subscribe", subscribePattern="o.*"))


def test_assign_needs_no_group() -> None:
    parsed = parse_source_options(without("kafka.group.id", "subscribe", assign='{"orders":[0,2]}'))
    assert parsed.uses_group is False


@pytest.mark.parametrize(
    "text",
    ["{not json", "[]", "{}", '{"orders":0}', '{"orders":[]}', '{"orders":["x"]}', '{"orders":[-1]}'],
)
def test_malformed_assign(text: str) -> None:
    with pytest.raises(OffsetFormatError, match="option 'assign'"):
        parse_source_options(without("subscribe", assign=text))


@pytest.mark.parametrize(
    "text",
    ["{oops", "soonest", '{"orders":5}', '{"orders":{"0":"x"}}', '{"orders":{"a":1}}', '{"orders":{"0":-3}}'],
)
def test_malformed_starting_offsets(text: str) -> None:
    with pytest.raises(OffsetFormatError, match="option 'startingOffsets'"):
        parse_source_options(opts(startingOffsets=text))


def test_starting_offsets_json() -> None:
    parsed = parse_source_options(opts(startingOffsets='{"orders":{"0":23,"1":-1}}'))
    assert parsed.starting_offsets.for_partition(TopicPartition("orders", 0)) == 23
    assert parsed.starting_offsets.for_partition(TopicPartition("orders", 1)) == LATEST
    assert parsed.starting_offsets.for_partition(TopicPartition("orders", 7)) == EARLIEST


def test_starting_offsets_for_an_unsubscribed_topic() -> None:
    with pytest.raises(ConfigError, match="names topic 'payments', which 'subscribe' does not include"):
        parse_source_options(opts(startingOffsets='{"payments":{"0":1}}'))


@pytest.mark.parametrize("value", ["-5", "0", "ten", "1.5", ""])
def test_bad_max_offsets_per_trigger(value: str) -> None:
    with pytest.raises(ConfigError, match="option 'maxOffsetsPerTrigger' must be a positive whole number"):
        parse_source_options(opts(maxOffsetsPerTrigger=value))


@pytest.mark.parametrize(
    "key",
    [
        "kafka.enable.auto.commit",
        "kafka.auto.offset.reset",
        "kafka.key.deserializer",
        "kafka.value.deserializer",
    ],
)
def test_refused_client_options(key: str) -> None:
    with pytest.raises(ConfigError, match=f"option '{key}' is not allowed"):
        parse_source_options({**opts(), key: "x"})


def test_group_instance_id_with_assign_is_refused() -> None:
    options = without("subscribe", assign='{"orders":[0]}', **{"kafka__group__instance__id": "a"})
    with pytest.raises(ConfigError, match="'kafka.group.instance.id' needs a consumer group"):
        parse_source_options(options)


def test_group_instance_id_with_subscribe_is_static_membership() -> None:
    parsed = parse_source_options(opts(**{"kafka__group__instance__id": "query-a"}))
    assert parsed.client_config["group.instance.id"] == "query-a"


def test_unknown_option_suggests_the_right_spelling() -> None:
    with pytest.raises(ConfigError, match="did you mean 'maxOffsetsPerTrigger'"):
        parse_source_options(opts(maxOffsetPerTrigger="10"))


def test_bad_boolean() -> None:
    with pytest.raises(ConfigError, match="option 'failOnDataLoss' must be 'true' or 'false'"):
        parse_source_options(opts(failOnDataLoss="yes"))


def test_bad_pattern() -> None:
    with pytest.raises(ConfigError, match="'subscribePattern' is not a valid regular expression"):
        parse_source_options(without("subscribe", subscribePattern="orders-("))


def test_secrets_are_redacted_in_repr() -> None:
    parsed = parse_source_options(opts(**{"kafka__sasl__password": "hunter2-secret", "kafka__sasl__username": "u"}))
    assert "hunter2-secret" not in repr(parsed)
    assert parsed.redacted_client_config()["sasl.password"] == "***"
    assert parsed.redacted_client_config()["sasl.username"] == "u"


@pytest.mark.parametrize("spec", ["module", "a.b:", ":f", "a b:f", "a.b:c.d"])
def test_malformed_rebalance_listener(spec: str) -> None:
    with pytest.raises(ConfigError, match="option 'rebalanceListener' must name a callable as 'package.module:function'"):
        parse_source_options(opts(rebalanceListener=spec))


def test_rebalance_listener_needs_a_group() -> None:
    with pytest.raises(ConfigError, match="'rebalanceListener' needs a consumer group"):
        parse_source_options(without("subscribe", "kafka.group.id", assign='{"orders":[0]}',
                                     rebalanceListener="m:f"))


def test_rebalance_listener_that_cannot_be_imported() -> None:
    from kafka_group.group.rebalance_listener import load_rebalance_listener

    with pytest.raises(ConfigError, match="cannot import module 'no_such_module_here' on the driver"):
        load_rebalance_listener("no_such_module_here:f")
    with pytest.raises(ConfigError, match="'json' has no callable named 'nothing'"):
        load_rebalance_listener("json:nothing")
    assert load_rebalance_listener(" json:dumps ") is __import__("json").dumps


def test_flow_options() -> None:
    parsed = parse_source_options(opts(maxOffsetsPerPartition="500", **{
        "flow.budgetSharing": "Proportional", "flow.alignment.maxDrift": "30 minutes",
        "flow.topicPriority": "orders:10, audit:-1"}))
    assert parsed.flow_policy.max_per_partition == 500
    assert parsed.flow_policy.sharing == "proportional"
    assert parsed.flow_policy.topic_priority == {"orders": 10, "audit": -1}
    assert parsed.max_drift_ms == 30 * 60_000
    defaults = parse_source_options(opts())
    assert defaults.flow_policy.sharing == "fair" and defaults.max_drift_ms is None


@pytest.mark.parametrize("value", ["-5", "0", "ten"])
def test_bad_per_partition_cap(value: str) -> None:
    with pytest.raises(ConfigError, match="option 'maxOffsetsPerPartition' must be a positive whole number"):
        parse_source_options(opts(maxOffsetsPerPartition=value))


@pytest.mark.parametrize("value", ["soon", "30", "-1h", "5 fortnights", "0s", ""])
def test_malformed_drift(value: str) -> None:
    with pytest.raises(ConfigError, match="option 'flow.alignment.maxDrift' must be a positive duration with a unit"):
        parse_source_options(opts(**{"flow.alignment.maxDrift": value}))


@pytest.mark.parametrize("text, ms", [("500ms", 500), ("90s", 90_000), ("2h", 7_200_000), ("1.5 hours", 5_400_000)])
def test_durations(text: str, ms: int) -> None:
    assert parse_source_options(opts(**{"flow.alignment.maxDrift": text})).max_drift_ms == ms


@pytest.mark.parametrize("value", ["orders", "orders:high", ":1", "orders:1,,"])
def test_bad_topic_priority(value: str) -> None:
    with pytest.raises(ConfigError, match="option 'flow.topicPriority' must list topic:priority pairs"):
        parse_source_options(opts(**{"flow.topicPriority": value}))


def test_bad_budget_sharing() -> None:
    with pytest.raises(ConfigError, match="option 'flow.budgetSharing' must be one of fair, proportional"):
        parse_source_options(opts(**{"flow.budgetSharing": "greedy"}))


def test_unknown_isolation_level_is_refused_at_load_naming_both_choices() -> None:
    with pytest.raises(ConfigError, match=r"'kafka.isolation.level'.*read_committed.*read_uncommitted.*'read_dirty'"):
        parse_source_options({**BASE, "kafka.isolation.level": "read_dirty"})
    assert parse_source_options({**BASE, "kafka.isolation.level": "READ_UNCOMMITTED"}) is not None


def test_offsets_table_storage_options_reach_the_store_without_the_prefix_and_stay_hidden() -> None:
    secret = "Canary-Storage-Secret-9907"
    parsed = parse_source_options({**BASE, "offsets.table": "s3://lake/t",
                                   "offsets.table.storage.aws_region": "eu-west-1",
                                   "offsets.table.storage.AWS_SECRET_ACCESS_KEY": secret})
    assert parsed.offsets_table_storage == {"aws_region": "eu-west-1", "aws_secret_access_key": secret}
    assert secret not in repr(parsed) and secret not in str(parsed)
    with pytest.raises(ConfigError, match="'offsets.table.storage.aws_secret_access_key' needs 'offsets.table'") as e:
        parse_source_options({**BASE, "offsets.table.storage.aws_secret_access_key": secret})
    assert secret not in str(e.value)
    with pytest.raises(ConfigError, match="'offsets.table.storage.' names no storage option"):
        parse_source_options({**BASE, "offsets.table": "s3://lake/t", "offsets.table.storage.": secret})
    with pytest.raises(ConfigError, match="option 'offsets.table.storage.aws_region' is empty"):
        parse_source_options({**BASE, "offsets.table": "s3://lake/t", "offsets.table.storage.aws_region": " "})
