"""The Schema Registry options (issue 29): parsed at load(), checked together, secrets never shown."""

from __future__ import annotations

from typing import Dict

import pytest

from kafka_group.config.options import parse_source_options
from kafka_group.errors import ConfigError
from kafka_group.redaction import scrub

BASE = {"kafka.bootstrap.servers": "h:9092", "subscribe": "orders", "kafka.group.id": "g"}
REGISTRY = {"valueformat": "avro", "schemaregistryaddress": "http://registry:8081/apis/ccompat/v7"}


def parse(**options: str) -> object:
    return parse_source_options({**BASE, **{k.lower(): v for k, v in options.items()}})


def test_raw_is_the_default_and_adds_nothing() -> None:
    assert parse_source_options(BASE).registry is None


def test_the_default_reader_schema_is_the_latest_of_the_topic_name_strategy_subject() -> None:
    registry = parse_source_options({**BASE, **REGISTRY, "keyformat": "json", "keyschemaversion": "3"}).registry
    assert registry is not None and registry.value is not None and registry.key is not None
    assert (registry.value.schema_type, registry.value.subject, registry.value.version) == ("AVRO", "orders-value", "latest")
    assert (registry.key.schema_type, registry.key.subject, registry.key.version) == ("JSON", "orders-key", "3")
    assert not registry.quarantine


def test_credentials_in_the_url_become_basic_auth_and_are_secrets() -> None:
    options: Dict[str, str] = {**BASE, **REGISTRY,
                               "schemaregistryaddress": "https://reg-user:s3cret-pass@registry:8081/api"}
    registry = parse_source_options(options).registry
    assert registry is not None and registry.url == "https://registry:8081/api"
    assert registry.headers() == {"Authorization": "Basic cmVnLXVzZXI6czNjcmV0LXBhc3M="}
    assert "s3cret" not in repr(registry) and "s3cret" not in repr(parse_source_options(options))
    assert scrub("token s3cret-pass here") == "token *** here"


def test_a_bearer_token_is_a_secret() -> None:
    registry = parse_source_options({**BASE, **REGISTRY, "schemaregistry.bearer.auth.token": "tok-123456789"}).registry
    assert registry is not None and registry.headers() == {"Authorization": "Bearer tok-123456789"}
    assert scrub("Bearer tok-123456789") == "Bearer ***"


@pytest.mark.parametrize("options,message", [
    ({"valueformat": "avro"}, "option 'schemaRegistryAddress' is needed"),
    ({"schemaregistryaddress": "http://r:1"}, "option 'schemaRegistryAddress' needs a registry format"),
    ({"valuesubject": "x"}, "option 'valueSubject' needs 'valueFormat' avro, protobuf or json"),
    ({**REGISTRY, "subscribe": "a,b"}, "reads 2 topics. Set 'valueSubject' (or 'valueSchema')"),
    ({**REGISTRY, "valueschema": '"string"', "valuesubject": "s"}, "option 'valueSchema' gives the reader schema"),
    ({**REGISTRY, "schemaregistry.basic.auth.user.info": "u:password1",
      "schemaregistry.bearer.auth.token": "t0ken-abc"}, "are both set"),
])
def test_combinations_that_cannot_work_fail_at_load_naming_the_fix(options: Dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as excinfo:
        parse_source_options({**BASE, **options})
    assert message in str(excinfo.value)
    assert "password1" not in str(excinfo.value) and "t0ken-abc" not in str(excinfo.value)


def test_a_subject_makes_several_topics_fine() -> None:
    registry = parse_source_options({**BASE, **REGISTRY, "subscribe": "a,b", "valuesubject": "orders-v"}).registry
    assert registry is not None and registry.value is not None and registry.value.subject == "orders-v"


def test_registry_credentials_can_come_from_the_environment_so_spark_plans_hold_only_the_reference(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark's redaction (``spark.redaction.regex``: secret|password|token|access key) does not match
    ``schemaRegistry.basic.auth.user.info`` nor ``schemaRegistryAddress``, and under Spark Connect option
    values reach the server's plan text: Kafka's config providers keep the secret out of the options, as
    they do for ``kafka.*``."""
    monkeypatch.setenv("REGISTRY_AUTH", "reg-user:env-s3cret-pass")
    options = {**BASE, **REGISTRY, "kafka.config.providers": "env",
               "kafka.config.providers.env.class": "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
               "schemaregistry.basic.auth.user.info": "${env:REGISTRY_AUTH}"}
    registry = parse_source_options(options).registry
    assert registry is not None
    assert registry.headers() == {"Authorization": "Basic cmVnLXVzZXI6ZW52LXMzY3JldC1wYXNz"}
    assert scrub("user info env-s3cret-pass") == "user info ***"
