"""The main job: Kafka order events into a Delta table, as one member of a consumer group.

A streaming query with the ``kafka-group`` source joins consumer group
``--group`` (default ``orders-bronze``), parses the JSON order events of topic
``orders`` and lands them in a Delta table exactly once: each micro-batch's files
and its Kafka offsets go into one Delta commit
(:class:`pyspark_kafka_group.DeltaSink`). Start it twice (with two checkpoints)
and the two queries share the topic's partitions, as two Kafka consumers of one
group do; stop or kill one and the other takes its partitions over.

Run it (after ``pip install '.[spark]'``) against your cluster::

    python examples/orders_to_delta.py --bootstrap-servers HOST:9092 \\
        --table /tmp/orders_bronze --checkpoint /tmp/orders_bronze_chk --name a

It only reads ``orders`` and writes the two folders given. It prints one JSON
line per landed micro-batch on stdout (its member name, batch id, rows and the
partitions it owns) and reads commands on stdin: ``stop`` (the query leaves the
group), ``start`` (it joins again from its checkpoint), ``exit``; end of input
is ``exit``. ``examples/demo.py`` (``bash scripts/demo.sh``) runs two of these
on the embedded cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import sys
import threading
import time
from typing import Any, Dict, List, Optional

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


def start_query(spark: Any, args: argparse.Namespace) -> Any:
    """Start the query: ``orders`` from group ``args.group`` into the Delta table, exactly once."""
    from pyspark.sql import functions as F

    from pyspark_kafka_group import DeltaSink

    events = (
        spark.readStream.format("kafka-group")
        .option("kafka.bootstrap.servers", args.bootstrap_servers)
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


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", required=True, help="the Kafka cluster to read topic 'orders' from")
    parser.add_argument("--table", required=True, help="the Delta table to land in (a folder; created if missing)")
    parser.add_argument("--checkpoint", required=True, help="this query's Spark checkpoint (a folder)")
    parser.add_argument("--name", default="a", help="this member's name in its output lines and the landed_by column")
    parser.add_argument("--group", default=GROUP, help="the consumer group to join")
    parser.add_argument("--starting-offsets", default="earliest",
                        help="where partitions the group never read start: earliest, latest or JSON")
    parser.add_argument("--session-timeout-ms", type=int, default=6000,
                        help="the group member's session timeout: how soon the group notices it died (default 6000)")
    parser.add_argument("--cores", type=int, default=1, help="local Spark cores")
    args = parser.parse_args(argv)

    from pyspark_kafka_group.spark_session import local_session

    spark = local_session(f"orders-to-delta-{args.name}", cores=args.cores,
                          extra_conf={"spark.ui.showConsoleProgress": "false"})
    commands: "queue.Queue[str]" = queue.Queue()
    threading.Thread(target=read_commands, args=(commands,), daemon=True, name="commands").start()
    query: Any = start_query(spark, args)
    emit(event="started", member=args.name, pid=os.getpid())
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
        if command == "exit":
            spark.stop()
            return 0
        if command == "start" and query is None:
            query = start_query(spark, args)
            emit(event="started", member=args.name, pid=os.getpid())
        if query is None:
            continue
        if not query.isActive:
            exception = query.exception()
            emit(event="failed", member=args.name, error=str(exception)[:2000])
            return 1
        progress = query.lastProgress
        report = (json.loads(progress.json) if hasattr(progress, "json") else dict(progress)) if progress else {}
        if report and report["batchId"] != last_batch:
            last_batch = report["batchId"]
            rows = int(report.get("numInputRows") or 0)
            emit(event="batch", member=args.name, batch=last_batch, rows=rows, owned=owned_partitions(report),
                 at=time.time())


if __name__ == "__main__":
    sys.exit(main())
