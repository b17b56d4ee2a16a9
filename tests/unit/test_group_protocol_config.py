"""Group protocol settings: KIP-848's consumer protocol gets none of the classic protocol's member settings."""

from __future__ import annotations

from typing import Dict

import pytest

from kafka_group.config.client_config import CLASSIC_ONLY_KEYS, member_config
from kafka_group.config.options import parse_source_options
from kafka_group.errors import ConfigError

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "orders", "kafka.group.id": "g"}


def options(**kafka: str) -> Dict[str, str]:
    return {**BASE, **{f"kafka.{k.replace('_', '.')}": v for k, v in kafka.items()}}


def test_classic_member_gets_the_cooperative_default_and_the_users_settings() -> None:
    config = member_config({"session.timeout.ms": "45000"}, "g")
    assert config["partition.assignment.strategy"] == "cooperative-sticky"
    assert config["session.timeout.ms"] == "45000"
    assert member_config({"partition.assignment.strategy": "range"}, "g")["partition.assignment.strategy"] == "range"


@pytest.mark.parametrize("protocol", ["consumer", "CONSUMER", " consumer "])
def test_consumer_protocol_member_gets_no_classic_only_setting(protocol: str) -> None:
    config = member_config({"group.protocol": protocol, "group.remote.assignor": "range",
                            **{key: "1" for key in CLASSIC_ONLY_KEYS}}, "g")
    assert not set(CLASSIC_ONLY_KEYS) & set(config), config
    assert config["group.remote.assignor"] == "range"
    assert config["group.id"] == "g"


def test_librdkafka_accepts_the_consumer_protocol_member_config() -> None:
    from confluent_kafka import Consumer

    # Creating the client validates the settings; nothing connects before poll().
    Consumer(member_config({"bootstrap.servers": "127.0.0.1:9", "group.protocol": "consumer"}, "g")).close()


@pytest.mark.parametrize("key", sorted(CLASSIC_ONLY_KEYS))
def test_classic_only_setting_with_consumer_protocol_is_refused_naming_it(key: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_source_options({**options(group_protocol="consumer"), f"kafka.{key}": "1"})
    message = str(error.value)
    assert f"'kafka.{key}'" in message and "kafka.group.protocol=consumer" in message
    assert f"Remove 'kafka.{key}'" in message


def test_assignment_strategy_with_consumer_protocol_points_at_the_remote_assignor() -> None:
    with pytest.raises(ConfigError, match="kafka.group.remote.assignor"):
        parse_source_options(options(group_protocol="consumer", partition_assignment_strategy="range"))


def test_remote_assignor_needs_the_consumer_protocol() -> None:
    with pytest.raises(ConfigError, match="'kafka.group.remote.assignor' only applies"):
        parse_source_options(options(group_remote_assignor="range"))


def test_unknown_group_protocol_is_refused() -> None:
    with pytest.raises(ConfigError, match="'kafka.group.protocol' is 'kip848'"):
        parse_source_options(options(group_protocol="kip848"))


def test_consumer_protocol_options_are_accepted() -> None:
    parsed = parse_source_options(options(group_protocol="consumer", group_remote_assignor="uniform",
                                          group_instance_id="q1", max_poll_interval_ms="300000"))
    assert parsed.client_config["group.protocol"] == "consumer"
