"""Change data into Delta by key: the keyed ``DeltaSink`` against what users write by hand, same run.

Run from the repository root (the package and the development brokers installed, Java 17 and
Maven present; the spark-sql-kafka-0-10 and delta-spark jars are fetched on first use)::

    python -m bench.cdc_merge [--keys 100000] [--changes 400000] [--batch 50000] [--repeat 2]

One Apache Kafka broker (KRaft, loopback) holds a CDC topic: ``--keys`` inserts, then
updates (90 %) and deletes (10 %) of random keys, ``--changes`` events in all, JSON
``{"id", "name", "amount", "seq", "op"}`` keyed by ``id`` (one key, one partition), over
``--partitions`` partitions. Two contenders land it in a fresh Delta table each, taking turns
``--repeat`` times, the first of each round alternating (the best of each is kept):

- **(S3)** Spark's ``format("kafka")`` and a ``foreachBatch`` function as Delta's documentation
  has users write it: the batch's latest event per key (a window by ``id`` ordered by ``seq``),
  then delta-spark's ``MERGE`` (delete, update when newer, insert) made idempotent by the
  session's ``spark.databricks.delta.write.txnAppId``/``txnVersion`` (the batch id);
  ``kafka.fetch.max.wait.ms=10`` and ``spark.databricks.delta.snapshotPartitions`` = cores, as
  ``bench.run`` gives (S2);
- **kafka-group + keyed DeltaSink**: ``DeltaSink(keys=["id"], sequence_by="seq",
  apply_as_deletes="op = 'd'")``, the MERGE and the offsets in one commit.

Both parse with the same ``from_json`` and read ``maxOffsetsPerTrigger`` = ``--batch`` changes per
micro-batch. Figures (over micro-batch time, the sum of ``triggerExecution``, as ``bench.run``):
changes per second end to end, and the warm small-batch cost: batches of 80 changes from 8
partitions into the populated table, the median ``triggerExecution`` after the first three.
Each ratio is printed against (S3). Both tables are checked against the state computed from
the produced events (last event per key by ``seq``, deletes applied), read with delta-rs. All
figures, each batch's durations and the CPU by kind of process go to
``bench/results/cdc-<UTC timestamp>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
import uuid
from typing import Any, Dict, List, Optional, Tuple

from bench.spark_runs import CpuSampler, QueryRun, _as_dict, _epoch, median

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")

#: The change events' JSON, as both contenders parse it.
EVENT_SCHEMA = "id int, name string, amount double, seq long, op string"
COLUMNS = ["id", "name", "amount", "seq"]

State = Dict[int, Tuple[str, float, int]]


def produce_changes(servers: str, topic: str, keys: int, changes: int, seed: int, *, first_seq: int = 0,
                    existing: Optional[State] = None) -> Tuple[State, int]:
    """Produce the CDC events; return the table's state after them (the oracle) and the next sequence."""
    from confluent_kafka import Producer

    rng = random.Random(seed)
    state: State = dict(existing or {})
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 20, "batch.num.messages": 10000,
                         "enable.idempotence": True})
    seq = first_seq
    inserts = 0 if existing else min(keys, changes)
    for i in range(changes):
        if i < inserts:
            row_id, op = i, "c"
        else:
            row_id = rng.randrange(keys)
            op = "d" if rng.random() < 0.1 else "u"
        name, amount = f"customer-{row_id}-{rng.randrange(10 ** 6)}", round(rng.uniform(1, 1000), 2)
        event = {"id": row_id, "name": name, "amount": amount, "seq": seq, "op": op}
        if op == "d":
            state.pop(row_id, None)
        else:
            state[row_id] = (name, amount, seq)
        seq += 1
        while True:
            try:
                producer.produce(topic, key=str(row_id).encode(), value=json.dumps(event).encode())
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120):
        raise RuntimeError(f"not every change event reached '{topic}'")
    return state, seq


def parse(batch: Any) -> Any:
    """Both contenders' parsing: the event's columns (and the source's offset columns, kept)."""
    from pyspark.sql import functions as F

    keep = [c for c in batch.columns if c not in ("key", "value", "timestamp", "timestampType", "headers")]
    return batch.select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"), *keep) \
        .select("e.*", *keep)


class SparkMerge:
    """(S3)'s ``foreachBatch``: latest per key, then delta-spark's MERGE, idempotent by txnAppId/txnVersion.

    Caller: the query's micro-batch thread on the driver.
    """

    def __init__(self, table: str, app_id: str) -> None:
        self._table = table
        self._app_id = app_id

    def __call__(self, batch: Any, batch_id: int) -> None:
        from delta.tables import DeltaTable
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        spark = batch.sparkSession
        events = parse(batch).select("id", "name", "amount", "seq", "op")
        latest = events.withColumn("_r", F.row_number().over(Window.partitionBy("id").orderBy(F.col("seq").desc()))) \
            .where("_r = 1").drop("_r")
        spark.conf.set("spark.databricks.delta.write.txnAppId", self._app_id)
        spark.conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
        try:
            (DeltaTable.forPath(spark, self._table).alias("t")
             .merge(latest.alias("s"), "t.id = s.id")
             .whenMatchedDelete(condition="s.op = 'd' AND s.seq > t.seq")
             .whenMatchedUpdate(condition="s.op != 'd' AND s.seq > t.seq",
                                set={c: f"s.{c}" for c in COLUMNS})
             .whenNotMatchedInsert(condition="s.op != 'd'", values={c: f"s.{c}" for c in COLUMNS})
             .execute())
        finally:
            spark.conf.unset("spark.databricks.delta.write.txnAppId")
            spark.conf.unset("spark.databricks.delta.write.txnVersion")


def run(spark: Any, servers: str, topic: str, table: str, checkpoint: str, contender: str, batch: int,
        group: str, cpu: Optional[CpuSampler]) -> QueryRun:
    """One AvailableNow query of ``contender`` ("s3" or "kg") from earliest into ``table``."""
    from pyspark_kafka_group import DeltaSink, cluster_options

    if contender == "s3":
        reader = spark.readStream.format("kafka").option("kafka.fetch.max.wait.ms", "10")
        sink: Any = SparkMerge(table, app_id=checkpoint)
    else:
        reader = (spark.readStream.format("kafka-group").option("kafka.group.id", group)
                  .option("kafka.session.timeout.ms", "6000").option("offsets.table", table)
                  .options(**cluster_options(spark)))
        sink = DeltaSink(table, keys=["id"], sequence_by="seq", apply_as_deletes="op = 'd'",
                         column_list=COLUMNS, transform=parse)
    stream = (reader.option("kafka.bootstrap.servers", servers).option("subscribe", topic)
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", batch).load())
    started = time.monotonic()
    query = (stream.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    seconds = time.monotonic() - started
    progress = [_as_dict(p) for p in query.recentProgress]
    batches = [{"batchId": p["batchId"], "numInputRows": p["numInputRows"], "durationMs": dict(p["durationMs"])}
               for p in progress]
    result = QueryRun(seconds, sum(b["numInputRows"] for b in batches), batches)
    if cpu is not None and batches:
        starts = [_epoch(str(p["timestamp"])) for p in progress]
        result.cpu_per_second = cpu.window(starts[0], starts[-1] + batches[-1]["durationMs"].get("triggerExecution",
                                                                                                  0) / 1000)
    return result


def table_state(table: str) -> State:
    """The table's live rows, read with delta-rs (the keyed sink's own columns left out)."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    # QueryBuilder honours deletion vectors (the keyed sink's new tables have them; to_pyarrow_dataset refuses them)
    names = ", ".join(f'"{c}"' for c in COLUMNS)
    data = pa.table(QueryBuilder().register("t", DeltaTable(table)).execute(f"SELECT {names} FROM t")
                    .read_all()).to_pylist()
    return {r["id"]: (r["name"], r["amount"], r["seq"]) for r in data}


def create_s3_table(spark: Any, table: str) -> None:
    """(S3)'s target, created before its query as a user does (MERGE needs a table)."""
    spark.createDataFrame([], "id int, name string, amount double, seq long").write.format("delta").save(table)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--changes", type=int, default=400_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--batch", type=int, default=50_000, help="maxOffsetsPerTrigger of the throughput runs")
    parser.add_argument("--small-batches", type=int, default=12, help="batches of 80 changes for the warm cost")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--first", choices=("s3", "kg"), default="s3",
                        help="the contender of the first round's first run (they alternate by round)")
    parser.add_argument("--seed", type=int, default=36)
    parser.add_argument("--results-dir", default=RESULTS_DIR)
    args = parser.parse_args(argv)

    from bench.run import _spark, _versions
    from kafka_group_devbroker import start_cluster

    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    results: Dict[str, Any] = {"started": stamp, "argv": sys.argv[1:], "loadavg_start": os.getloadavg(),
                               "cpus": os.cpu_count(), "runs": {"s3": [], "kg": []}, "small": {}}
    lines: List[str] = []

    def say(text: str) -> None:
        lines.append(text)
        print(text, flush=True)

    workdir = tempfile.mkdtemp(prefix="kafka-group-cdc-bench-")
    cluster = start_cluster("kafka", brokers=1)
    spark: Any = None
    try:
        servers = cluster.bootstrap_servers
        small = 80
        topic, small_topic = f"cdc-{uuid.uuid4().hex[:6]}", f"cdc-small-{uuid.uuid4().hex[:6]}"
        cluster.create_topic(topic, args.partitions)
        cluster.create_topic(small_topic, 8)
        expected, next_seq = produce_changes(servers, topic, args.keys, args.changes, args.seed)
        # the small batches change keys of the populated table, later in sequence than everything before
        expected_after, _ = produce_changes(servers, small_topic, args.keys, small * args.small_batches,
                                            args.seed + 1, first_seq=next_seq, existing=expected)
        spark = _spark(2)
        results["versions"] = _versions()
        say(f"machine: {os.cpu_count()} CPUs, load average at start {os.getloadavg()}")
        say("versions: " + ", ".join(f"{k} {v}" for k, v in results["versions"].items()))
        say(f"workload: {args.changes:,} change events over {args.partitions} partitions, {args.keys:,} keys "
            f"({min(args.keys, args.changes):,} inserts, then 90 % updates, 10 % deletes), batches of {args.batch:,}; "
            f"{len(expected):,} live keys at the end")
        pids = list(getattr(cluster, "pids", []))
        best: Dict[str, QueryRun] = {}
        small_cost: Dict[str, List[float]] = {}
        for round_ in range(args.repeat):
            # the contenders take turns, the first one alternating by round: a load that changes during
            # the run (a shared machine) then weighs on both
            order = ("s3", "kg") if (round_ % 2 == 0) == (args.first == "s3") else ("kg", "s3")
            for contender in order:
                name = f"{contender}-{round_}"
                table, checkpoint = os.path.join(workdir, name, "table"), os.path.join(workdir, name, "chk")
                group = f"cdc-bench-{name}-{uuid.uuid4().hex[:6]}"
                if contender == "s3":
                    create_s3_table(spark, table)
                with CpuSampler(pids) as cpu:
                    r = run(spark, servers, topic, table, checkpoint, contender, args.batch, group, cpu)
                landed = table_state(table)
                if r.rows != args.changes or landed != expected:
                    raise RuntimeError(f"{contender}: read {r.rows:,} of {args.changes:,} changes; the table has "
                                       f"{len(landed):,} keys, expected {len(expected):,} "
                                       f"({sum(1 for k in expected if landed.get(k) != expected[k])} differ)")
                results["runs"][contender].append(r.to_json())
                say(f"[round {round_ + 1}] {contender}: {r.rate:,.0f} changes/s over {r.batch_seconds:.1f} s of "
                    f"{len(r.batches)} batches (wall {r.seconds:.1f} s); CPU/s {r.cpu_per_second}")
                if contender not in best or r.batch_seconds < best[contender].batch_seconds:
                    best[contender] = r
                if round_ == args.repeat - 1:  # the warm small batches, into this populated table
                    s = run(spark, servers, small_topic, table, checkpoint + "-small", contender, small, group, None)
                    if table_state(table) != expected_after:
                        raise RuntimeError(f"{contender}: the table after the small batches is not the expected state")
                    small_cost[contender] = s.warm_batch_seconds()
                    results["small"][contender] = s.to_json()
        s3, kg = best["s3"], best["kg"]
        ratio = kg.rate / s3.rate
        say(f"CDC end to end, {args.changes:,} changes in batches of {args.batch:,}: kafka-group + keyed DeltaSink "
            f"{kg.rate:,.0f} changes/s ({kg.batch_seconds:.1f} s) = {ratio:.2f}x (S3) format(kafka) + "
            f"delta-spark MERGE txnAppId ({s3.rate:,.0f} changes/s, {s3.batch_seconds:.1f} s); target >= 1.0x: "
            f"{'HOLDS' if ratio >= 1.0 else 'MISSED'}")
        kg_small, s3_small = median(small_cost["kg"]), median(small_cost["s3"])
        say(f"warm batch of {small} changes into the populated table: kafka-group + keyed DeltaSink median "
            f"{kg_small * 1000:.0f} ms, (S3) {s3_small * 1000:.0f} ms = {kg_small / s3_small:.2f}x; "
            f"target <= 1.0x: {'HOLDS' if kg_small <= s3_small else 'MISSED'}")
        say(f"CPU per second of the best runs' batches: kafka-group {kg.cpu_per_second}, (S3) {s3.cpu_per_second}")
        results.update(ratio=ratio, small_ratio=kg_small / s3_small, loadavg_end=os.getloadavg(), lines=lines,
                       best={"s3": s3.to_json(), "kg": kg.to_json()},
                       workload={"changes": args.changes, "keys": args.keys, "partitions": args.partitions,
                                 "batch": args.batch, "small_batch": small, "small_batches": args.small_batches})
        os.makedirs(args.results_dir, exist_ok=True)
        out = os.path.join(args.results_dir, f"cdc-{stamp}.json")
        with open(out, "w") as f:
            json.dump(results, f, indent=1)
        say(f"load average at end {os.getloadavg()}; results written to {out}")
        return 0
    finally:
        if spark is not None:
            spark.stop()
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
