"""Parse JSON records into Delta and quarantine the ones that do not parse, exactly once for both.

The ``kafka-group`` source never parses: it hands every record's bytes through
(``value`` is binary), so a malformed record can never stop the stream. Parsing
happens in the sink's ``transform``: each row is parsed with ``from_json`` and
either gets its columns or a ``parse_error`` saying what is wrong with it (null
value, not UTF-8, not JSON, wrong field types, a required field missing). Rows
that fail keep their raw bytes (``raw_value``) with ``topic``, ``partition`` and
``offset``, so they can be inspected, fixed and replayed.

**Why one table with a ``quarantined`` column, and not two tables.**
:class:`pyspark_kafka_group.DeltaSink` is exactly-once because a batch's rows
and its Kafka positions go into *one* Delta commit of *one* table (an app
transaction per topic-partition in that commit). A second, separate quarantine
table would need a second commit, and no commit spans two Delta tables: a crash
between the two would either lose the quarantined records of that batch (the
positions were already committed with the good rows, so the batch is never
replayed) or write them twice (the quarantine commit landed, the main one did
not, so the batch is replayed). So both kinds of row land in the same commit of
the same table, and readers split it:

- good rows: ``quarantined = false`` (:func:`read_good`; in SQL,
  ``CREATE VIEW orders AS SELECT ... WHERE NOT quarantined``);
- quarantined rows: ``quarantined = true`` (:func:`read_quarantine`), with
  ``parse_error`` and ``raw_value``.

Malformed records are expected to be rare, so the null order columns they carry
cost next to nothing. If a physically separate quarantine table is needed (other
retention or permissions), derive it downstream from this table, idempotently,
keyed by ``(topic, partition, offset)``.

Run it anywhere with its own embedded Kafka cluster, demo orders and a few
malformed records of each kind::

    python examples/parse_with_quarantine.py --embedded --table /tmp/q/orders --checkpoint /tmp/q/chk

or against your cluster with ``--topic`` and ``--group``: with spark-submit it takes
the session Spark gives it (or build one with ``--master``, or ``--local`` for a local
one), and the Kafka settings come from ``--command-config FILE`` (a Java properties
file, as Kafka's own tools take it), ``KAFKA_GROUP_KAFKA_<SETTING>`` environment
variables, ``--bootstrap-servers`` and ``--kafka-option``::

    spark-submit examples/parse_with_quarantine.py --command-config client.properties \\
        --topic orders-raw --group orders-parser --table /lake/orders --checkpoint /chk/orders

It runs one ``Trigger.AvailableNow`` query (the same transform serves a
continuous query), logging each step from its first second, then prints the good
and quarantined counts, the quarantined rows by error, and, with ``--embedded``,
whether every produced record is in the table exactly once. Exit status: 0 when it
is (or, on your topic, when the run landed it), 1 otherwise or on failure (the
reason on stderr, ``parse_with_quarantine: FAILED: ...``), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections import Counter
from typing import Any, Dict, List, Mapping, Optional, Tuple

from pyspark_kafka_group.jobs import (Heartbeat, add_cluster_arguments, help_text, job_session, kafka_settings,
                                      source_options, stop_session)
from pyspark_kafka_group.query_errors import failure_reason

logger = logging.getLogger("parse_with_quarantine")

DEMO_TOPIC = "orders-raw"
DEMO_GROUP = "orders-parser"
DEMO_PARTITIONS = 4

#: The expected JSON. ``_corrupt_record`` is filled by ``from_json`` when the text does not fit it.
ORDER_SCHEMA = "order_id string, customer_id string, amount double, items int, created_at timestamp, " \
    "_corrupt_record string"
REQUIRED_FIELDS = ("order_id", "amount")

#: Malformed records of each kind the demo produces (value bytes, or None for a tombstone).
MALFORMED: Dict[str, Optional[bytes]] = {
    "truncated JSON": b'{"order_id": "x1", "amount": ',
    "plain text": b"hello, this is not JSON",
    "wrong field type": b'{"order_id": "x2", "amount": "twelve", "items": 1}',
    "missing field": b'{"customer_id": "c1", "items": 2}',
    "JSON array": b"[1, 2, 3]",
    "invalid UTF-8": b'{"order_id": "\xff\xfe", "amount": 1}',
    "tombstone": None,
}


def parse_or_quarantine(batch: Any) -> Any:
    """The sink's transform: parsed order columns, or ``quarantined`` with the error and the raw bytes.

    Stateless and row by row, so :class:`DeltaSink` still sees ``topic`` and
    ``partition`` and commits exactly the planned offsets whatever the rows hold.
    """
    from pyspark.sql import functions as F

    text = F.col("value").cast("string")
    order = F.from_json(text, ORDER_SCHEMA, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt_record"})
    parsed = batch.select("*", order.alias("o"))
    error = (
        F.when(F.col("value").isNull(), F.lit("value is null (a tombstone)"))
        .when(~F.expr("is_valid_utf8(CAST(value AS STRING))"), F.lit("value is not UTF-8 text"))
        .when(F.expr("try_parse_json(CAST(value AS STRING))").isNull(), F.lit("value is not valid JSON"))
        .when(F.col("o._corrupt_record").isNotNull(),
              F.lit("JSON does not match the order schema (not an object, or a field of the wrong type)"))
    )
    for field in REQUIRED_FIELDS:
        error = error.when(F.col(f"o.{field}").isNull(), F.lit(f"required field '{field}' is missing or null"))
    quarantined = error.isNotNull()
    return parsed.select(
        *[F.when(~quarantined, F.col(f"o.{name}")).alias(name)
          for name in ("order_id", "customer_id", "amount", "items", "created_at")],
        "topic", "partition", "offset",
        F.col("timestamp").alias("kafka_timestamp"),
        quarantined.alias("quarantined"),
        error.alias("parse_error"),
        F.when(quarantined, F.col("value")).alias("raw_value"),
    )


def produce_demo_records(bootstrap_servers: str, topic: str, good: int, bad_per_kind: int) -> Tuple[int, int]:
    """Produce ``good`` orders with ``bad_per_kind`` malformed records of each kind mixed in.

    Returns
    -------
    tuple of int
        The good and the malformed records produced.
    """
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap_servers, "linger.ms": 5})
    bad_values = [value for value in MALFORMED.values() for _ in range(bad_per_kind)]
    every = max(1, good // max(1, len(bad_values)))
    sent_good = sent_bad = 0
    for i in range(good):
        customer = f"c{i % 97:03d}"
        order = {"order_id": f"o{i:06d}", "customer_id": customer, "amount": round(5 + i % 300 / 3, 2),
                 "items": 1 + i % 4, "created_at": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(1_790_000_000 + i))}
        producer.produce(topic, key=customer.encode(), value=json.dumps(order).encode())
        sent_good += 1
        if i % every == 0 and bad_values:
            producer.produce(topic, key=f"bad{i}".encode(), value=bad_values.pop())
            sent_bad += 1
    for value in bad_values:  # what is left when there are few good records
        producer.produce(topic, key=b"bad", value=value)
        sent_bad += 1
    remaining = producer.flush(30)
    if remaining:
        raise RuntimeError(f"{remaining} demo records were not delivered to '{topic}'")
    logger.info("produced %d orders and %d malformed records to '%s'", sent_good, sent_bad, topic)
    return sent_good, sent_bad


def run_query(spark: Any, args: argparse.Namespace, kafka: Mapping[str, str], heartbeat: Heartbeat) -> None:
    """Land what the topic holds now, parsed or quarantined, with one AvailableNow query."""
    from pyspark_kafka_group import DeltaSink

    stream = (
        spark.readStream.format("kafka-group")
        .options(**source_options(kafka))  # the Kafka cluster, with its security settings
        .option("subscribe", args.topic)
        .option("kafka.group.id", args.group)
        .option("startingOffsets", "earliest")
        .option("offsets.table", args.table)
        .load()
    )
    sink = DeltaSink(args.table, transform=parse_or_quarantine)

    def land(batch: Any, batch_id: int) -> None:
        heartbeat.step(f"landing batch {batch_id}")
        sink(batch, batch_id)
        heartbeat.step(f"batch {batch_id} landed; planning the next")

    heartbeat.step(f"joining group '{args.group}' and planning the first batch of '{args.topic}'")
    query = (
        stream.writeStream.foreachBatch(land)
        .option("checkpointLocation", args.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def read_good(table: str, columns: Optional[List[str]] = None) -> Any:
    """The parsed orders (a pyarrow Table): the rows with ``quarantined = false``."""
    import pyarrow.dataset as ds
    from deltalake import DeltaTable

    return DeltaTable(table).to_pyarrow_dataset().to_table(columns=columns, filter=~ds.field("quarantined"))


def read_quarantine(table: str, columns: Optional[List[str]] = None) -> Any:
    """The quarantined records (a pyarrow Table) with ``parse_error`` and ``raw_value``."""
    import pyarrow.dataset as ds
    from deltalake import DeltaTable

    return DeltaTable(table).to_pyarrow_dataset().to_table(columns=columns, filter=ds.field("quarantined"))


def report(table: str, expected: Optional[Tuple[int, int]]) -> bool:
    """Print the good and quarantined counts; with ``expected`` (good, bad), check exactly once."""
    good = read_good(table, ["partition", "offset"])
    bad = read_quarantine(table, ["partition", "offset", "parse_error", "raw_value"])
    print(f"good rows: {good.num_rows}")
    print(f"quarantined rows: {bad.num_rows}")
    for error, count in sorted(Counter(bad.column("parse_error").to_pylist()).items()):
        print(f"  {count:>4}  {error}")
    for row in bad.slice(0, 3).to_pylist():
        print(f"  e.g. partition {row['partition']} offset {row['offset']}: {row['raw_value']!r}")
    if expected is None:
        return True
    seen = Counter(zip(good.column("partition").to_pylist() + bad.column("partition").to_pylist(),
                       good.column("offset").to_pylist() + bad.column("offset").to_pylist()))
    duplicated = sum(1 for n in seen.values() if n > 1)
    ok = (good.num_rows, bad.num_rows) == expected and duplicated == 0
    verdict = "every record is in the table exactly once" if ok else "MISMATCH"
    print(f"expected {expected[0]} good + {expected[1]} quarantined, {duplicated} duplicated offsets: {verdict}")
    return ok


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=help_text(__doc__),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topic", help=f"topic to read (default with --embedded: {DEMO_TOPIC})")
    parser.add_argument("--group", help=f"consumer group (default with --embedded: {DEMO_GROUP})")
    parser.add_argument("--table", required=True, help="the Delta table for parsed and quarantined rows")
    parser.add_argument("--checkpoint", required=True, help="the query's checkpoint location")
    parser.add_argument("--embedded", action="store_true",
                        help="start an embedded Kafka cluster with demo data and a local Spark session")
    parser.add_argument("--good-records", type=int, default=1000, help="orders produced with --embedded")
    parser.add_argument("--bad-per-kind", type=int, default=3,
                        help=f"malformed records of each of the {len(MALFORMED)} kinds produced with --embedded")
    add_cluster_arguments(parser)
    args = parser.parse_args(argv)
    if args.master and args.local is not None:
        parser.error("--master and --local both say where Spark runs: give one")
    if args.embedded:
        given = [flag for flag, value in (("--bootstrap-servers", args.bootstrap_servers), ("--master", args.master),
                                          ("--command-config", args.command_config),
                                          ("--kafka-option", args.kafka_option)) if value]
        if given:
            parser.error(f"--embedded starts its own cluster and local Spark: leave out {', '.join(given)}")
        args.topic, args.group = args.topic or DEMO_TOPIC, args.group or DEMO_GROUP
    else:
        missing = [f"--{n}" for n in ("topic", "group") if not getattr(args, n)]
        if missing:
            parser.error(f"{', '.join(missing)} required (or --embedded for a self-contained demo run)")
        try:
            args.kafka = kafka_settings(args, os.environ)
        except ValueError as exc:  # ConfigError: names the setting and its sources, never a value
            parser.error(f"{exc} (or --embedded for a self-contained demo run)")
    args.table, args.checkpoint = os.path.abspath(args.table), os.path.abspath(args.checkpoint)
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("py4j", "kafka_group", "pyspark_kafka_group"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    embedded: Any = None
    spark: Any = None
    own_session = False
    with Heartbeat(logger) as heartbeat:
        try:
            expected: Optional[Tuple[int, int]] = None
            if args.embedded:
                from kafka_group_devbroker import EmbeddedKafka

                heartbeat.step("starting an embedded Kafka cluster with demo data")
                embedded = EmbeddedKafka(brokers=3, topics={args.topic: DEMO_PARTITIONS}).start()
                kafka: Mapping[str, str] = {"bootstrap.servers": embedded.bootstrap_servers}
                expected = produce_demo_records(embedded.bootstrap_servers, args.topic, args.good_records,
                                                args.bad_per_kind)
            else:
                kafka = args.kafka
            heartbeat.step("starting the Spark session")
            spark, own_session = job_session("parse-with-quarantine", master=args.master, conf=args.conf,
                                             local=args.local if not args.embedded else (args.local or 2))
            run_query(spark, args, kafka, heartbeat)
            heartbeat.step("reading the table back", repeat=False)
            return 0 if report(args.table, expected) else 1
        except Exception as exc:  # one clear line and a non-zero status
            print(f"parse_with_quarantine: FAILED: {failure_reason(exc)}", file=sys.stderr, flush=True)
            return 1
        finally:
            if spark is not None and own_session:
                stop_session(spark)
            if embedded is not None:
                embedded.stop()


if __name__ == "__main__":
    sys.exit(main())
