"""A scheduled batch job: land what is in a Kafka topic now in Delta, exactly once, then exit.

Run it from cron, Airflow, a Databricks job or any scheduler: each run joins the
consumer group, reads every partition from where the Delta table says the last
run stopped up to the latest offsets at the start of the run
(``Trigger.AvailableNow``), lands them with :class:`pyspark_kafka_group.DeltaSink`
(data and offsets in one Delta commit per micro-batch) and stops. A run that
crashes or is killed is simply run again: nothing it committed is repeated and
nothing it did not commit is lost.

Run it on your cluster with spark-submit (or as a platform's Python job): it takes
the session Spark gives it (``SparkSession.builder.getOrCreate()``)::

    spark-submit examples/scheduled_job.py --command-config client.properties \\
        --topic orders --group orders-bronze --table /lake/orders_bronze --checkpoint /chk/orders_bronze

or build its own session with ``--master`` (``local[4]``, ``spark://host:7077``, ``yarn``)::

    python examples/scheduled_job.py --master 'local[4]' --bootstrap-servers broker:9093 \\
        --command-config client.properties --topic orders --group orders-bronze ...

The Kafka cluster's settings come from, in this order (a setting given twice is an error):

- ``--command-config FILE``: a Java properties file, as Kafka's own tools take it
  (``bootstrap.servers``, ``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config``,
  ``ssl.truststore.location`` ... in the Java client's names, translated as the
  ``kafka.*`` options of the source are; a ``kafka.`` prefix is allowed);
- environment variables ``KAFKA_GROUP_KAFKA_<SETTING>`` (upper case, dots as underscores:
  ``KAFKA_GROUP_KAFKA_SASL_JAAS_CONFIG``), as the connector's command-line tools read them;
- flags: ``--bootstrap-servers`` and ``--kafka-option KEY=VALUE`` (other users of the host
  see arguments in ``ps``: keep secrets in the file or the environment).

Secrets are never printed: they reach the source as ``kafka.*`` options, which the
connector keeps out of its logs and errors, and this job logs none of them.

Or anywhere, with its own embedded Kafka cluster and demo data (the local demo mode,
the only one that imports the development brokers, ``kafka_group_devbroker``)::

    python examples/scheduled_job.py --embedded --table /tmp/job/table --checkpoint /tmp/job/chk

It logs what it is doing from its first second (starting Spark, joining the group
and planning the first batch, then each landed batch; a step that lasts is logged
again every 10 s) and a summary (``landed N records in B batches; table version V
holds R rows``).

It imports only the public API: :mod:`pyspark_kafka_group.jobs` gives the cluster
flags, the Kafka settings, the session and the progress lines, and
:func:`pyspark_kafka_group.query_errors.failure_reason` the one-line error.

Exit status: 0 when the run landed what it planned; 1 when it failed (the
reason on stderr, starting with ``scheduled_job: FAILED:``); 2 for bad
arguments.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from typing import Any, List, Mapping, Optional, Tuple

from pyspark_kafka_group.jobs import (ENV_PREFIX, Heartbeat, add_cluster_arguments, help_text, job_session,
                                      kafka_settings, source_options, stop_session)
from pyspark_kafka_group.query_errors import failure_reason

logger = logging.getLogger("scheduled_job")

#: Topic, group and partitions used with ``--embedded`` when not given.
DEMO_TOPIC = "orders"
DEMO_GROUP = "scheduled-job"
DEMO_PARTITIONS = 4

class JobFailed(Exception):
    """The run did not do what it should; the message says what and how to fix it."""


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


def run(spark: Any, args: argparse.Namespace, kafka: Mapping[str, str], heartbeat: Heartbeat) -> Tuple[int, int]:
    """Run the AvailableNow query; return the records landed and the micro-batches that landed them."""
    from pyspark_kafka_group import DeltaSink

    reader = spark.readStream.format("kafka-group")
    for key, value in source_options(kafka).items():  # security settings in the Java client's names too
        reader = reader.option(key, value)
    reader = (
        reader
        .option("subscribe", args.topic)
        .option("kafka.group.id", args.group)
        .option("startingOffsets", args.starting_offsets)
        .option("offsets.table", args.table)  # the positions live in the table's commits
    )
    if args.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", args.max_offsets_per_trigger)
    # every batch's progress is kept (the run's summary adds them up); a run's query ends, so they do not pile up
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "100000")

    sink = DeltaSink(
        args.table,
        transform=lambda batch: batch.selectExpr(
            "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "topic", "partition", "offset",
            "timestamp AS kafka_timestamp",
        ),
    )

    def land(batch: Any, batch_id: int) -> None:
        heartbeat.step(f"landing batch {batch_id}")
        sink(batch, batch_id)
        heartbeat.step(f"batch {batch_id} landed; planning the next")

    heartbeat.step(f"joining group '{args.group}' and planning the first batch of '{args.topic}'")
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
    return landed, sum(1 for p in progress if int(p.get("numInputRows", 0)) > 0)


def table_summary(table: str) -> Tuple[int, int]:
    """The table's version and rows (-1 and 0 when nothing was ever landed), read with delta-rs."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        delta = DeltaTable(table)  # a local folder or an object-store URI (delta-rs reads AWS_*/AZURE_* variables)
    except TableNotFoundError:
        return -1, 0
    rows = sum(batch.num_rows for batch in delta.to_pyarrow_dataset().to_batches(columns=["offset"]))
    return int(delta.version()), rows


def location(path: str) -> str:
    """A local path made absolute; a URI (``s3://``, ``abfss://``, ``dbfs:/``, ``s3a://``) as written."""
    return path if re.match(r"^[A-Za-z][A-Za-z0-9+.-]+:/", path) else os.path.abspath(path)


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=help_text(__doc__),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
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
    add_cluster_arguments(parser)
    args = parser.parse_args(argv)
    if args.embedded:
        given = [flag for flag, value in (("--bootstrap-servers", args.bootstrap_servers), ("--master", args.master),
                                          ("--conf", args.conf), ("--command-config", args.command_config),
                                          ("--kafka-option", args.kafka_option)) if value]
        if given:
            parser.error(f"--embedded starts its own cluster and local Spark: leave out {', '.join(given)}")
        args.topic = args.topic or DEMO_TOPIC
        args.group = args.group or DEMO_GROUP
    else:
        missing = [f"--{n}" for n in ("topic", "group") if not getattr(args, n)]
        if missing:
            parser.error(f"{', '.join(missing)} required (or --embedded for a self-contained demo run)")
        if any("=" not in value or value.startswith("=") for value in args.conf):
            parser.error("--conf takes KEY=VALUE (one was given without a key or '=')")  # never echo a value
        if args.master and args.local is not None:
            parser.error("--master and --local both say where Spark runs: give one")
        try:
            args.kafka = kafka_settings(args, os.environ)
        except ValueError as exc:  # ConfigError: names the setting and its sources, never a value
            parser.error(str(exc))
    if args.max_offsets_per_trigger is not None and args.max_offsets_per_trigger <= 0:
        parser.error("--max-offsets-per-trigger must be a positive number of records")
    args.table, args.checkpoint = location(args.table), location(args.checkpoint)
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # py4j is noisy; botocore's DEBUG lines carry request headers (session tokens among them)
    for quiet in ("py4j", "botocore", "boto3", "urllib3"):
        logging.getLogger(quiet).setLevel(logging.WARNING)
    for noisy in ("kafka_group", "pyspark_kafka_group"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if args.verbose else logging.WARNING)

    embedded: Any = None
    spark: Any = None
    own_session = True
    with Heartbeat(logger) as heartbeat:
        try:
            if args.embedded:  # the local demo mode: the only one that needs the development brokers
                from kafka_group_devbroker import EmbeddedKafka

                heartbeat.step("starting an embedded Kafka cluster with demo data")
                embedded = EmbeddedKafka(brokers=3, topics={args.topic: DEMO_PARTITIONS}).start()
                kafka = {"bootstrap.servers": embedded.bootstrap_servers}
                logger.info("embedded Kafka at %s, topic '%s' with %d partitions", kafka["bootstrap.servers"],
                            args.topic, DEMO_PARTITIONS)
                produce_demo_records(kafka["bootstrap.servers"], args.topic, args.demo_records)
                heartbeat.step("starting a local Spark session")
                spark, own_session = job_session("scheduled-job", local=args.local or 2)
            else:
                kafka = args.kafka
                heartbeat.step("starting the Spark session" if args.master or args.local else
                               "getting the Spark session")
                spark, own_session = job_session("scheduled-job", master=args.master, conf=args.conf,
                                                 local=args.local)
                try:
                    master = spark.conf.get("spark.master", "?")
                except Exception:  # a Connect server may not show it
                    master = "(not shown)"
                logger.info("Kafka at %s; Spark master %s", kafka["bootstrap.servers"], master)
            landed, batches = run(spark, args, kafka, heartbeat)
            version, rows = table_summary(args.table)
            heartbeat.step(f"landed {landed} records in {batches} batches; table {args.table} version {version} "
                           f"holds {rows} rows", repeat=False)
            return 0
        except Exception as exc:  # the scheduler sees one clear line and a non-zero status
            print(f"scheduled_job: FAILED: {failure_reason(exc)}", file=sys.stderr, flush=True)
            return 1
        finally:
            if spark is not None and own_session:
                stop_session(spark)
            if embedded is not None:
                embedded.stop()


if __name__ == "__main__":
    sys.exit(main())
