"""Bearer tokens over SASL_PLAINTEXT: a warning naming the option and the fix, once (not refused: dev brokers use it)."""

from __future__ import annotations

import logging
from typing import Dict

import pytest

from kafka_group.config import token_options
from kafka_group.config.options import parse_source_options

HERE = "tests.unit.test_token_provider"
_MSK_HOST = "b-1.orders.abc123.c2.kafka.eu-west-1.amazonaws.com:9098"
_LOGGER = "kafka_group.config.token_options"


def _options(protocol: str, **more: str) -> Dict[str, str]:
    return {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t", "kafka.group.id": "g",
            "kafka.security.protocol": protocol, **more}


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == _LOGGER and r.levelno == logging.WARNING]


def test_a_token_provider_over_sasl_plaintext_warns_once(caplog: pytest.LogCaptureFixture,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(token_options, "_WARNED", set(), raising=False)  # "once" starts here
    caplog.set_level(logging.WARNING, logger=_LOGGER)
    parse_source_options(_options("SASL_SSL", tokenProvider=f"{HERE}:good_token"))
    assert _warnings(caplog) == []
    for _ in range(3):
        parsed = parse_source_options(_options("sasl_plaintext", tokenProvider=f"{HERE}:good_token"))
    assert parsed.client_config["sasl.mechanism"] == "OAUTHBEARER"  # still accepted
    [warning] = _warnings(caplog)
    assert "'tokenProvider'" in warning and "SASL_PLAINTEXT" in warning
    assert "set 'kafka.security.protocol' to SASL_SSL" in warning


def test_msk_iam_over_sasl_plaintext_warns_once(caplog: pytest.LogCaptureFixture,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(token_options, "_WARNED", set(), raising=False)  # "once" starts here
    caplog.set_level(logging.WARNING, logger=_LOGGER)
    for _ in range(2):
        parse_source_options(_options("SASL_PLAINTEXT", **{"kafka.bootstrap.servers": _MSK_HOST,
                                                           "kafka.sasl.mechanism": "AWS_MSK_IAM"}))
    [warning] = _warnings(caplog)
    assert "AWS MSK IAM" in warning and "'kafka.sasl.mechanism'" in warning
    assert "set 'kafka.security.protocol' to SASL_SSL" in warning
