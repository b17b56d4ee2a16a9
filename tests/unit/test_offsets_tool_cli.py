"""The offsets tool's command line: help for every subcommand and flag, in plain text.

It is the ``kafka-group-offsets`` command (setup.py's console script), so its help is what a user
reads first: each subcommand and each flag says what it does, and no reStructuredText markup
(````kafka-consumer-groups````) leaks from the module's docstring into it.
"""

from __future__ import annotations

import re
from typing import List

import pytest

from kafka_group.offsets_tool import main


def _help(capsys: pytest.CaptureFixture[str], argv: List[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        main(argv + ["--help"])
    assert exited.value.code == 0
    return capsys.readouterr().out


def _undescribed(text: str) -> List[str]:
    """Entries of argparse's help (a subcommand or a flag) with no description."""
    lines = text.splitlines()
    bare = []
    for i, line in enumerate(lines):
        entry = re.match(r"^  (\S.*?)(\s{2,}\S.*)?$", line)
        if not entry or entry.group(2):
            continue
        following = lines[i + 1] if i + 1 < len(lines) else ""
        if not re.match(r"^\s{6,}\S", following):  # argparse puts a long entry's help on the next line
            bare.append(entry.group(1).strip())
    return bare


@pytest.mark.parametrize("command", [[], ["show"], ["reset"], ["from-spark-checkpoint"]])
def test_help_describes_every_subcommand_and_flag_in_plain_text(
    capsys: pytest.CaptureFixture[str], command: List[str]
) -> None:
    text = _help(capsys, command)
    assert "kafka-group-offsets" in text.splitlines()[0], text
    assert "``" not in text and ":mod:" not in text and ":func:" not in text, text
    assert _undescribed(text) == [], text
    if not command:
        assert re.search(r"^\s+show\s+\S", text, re.M) and re.search(r"^\s+reset\s+\S", text, re.M), text


def test_a_bad_partition_list_names_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["reset", "--table", "t", "--group", "g", "--bootstrap-servers", "b:1", "--topic", "t",
              "--partitions", "0,x", "--to-earliest"])
    assert "--partitions" in capsys.readouterr().err


def test_errors_name_settings_of_the_command_config_and_leave_topics_alone() -> None:
    from kafka_group.offsets_tool.command import _tool_words

    said = _tool_words("--topic names 'kafka.orders'; check 'kafka.sasl.username' (or 'kafka.ssl.truststore.*')")
    assert said == ("--topic names 'kafka.orders'; check 'sasl.username' (--command-config) "
                    "(or 'ssl.truststore.*' (--command-config))")
