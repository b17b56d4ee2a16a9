"""``pyspark_kafka_group.jobs``: a job's Kafka settings from a file, the environment and flags; its --help text; its
progress lines. No Spark: :func:`job_session` and :func:`stop_session` run in ``tests/integration/test_examples.py``."""

from __future__ import annotations

import argparse
import logging
import pathlib
import threading
from typing import List

import pytest

from kafka_group.errors import ConfigError
from kafka_group.redaction import scrub
from pyspark_kafka_group.jobs import (Heartbeat, add_cluster_arguments, client_config, help_text, kafka_settings,
                                      source_options)


def parse(argv: List[str]) -> argparse.Namespace:
    return add_cluster_arguments(argparse.ArgumentParser()).parse_args(argv)


def test_settings_come_from_the_file_the_environment_and_the_flags(tmp_path: pathlib.Path) -> None:
    properties = tmp_path / "client.properties"
    properties.write_text("kafka.security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n")
    args = parse(["--command-config", str(properties), "--bootstrap-servers", "b:9093",
                  "--kafka-option", "client.id=job"])
    settings = kafka_settings(args, {"KAFKA_GROUP_KAFKA_SASL_USERNAME": "orders", "OTHER": "x"})
    assert settings == {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "orders",
                        "bootstrap.servers": "b:9093", "client.id": "job"}
    assert source_options(settings)["kafka.security.protocol"] == "SASL_SSL"


def test_a_setting_given_twice_is_named_and_its_value_never_shown(tmp_path: pathlib.Path) -> None:
    properties = tmp_path / "client.properties"
    properties.write_text("bootstrap.servers=b:1\nsasl.password=File-Secret-17\n")
    with pytest.raises(ConfigError) as twice:
        kafka_settings(parse(["--command-config", str(properties)]), {"KAFKA_GROUP_KAFKA_SASL_PASSWORD": "Env-18"})
    assert "'sasl.password' is given by --command-config and by the environment" in str(twice.value)
    assert "File-Secret-17" not in str(twice.value) and "Env-18" not in str(twice.value)
    with pytest.raises(ConfigError, match="no Kafka bootstrap servers"):
        kafka_settings(parse([]), {})
    with pytest.raises(ConfigError, match="--kafka-option takes KEY=VALUE"):
        kafka_settings(parse(["--bootstrap-servers", "b:1", "--kafka-option", "=x"]), {})


def test_secrets_of_the_settings_are_scrubbed_from_the_connector_s_messages() -> None:
    kafka_settings(parse(["--bootstrap-servers", "b:1", "--kafka-option", "sasl.password=Flag-Secret-19"]), {})
    assert "Flag-Secret-19" not in scrub("login failed with Flag-Secret-19")


def test_client_config_translates_the_java_client_s_settings() -> None:
    config = client_config({"bootstrap.servers": "b:1", "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                            "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                                'username="u" password="${env:JOB_PW}";',
                            "config.providers": "env",
                            "config.providers.env.class":
                                "org.apache.kafka.common.config.provider.EnvVarConfigProvider"},
                           environ={"JOB_PW": "p-20"})
    assert config["sasl.username"] == "u" and config["sasl.password"] == "p-20"
    assert "sasl.jaas.config" not in config and "config.providers" not in config


def test_help_text_drops_the_markup() -> None:
    doc = "Land it with :class:`pyspark_kafka_group.DeltaSink` (``Trigger.AvailableNow``)::\n\n    python job.py\n"
    assert help_text(doc) == "Land it with pyspark_kafka_group.DeltaSink (Trigger.AvailableNow):\n\n    python job.py\n"


def test_heartbeat_logs_each_step_at_once_and_again_while_it_lasts(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("test_jobs.heartbeat")
    caplog.set_level(logging.INFO, logger=log.name)
    repeated = threading.Event()

    class Seen(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "still joining" in record.getMessage():
                repeated.set()

    log.addHandler(Seen())
    with Heartbeat(log, interval_s=0.05) as heartbeat:
        heartbeat.step("joining the group")
        assert repeated.wait(30)
        heartbeat.step("waiting for the next batch", repeat=False)
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0].startswith("joining the group (")
    assert any(m.startswith("waiting for the next batch (") for m in messages)
    assert not any("still waiting" in m for m in messages)
