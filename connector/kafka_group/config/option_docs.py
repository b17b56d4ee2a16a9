"""The options page of the docs (``docs/options.md``), rendered from the option catalog.

Every option is declared once, in :mod:`kafka_group.config.option_catalog`; this module only
sorts the declarations into groups by purpose (one page section and one table each) and
renders the page. ``python -m kafka_group.config.option_docs`` prints it,
``--write docs/options.md`` writes it, ``--check docs/options.md`` fails when the committed
page differs (a unit test and the docs build run that check).

An option this module does not name is placed by its spelling (``flow.*`` under flow control,
``schemaRegistry*`` under the Schema Registry, ...); one that matches no rule lands in
"Other options", which a unit test keeps empty.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from kafka_group.config.option_catalog import OPTIONS, OptionSpec, render_markdown_table

__all__ = ["GROUPS", "OTHER", "group_of", "grouped_options", "render_options_page", "main"]


@dataclass(frozen=True)
class OptionGroup:
    """One section of the page: its heading, a sentence on what its options are for, and their names."""

    title: str
    about: str
    names: Tuple[str, ...]


GROUPS: Tuple[OptionGroup, ...] = (
    OptionGroup("Connecting and subscribing",
                "Which cluster, which topics, which consumer group; settings handed to the Kafka clients.",
                ("kafka.bootstrap.servers", "subscribe", "subscribePattern", "assign", "kafka.group.id",
                 "kafka.isolation.level", "kafka.*", "kafkaConsumer.connectTimeoutMs", "groupJoinTimeoutMs",
                 "leaveGroupOnStop")),
    OptionGroup("Where a query starts and ends",
                "Where partitions never read before start, where batch reads end, and what happens to "
                "records the broker no longer has.",
                ("startingOffsets", "startingTimestamp", "startingOffsetsByTimestamp",
                 "startingOffsetsByTimestampStrategy", "endingOffsets", "endingTimestamp",
                 "endingOffsetsByTimestamp", "failOnDataLoss")),
    OptionGroup("How much a batch reads",
                "Rate limits and trigger thresholds.",
                ("maxOffsetsPerTrigger", "maxBytesPerTrigger", "maxOffsetsPerPartition", "minOffsetsPerTrigger",
                 "maxTriggerDelay",
                 "availableNowTimeoutMs")),
    OptionGroup("Flow control",
                "How the batch budget is shared, priorities, event-time alignment and the control channel of "
                "`flow.pause`/`flow.resume` ([Flow control](flow-control.md)).",
                ("flow.budgetSharing", "flow.topicPriority", "flow.alignment.maxDrift", "flow.controlDir")),
    OptionGroup("Tasks and reading on the executors",
                "How a batch becomes Spark tasks, and how executors read their ranges.",
                ("minPartitions", "maxRecordsPerPartition", "fetch.minRecordsPerTask", "fetch.maxTasks",
                 "fetch.clusterParallelism", "fetch.taskLayout", "fetch.maxRecordsPerBatch",
                 "kafkaConsumer.pollTimeoutMs", "kafkaConsumer.cacheTimeoutMs", "includeHeaders", "read.path")),
    OptionGroup("Exactly-once into Delta",
                "The Delta table whose commits hold the offsets ([Exactly-once](exactly-once.md)).",
                ("offsets.table", "offsets.table.shared", "offsets.table.storage.*", "revokeTimeoutMs")),
    OptionGroup("Your code: rebalance listener and token provider",
                "Options that name a `module:callable` the connector imports and calls "
                "(see the trust model in `SECURITY.md`).",
                ("rebalanceListener", "tokenProvider")),
    OptionGroup("Schema Registry and record formats",
                "Decoding registry-framed Avro, Protobuf and JSON Schema records into typed columns "
                "([Schema Registry](schema-registry.md)).",
                ("valueFormat", "keyFormat", "schemaRegistryAddress", "schemaRegistry.basic.auth.user.info",
                 "schemaRegistry.bearer.auth.token", "valueSubject", "keySubject", "valueSchemaVersion",
                 "keySchemaVersion", "valueSchema", "keySchema", "badRecords")),
)

#: The section of options that no group names and no spelling rule places (kept empty by a test).
OTHER = OptionGroup("Other options", "", ())

#: Spelling rules for options no group names: (prefix of the lower-cased name, group title).
_PREFIX_RULES: Tuple[Tuple[str, str], ...] = (
    ("flow.", "Flow control"),
    ("fetch.", "Tasks and reading on the executors"),
    ("kafkaconsumer.", "Tasks and reading on the executors"),
    ("schemaregistry", "Schema Registry and record formats"),
    ("offsets.table", "Exactly-once into Delta"),
    ("starting", "Where a query starts and ends"),
    ("ending", "Where a query starts and ends"),
    ("kafka.", "Connecting and subscribing"),
)
_REGISTRY_SUFFIXES = ("format", "subject", "schema", "schemaversion")

_INTRO = """\
# Options

<!-- generated by `python -m kafka_group.config.option_docs --write docs/options.md` from
     connector/kafka_group/config/option_catalog.py: edit the declarations there, not this page -->

Names follow Spark's Kafka source wherever the meaning is the same. Keys are
case-insensitive. Every option is validated when `load()` runs, before any data
moves; a bad one fails with an error that names it and says how to fix it.
Unknown options fail with a "did you mean" hint.
"""

_REFUSED = """\
## Refused options

Refused, with the reason in the error: `kafka.enable.auto.commit`,
`kafka.enable.auto.offset.store` (the connector commits after each batch),
`kafka.auto.offset.reset` (use `startingOffsets` and `failOnDataLoss`),
`kafka.key.deserializer`/`kafka.value.deserializer` (records are binary: use
`cast`, `from_json`, `from_avro`), `kafka.group.instance.id` with `assign` (static
membership needs a group), and Spark Kafka options this source does not support
(`endingOffsets` on a stream, `groupIdPrefix`, ...). The Java client's security
settings (`kafka.sasl.jaas.config`, `kafka.ssl.truststore.*`, ...) are translated to
librdkafka's: see [Security](security.md).
"""


def group_of(spec: OptionSpec[Any]) -> str:
    """The title of the group ``spec`` belongs to: the group naming it, else by its spelling, else "Other"."""
    for group in GROUPS:
        if spec.name in group.names:
            return group.title
    key = spec.key
    for prefix, title in _PREFIX_RULES:
        if key.startswith(prefix):
            return title
    if key.startswith(("key", "value")) and key.endswith(_REGISTRY_SUFFIXES):
        return "Schema Registry and record formats"
    return OTHER.title


def grouped_options(options: Sequence[OptionSpec[Any]] = OPTIONS) -> List[Tuple[OptionGroup, List[OptionSpec[Any]]]]:
    """Each non-empty group with its options: named ones in the group's order, then placed ones."""
    by_title: Dict[str, List[OptionSpec[Any]]] = {}
    for spec in options:
        by_title.setdefault(group_of(spec), []).append(spec)
    result: List[Tuple[OptionGroup, List[OptionSpec[Any]]]] = []
    for group in (*GROUPS, OTHER):
        specs = by_title.get(group.title, [])
        order = {name: i for i, name in enumerate(group.names)}
        specs.sort(key=lambda s: order.get(s.name, len(order)))
        if specs:
            result.append((group, specs))
    return result


def render_options_page(options: Sequence[OptionSpec[Any]] = OPTIONS) -> str:
    """The whole of ``docs/options.md``."""
    groups = grouped_options(options)
    parts = [_INTRO, "Sections: " + ", ".join(f"[{g.title}](#{_anchor(g.title)})" for g, _ in groups) + ".\n"]
    for group, specs in groups:
        parts.append(f"## {group.title}\n\n" + (f"{group.about}\n\n" if group.about else "")
                     + render_markdown_table(specs) + "\n")
    parts.append(_REFUSED)
    return "\n".join(parts)


def _anchor(title: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc) gives a heading: lower case, punctuation dropped, spaces as '-'."""
    kept = "".join(c for c in title.lower() if c.isalnum() or c in " -_")
    return "-".join(kept.split())


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Print the page; ``--write PATH`` writes it; ``--check PATH`` exits 1 when PATH differs."""
    args = list(sys.argv[1:] if argv is None else argv)
    page = render_options_page()
    if len(args) == 2 and args[0] in ("--write", "--check"):
        if args[0] == "--write":
            with open(args[1], "w", encoding="utf-8") as f:
                f.write(page)
            return 0
        try:
            with open(args[1], encoding="utf-8") as f:
                current = f.read()
        except OSError as exc:
            sys.stderr.write(f"{args[1]}: {exc.strerror}\n")
            return 1
        if current != page:
            sys.stderr.write(f"{args[1]} is not what the option catalog declares: run "
                             f"`python -m kafka_group.config.option_docs --write {args[1]}`\n")
            return 1
        return 0
    if args:
        sys.stderr.write("usage: python -m kafka_group.config.option_docs [--write PATH | --check PATH]\n")
        return 2
    sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
