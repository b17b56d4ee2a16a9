"""The offsets tool's command line, ``kafka-group-offsets`` (also ``python -m kafka_group.offsets_tool``).

The work is :mod:`kafka_group.offsets_tool.admin`'s (``show_offsets``, ``plan_reset``); this module turns the
command line into those calls and their answers into text. Output goes to stdout, warnings and errors to stderr;
the exit code is 0 on success, 2 on an error (and argparse's 2 on a bad command line). Errors name the tool's
own flags, not the Spark source's options.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import List, Optional, Sequence

from kafka_group.config.client_properties import ENV_PREFIX, tool_client_settings
from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
from kafka_group.errors import ConfigError, KafkaGroupError
from kafka_group.group.cluster_metadata import ClusterView
from kafka_group.log_setup import configure, level_of
from kafka_group.offsets import TopicPartition, parse_starting_offsets
from kafka_group.offsets_tool.admin import PartitionOffsets, parse_timestamp, past_end, plan_reset, show_offsets
from kafka_group.offsets_tool.spark_checkpoint import positions_from_checkpoint, starting_offsets_json

__all__ = ["build_parser", "main"]

PROG = "kafka-group-offsets"

DESCRIPTION = """\
Read and reset the Kafka offsets a kafka-group query keeps in its Delta table (the option
offsets.table), as kafka-consumer-groups does for a group's committed offsets.

show   prints each partition's position in the table, the broker's latest offset and the lag.
reset  moves positions (earliest, latest, a time, or explicit offsets) in a Delta commit of its
       own; a dry run unless --execute is given. A running query picks a reset up at its next
       batch: backwards re-lands records, forwards skips them.
from-spark-checkpoint
       prints where a stopped format("kafka") query's last finished batch ended, read from its
       checkpoint, as the startingOffsets JSON of the kafka-group query that takes over.
"""

EPILOG = f"""\
A secured cluster's settings (security.protocol, sasl.*, ssl.*) come from --command-config
FILE, a Java properties file as Kafka's own tools take, or from environment variables
{ENV_PREFIX}<SETTING> ({ENV_PREFIX}SASL_PASSWORD); never from the command
line, where other users of the host could read them.
Run '{PROG} show --help' or '{PROG} reset --help' for the flags.
"""

#: ``'kafka.<setting>'`` in an error of the connector's: the tool's user sets it in --command-config.
#: Only Kafka client setting names: a topic named 'kafka.orders' in a message stays as it is.
_SOURCE_SETTING = re.compile(r"'kafka\.((?:security|sasl|ssl|bootstrap|client|socket|connections|reconnect|metadata|"
                             r"request|retry|retries|broker|api|enable)\.[A-Za-z0-9_.*\-]+)'")


def _partition_list(text: str) -> List[int]:
    """``0,3,5`` as partition numbers (argparse calls it; its ValueError names --partitions)."""
    numbers = [part.strip() for part in text.split(",")]
    if not numbers or not all(n.isascii() and n.isdigit() for n in numbers):
        raise argparse.ArgumentTypeError(f"'{text[:60]}' is not a comma-separated list of partition numbers (0,3,5)")
    return [int(n) for n in numbers]


def _positive_ms(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) <= 0 or len(text) > 10:
        raise argparse.ArgumentTypeError(f"'{text[:60]}' is not a positive number of milliseconds")
    return int(text)


def _log_level(text: str) -> int:
    level = level_of(text)
    if level is None:
        raise argparse.ArgumentTypeError(f"'{text[:60]}' is not a level: use DEBUG, INFO, WARNING or ERROR")
    return level


def _common_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--table", required=True, help="the Delta table holding the offsets (the query's offsets.table)")
    parser.add_argument("--group", required=True, help="the consumer group the table belongs to (kafka.group.id)")
    parser.add_argument("--topic", action="append", required=True,
                        help="a topic whose partitions to show or reset; repeat the flag for several")
    parser.add_argument("--bootstrap-servers", default=None, metavar="HOST:PORT[,...]",
                        help="the brokers to ask (or bootstrap.servers in --command-config)")
    parser.add_argument("--command-config", default=None, metavar="FILE",
                        help="Kafka client settings as a properties file, like Kafka's tools (security.protocol, "
                             f"sasl.*, ssl.*); or environment variables {ENV_PREFIX}<SETTING>, such as "
                             f"{ENV_PREFIX}SASL_PASSWORD")
    parser.add_argument("--timeout-ms", type=_positive_ms, default=30000, metavar="MS",
                        help="how long to wait for each answer of the cluster (default 30000)")
    parser.add_argument("--log-level", type=_log_level, default=None, metavar="LEVEL",
                        help="print the connector's and librdkafka's log lines at this level (DEBUG, INFO, "
                             "WARNING, ERROR) on stderr; none by default")


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``kafka-group-offsets``."""
    parser = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="{show,reset,from-spark-checkpoint}",
                                help="what to do (each takes --help)")
    show = sub.add_parser("show", help="print each partition's position in the table, latest offset and lag",
                          description="Print, per partition of the topics, the table's position (the next offset "
                                      "it will read), the broker's latest offset and the lag. Warns when a position "
                                      "is past the partition's end (a topic deleted and recreated).")
    _common_flags(show)
    reset = sub.add_parser("reset", help="move the table's positions; a dry run unless --execute",
                           description="Move the table's positions of the topics' partitions in a Delta commit of "
                                       "its own (no data). Without --execute it only prints each position now and "
                                       "after, and checks what the reset would check.")
    _common_flags(reset)
    reset.add_argument("--partitions", type=_partition_list, default=None, metavar="N[,N...]",
                       help="only these partition numbers, comma-separated (default: all)")
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true",
                      help="show each partition's position now and after the reset; change nothing (the default)")
    mode.add_argument("--execute", action="store_true", help="apply the reset to the table")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true", help="to the first offset the broker still holds")
    target.add_argument("--to-latest", action="store_true", help="to the partition's end (skip what is there)")
    target.add_argument("--to-timestamp", default=None, metavar="TIME",
                        help="to the first record at or after TIME: ISO-8601 (2026-11-23T08:00:00Z) or "
                             "milliseconds since the epoch")
    target.add_argument("--to-offsets", default=None, metavar="JSON",
                        help='to explicit offsets, as JSON like {"orders":{"0":1200}}')
    spark = sub.add_parser(
        "from-spark-checkpoint", help="print a stopped format(\"kafka\") query's positions as startingOffsets JSON",
        description="Print, as the startingOffsets JSON of a kafka-group query, where the last finished batch of a "
                    "stopped format(\"kafka\") query ended: the end offsets in CHECKPOINT/offsets/N of the last "
                    "batch N with a commit marker CHECKPOINT/commits/N (or, with --delta-table, the last batch "
                    "Delta's streaming sink wrote to that table, if later). The new query then reads every record "
                    "after those positions exactly once. Reads a local folder: copy an object-store checkpoint "
                    "down first.")
    spark.add_argument("checkpoint", metavar="CHECKPOINT", help="the old query's checkpointLocation (a folder)")
    spark.add_argument("--source", type=int, default=-1, metavar="N",
                       help="the Kafka source's number (from 0) when the old query has several sources")
    spark.add_argument("--delta-table", default=None, metavar="PATH",
                       help="the Delta table the old query wrote with format(\"delta\"): a batch it holds whose "
                            "commit marker Spark never wrote (a killed query) counts as finished")
    return parser


def _from_spark_checkpoint(args: argparse.Namespace) -> int:
    delta_batch = None
    if args.delta_table:
        table = args.delta_table

        def delta_batch(query_id: str) -> Optional[int]:
            from deltalake import DeltaTable

            version = DeltaTable(table).transaction_version(query_id)
            return None if version is None else int(version)

    positions = positions_from_checkpoint(args.checkpoint, source_index=args.source, delta_batch=delta_batch)
    why = ("the last batch with a commit marker" if positions.source == "commits"
           else "the last batch the Delta table holds")
    print(f"batch {positions.batch_id} ({why}) ended at these positions; start the kafka-group query with "
          "option('startingOffsets', <the line on stdout>)", file=sys.stderr)
    print(starting_offsets_json(positions))
    return 0


def _cell(value: Optional[int]) -> str:
    return "-" if value is None else f"{value}"


def _show(rows: Sequence[PartitionOffsets], table: str) -> None:
    print(f"{'topic':<30} {'partition':>9} {'committed':>12} {'latest':>12} {'lag':>10}")
    for row in rows:
        print(f"{row.topic_partition.topic:<30} {row.topic_partition.partition:>9} "
              f"{_cell(row.committed):>12} {_cell(row.latest):>12} {_cell(row.lag):>10}")
    for row in past_end(rows):
        print(f"warning: the table's position of {row.topic_partition} ({row.committed}) is past the end of the "
              f"partition ({row.latest}): these are not the records the table read. The topic was probably "
              "deleted and recreated (its offsets start again at 0), or an unclean leader election cut the log. "
              f"To read the partition from its start, run '{PROG} reset --table {table} ... "
              f"--partitions {row.topic_partition.partition} --to-earliest'", file=sys.stderr)


def _missing_topics(cluster_partitions: Sequence[TopicPartition], topics: Sequence[str]) -> None:
    found = {tp.topic for tp in cluster_partitions}
    missing = [t for t in topics if t not in found]
    if missing:
        raise ConfigError(f"--topic names {', '.join(repr(t) for t in missing)}, which the cluster does not have "
                          "(or this principal may not describe): correct the name")


def run(args: argparse.Namespace) -> int:
    """Carry out parsed ``args``; returns the exit code (raises the connector's errors)."""
    if args.command == "from-spark-checkpoint":
        return _from_spark_checkpoint(args)
    settings = tool_client_settings(args.command_config, os.environ, args.bootstrap_servers)
    cluster = ClusterView(settings, args.timeout_ms, servers_option="--bootstrap-servers",
                          timeout_option="--timeout-ms")
    partitions = cluster.partitions_of(args.topic)
    _missing_topics(partitions, args.topic)
    if args.command == "show":
        _show(show_offsets(args.table, args.group, cluster, args.topic), args.table)
        return 0
    if args.partitions is not None:
        wanted = set(args.partitions)
        unknown = sorted(wanted - {tp.partition for tp in partitions})
        if unknown:
            raise ConfigError(f"--partitions names {unknown}, which the topics do not have: correct the numbers")
        partitions = [tp for tp in partitions if tp.partition in wanted]
    explicit = None
    if args.to_offsets:
        try:
            spec = parse_starting_offsets(args.to_offsets).specific or {}
        except (ConfigError, ValueError) as exc:
            raise ConfigError(f"--to-offsets: {_tool_words(str(exc))}") from None
        explicit = {tp: pos for tp, pos in spec.items() if pos >= 0}
    to = ("earliest" if args.to_earliest else "latest" if args.to_latest
          else "timestamp" if args.to_timestamp else "offsets")
    plan = plan_reset(args.table, args.group, cluster, partitions, to=to,
                      timestamp_ms=parse_timestamp(args.to_timestamp) if args.to_timestamp else None, offsets=explicit)
    print(f"{'topic':<30} {'partition':>9} {'current':>12} {'new':>12}")
    for planned in plan:
        print(f"{planned.topic_partition.topic:<30} {planned.topic_partition.partition:>9} "
              f"{_cell(planned.current):>12} {planned.new:>12}")
    if not args.execute:
        print("dry run: the table was not changed; run again with --execute to apply this reset")
        return 0
    version = DeltaOffsetStore(args.table, args.group).reset(
        {planned.topic_partition: planned.new for planned in plan}, reason=f"reset to {to}")
    print(f"reset applied: table version {version}")
    return 0


def _tool_words(message: str) -> str:
    """An error of the connector's in the tool's words: ``'kafka.sasl.password'`` is the setting
    ``'sasl.password'`` of --command-config (or its environment variable)."""
    return _SOURCE_SETTING.sub(lambda m: f"'{m.group(1)}' (--command-config)", message)


def main(argv: Optional[List[str]] = None) -> int:
    """``kafka-group-offsets``: parse ``argv`` (default ``sys.argv[1:]``), run, return the exit code."""
    args = build_parser().parse_args(argv)
    if getattr(args, "log_level", None) is not None:  # from-spark-checkpoint talks to no cluster: no --log-level
        configure(args.log_level)
    try:
        return run(args)
    except (KafkaGroupError, ValueError) as exc:
        print(f"error: {_tool_words(str(exc))}", file=sys.stderr)
        return 2

