"""The main job: Kafka order events into a Delta table, as one member of a consumer group.

A streaming query with the ``kafka-group`` source joins consumer group
``--group`` (default ``orders-bronze``), parses the JSON order events of topic
``orders`` and lands them in a Delta table exactly once: each micro-batch's files
and its Kafka offsets go into one Delta commit
(:class:`pyspark_kafka_group.DeltaSink`). Start it twice (with two checkpoints)
and the two queries share the topic's partitions, as two Kafka consumers of one
group do; stop or kill one and the other takes its partitions over.

Run it on your cluster with spark-submit (it takes the session Spark gives it),
with the Kafka settings in a properties file as Kafka's own tools take them::

    spark-submit examples/orders_to_delta.py --command-config client.properties \\
        --table /lake/orders_bronze --checkpoint /chk/orders_bronze --name a

or with a session it builds (``--master spark://host:7077``, or ``--local`` for a
local one) and the brokers as a flag::

    python examples/orders_to_delta.py --local --bootstrap-servers HOST:9092 \\
        --table /tmp/orders_bronze --checkpoint /tmp/orders_bronze_chk --name a

Kafka settings come from ``--command-config FILE``, ``KAFKA_GROUP_KAFKA_<SETTING>``
environment variables and ``--bootstrap-servers`` / ``--kafka-option`` (see
``--help``); secrets never reach its output.

It only reads ``orders`` and writes the two folders given. It logs what it is doing
on stderr from its first second, prints one JSON line per landed micro-batch on
stdout (its member name, batch id, rows and the partitions it owns) and reads
commands on stdin: ``stop`` (the query leaves the group), ``start`` (it joins again
from its checkpoint), ``exit``; end of input is ``exit``. ``examples/demo.py``
(``bash scripts/demo.sh``) runs two of these on the embedded cluster, with
``--local 1``. Exit status: 0 after ``exit``, 1 when the query failed (the reason
on stdout's ``failed`` line and on stderr), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import queue
import sys
import threading
import time
from typing import Any, Dict, List, Mapping, Optional

from pyspark_kafka_group.jobs import (Heartbeat, add_cluster_arguments, help_text, job_session, kafka_settings,
                                      source_options, stop_session)
from pyspark_kafka_group.query_errors import failure_reason

logger = logging.getLogger("orders_to_delta")

TOPIC = "orders"
GROUP = "orders-bronze"

ORDER_SCHEMA = (
    "order_id string, customer_id string, amount double, currency string, "
    "status string, items int, created_at timestamp"
)


def emit(**event: Any) -> None:
    """One JSON line on stdout (what ``examples/demo.py`` reads)."""
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def owned_partitions(progress: Dict[str, Any]) -> List[int]:
    """The partitions of ``orders`` the query's group member owned at this progress event."""
    sources = progress.get("sources") or [{}]
    latest = sources[0].get("latestOffset") or "{}"
    report = json.loads(latest) if isinstance(latest, str) else latest
    member = report.get("@member") or {}
    return sorted(int(p) for p in (member.get("owned") or {}).get(TOPIC, []))


def start_query(spark: Any, args: argparse.Namespace, kafka: Mapping[str, str]) -> Any:
    """Start the query: ``orders`` from group ``args.group`` into the Delta table, exactly once."""
    from pyspark.sql import functions as F

    from pyspark_kafka_group import DeltaSink

    events = (
        spark.readStream.format("kafka-group")
        .options(**source_options(kafka))  # the Kafka cluster, with its security settings
        .option("subscribe", TOPIC)
        .option("kafka.group.id", args.group)
        .option("startingOffsets", args.starting_offsets)
        .option("offsets.table", args.table)  # the Delta table's commits hold the offsets
        # a member that dies is noticed after this instead of librdkafka's default 45 s (Kafka's brokers
        # accept 6 s and more by default: group.min.session.timeout.ms)
        .option("kafka.session.timeout.ms", str(args.session_timeout_ms))
        .option("kafka.heartbeat.interval.ms", "500")
        .load()
    )

    def parse(batch: Any) -> Any:
        """A stateless transformation: JSON to columns, keeping where each row came from."""
        return batch.select(
            F.from_json(F.col("value").cast("string"), ORDER_SCHEMA).alias("order"),
            "topic",
            "partition",
            "offset",
            F.col("timestamp").alias("kafka_timestamp"),
            F.lit(args.name).alias("landed_by"),
        ).select("order.*", "topic", "partition", "offset", "kafka_timestamp", "landed_by")

    return (
        events.writeStream.foreachBatch(DeltaSink(args.table, transform=parse))
        .option("checkpointLocation", args.checkpoint)
        .trigger(processingTime="1 second")
        .start()
    )


def read_commands(commands: "queue.Queue[str]") -> None:
    """Thread: stdin's lines into ``commands``; end of input is ``exit``."""
    for line in sys.stdin:
        commands.put(line.strip())
    commands.put("exit")


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=help_text(__doc__),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table", required=True, help="the Delta table to land in (a folder; created if missing)")
    parser.add_argument("--checkpoint", required=True, help="this query's Spark checkpoint (a folder)")
    parser.add_argument("--name", default="a", help="this member's name in its output lines and the landed_by column")
    parser.add_argument("--group", default=GROUP, help=f"the consumer group to join (default {GROUP})")
    parser.add_argument("--starting-offsets", default="earliest",
                        help="where partitions the group never read start: earliest, latest or JSON")
    parser.add_argument("--session-timeout-ms", type=int, default=6000,
                        help="the group member's session timeout: how soon the group notices it died (default 6000)")
    add_cluster_arguments(parser)
    args = parser.parse_args(argv)
    if args.master and args.local is not None:
        parser.error("--master and --local both say where Spark runs: give one")
    try:
        args.kafka = kafka_settings(args, os.environ)
    except ValueError as exc:  # ConfigError: names the setting and its sources, never a value
        parser.error(str(exc))
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("py4j", "kafka_group", "pyspark_kafka_group"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    spark: Any = None
    own_session = False
    with Heartbeat(logger) as heartbeat:
        try:
            heartbeat.step("starting the Spark session")
            spark, own_session = job_session(f"orders-to-delta-{args.name}", master=args.master, conf=args.conf,
                                             local=args.local)
            commands: "queue.Queue[str]" = queue.Queue()
            threading.Thread(target=read_commands, args=(commands,), daemon=True, name="commands").start()
            heartbeat.step(f"joining group '{args.group}' and planning the first batch")
            query: Any = start_query(spark, args, args.kafka)
            emit(event="started", member=args.name, pid=os.getpid())
            return serve(query, commands, spark, args, heartbeat)
        except Exception as exc:  # one clear line and a non-zero status
            print(f"orders_to_delta: FAILED: {failure_reason(exc)}", file=sys.stderr, flush=True)
            return 1
        finally:
            if spark is not None and own_session:
                stop_session(spark)


def serve(query: Any, commands: "queue.Queue[str]", spark: Any, args: argparse.Namespace,
          heartbeat: Heartbeat) -> int:
    """Report each landed batch and follow the commands until ``exit`` (0) or the query fails (1)."""
    last_batch = -1
    while True:
        try:
            command = commands.get(timeout=0.2)
        except queue.Empty:
            command = ""
        if command in ("stop", "exit") and query is not None:
            query.stop()  # the group member leaves the group: the others get its partitions at once
            query = None
            emit(event="stopped", member=args.name)
            heartbeat.step("stopped: out of the group", repeat=False)
        if command == "exit":
            return 0
        if command == "start" and query is None:
            heartbeat.step(f"joining group '{args.group}' again and planning the next batch")
            query = start_query(spark, args, args.kafka)
            emit(event="started", member=args.name, pid=os.getpid())
        if query is None:
            continue
        if not query.isActive:
            exception = query.exception()
            reason = failure_reason(exception) if exception is not None else "the query stopped"
            emit(event="failed", member=args.name, error=reason[:2000])
            print(f"orders_to_delta: FAILED: {reason}", file=sys.stderr, flush=True)
            return 1
        progress = query.lastProgress
        report = (json.loads(progress.json) if hasattr(progress, "json") else dict(progress)) if progress else {}
        if report and report["batchId"] != last_batch:
            last_batch = report["batchId"]
            rows = int(report.get("numInputRows") or 0)
            emit(event="batch", member=args.name, batch=last_batch, rows=rows, owned=owned_partitions(report),
                 at=time.time())
            heartbeat.step(f"batch {last_batch} landed ({rows} rows); waiting for the next", repeat=False)


if __name__ == "__main__":
    sys.exit(main())
