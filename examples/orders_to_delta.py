"""The main job: Kafka order events into a Delta table with the ``kafka-group`` source.

Starts the embedded Kafka cluster (librdkafka's mock brokers, real TCP on
127.0.0.1), produces JSON order events over 8 partitions, then runs a streaming
query with ``Trigger.AvailableNow`` that joins consumer group ``orders-bronze``,
parses the events and lands them in a Delta table on local disk exactly once:
each micro-batch's files and its Kafka offsets go into one Delta commit
(:class:`pyspark_kafka_group.DeltaSink`). It prints a line per micro-batch as it
goes, then what landed: rows and offsets per partition, and the seconds it took.

Run it (after ``pip install '.[spark]'``)::

    python examples/orders_to_delta.py --records 200000 --output demo-output

Point ``--bootstrap-servers`` at your own cluster to skip the embedded one.
Exit code 0 means every produced record landed exactly once.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import sys
import time
from typing import Any, Optional

logger = logging.getLogger("orders_to_delta")

TOPIC = "orders"
GROUP = "orders-bronze"
PARTITIONS = 8

ORDER_SCHEMA = (
    "order_id string, customer_id string, amount double, currency string, "
    "status string, items int, created_at timestamp"
)


def produce_orders(bootstrap_servers: str, records: int, seed: int) -> None:
    """Produce ``records`` JSON order events, keyed by customer, with a progress line."""
    from confluent_kafka import Producer

    rng = random.Random(seed)
    producer = Producer({"bootstrap.servers": bootstrap_servers, "linger.ms": 20, "batch.num.messages": 10000})
    started = time.monotonic()
    statuses = ["created", "paid", "shipped", "delivered", "cancelled"]
    for i in range(records):
        customer = f"c{rng.randrange(20000):05d}"
        event = {
            "order_id": f"o{i:08d}",
            "customer_id": customer,
            "amount": round(rng.uniform(2, 500), 2),
            "currency": rng.choice(["EUR", "USD", "GBP"]),
            "status": rng.choice(statuses),
            "items": rng.randint(1, 9),
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(1_790_000_000 + i)),
        }
        while True:
            try:
                producer.produce(TOPIC, key=customer.encode(), value=json.dumps(event).encode())
                break
            except BufferError:
                producer.poll(0.05)
        if i % 50_000 == 0 and i:
            producer.poll(0)
            print(f"produced {i:,} of {records:,} order events", flush=True)
    producer.flush(60)
    print(f"produced {records:,} order events to '{TOPIC}' in {time.monotonic() - started:.1f} s", flush=True)


def run_query(spark: Any, bootstrap_servers: str, table: str, checkpoint: str, max_per_trigger: int) -> int:
    """Run the AvailableNow query into Delta; return the number of micro-batches."""
    from pyspark.sql import functions as F

    from pyspark_kafka_group import DeltaSink

    events = (
        spark.readStream.format("kafka-group")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", TOPIC)
        .option("kafka.group.id", GROUP)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", max_per_trigger)
        .option("offsets.table", table)  # the Delta table's commits hold the offsets
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
        ).select("order.*", "topic", "partition", "offset", "kafka_timestamp")

    sink = DeltaSink(table, transform=parse)
    batches = 0
    started = time.monotonic()

    def land(batch: Any, batch_id: int) -> None:
        nonlocal batches
        sink(batch, batch_id)
        batches += 1
        print(f"batch {batch_id}: landed in {table} ({time.monotonic() - started:.1f} s since start)", flush=True)

    query = (
        events.writeStream.foreachBatch(land)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return batches


def summarize(table: str, expected: int, seconds: float) -> bool:
    """Print rows and offsets per partition; return whether every record landed once."""
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    from kafka_group.delta.offsets_table import transaction_id
    from kafka_group.offsets import TopicPartition

    delta = DeltaTable(table)
    data = delta.to_pyarrow_dataset().to_table(columns=["partition", "offset"])
    print(f"\nDelta table {table} (version {delta.version()}): {data.num_rows:,} rows in {seconds:.1f} s")
    print(f"{'partition':>9} {'rows':>9} {'first offset':>13} {'last offset':>12} {'committed offset':>17}")
    ok = True
    for p in sorted(set(data.column("partition").to_pylist())):
        offsets = data.filter(pc.equal(data.column("partition"), p)).column("offset")
        n, lo, hi = len(offsets), pc.min(offsets).as_py(), pc.max(offsets).as_py()
        distinct = len(pc.unique(offsets))
        committed = delta.transaction_version(transaction_id(GROUP, TopicPartition(TOPIC, p)))
        ok = ok and distinct == n == hi - lo + 1 and committed == hi + 1
        print(f"{p:>9} {n:>9,} {lo:>13,} {hi:>12,} {committed:>17,}")
    ok = ok and data.num_rows == expected
    verdict = "every record landed exactly once" if ok else "MISMATCH: missing or duplicated records"
    print(f"expected {expected:,} rows: {verdict}")
    return ok


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000, help="order events to produce")
    parser.add_argument("--output", default="demo-output", help="folder for the Delta table and checkpoint")
    parser.add_argument("--bootstrap-servers", default=None, help="use this Kafka cluster instead of the embedded one")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from kafka_group_devbroker import EmbeddedKafka
    from pyspark_kafka_group.spark_session import local_session

    output = os.path.abspath(args.output)
    shutil.rmtree(output, ignore_errors=True)
    table, checkpoint = os.path.join(output, "orders_bronze"), os.path.join(output, "_checkpoint")
    embedded: Optional[EmbeddedKafka] = None
    try:
        servers = args.bootstrap_servers
        if servers is None:
            embedded = EmbeddedKafka(brokers=3, topics={TOPIC: PARTITIONS}).start()
            servers = embedded.bootstrap_servers
            print(f"embedded Kafka: 3 brokers at {servers}, topic '{TOPIC}' with {PARTITIONS} partitions", flush=True)
        produce_orders(servers, args.records, args.seed)
        from kafka_group.read.read_path import describe

        print(f"executor read path: {describe({'bootstrap.servers': servers})}", flush=True)
        print("starting Spark (local[2]) ...", flush=True)
        spark = local_session("orders-to-delta")
        started = time.monotonic()
        batches = run_query(spark, servers, table, checkpoint, args.max_offsets_per_trigger)
        seconds = time.monotonic() - started
        print(f"query finished: {batches} micro-batches")
        ok = summarize(table, args.records, seconds)
        spark.stop()
        return 0 if ok else 1
    finally:
        if embedded is not None:
            embedded.stop()


if __name__ == "__main__":
    sys.exit(main())
