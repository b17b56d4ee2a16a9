"""Option ``read.path``: which executor read path a task takes, and the compiled path's batch schema."""

from __future__ import annotations

import logging

import pytest

from kafka_group.auth.token_provider import TOKEN_PROVIDER_KEY
from kafka_group.config.options import parse_source_options
from kafka_group.errors import ConfigError
from kafka_group.read import read_path
from kafka_group.read.read_path import choose_native, native_module, unsupported_reason
from kafka_group.read.record_schema import arrow_schema

BASE = {"kafka.bootstrap.servers": "h:9092", "subscribe": "t", "kafka.group.id": "g"}


def test_read_path_is_auto_unless_set_and_refuses_other_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKA_GROUP_READ_PATH", raising=False)
    assert parse_source_options(BASE).read_path == "auto"
    assert parse_source_options({**BASE, "read.path": "python"}).read_path == "python"
    with pytest.raises(ConfigError, match="read.path"):
        parse_source_options({**BASE, "read.path": "rust"})


def test_the_environment_sets_the_default_read_path_for_the_test_tiers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_GROUP_READ_PATH", "python")
    assert parse_source_options(BASE).read_path == "python"
    assert parse_source_options({**BASE, "read.path": "native"}).read_path == "native"


@pytest.mark.parametrize(("config", "served"), [
    ({}, True),
    ({"security.protocol": "SSL"}, True),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"}, True),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN"}, True),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"}, False),
    ({"security.protocol": "SASL_PLAINTEXT"}, False),  # GSSAPI, librdkafka's default mechanism
    ({TOKEN_PROVIDER_KEY: "mod:fn"}, False),
])
def test_settings_the_compiled_client_serves(config: dict, served: bool) -> None:  # type: ignore[type-arg]
    assert (unsupported_reason(config) is None) is served


def test_python_is_chosen_when_asked_and_native_fails_naming_the_option_when_it_cannot_serve() -> None:
    assert choose_native("python", {}) is None
    with pytest.raises(ConfigError, match="option 'read.path' is 'native' but option 'tokenProvider'"):
        choose_native("native", {TOKEN_PROVIDER_KEY: "mod:fn"})


def test_auto_falls_back_to_python_with_one_info_line(caplog: pytest.LogCaptureFixture,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(read_path, "_said", set())
    with caplog.at_level(logging.INFO, logger="kafka_group.read.read_path"):
        for _ in range(3):
            assert choose_native("auto", {TOKEN_PROVIDER_KEY: "mod:fn"}) is None
    lines = [r.getMessage() for r in caplog.records if r.name == "kafka_group.read.read_path"]
    assert lines == ["reading with the Python read path: option 'tokenProvider' (a Python OAUTHBEARER token "
                     "callback) is called by confluent-kafka's client only"]
    assert all(r.levelno == logging.INFO for r in caplog.records if r.name == "kafka_group.read.read_path")


@pytest.mark.parametrize("include_headers", [False, True])
def test_the_compiled_path_builds_spark_s_kafka_schema(include_headers: bool) -> None:
    native = native_module()
    if native is None:
        pytest.skip("the compiled read path is not built here (python native/build_native.py --inplace)")
    client = native.Client([("bootstrap.servers", "127.0.0.1:9"), ("group.id", "g")], include_headers, 100)
    try:
        assert client.build().schema == arrow_schema(include_headers)
    finally:
        client.close()


def test_a_setting_librdkafka_refuses_names_the_setting_and_not_its_value() -> None:
    native = native_module()
    if native is None:
        pytest.skip("the compiled read path is not built here")
    from kafka_group.read.native_client import NativeConsumer

    with pytest.raises(ConfigError) as raised:
        NativeConsumer(native, {"bootstrap.servers": "127.0.0.1:9", "no.such.setting": "s3cr3t-value"})
    assert "'no.such.setting'" in str(raised.value) and "read.path" in str(raised.value)


def test_a_setting_the_built_in_librdkafka_refuses_falls_back_under_auto_and_fails_under_native() -> None:
    if native_module() is None:
        pytest.skip("the compiled read path is not built here")
    config = {"bootstrap.servers": "127.0.0.1:9", "no.such.setting": "s3cr3t-value"}
    assert choose_native("auto", config) is None
    with pytest.raises(ConfigError, match="option 'read.path' is 'native' but .* setting 'no.such.setting'") as raised:
        choose_native("native", config)
    assert "s3cr3t-value" not in str(raised.value)
    assert choose_native("auto", {"bootstrap.servers": "127.0.0.1:9"}) is native_module()


def test_the_environments_native_default_still_reads_tokens_with_python(monkeypatch: pytest.MonkeyPatch) -> None:
    # CI sets KAFKA_GROUP_READ_PATH=native so that a missing module fails the run; a query whose settings
    # only the Python path serves (OAUTHBEARER, a token provider) must still read, as under auto.
    if read_path.native_module() is None:
        pytest.skip("the compiled read path is not built here")
    monkeypatch.setenv("KAFKA_GROUP_READ_PATH", "native")
    oauth = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER"}
    assert read_path.choose_native("native", oauth, explicit=False) is None
    # A query that sets read.path=native itself is held to it, whatever the environment says.
    with pytest.raises(ConfigError, match="read.path"):
        read_path.choose_native("native", oauth)
    monkeypatch.delenv("KAFKA_GROUP_READ_PATH")
    with pytest.raises(ConfigError, match="read.path"):
        read_path.choose_native("native", oauth, explicit=False)
