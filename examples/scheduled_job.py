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
import traceback
from typing import Any, Dict, List, Mapping, Optional, Tuple

from kafka_group.delta.storage.table_location import local_table_path
from kafka_group.formats import read_progress
from pyspark_kafka_group.query_errors import failure_reason

logger = logging.getLogger("scheduled_job")

#: Environment variables holding Kafka client settings (the connector's command-line tools read the same).
ENV_PREFIX = "KAFKA_GROUP_KAFKA_"

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


def kafka_settings(args: argparse.Namespace, environ: Mapping[str, str]) -> Dict[str, str]:
    """The Kafka client settings of the run (no ``kafka.`` prefix): ``--command-config``, then
    ``KAFKA_GROUP_KAFKA_*`` variables, then ``--bootstrap-servers`` and ``--kafka-option``.

    Raises
    ------
    JobFailed
        The file cannot be read, a setting is given by two sources (named, never its value), or no
        bootstrap servers anywhere.
    """
    from kafka_group.config.properties_text import parse_properties

    sources: List[Tuple[str, Dict[str, str]]] = []
    if args.command_config:
        try:
            with open(args.command_config, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise JobFailed(f"--command-config '{args.command_config}' cannot be read ({exc.strerror})") from None
        sources.append(("--command-config", parse_properties(text)))
    sources.append(("the environment", {name[len(ENV_PREFIX):].lower().replace("_", "."): value
                                        for name, value in environ.items()
                                        if name.startswith(ENV_PREFIX) and len(name) > len(ENV_PREFIX)}))
    flags = dict(option.split("=", 1) for option in args.kafka_option)
    if args.bootstrap_servers:
        flags["bootstrap.servers"] = args.bootstrap_servers
    sources.append(("the flags", flags))
    settings: Dict[str, str] = {}
    given_by: Dict[str, str] = {}
    for source, values in sources:
        for key, value in values.items():
            key = key.strip()
            key = key[len("kafka."):] if key.startswith("kafka.") else key
            if key in settings:
                raise JobFailed(f"Kafka setting '{key}' is given by {given_by[key]} and by {source}: keep one")
            settings[key], given_by[key] = value, source
    if not settings.get("bootstrap.servers"):
        raise JobFailed("no Kafka bootstrap servers: give --bootstrap-servers, bootstrap.servers in --command-config, "
                        f"or {ENV_PREFIX}BOOTSTRAP_SERVERS (or --embedded for a self-contained demo run)")
    return settings


def run(spark: Any, args: argparse.Namespace, kafka: Mapping[str, str]) -> Tuple[int, Dict[TopicPartitionKey, int]]:
    """Run the AvailableNow query; return the records landed and, per partition, the end the run planned."""
    from pyspark_kafka_group import DeltaSink

    reader = spark.readStream.format("kafka-group")
    for key, value in kafka.items():  # security settings in the Java client's names too: the source translates them
        reader = reader.option(f"kafka.{key}", value)
    reader = (
        reader
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
    from deltalake.exceptions import TableNotFoundError

    from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
    from kafka_group.offsets import TopicPartition

    if not ends:
        try:
            DeltaTable(table)  # a local folder or an object-store URI (delta-rs reads AWS_*/AZURE_* variables)
        except TableNotFoundError:
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
    parser.add_argument("--master", help="the Spark master of a session this job builds (local[4], spark://host:7077, "
                                         "yarn); unset: the session spark-submit or the platform gives")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting of the session this job builds (repeatable), as spark-submit's --conf")
    parser.add_argument("--bootstrap-servers", help="the Kafka cluster (not with --embedded)")
    parser.add_argument("--command-config", metavar="FILE",
                        help="Kafka client properties (Java names, as Kafka's tools take them: security.protocol, "
                             "sasl.jaas.config, ssl.truststore.location, ...)")
    parser.add_argument("--kafka-option", action="append", default=[], metavar="KEY=VALUE",
                        help="a Kafka client setting (repeatable; process lists show it: keep secrets in "
                             f"--command-config or {ENV_PREFIX}<SETTING> variables)")
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
        given = [flag for flag, value in (("--bootstrap-servers", args.bootstrap_servers), ("--master", args.master), ("--conf", args.conf),
                                          ("--command-config", args.command_config),
                                          ("--kafka-option", args.kafka_option)) if value]
        if given:
            parser.error(f"--embedded starts its own cluster and local Spark: leave out {', '.join(given)}")
        args.topic = args.topic or DEMO_TOPIC
        args.group = args.group or DEMO_GROUP
    else:
        missing = [f"--{n}" for n in ("topic", "group") if not getattr(args, n)]
        if missing:
            parser.error(f"{', '.join(missing)} required (or --embedded for a self-contained demo run)")
        for flag, values in (("--kafka-option", args.kafka_option), ("--conf", args.conf)):
            if any("=" not in value or value.startswith("=") for value in values):
                parser.error(f"{flag} takes KEY=VALUE (one was given without a key or '=')")  # never echo a value
        try:
            args.kafka = kafka_settings(args, os.environ)
        except JobFailed as exc:  # names the setting and its sources, never a value
            parser.error(str(exc))
    if args.max_offsets_per_trigger is not None and args.max_offsets_per_trigger <= 0:
        parser.error("--max-offsets-per-trigger must be a positive number of records")
    # local paths become absolute; URIs (s3://, abfss://, dbfs:/, s3a:// checkpoints) stay as written
    args.table = local_table_path(args.table) or args.table
    args.checkpoint = local_table_path(args.checkpoint) or args.checkpoint
    return args


def cluster_session(master: Optional[str], conf: List[str]) -> Tuple[Any, bool]:
    """The Spark session of a run on your cluster, and whether this job made it (and so stops it).

    Under spark-submit or inside a platform's job (Databricks, EMR steps) the session is the one
    Spark gives (``SparkSession.builder.getOrCreate()``: master, executors and Python from the
    submission); ``master`` builds one here instead. Never the local demo session. ``conf``
    (``KEY=VALUE``) goes to the builder: it applies to a session made here, not to one that exists.
    """
    from pyspark.sql import SparkSession

    existing = SparkSession.getActiveSession()
    builder = SparkSession.builder.appName("scheduled-job")
    if master:
        builder = builder.master(master)
    for setting in conf:
        key, _, value = setting.partition("=")
        builder = builder.config(key.strip(), value)
    spark = existing if existing is not None and not master else builder.getOrCreate()
    for key, value in SESSION_CONF.items():
        try:
            spark.conf.set(key, value)
        except Exception as exc:  # a platform may refuse a setting; the run works without it
            logger.info("could not set %s on the session (%s)", key, type(exc).__name__)
    return spark, existing is None


#: Session settings of every mode: planned_ends() reads every batch's progress; the connector's own
#: message comes first in errors raised in the source.
SESSION_CONF = {
    "spark.sql.streaming.numRecentProgressUpdates": "100000",
    "spark.sql.execution.pyspark.udf.hideTraceback.enabled": "true",
}


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # py4j is noisy; botocore's DEBUG lines carry request headers (session tokens among them)
    for quiet in ("py4j", "botocore", "boto3", "urllib3"):
        logging.getLogger(quiet).setLevel(logging.WARNING)
    for noisy in ("kafka_group", "pyspark_kafka_group"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if args.verbose else logging.WARNING)

    from kafka_group.redaction import register_client_secrets, scrub

    embedded: Any = None
    spark: Any = None
    own_session = True
    started = time.monotonic()
    try:
        if args.embedded:  # the local demo mode: the only one that needs the development brokers
            from kafka_group_devbroker import EmbeddedKafka
            from pyspark_kafka_group.spark_session import local_session

            embedded = EmbeddedKafka(brokers=3, topics={args.topic: DEMO_PARTITIONS}).start()
            kafka = {"bootstrap.servers": embedded.bootstrap_servers}
            logger.info("embedded Kafka at %s, topic '%s' with %d partitions", kafka["bootstrap.servers"], args.topic,
                        DEMO_PARTITIONS)
            produce_demo_records(kafka["bootstrap.servers"], args.topic, args.demo_records)
            spark = local_session("scheduled-job", extra_conf={**SESSION_CONF, "spark.ui.showConsoleProgress": "false"})
        else:
            kafka = args.kafka
            register_client_secrets(kafka)  # scrubbed from the connector's logs and errors in this process
            spark, own_session = cluster_session(args.master, args.conf)
            try:
                master = spark.conf.get("spark.master", "?")
            except Exception:  # a Connect server may not show it
                master = "(not shown)"
            logger.info("Kafka at %s; Spark master %s", kafka["bootstrap.servers"], master)
        landed, ends = run(spark, args, kafka)
        version, rows = check_table(args.table, args.group, ends)
        logger.info("landed %d records in %.1f s; table %s version %d holds %d rows", landed,
                    time.monotonic() - started, args.table, version, rows)
        return 0
    except Exception as exc:  # the scheduler sees one clear line and a non-zero status
        logger.debug("the run failed: %s", scrub(traceback.format_exc()))
        print(f"scheduled_job: FAILED: {scrub(failure_reason(exc))}", file=sys.stderr, flush=True)
        return 1
    finally:
        if spark is not None and own_session:
            spark.stop()
        if embedded is not None:
            embedded.stop()


if __name__ == "__main__":
    sys.exit(main())
