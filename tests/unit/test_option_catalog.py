"""Options are declared once (kafka_group.config.option_catalog): each declaration's parser, default and spelling
are what parse_source_options uses, its "did you mean" hints come from them, and the options page of the docs
(docs/options.md, grouped by purpose) is rendered from them."""

from __future__ import annotations

import pathlib
import re
from typing import Any

import pytest

from kafka_group.config.option_catalog import (
    CONTROL_DIR,
    FETCH_MAX_TASKS,
    OPTIONS,
    OptionSpec,
    render_markdown_table,
)
from kafka_group.config.option_docs import GROUPS, OTHER, group_of, grouped_options, main, render_options_page
from kafka_group.config.option_catalog import OPTION_DEFAULTS, OPTION_SPELLING
from kafka_group.config.options import parse_source_options
from kafka_group.errors import ConfigError

OPTIONS_PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "options.md"


def test_the_options_page_is_the_rendered_declarations() -> None:
    assert OPTIONS_PAGE.read_text(encoding="utf-8") == render_options_page(), (
        "docs/options.md differs from kafka_group/config/option_catalog.py: edit the declaration, then run "
        "`python -m kafka_group.config.option_docs --write docs/options.md`")
    assert main(["--check", str(OPTIONS_PAGE)]) == 0


def test_every_option_is_in_one_group_by_purpose_and_none_is_left_over() -> None:
    placed = [spec.name for _, specs in grouped_options() for spec in specs]
    assert sorted(placed) == sorted(o.name for o in OPTIONS)
    assert [o.name for o in OPTIONS if group_of(o) == OTHER.title] == [], (
        "options no group of kafka_group/config/option_docs.py names: add them to a group")
    named = [name for group in GROUPS for name in group.names]
    assert len(named) == len(set(named)) and set(named) <= {o.name for o in OPTIONS}


def test_an_option_no_group_names_is_placed_by_its_spelling() -> None:
    spec = OptionSpec("schemaRegistry.ssl.ca.location", "path", "none", "A CA.", lambda n, r: r)
    assert group_of(spec) == "Schema Registry and record formats"
    assert group_of(OptionSpec("somethingNew", "int", "none", "New.", lambda n, r: r)) == OTHER.title
    page = render_options_page([*OPTIONS, spec])
    section = page[page.index("## Schema Registry and record formats"):page.index("## Refused options")]
    assert "`schemaRegistry.ssl.ca.location`" in section


def test_each_group_table_is_the_catalog_table_of_its_options() -> None:
    page = render_options_page()
    for group, specs in grouped_options():
        assert f"## {group.title}\n" in page
        assert render_markdown_table(specs) in page


def test_each_option_is_declared_once_and_the_parser_uses_the_declarations() -> None:
    keys = [o.key for o in OPTIONS]
    assert len(keys) == len(set(keys))
    assert set(OPTION_DEFAULTS) == set(OPTION_SPELLING) == {o.key for o in OPTIONS if o.source_option}
    assert all(o.name.lower().startswith("kafka.") or o.name == "offsets.table.storage.*"
               for o in OPTIONS if not o.source_option)


def test_declared_defaults_are_the_parsed_defaults() -> None:
    parsed = parse_source_options({"kafka.bootstrap.servers": "h:9092", "subscribe": "t", "kafka.group.id": "g"})
    assert parsed.revoke_timeout_ms == int(OPTION_DEFAULTS["revoketimeoutms"] or 0)
    assert parsed.available_now_timeout_ms == int(OPTION_DEFAULTS["availablenowtimeoutms"] or 0)
    assert parsed.poll_timeout_ms == int(OPTION_DEFAULTS["kafkaconsumer.polltimeoutms"] or 0)
    assert parsed.reader_cache_timeout_ms == int(OPTION_DEFAULTS["kafkaconsumer.cachetimeoutms"] or 0) == 300_000


def test_the_reader_cache_timeout_reaches_the_executors_read_settings() -> None:
    from kafka_group.config.options import parse_source_options as parse
    from pyspark_kafka_group.source.stream_reader import read_settings

    options = parse({"kafka.bootstrap.servers": "h:9092", "subscribe": "t", "kafka.group.id": "g",
                     "kafkaconsumer.cachetimeoutms": "60000"})
    assert read_settings(options).client_idle_timeout_ms == 60_000


# A value each option's parser refuses. An option added to the catalog without one here fails
# test_every_checked_option_has_a_bad_value_here: give it one (or list it as free text).
BAD_VALUES = {
    "kafka.bootstrap.servers": " ",
    "subscribe": "not a topic",
    "subscribePattern": "orders-(",
    "assign": '{"orders":',
    "kafka.group.id": " ",
    "startingOffsets": "soonest",
    "startingTimestamp": "noon",
    "startingOffsetsByTimestamp": '{"orders":{"0":"noon"}}',
    "startingOffsetsByTimestampStrategy": "earliest",
    "maxOffsetsPerTrigger": "0",
    "maxBytesPerTrigger": "lots",
    "minOffsetsPerTrigger": "-1",
    "endingOffsets": "earliest",
    "endingTimestamp": "tomorrow",
    "endingOffsetsByTimestamp": '{"orders":{"0":-5}}',
    "maxTriggerDelay": "later",
    "failOnDataLoss": "yes",
    "includeHeaders": "1",
    "minPartitions": "-2",
    "maxRecordsPerPartition": "many",
    "fetch.minRecordsPerTask": "1.5",
    "fetch.maxTasks": "0",
    "fetch.clusterParallelism": "all",
    "fetch.taskLayout": "spark",
    "read.path": "rust",
    "kafkaConsumer.pollTimeoutMs": "2m",
    "kafkaConsumer.cacheTimeoutMs": "5 minutes",
    "kafkaConsumer.connectTimeoutMs": "-1",
    "groupJoinTimeoutMs": "",
    "availableNowTimeoutMs": "ten",
    "revokeTimeoutMs": "0",
    "leaveGroupOnStop": "maybe",
    "rebalanceListener": "module",
    "tokenProvider": "module.without.callable",
    "maxOffsetsPerPartition": "0",
    "flow.budgetSharing": "greedy",
    "flow.topicPriority": "orders:high",
    "flow.alignment.maxDrift": "30",
    "fetch.maxRecordsPerBatch": "0",
    "offsets.table": " ",
    "offsets.table.shared": "sales.orders",
    "kafka.isolation.level": "read_dirty",
    "schemaRegistryAddress": "registry:8081",
    "schemaRegistry.basic.auth.user.info": "no-colon",
    "schemaRegistry.bearer.auth.token": " ",
    "schemaRegistry.ssl.ca.location": " ",
    "schemaRegistry.ssl.certificate.location": " ",
    "schemaRegistry.ssl.key.location": " ",
    "schemaRegistry.ssl.key.password": " ",
    "schemaRegistry.max.retries": "101",
    "schemaRegistry.bearer.auth.issuer.endpoint.url": "ftp://issuer/token",
    "schemaRegistry.bearer.auth.client.id": " ",
    "schemaRegistry.bearer.auth.client.secret": " ",
    "schemaRegistry.bearer.auth.scope": " ",
    "schemaRegistry.retries.wait.ms": "0",
    "schemaRegistry.retries.max.wait.ms": "soon",
    "valueFormat": "xml",
    "keyFormat": "string",
    "valueSubject": " ",
    "keySubject": "",
    "valueSchemaVersion": "newest",
    "keySchemaVersion": "0",
    "valueSchema": " ",
    "keySchema": "",
    "badRecords": "skip",
}

#: Options whose values are secrets (lower-cased).
SECRET_OPTIONS = {"schemaregistry.basic.auth.user.info", "schemaregistry.bearer.auth.token",
                  "schemaregistry.ssl.key.password", "schemaregistry.bearer.auth.client.secret"}

#: Options whose every string is a value: a path whose blank means the default, client settings as given.
FREE_TEXT = {"flow.controlDir", "kafka.*", "offsets.table.storage.*"}

BASE = {"kafka.bootstrap.servers": "h:9092", "subscribe": "orders", "kafka.group.id": "g"}
#: Options whose default is resolved when a batch is planned (it depends on the batch and the cluster).
PLANNED_DEFAULTS = {"fetch.maxTasks"}


def test_every_declared_option_has_a_parser_that_accepts_its_default() -> None:
    for spec in OPTIONS:
        assert callable(spec.parser), spec.name
        raw = spec.raw({})
        if raw is not None:
            spec.parse(raw)  # a declared default the parser refuses would fail every query
        if spec.default is not None:
            assert spec.default in spec.default_text, f"{spec.name}: the documented default is not the parser's"
    assert {o.name for o in OPTIONS if o.default_text not in ("none", "-", "off", "required")
            and not o.default_text.startswith("required ")} <= {o.name for o in OPTIONS if o.raw({}) is not None
                                                                } | PLANNED_DEFAULTS


def test_every_checked_option_has_a_bad_value_here() -> None:
    assert set(BAD_VALUES) | FREE_TEXT == {o.name for o in OPTIONS}


@pytest.mark.parametrize("spec", [o for o in OPTIONS if o.name in BAD_VALUES], ids=lambda o: o.name)
def test_a_bad_value_of_each_option_fails_naming_it(spec: OptionSpec[Any]) -> None:
    bad = BAD_VALUES[spec.name]
    with pytest.raises(ConfigError, match=re.escape(f"'{spec.name}'")):
        spec.parse(bad)
    # parse_source_options reads every option through its declaration: the same refusal, at load().
    options = {k.lower(): v for k, v in BASE.items()}
    if spec.key in ("subscribepattern", "assign"):
        del options["subscribe"]
    options[spec.key] = bad
    with pytest.raises(ConfigError, match=re.escape(f"'{spec.name}'")) as excinfo:
        parse_source_options(options)
    if bad.strip() and spec.key not in ("assign", "startingoffsets", "startingoffsetsbytimestamp",
                                                       "endingoffsetsbytimestamp"):  # JSON errors name the position instead
        if spec.key in SECRET_OPTIONS:
            assert bad not in str(excinfo.value)  # a secret is never shown, even a malformed one
        else:
            assert bad in str(excinfo.value)


@pytest.mark.parametrize("spec", [o for o in OPTIONS if o.source_option], ids=lambda o: o.name)
def test_unknown_option_suggests_the_declared_spelling(spec: OptionSpec[Any]) -> None:
    near_miss = spec.key + "s"
    with pytest.raises(ConfigError, match=re.escape(f"unknown option '{near_miss}'; did you mean '{spec.name}'?")):
        parse_source_options({**BASE, near_miss: "1"})


def test_suggestions_are_the_declared_source_options_only() -> None:
    assert set(OPTION_SPELLING.values()) == {o.name for o in OPTIONS if o.source_option}
    with pytest.raises(ConfigError) as excinfo:
        parse_source_options({**BASE, "completely_unrelated": "1"})
    assert "did you mean" not in str(excinfo.value)


def test_computed_defaults_come_from_the_declarations() -> None:
    parsed = parse_source_options(BASE)
    # fetch.maxTasks: resolved per batch from the cluster (tests/unit/test_cluster_sizing.py), never the driver's CPUs
    assert parsed.task_sizing.max_tasks is None and FETCH_MAX_TASKS.get({}) is None
    assert parsed.task_sizing.cluster_parallelism is None
    # flow.controlDir: the default root is chosen (and made) by the query's runner, not where options are parsed.
    assert parsed.control_dir is None and CONTROL_DIR.get({}) is None
    assert parse_source_options({**BASE, "flow.controldir": " "}).control_dir is None
    assert parse_source_options({**BASE, "flow.controldir": "/x"}).control_dir == "/x"
