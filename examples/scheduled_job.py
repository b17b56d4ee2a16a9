"""A scheduled batch job: land what is in a Kafka topic now in Delta, exactly once, then exit.

Run it from cron, Airflow, a Databricks job or any scheduler: each run joins the
consumer group, reads every partition from where the Delta table says the last
run stopped up to the latest offsets at the start of the run
(``Trigger.AvailableNow``), lands them with :class:`pyspark_kafka_group.DeltaSink`
(data and offsets in one Delta commit per micro-batch) and stops. A run that
crashes or is killed is simply run again: nothing it committed is repeated and
nothing it did not commit is lost.

Run it against your cluster::

    python examples/scheduled_job.py --bootstrap-servers broker:9092 --topic orders \\
        --group orders-bronze --table /lake/orders_bronze --checkpoint /chk/orders_bronze

or anywhere, with its own embedded Kafka cluster and demo data::

    python examples/scheduled_job.py --embedded --table /tmp/job/table --checkpoint /tmp/job/chk

It logs one line per micro-batch and a summary (``landed N records in B batches;
table version V holds R rows``). After the run it checks that the table's
committed position of every partition the run read is at least the end of what
the run planned (another member of the group may be further).

Exit status: 0 when the run landed what it planned; 1 when it failed (the
reason on stderr, starting with ``scheduled_job: FAILED:``); 2 for bad
arguments.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from kafka_group.formats import read_progress
from pyspark_kafka_group.query_errors import failure_reason

logger = logging.getLogger("scheduled_job")

#: Topic, group and partitions used with ``--embedded`` when not given.
DEMO_TOPIC = "orders"
DEMO_GROUP = "scheduled-job"
DEMO_PARTITIONS = 4

TopicPartitionKey = Tuple[str, int]


class JobFailed(Exception):
    """The run did not land what it planned; the message says what and how to fix it."""


def produce_demo_records(bootstrap_servers: str, topic: str, records: int) -> None:
    """Produce ``records`` small JSON order events, spread over the topic's partitions by key."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap_servers, "linger.ms": 5})
    for i in range(records):
        event = {"order_id": f"o{i:06d}", "amount": round(1 + (i * 37 % 500) / 7, 2), "items": 1 + i % 5}
        producer.produce(topic, key=f"c{i % 97}".encode(), value=json.dumps(event).encode())
        if i % 1000 == 0:
            producer.poll(0)
    remaining = producer.flush(30)
    if remaining:
        raise JobFailed(f"{remaining} of {records} demo records were not delivered to '{topic}'")
    logger.info("produced %d demo records to '%s'", records, topic)


def run(spark: Any, args: argparse.Namespace, bootstrap_servers: str) -> Tuple[int, Dict[TopicPartitionKey, int]]:
    """Run the AvailableNow query; return the records landed and, per partition, the end the run planned."""
    from pyspark_kafka_group import DeltaSink

    reader = (
        spark.readStream.format("kafka-group")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", args.topic)
        .option("kafka.group.id", args.group)
        .option("startingOffsets", args.starting_offsets)
        .option("offsets.table", args.table)  # the positions live in the table's commits
    )
    if args.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", args.max_offsets_per_trigger)

    sink = DeltaSink(
        args.table,
        transform=lambda batch: batch.selectExpr(
            "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "topic", "partition", "offset",
            "timestamp AS kafka_timestamp",
        ),
    )
    started = time.monotonic()

    def land(batch: Any, batch_id: int) -> None:
        sink(batch, batch_id)
        logger.info("batch %d landed (%.1f s since start)", batch_id, time.monotonic() - started)

    query = (
        reader.load().writeStream.foreachBatch(land)
        .option("checkpointLocation", args.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination()
    finally:
        if query.isActive:
            query.stop()
    progress: List[Any] = list(query.recentProgress)
    landed = sum(int(p.get("numInputRows", 0)) for p in progress)
    return landed, planned_ends(progress)


def planned_ends(progress: List[Any]) -> Dict[TopicPartitionKey, int]:
    """The end of the last range planned for each partition, from the query's progress ``endOffset``."""
    ends: Dict[TopicPartitionKey, int] = {}
    for event in progress:
        for source in read_progress(event).sources:
            for r in source.end.planned_ranges() if source.end is not None else []:
                if r.size > 0:
                    key = (r.topic_partition.topic, r.topic_partition.partition)
                    ends[key] = max(ends.get(key, 0), r.until_offset)
    return ends


def check_table(table: str, group: str, ends: Dict[TopicPartitionKey, int]) -> Tuple[int, int]:
    """Check that the table committed what the run planned; return (table version, rows).

    Raises
    ------
    JobFailed
        A partition's committed position is behind what this run planned.
    """
    from deltalake import DeltaTable

    from kafka_group.delta.delta_offsets import DeltaOffsetStore
    from kafka_group.offsets import TopicPartition

    if not ends and not os.path.isdir(os.path.join(table, "_delta_log")):
        return -1, 0  # nothing to read yet, nothing landed yet
    store = DeltaOffsetStore(table, group)
    committed = store.positions(TopicPartition(t, p) for t, p in ends)
    behind = {
        f"{t}-{p}": (committed.get(TopicPartition(t, p)), end)
        for (t, p), end in sorted(ends.items())
        if committed.get(TopicPartition(t, p), -1) < end
    }
    if behind:
        detail = ", ".join(f"{tp} committed {c} < planned {e}" for tp, (c, e) in behind.items())
        raise JobFailed(f"the table '{table}' does not hold what this run planned: {detail}")
    delta = DeltaTable(table)
    rows = sum(batch.num_rows for batch in delta.to_pyarrow_dataset().to_batches(columns=["offset"]))
    return int(delta.version()), rows


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", help="the Kafka cluster (not with --embedded)")
    parser.add_argument("--topic", help=f"topic to read (default with --embedded: {DEMO_TOPIC})")
    parser.add_argument("--group", help=f"consumer group to join (default with --embedded: {DEMO_GROUP})")
    parser.add_argument("--table", required=True, help="the Delta table (also holds the offsets)")
    parser.add_argument("--checkpoint", required=True, help="the query's checkpoint location")
    parser.add_argument("--starting-offsets", default="earliest",
                        help="where partitions the table has never seen start (default: earliest)")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None, help="records per micro-batch")
    parser.add_argument("--embedded", action="store_true",
                        help="start an embedded Kafka cluster with demo data (runs anywhere)")
    parser.add_argument("--demo-records", type=int, default=2000, help="records produced with --embedded")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG")
    args = parser.parse_args(argv)
    if args.embedded:
        if args.bootstrap_servers:
            parser.error("--embedded starts its own cluster: leave out --bootstrap-servers")
        args.topic = args.topic or DEMO_TOPIC
        args.group = args.group or DEMO_GROUP
    else:
        missing = [f"--{n.replace('_', '-')}" for n in ("bootstrap_servers", "topic", "group") if not getattr(args, n)]
        if missing:
            parser.error(f"{', '.join(missing)} required (or --embedded for a self-contained demo run)")
    if args.max_offsets_per_trigger is not None and args.max_offsets_per_trigger <= 0:
        parser.error("--max-offsets-per-trigger must be a positive number of records")
    args.table, args.checkpoint = os.path.abspath(args.table), os.path.abspath(args.checkpoint)
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    for noisy in ("kafka_group", "pyspark_kafka_group"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if args.verbose else logging.WARNING)

    from kafka_group_devbroker import EmbeddedKafka
    from pyspark_kafka_group.spark_session import local_session

    embedded: Optional[EmbeddedKafka] = None
    spark: Any = None
    started = time.monotonic()
    try:
        servers = args.bootstrap_servers
        if args.embedded:
            embedded = EmbeddedKafka(brokers=3, topics={args.topic: DEMO_PARTITIONS}).start()
            servers = embedded.bootstrap_servers
            logger.info("embedded Kafka at %s, topic '%s' with %d partitions", servers, args.topic, DEMO_PARTITIONS)
            produce_demo_records(servers, args.topic, args.demo_records)
        spark = local_session("scheduled-job", extra_conf={
            "spark.sql.streaming.numRecentProgressUpdates": "100000",  # planned_ends() reads every batch
            "spark.ui.showConsoleProgress": "false",
        })
        landed, ends = run(spark, args, servers)
        version, rows = check_table(args.table, args.group, ends)
        logger.info("landed %d records in %.1f s; table %s version %d holds %d rows", landed,
                    time.monotonic() - started, args.table, version, rows)
        return 0
    except Exception as exc:  # the scheduler sees one clear line and a non-zero status
        logger.debug("the run failed", exc_info=True)
        print(f"scheduled_job: FAILED: {failure_reason(exc)}", file=sys.stderr, flush=True)
        return 1
    finally:
        if spark is not None:
            spark.stop()
        if embedded is not None:
            embedded.stop()


if __name__ == "__main__":
    sys.exit(main())
