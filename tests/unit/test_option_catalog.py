"""Options are declared once (kafka_group.option_catalog): the parser's defaults and spellings and the
README's table all come from that declaration."""

from __future__ import annotations

import pathlib

from kafka_group.option_catalog import OPTIONS, readme_table_block, render_markdown_table
from kafka_group.options import OPTION_DEFAULTS, OPTION_SPELLING, parse_source_options

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def test_readme_table_is_the_rendered_declarations() -> None:
    block = readme_table_block(README.read_text(encoding="utf-8"))
    assert block, "README.md lost its option table markers"
    assert block == render_markdown_table(), (
        "README.md's option table differs from kafka_group/option_catalog.py: edit the declaration, then run "
        "`python -m kafka_group.option_catalog --write README.md`")


def test_each_option_is_declared_once_and_the_parser_uses_the_declarations() -> None:
    keys = [o.key for o in OPTIONS]
    assert len(keys) == len(set(keys))
    assert set(OPTION_DEFAULTS) == set(OPTION_SPELLING) == {o.key for o in OPTIONS if o.source_option}
    assert all(o.name.lower().startswith("kafka.") for o in OPTIONS if not o.source_option)


def test_declared_defaults_are_the_parsed_defaults() -> None:
    parsed = parse_source_options({"kafka.bootstrap.servers": "h:9092", "subscribe": "t", "kafka.group.id": "g"})
    assert parsed.revoke_timeout_ms == int(OPTION_DEFAULTS["revoketimeoutms"] or 0)
    assert parsed.available_now_timeout_ms == int(OPTION_DEFAULTS["availablenowtimeoutms"] or 0)
    assert parsed.poll_timeout_ms == int(OPTION_DEFAULTS["kafkaconsumer.polltimeoutms"] or 0)
