"""The offsets tool reaches a secured cluster (issue 28): Kafka client settings from a properties file
(``--command-config``, as Kafka's own tools) or ``KAFKA_GROUP_KAFKA_*`` environment variables, translated
like the source's options; never a secret on the command line, none in its output."""

from __future__ import annotations

import logging
import pathlib

import pytest

from kafka_group.config.client_properties import parse_properties, tool_client_settings
from kafka_group.errors import ConfigError
from kafka_group.offsets_tool import main

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
PASSWORD = "Tool-Canary-Pw-5150"


def test_properties_file_syntax() -> None:
    text = ("# comment\n! other\nsecurity.protocol = SASL_SSL\nsasl.mechanism:PLAIN\n"
            f"sasl.jaas.config={PLAIN} required \\\n    username=\"alice\" \\\n    password=\"{PASSWORD}\";\n"
            "ssl.endpoint.identification.algorithm=\nkey\\=x=1\n")
    assert parse_properties(text) == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": f'{PLAIN} required username="alice" password="{PASSWORD}";',
        "ssl.endpoint.identification.algorithm": "", "key=x": "1"}


def test_settings_from_the_file_and_the_environment_are_translated(tmp_path: pathlib.Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text(f"security.protocol=SASL_SSL\nsasl.jaas.config={PLAIN} required username=\"alice\" "
                      f"password=\"{PASSWORD}\";\nssl.endpoint.identification.algorithm=\n")
    settings = tool_client_settings(str(config), {"KAFKA_GROUP_KAFKA_CLIENT_ID": "ops"}, "b:9092")
    assert settings == {"security.protocol": "SASL_SSL", "sasl.username": "alice", "sasl.password": PASSWORD,
                        "sasl.mechanism": "PLAIN", "ssl.endpoint.identification.algorithm": "none",
                        "client.id": "ops", "bootstrap.servers": "b:9092"}
    with pytest.raises(ConfigError, match=r"given by --command-config and by \$KAFKA_GROUP_KAFKA_SECURITY_PROTOCOL"):
        tool_client_settings(str(config), {"KAFKA_GROUP_KAFKA_CLIENT_ID": "ops",
                                           "KAFKA_GROUP_KAFKA_SECURITY_PROTOCOL": "SSL"}, "b:9092")


def test_the_tool_passes_the_security_settings_to_its_client(
        tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "client.properties"
    config.write_text("bootstrap.servers=127.0.0.1:1\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                      "sasl.username=alice\n")
    monkeypatch.setenv("KAFKA_GROUP_KAFKA_SASL_PASSWORD", PASSWORD)
    with caplog.at_level(logging.DEBUG, logger="kafka_group"):
        code = main(["show", "--table", str(tmp_path / "t"), "--group", "g", "--topic", "orders",
                     "--command-config", str(config), "--timeout-ms", "1000"])
    out = capsys.readouterr()
    assert code == 2 and "error:" in out.err
    settings = [r.getMessage() for r in caplog.records if "admin client settings" in r.getMessage()]
    assert settings and "'security.protocol': 'SASL_PLAINTEXT'" in settings[0] and "'sasl.username': 'alice'" in settings[0]
    assert PASSWORD not in caplog.text + out.out + out.err


def test_an_untranslatable_setting_fails_before_any_client(tmp_path: pathlib.Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "client.properties"
    config.write_text("sasl.login.callback.handler.class=com.example.TokenHandler\n")
    code = main(["show", "--table", "t", "--group", "g", "--topic", "orders", "--bootstrap-servers", "b:1",
                 "--command-config", str(config)])
    assert code == 2 and "names com.example.TokenHandler, which librdkafka cannot run" in capsys.readouterr().err
