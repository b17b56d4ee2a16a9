"""``kafka-group-broker --help`` names the command the user typed: the console script, or
``python -m kafka_group_devbroker``."""

from __future__ import annotations

import pytest

from kafka_group_devbroker.__main__ import build_parser


def test_the_console_script_names_itself_in_its_usage(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.argv", ["/home/u/.venv/bin/kafka-group-broker", "--help"])
    assert build_parser().format_usage().startswith("usage: kafka-group-broker ")


def test_python_dash_m_names_the_module_in_its_usage(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.argv", ["/src/devbroker/kafka_group_devbroker/__main__.py", "--help"])
    assert build_parser().format_usage().startswith("usage: python -m kafka_group_devbroker ")
