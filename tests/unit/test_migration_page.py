"""docs/migration.md's table of the options that carry over from ``format("kafka")`` names options this source has."""

from __future__ import annotations

import pathlib
import re

from kafka_group.config.option_catalog import OPTION_SPELLING

PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "migration.md"


def test_every_option_said_to_carry_over_is_one_of_the_source() -> None:
    text = PAGE.read_text(encoding="utf-8")
    table = text.split("<!-- migration-same-options -->")[1].split("<!-- /migration-same-options -->")[0]
    named = [name for row in table.splitlines()[2:] for name in re.findall(r"`([^`]+)`", row.split("|")[1])]
    assert len(named) >= 15
    options = set(OPTION_SPELLING.values())
    missing = [n for n in named if n not in options and not n.startswith("kafka.")]
    assert missing == [], f"said to carry over but not options of kafka-group: {missing}"
