"""Records per second and CPU seconds per million records from Kafka into Delta: kafka-delta-ingest against
this connector on one Spark core, same run, same topic.

Run from the repository root (the package and the development brokers installed, Java 17 and Maven present)::

    python -m bench.kdi_per_core                     # 5,000,000 JSON records of about 100 B over 8 partitions
    python -m bench.kdi_per_core --records 1000000
    python -m bench.kdi_per_core --build-kdi         # first build kafka-delta-ingest (cargo, about 30 minutes)

kafka-delta-ingest (delta-io's Rust daemon, https://github.com/delta-io/kafka-delta-ingest) is taken at the
pinned commit :data:`KDI_COMMIT`, built with its own ``Cargo.toml`` and the crate versions pinned in
``bench/kdi/Cargo.lock`` (crates from crates.io; the ``azure`` feature, without which it does not compile;
local tables need no object store) into
``~/.cache/pyspark-kafka-group/kdi/<commit>/``, once: ``--build-kdi`` clones it there with git and runs
``cargo build --release`` under ``nice``; without it, a missing binary skips that contender.

One Apache Kafka broker (KRaft, loopback) holds one topic of ``--records`` JSON values
(``{"id", "name", "amount", "note"}``, about ``--value-bytes`` bytes each) over ``--partitions``
partitions, produced before anything reads. Then, one after the other, each contender lands the whole
topic in its own Delta table with the columns ``id long, name string, amount double, note string``:

- **(KDI)** ``kafka-delta-ingest ingest`` into a table created beforehand with that schema (it needs
  one), its own consumer group from ``earliest``, ``--allowed_latency`` seconds between its commits
  (the records of a file and the group's offsets in one Delta commit, as ours), one process;
- **kafka-group + DeltaSink**: ``from_json`` of the value in the sink's ``transform``, on
  ``local[1]`` (one Spark executor core; the driver's Python and the JVM's own threads besides),
  ``Trigger.AvailableNow`` from ``earliest``.

Figures: records per second from the contender's start (KDI's process, our ``query.start()``; both
join their group then) to the table holding every record (KDI: polled every 0.5 s with delta-rs; ours: the
AvailableNow query's end), and CPU
seconds per million records of every process of the contender (KDI's process; our driver's Python, the
Spark JVM and its Python workers) over the same interval. Each table is checked to hold every record
once. The load average is printed beside each figure.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any, Dict, List, Optional

__all__ = ["KDI_COMMIT", "kdi_binary", "main"]

#: The kafka-delta-ingest commit benchmarked (main of 22 June 2026, "use regular env variable for sr password").
KDI_COMMIT = "c6d42def1f65badaac417203591d2d47daf5f0d8"
KDI_REPO = "https://github.com/delta-io/kafka-delta-ingest"
SCHEMA = "id long, name string, amount double, note string"
#: The crate versions its build resolved (rdkafka 0.37.0 with librdkafka 2.12.1, deltalake-core 0.26.2, arrow 55.0.0,
#: datafusion 47.0.0), copied into its source before ``cargo build --locked``.
LOCK_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kdi", "Cargo.lock")


def kdi_folder(commit: str = KDI_COMMIT) -> str:
    """Where the commit's source, target folder and build log live."""
    return os.path.join(os.path.expanduser("~"), ".cache", "pyspark-kafka-group", "kdi", commit)


def kdi_binary(commit: str = KDI_COMMIT) -> str:
    """The path of the release binary of ``commit`` (it may not exist yet)."""
    return os.path.join(kdi_folder(commit), "target", "release", "kafka-delta-ingest")


def build_kdi(commit: str = KDI_COMMIT) -> str:
    """Clone ``commit`` into the cache (unless its source is there) and build the release binary with cargo
    under ``nice -n 15``, thin LTO (its profile asks for fat LTO: many minutes more of one core to link).
    Returns the binary's path; raises ``subprocess.CalledProcessError`` when the build fails (its log:
    ``build.log`` beside the source)."""
    folder = kdi_folder(commit)
    source = os.path.join(folder, "src")
    if not os.path.isdir(source):
        subprocess.run(["git", "clone", "--quiet", KDI_REPO, source], check=True)
        subprocess.run(["git", "-C", source, "checkout", "--quiet", commit], check=True)
    # its repository has no Cargo.lock: the crates this benchmark resolved and built (December 2026) are pinned
    shutil.copyfile(LOCK_FILE, os.path.join(source, "Cargo.lock"))
    env = dict(os.environ, CARGO_TARGET_DIR=os.path.join(folder, "target"), CARGO_PROFILE_RELEASE_LTO="thin")
    with open(os.path.join(folder, "build.log"), "ab") as log:
        subprocess.run(["nice", "-n", "15", "cargo", "build", "--release", "--locked", "--features", "azure",
                        "--bin", "kafka-delta-ingest"], cwd=source, env=env, stdout=log, stderr=log, check=True)
    return kdi_binary(commit)


def kdi_version(binary: str) -> str:
    """The binary's ``--version`` line."""
    done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    return (done.stdout or done.stderr).strip()


def produce_json(servers: str, topic: str, partitions: int, records: int, value_bytes: int) -> None:
    """``records`` JSON values of about ``value_bytes`` bytes, round robin over the partitions."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "linger.ms": 50, "batch.num.messages": 10000,
                         "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
                         "queue.buffering.max.kbytes": 262144, "compression.type": "none", "acks": "1"})
    rng = random.Random(52)
    letters = "abcdefghijklmnopqrstuvwxyz0123456789"
    notes = ["".join(rng.choice(letters) for _ in range(value_bytes)) for _ in range(256)]
    for i in range(records):
        head = f'{{"id":{i},"name":"customer-{i % 100000:06d}","amount":{(i * 37) % 100000 / 100},"note":"'
        value = head + notes[i % 256][:max(1, value_bytes - len(head) - 2)] + '"}'
        while True:
            try:
                producer.produce(topic, value.encode(), None, i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 20000 == 0:
            producer.poll(0)
    if producer.flush(300):
        raise RuntimeError(f"not every record reached '{topic}'")


def _rows(table: str) -> int:
    from deltalake import DeltaTable

    try:
        return int(DeltaTable(table).to_pyarrow_dataset().count_rows())
    except Exception:  # not created yet, or a commit in progress
        return 0


def _check(table: str, records: int) -> None:
    """``table`` holds ``records`` rows, each id once."""
    from deltalake import DeltaTable

    ids = DeltaTable(table).to_pyarrow_dataset().to_table(columns=["id"]).column("id")
    import pyarrow.compute as pc

    distinct = len(pc.unique(ids))
    if len(ids) != records or distinct != records:
        raise RuntimeError(f"{table}: {len(ids):,} rows, {distinct:,} distinct ids, of {records:,} records")


def _cpu_of(pids: List[int]) -> float:
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
        except (OSError, ValueError, IndexError):
            continue
    return total


def run_kdi(binary: str, servers: str, topic: str, table: str, records: int, latency_s: int,
            bound_s: float, fraction: float = 0.98, stall_s: float = 30.0) -> Dict[str, Any]:
    """kafka-delta-ingest from its start to the table holding every record, and to it holding ``fraction`` of
    them (``bulk``); its CPU seconds at both. It stops waiting ``stall_s`` after ``bulk`` (here its last
    records trickled in at one record per commit every few seconds, its CPU idle)."""
    from deltalake import write_deltalake
    import pyarrow as pa

    from tests.support import stop_process

    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64()), ("note", pa.string())])
    write_deltalake(table, schema.empty_table())
    group = f"kdi-{uuid.uuid4().hex[:8]}"
    load_start = os.getloadavg()
    started = time.monotonic()
    # its log to a file: it logs an error at every latency timer's expiry, and a pipe nobody reads fills up and
    # blocks it
    log_path = table + ".log"
    log = open(log_path, "wb")
    process = subprocess.Popen(
        [binary, "ingest", topic, table, "--kafka", servers, "--consumer_group", group, "--app_id", group,
         "--auto_offset_reset", "earliest", "--allowed_latency", str(latency_s)],
        stdout=log, stderr=log, env=dict(os.environ, RUST_LOG="warn"))
    rows, cpu, seconds = 0, 0.0, 0.0
    bulk: Optional[Dict[str, float]] = None  # when it first held `fraction` of the records
    try:
        while time.monotonic() - started < bound_s:
            if process.poll() is not None:
                with open(log_path, "rb") as f:
                    raise RuntimeError(f"kafka-delta-ingest exited ({process.returncode}): "
                                       f"{f.read()[-2000:].decode(errors='replace')}")
            cpu, rows, seconds = _cpu_of([process.pid]), _rows(table), time.monotonic() - started
            if bulk is None and rows >= fraction * records:
                bulk = {"seconds": seconds, "cpu": cpu, "rows": rows}
            if rows >= records or (bulk is not None and seconds - bulk["seconds"] > stall_s):
                break
            time.sleep(0.5)
    finally:
        stop_process(process)
        log.close()
    if bulk is None:
        raise RuntimeError(f"kafka-delta-ingest landed {rows:,} of {records:,} records within {bound_s:.0f} s")
    _check(table, rows)
    return {"seconds": seconds, "cpu": cpu, "rows": rows, "bulk": bulk, "fraction": fraction,
            "load_start": load_start, "load_end": os.getloadavg()}


def run_ours(spark: Any, servers: str, topic: str, table: str, checkpoint: str, records: int,
             bound_s: float, broker_pids: List[int]) -> Dict[str, Any]:
    """kafka-group + DeltaSink (``from_json`` in the transform), AvailableNow, from ``query.start()`` to the
    table holding every record; the CPU of every process of this session but the broker then."""
    from pyspark.sql import functions as F

    from bench.spark_runs import CpuSampler
    from pyspark_kafka_group import DeltaSink, cluster_options

    def parse(batch: Any) -> Any:
        return batch.select(F.from_json(F.col("value").cast("string"), SCHEMA).alias("e")).select("e.*")

    stream = (spark.readStream.format("kafka-group").option("kafka.bootstrap.servers", servers)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("kafka.group.id", f"kg-{uuid.uuid4().hex[:8]}").option("kafka.session.timeout.ms", "6000")
              .option("offsets.table", table).options(**cluster_options(spark)).load())
    load_start = os.getloadavg()
    with CpuSampler(broker_pids) as sampler:
        started = time.monotonic()
        wall0 = time.time()
        query = (stream.writeStream.foreachBatch(DeltaSink(table, transform=parse))
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        try:
            # not polled: this process's CPU is the query's driver side, counted
            query.awaitTermination(bound_s)
            seconds = time.monotonic() - started
            wall1 = time.time()
        finally:
            query.stop()
    if query.exception() is not None:
        raise RuntimeError(f"the query failed: {query.exception()}")
    _check(table, records)
    used = sampler.window(wall0, wall1) or {}
    cpu = sum(v for k, v in used.items() if k != "broker") * (wall1 - wall0)
    batches = [json.loads(p.json) if not isinstance(p, dict) else p for p in query.recentProgress]
    batch_s = sum(b["durationMs"].get("triggerExecution", 0) for b in batches) / 1000
    return {"seconds": seconds, "cpu": cpu, "cpu_by_kind": used, "batch_seconds": batch_s,
            "load_start": load_start, "load_end": os.getloadavg()}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=5_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--allowed-latency", type=int, default=2,
                        help="kafka-delta-ingest's --allowed_latency, seconds (its default: 300)")
    parser.add_argument("--bound", type=float, default=900.0, help="seconds each contender may take")
    parser.add_argument("--kdi-binary", default=None, help=f"default: {kdi_binary()}")
    parser.add_argument("--build-kdi", action="store_true", help="clone and build kafka-delta-ingest first")
    parser.add_argument("--skip-ours", action="store_true")
    parser.add_argument("--results-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    args = parser.parse_args(argv)
    from bench.run import _spark, _versions
    from kafka_group_devbroker import start_cluster

    binary = args.kdi_binary or kdi_binary()
    if args.build_kdi and not os.path.exists(binary):
        binary = build_kdi()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    lines: List[str] = []

    def say(text: str) -> None:
        lines.append(text)
        print(text, flush=True)

    workdir = tempfile.mkdtemp(prefix="kafka-group-kdi-")
    cluster = start_cluster("kafka", brokers=1)
    spark: Any = None
    results: Dict[str, Any] = {"started": stamp, "argv": sys.argv[1:], "kdi_commit": KDI_COMMIT}
    try:
        servers = cluster.bootstrap_servers
        topic = f"per-core-{uuid.uuid4().hex[:6]}"
        cluster.create_topic(topic, args.partitions)
        say(f"machine: {os.cpu_count()} CPUs, load average at start {os.getloadavg()}")
        produce_json(servers, topic, args.partitions, args.records, args.value_bytes)
        say(f"workload: {args.records:,} JSON records of about {args.value_bytes} B over {args.partitions} partitions "
            f"(produced first), into Delta columns {SCHEMA}")
        broker_pids = list(getattr(cluster, "pids", []))
        if os.path.exists(binary):
            version = kdi_version(binary)
            results["kdi_version"] = version
            kdi = run_kdi(binary, servers, topic, os.path.join(workdir, "kdi"), args.records, args.allowed_latency,
                          args.bound)
            results["kdi"] = kdi
            bulk = kdi["bulk"]
            say(f"(KDI) {version} at {KDI_COMMIT[:10]}, --allowed_latency {args.allowed_latency}: "
                f"{bulk['rows']:,} records ({kdi['fraction']:.0%}) landed {bulk['seconds']:.1f} s after its start: "
                f"{bulk['rows'] / bulk['seconds']:,.0f} records/s, {bulk['cpu'] / bulk['rows'] * 1e6:.2f} CPU s per "
                f"million records; all {args.records:,}: "
                + (f"{kdi['seconds']:.1f} s, {args.records / kdi['seconds']:,.0f} records/s, "
                   f"{kdi['cpu'] / args.records * 1e6:.2f} CPU s per million" if kdi["rows"] >= args.records
                   else f"not landed, {kdi['rows']:,} after {kdi['seconds']:.0f} s")
                + f"; load {kdi['load_start']} -> {kdi['load_end']}")
        else:
            say(f"(KDI) skipped: no binary at {binary} (python -m bench.kdi_per_core --build-kdi builds it)")
        if not args.skip_ours:
            spark = _spark(1)
            results["versions"] = _versions()
            say("versions: " + ", ".join(f"{k} {v}" for k, v in results["versions"].items()))
            ours = run_ours(spark, servers, topic, os.path.join(workdir, "kg"), os.path.join(workdir, "kg-chk"),
                            args.records, args.bound, broker_pids)
            results["ours"] = ours
            say(f"kafka-group + DeltaSink (from_json), local[1], AvailableNow: {args.records / ours['seconds']:,.0f} "
                f"records/s ({ours['seconds']:.1f} s from query.start(); batches {ours['batch_seconds']:.1f} s), "
                f"{ours['cpu'] / args.records * 1e6:.2f} CPU s per million records "
                f"({ {k: round(v * (ours['seconds']) / args.records * 1e6, 2) for k, v in ours['cpu_by_kind'].items()} }"
                f"); load {ours['load_start']} -> {ours['load_end']}")
            if "kdi" in results:
                bulk = results["kdi"]["bulk"]
                say(f"ours / (KDI) on its first {results['kdi']['fraction']:.0%}: records/s "
                    f"{(args.records / ours['seconds']) / (bulk['rows'] / bulk['seconds']):.2f}x, CPU per record "
                    f"{(ours['cpu'] / args.records) / (bulk['cpu'] / bulk['rows']):.2f}x")
        results["lines"] = lines
        os.makedirs(args.results_dir, exist_ok=True)
        out = os.path.join(args.results_dir, f"kdi-{stamp}.json")
        with open(out, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1, default=str)
        say(f"load average at end {os.getloadavg()}; results written to {out}")
        return 0
    finally:
        if spark is not None:
            spark.stop()
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
