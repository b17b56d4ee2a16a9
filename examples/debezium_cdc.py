"""Apply Debezium change events to a Delta table by key, exactly once.

A Debezium connector writes every change of a database table to Kafka: ``op`` (``r``
snapshot read, ``c`` create, ``u`` update, ``d`` delete), the row ``before`` and
``after``, and ``source`` with the change's place in the database's log (PostgreSQL's
``lsn``), in the JSON converter's ``{"schema": ..., "payload": ...}`` wrapper; after
each delete comes a tombstone (the key with a null value). This example produces such
a topic for a ``customers`` table (the snapshot, then creates, updates and deletes, then
the last events a second time, as a connector sends them again after its own restart),
and lands it with the keyed :class:`pyspark_kafka_group.DeltaSink`:

- :func:`pyspark_kafka_group.debezium.debezium_transform` turns each event into the
  row's columns, a sequence (the LSN) and a delete flag;
- :func:`pyspark_kafka_group.debezium.debezium_sink_options` gives the sink the
  matching ``sequence_by``, ``apply_as_deletes`` and ``except_column_list``;
- the sink MERGEs each micro-batch into the table by ``id`` with the batch's Kafka
  offsets in the same Delta commit: a replayed batch changes nothing, and an event
  older than what the table holds for its key (the connector's repeats) is ignored.

Run it anywhere with its own embedded Kafka cluster and a local Spark session::

    python examples/debezium_cdc.py --embedded --table /tmp/cdc/customers --checkpoint /tmp/cdc/chk

On your cluster: with spark-submit it takes the session Spark gives it (or build one
with ``--master``, or ``--local`` for a local one); the Kafka settings come from
``--command-config FILE`` (a Java properties file, as Kafka's own tools take it),
``KAFKA_GROUP_KAFKA_<SETTING>`` environment variables, ``--bootstrap-servers`` and
``--kafka-option``. Produce the demo topic into your cluster with ``--produce-demo``::

    spark-submit examples/debezium_cdc.py --command-config client.properties --produce-demo \\
        --table /lake/customers --checkpoint /chk/customers

or read your connector's topic with ``--topic`` and ``--group`` (its rows must have this
example's ``customers`` columns). It runs one ``Trigger.AvailableNow`` query in batches of
``--max-offsets-per-trigger`` records, logging each step from its first second, then prints
the table; with demo data it compares the table with the database's final state, computed
from the produced events alone. Exit status: 0 when they are equal (or, on your topic, when
the run landed it), 1 otherwise (the reason on stderr, ``debezium_cdc: FAILED: ...``), 2
for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
from typing import Any, Dict, List, Mapping, Optional, Tuple

from pyspark_kafka_group.jobs import (Heartbeat, add_cluster_arguments, client_config, help_text, job_session,
                                      kafka_settings, source_options, stop_session)
from pyspark_kafka_group.query_errors import failure_reason

logger = logging.getLogger("debezium_cdc")

DEMO_TOPIC = "dbserver1.inventory.customers"
DEMO_GROUP = "customers-cdc"
DEMO_PARTITIONS = 3

#: The ``customers`` table's columns, as Debezium's JSON converter writes them.
SCHEMA = "id int, first_name string, last_name string, email string"
KEYS = ["id"]

Row = Dict[str, Any]


# -- the demo topic: what Debezium's PostgreSQL connector writes ------------------------------


def _field(kind: str, name: str, optional: bool = True) -> Dict[str, Any]:
    return {"type": kind, "optional": optional, "field": name}


_ROW_FIELDS = [_field("int32", "id", False), _field("string", "first_name"), _field("string", "last_name"),
               _field("string", "email")]
_VALUE_SCHEMA = {
    "type": "struct", "optional": False, "name": "dbserver1.inventory.customers.Envelope", "fields": [
        {"type": "struct", "optional": True, "field": "before", "name": "dbserver1.inventory.customers.Value",
         "fields": _ROW_FIELDS},
        {"type": "struct", "optional": True, "field": "after", "name": "dbserver1.inventory.customers.Value",
         "fields": _ROW_FIELDS},
        {"type": "struct", "optional": False, "field": "source", "name": "io.debezium.connector.postgresql.Source",
         "fields": [_field("string", "version", False), _field("string", "connector", False),
                    _field("string", "name", False), _field("int64", "ts_ms", False),
                    _field("string", "snapshot"), _field("string", "db", False), _field("string", "sequence"),
                    _field("string", "schema", False), _field("string", "table", False),
                    _field("int64", "txId"), _field("int64", "lsn"), _field("int64", "xmin")]},
        _field("string", "op", False), _field("int64", "ts_ms"),
    ]}
_KEY_SCHEMA = {"type": "struct", "optional": False, "name": "dbserver1.inventory.customers.Key",
               "fields": [_field("int32", "id", False)]}


Record = Tuple[bytes, Optional[bytes]]


def change_events(customers: int, changes: int, repeats: int, seed: int) -> Tuple[List[Record], Dict[int, Row]]:
    """The demo's Kafka records (key, value) in the order the connector writes them, and the table's final state.

    A snapshot of ``customers`` rows, ``changes`` creates, updates and deletes (each delete followed by its
    tombstone), then the last ``repeats`` records again (a connector restart). The final state is the
    simulated database's, kept as the events are made: the oracle the landed table is compared with.
    """
    rng = random.Random(seed)
    database: Dict[int, Row] = {}
    out: List[Record] = []
    lsn, ts_ms, tx = 33_816_040, 1_790_000_000_000, 700

    def emit(op: str, before: Optional[Row], after: Optional[Row], snapshot: str = "false") -> None:
        nonlocal lsn, ts_ms
        source = {"version": "3.2.0.Final", "connector": "postgresql", "name": "dbserver1", "ts_ms": ts_ms,
                  "snapshot": snapshot, "db": "inventory", "sequence": json.dumps([str(lsn - 8), str(lsn)]),
                  "schema": "inventory", "table": "customers", "txId": tx, "lsn": lsn, "xmin": None}
        payload = {"before": before, "after": after, "source": source, "op": op, "ts_ms": ts_ms + 37}
        row_id = (after or before or {})["id"]
        key = json.dumps({"schema": _KEY_SCHEMA, "payload": {"id": row_id}}).encode()
        out.append((key, json.dumps({"schema": _VALUE_SCHEMA, "payload": payload}).encode()))
        if op == "d":
            out.append((key, None))  # the tombstone
        if snapshot == "false":  # a snapshot's rows share the slot's LSN
            lsn += rng.randint(40, 400)
        ts_ms += rng.randint(0, 3)

    def person(row_id: int) -> Row:
        first = rng.choice(["Anne", "Bob", "Chen", "Dana", "Emil", "Fatou", "Gita", "Hugo"])
        return {"id": row_id, "first_name": first, "last_name": rng.choice(["Kretchmar", "Walker", "Ito", "Silva"]),
                "email": f"{first.lower()}.{row_id}.{rng.randrange(1000)}@example.org"}

    for row_id in range(1001, 1001 + customers):
        database[row_id] = person(row_id)
        emit("r", None, database[row_id], snapshot="last" if row_id == 1000 + customers else "true")
    lsn += 1_000
    next_id = 1001 + customers
    for _ in range(changes):
        tx += 1
        kind = rng.random()
        if kind < 0.3 or not database:
            database[next_id] = person(next_id)
            emit("c", None, database[next_id])
            next_id += 1
        elif kind < 0.8:
            row_id = rng.choice(sorted(database))
            before, after = database[row_id], {**database[row_id], "email": f"moved.{rng.randrange(10**6)}@example.org"}
            database[row_id] = after
            emit("u", before, after)
        else:
            row_id = rng.choice(sorted(database))
            emit("d", database.pop(row_id), None)
    out.extend(out[-repeats:] if repeats else [])  # the connector's restart sends its last events again
    return out, database


def produce_demo(config: Mapping[str, str], topic: str, records: List[Record]) -> None:
    """Produce the demo records in order, keyed (one key, one partition, as Debezium's producer does), with the
    client configuration ``config`` (:func:`pyspark_kafka_group.jobs.client_config`)."""
    from confluent_kafka import Producer

    producer = Producer({**config, "linger.ms": 5, "enable.idempotence": True})
    for key, value in records:
        producer.produce(topic, key=key, value=value)
        producer.poll(0)
    remaining = producer.flush(60)
    if remaining:
        raise RuntimeError(f"{remaining} demo records were not delivered to '{topic}'")
    logger.info("produced %d Debezium change records to '%s'", len(records), topic)


# -- the query ---------------------------------------------------------------------------------


def run_query(spark: Any, args: argparse.Namespace, kafka: Mapping[str, str], heartbeat: Heartbeat) -> None:
    """Land what the topic holds now, keyed by ``id``, with one AvailableNow query."""
    from pyspark_kafka_group import DeltaSink
    from pyspark_kafka_group.debezium import debezium_sink_options, debezium_transform

    stream = (
        spark.readStream.format("kafka-group")
        .options(**source_options(kafka))  # the Kafka cluster, with its security settings
        .option("subscribe", args.topic)
        .option("kafka.group.id", args.group)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", args.max_offsets_per_trigger)
        .option("offsets.table", args.table)
        .load()
    )
    sink = DeltaSink(args.table, keys=KEYS, transform=debezium_transform(schema=SCHEMA), **debezium_sink_options())

    def land(batch: Any, batch_id: int) -> None:
        heartbeat.step(f"applying batch {batch_id} by key")
        sink(batch, batch_id)
        heartbeat.step(f"batch {batch_id} applied; planning the next")

    heartbeat.step(f"joining group '{args.group}' and planning the first batch of '{args.topic}'")
    query = (
        stream.writeStream.foreachBatch(land)
        .option("checkpointLocation", args.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def read_table(table: str) -> Dict[int, Row]:
    """The table's rows by ``id`` (with delta-rs, not Spark), its columns only."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    # through delta-rs's SQL engine: it honours the deletion vectors the keyed sink's tables have
    query = 'SELECT "id", "first_name", "last_name", "email" FROM t'
    data = pa.table(QueryBuilder().register("t", DeltaTable(table)).execute(query).read_all())
    return {row["id"]: row for row in data.to_pylist()}


def report(table: str, expected: Optional[Dict[int, Row]]) -> bool:
    """Print the table; with ``expected``, compare it with the database's final state."""
    landed = read_table(table)
    print(f"table {table}: {len(landed)} customers")
    for row_id in sorted(landed)[:5]:
        print(f"  {landed[row_id]}")
    if expected is None:
        return True
    missing = sorted(set(expected) - set(landed))
    extra = sorted(set(landed) - set(expected))
    different = sorted(k for k in set(expected) & set(landed) if expected[k] != landed[k])
    ok = not (missing or extra or different)
    verdict = "the table equals the database" if ok else \
        f"MISMATCH: missing {missing[:10]}, deleted but present {extra[:10]}, different {different[:10]}"
    print(f"expected {len(expected)} customers: {verdict}")
    return ok


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=help_text(__doc__),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topic", help=f"the Debezium topic (default with demo data: {DEMO_TOPIC})")
    parser.add_argument("--group", help=f"consumer group (default with demo data: {DEMO_GROUP})")
    parser.add_argument("--table", required=True, help="the Delta table keyed by id")
    parser.add_argument("--checkpoint", required=True, help="the query's checkpoint location")
    parser.add_argument("--embedded", action="store_true",
                        help="start an embedded Kafka cluster with demo data and a local Spark session")
    parser.add_argument("--produce-demo", action="store_true", help="produce the demo events to your cluster first")
    parser.add_argument("--customers", type=int, default=200, help="rows of the demo's snapshot")
    parser.add_argument("--changes", type=int, default=1000, help="demo changes after the snapshot")
    parser.add_argument("--repeats", type=int, default=50, help="demo records sent again (a connector restart)")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=500, help="records per micro-batch")
    parser.add_argument("--seed", type=int, default=36, help="the demo data's random seed")
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
    else:
        try:
            args.kafka = kafka_settings(args, os.environ)
        except ValueError as exc:  # ConfigError: names the setting and its sources, never a value
            parser.error(f"{exc} (or --embedded for a self-contained demo run)")
    demo = args.embedded or args.produce_demo
    args.topic, args.group = args.topic or (DEMO_TOPIC if demo else None), args.group or (DEMO_GROUP if demo else None)
    if not (args.topic and args.group):
        parser.error("--topic and --group required to read your own topic (or --produce-demo)")
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
            expected: Optional[Dict[int, Row]] = None
            if args.embedded:
                from kafka_group_devbroker import EmbeddedKafka

                heartbeat.step("starting an embedded Kafka cluster")
                embedded = EmbeddedKafka(brokers=3, topics={args.topic: DEMO_PARTITIONS}).start()
                kafka: Mapping[str, str] = {"bootstrap.servers": embedded.bootstrap_servers}
            else:
                kafka = args.kafka
            if args.embedded or args.produce_demo:
                heartbeat.step(f"producing the demo's change events to '{args.topic}'")
                records, expected = change_events(args.customers, args.changes, args.repeats, args.seed)
                produce_demo(client_config(kafka), args.topic, records)
            heartbeat.step("starting the Spark session")
            spark, own_session = job_session("debezium-cdc", master=args.master, conf=args.conf,
                                             local=args.local if not args.embedded else (args.local or 2))
            run_query(spark, args, kafka, heartbeat)
            heartbeat.step("reading the table back", repeat=False)
            return 0 if report(args.table, expected) else 1
        except Exception as exc:  # one clear line and a non-zero status
            print(f"debezium_cdc: FAILED: {failure_reason(exc)}", file=sys.stderr, flush=True)
            return 1
        finally:
            if spark is not None and own_session:
                stop_session(spark)
            if embedded is not None:
                embedded.stop()


if __name__ == "__main__":
    sys.exit(main())
