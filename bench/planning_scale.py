"""Planning time per micro-batch and driver memory by the number of topics a query subscribes to, same run.

Run from the repository root (the package and the development brokers installed, Java 17 and
Maven present; the spark-sql-kafka-0-10 and delta-spark jars are fetched on first use)::

    python -m bench.planning_scale                                # 10, 50 and 200 topics of 8 partitions
    python -m bench.planning_scale --topics 200 --contenders kg

One Apache Kafka broker (KRaft, loopback, ``kafka_group_devbroker``) with ``max(--topics)`` topics of
``--partitions`` partitions (``scale-000``, ``scale-001``...), ``--records`` records of 100 B produced
to every partition. For each topic count N and each contender, one query subscribes with
``subscribePattern`` to the first N topics (``^scale-(000|001|...)$``) from ``earliest`` and reads
the backlog in ``--batches`` micro-batches (``maxOffsetsPerTrigger`` = the backlog / ``--batches``, which
both sources share in proportion to each partition's backlog: every batch plans every partition):

- **kafka-group + DeltaSink** (``kg``): one group member and one planning loop for all the topics,
  its default options sized by the session (``cluster_options``), offsets in the Delta table;
- **(S1)** (``s1``): Spark's own ``format("kafka")`` (spark-sql-kafka-0-10) into ``noop``, the same
  pattern, the same ``maxOffsetsPerTrigger``; planning does not depend on the sink.

Each query runs in a process of its own (its own SparkSession and JVM, ``local[--cores]``), so that
the memory figures of one do not carry another's. Measured per batch from Spark's
``StreamingQueryProgress.durationMs``: ``latestOffset`` (the source's ``latestOffset``: for
kafka-group a call into its planning process, which reads the positions, the broker's offsets and
plans) and ``queryPlanning`` (the batch's plan, with ``planInputPartitions``); *planning* is their
sum, the median and the maximum over the batches after the first ``--skip`` with rows (the group's
join and the first positioning are not a batch's planning). Memory, sampled every 0.2 s during the
query and read once more at its end: the peak RSS of the query's Python driver (this benchmark's
child process), of kafka-group's planning process (the Python process Spark starts for the source's
planning calls, ``python_streaming_source_runner``) and of the Spark JVM, and the JVM's live heap
after a full GC at the end. Then, in this process, kafka-group's planning alone
(``SourceDriver.next_offsets`` outside Spark, with the offsets table landed between plans as DeltaSink
lands it) for the largest N. Printed: one line per figure with the ratio to (S1) of the same N, the
load average beside each; all figures go to ``bench/results/planning-scale-<UTC timestamp>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from typing import Any, Dict, List, Mapping, Optional, Sequence

__all__ = ["topic_names", "topics_pattern", "planning_summary", "runner_pids", "main"]

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
CONTENDERS = {"kg": "kafka-group + DeltaSink", "s1": "(S1) format(kafka) -> noop"}
#: Spark starts a Python data source's planning process with this module (pyspark 4.2).
RUNNER_MODULE = b"python_streaming_source_runner"


# -- pure parts (unit-tested: tests/unit/test_bench_planning_scale.py) ----------------------------------------


def topic_names(count: int) -> List[str]:
    """The benchmark's first ``count`` topics."""
    return [f"scale-{i:03d}" for i in range(count)]


def topics_pattern(count: int) -> str:
    """A ``subscribePattern`` matching exactly the first ``count`` topics of :func:`topic_names`."""
    return "^scale-(" + "|".join(name[len("scale-"):] for name in topic_names(count)) + ")$"


def planning_summary(progress: Sequence[Mapping[str, Any]], skip: int) -> Dict[str, Any]:
    """Median and maximum ms of ``latestOffset``, ``queryPlanning``, their sum (planning) and
    ``triggerExecution`` over the batches with rows after the first ``skip`` of them; their count."""
    with_rows = sorted((p for p in progress if p.get("numInputRows", 0) > 0), key=lambda p: int(p["batchId"]))
    chosen = with_rows[skip:]
    series: Dict[str, List[float]] = {"latestOffset": [], "queryPlanning": [], "planning": [], "triggerExecution": []}
    for p in chosen:
        d = p["durationMs"]
        latest, planning = float(d.get("latestOffset", 0)), float(d.get("queryPlanning", 0))
        series["latestOffset"].append(latest)
        series["queryPlanning"].append(planning)
        series["planning"].append(latest + planning)
        series["triggerExecution"].append(float(d.get("triggerExecution", 0)))
    out: Dict[str, Any] = {k: {"median": statistics.median(v) if v else float("nan"),
                               "max": max(v) if v else float("nan"), "all": v} for k, v in series.items()}
    out["batches"] = len(chosen)
    out["rows"] = sum(int(p["numInputRows"]) for p in chosen)
    return out


def runner_pids(cmdlines: Mapping[int, bytes]) -> List[int]:
    """The processes among ``cmdlines`` (pid -> ``/proc/<pid>/cmdline``) that serve a Python data source's
    planning calls."""
    return sorted(pid for pid, cmd in cmdlines.items() if RUNNER_MODULE in cmd)


# -- one query, in a process of its own ---------------------------------------------------------------------


class MemorySampler:
    """Peak RSS (kB) of this process, of the source's planning processes and of the Java descendants,
    sampled every ``interval`` seconds while open."""

    def __init__(self, interval: float = 0.2) -> None:
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory-sampler", daemon=True)
        self.peak_kb = {"python driver": 0, "planning process": 0, "spark jvm": 0}
        self.runner_cmdlines: Dict[int, str] = {}

    def __enter__(self) -> "MemorySampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sample()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.sample()

    def sample(self) -> None:
        from bench.spark_runs import _descendants, _status_kb

        me = os.getpid()
        cmdlines: Dict[int, bytes] = {}
        for pid in _descendants(me):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmdlines[pid] = f.read()
            except OSError:
                continue
        kinds = {"python driver": [me], "planning process": runner_pids(cmdlines),
                 "spark jvm": [pid for pid, cmd in cmdlines.items() if cmd.split(b"\0")[0].endswith(b"java")]}
        for pid in kinds["planning process"]:
            self.runner_cmdlines[pid] = cmdlines[pid].replace(b"\0", b" ").decode(errors="replace")[:200]
        for kind, pids in kinds.items():
            for pid in pids:
                try:
                    self.peak_kb[kind] = max(self.peak_kb[kind], _status_kb(pid, "VmRSS"), _status_kb(pid, "VmHWM"))
                except OSError:
                    continue


def run_child(spec: Mapping[str, Any]) -> Dict[str, Any]:
    """One query of ``spec`` (contender, servers, topics, partitions, batches, max_offsets, cores, workdir,
    bound_s) to its last batch; its progress and memory."""
    from bench.run import _spark
    from bench.spark_runs import _as_dict

    contender, count = spec["contender"], int(spec["topics"])
    expected = count * int(spec["partitions"]) * int(spec["records"])
    table = os.path.join(spec["workdir"], f"{contender}-{count}-{uuid.uuid4().hex[:6]}")
    with MemorySampler() as memory:
        spark = _spark(int(spec["cores"]))
        spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "10000")
        try:
            if contender == "kg":
                from pyspark_kafka_group import DeltaSink, cluster_options

                reader = (spark.readStream.format("kafka-group")
                          .option("kafka.group.id", f"scale-{uuid.uuid4().hex[:8]}")
                          .option("kafka.session.timeout.ms", "6000").option("offsets.table", table)
                          .options(**cluster_options(spark)))
            else:
                reader = spark.readStream.format("kafka").option("kafka.fetch.max.wait.ms", "10")
            stream = (reader.option("kafka.bootstrap.servers", spec["servers"])
                      .option("subscribePattern", topics_pattern(count)).option("startingOffsets", "earliest")
                      .option("maxOffsetsPerTrigger", str(spec["max_offsets"])).load())
            writer = stream.writeStream.option("checkpointLocation", table + "-checkpoint")
            query = (writer.foreachBatch(DeltaSink(table)) if contender == "kg" else writer.format("noop")).start()
            load_start = os.getloadavg()
            deadline = time.monotonic() + float(spec["bound_s"])
            rows = 0
            try:
                while rows < expected:
                    if query.exception() is not None:
                        raise RuntimeError(f"the query failed: {query.exception()}")
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{rows:,} of {expected:,} rows within {spec['bound_s']} s")
                    rows = sum(int(_as_dict(p)["numInputRows"]) for p in query.recentProgress)
                    time.sleep(0.5)
                progress = [_as_dict(p) for p in query.recentProgress]
                memory.sample()  # the planning process ends with the query
            finally:
                query.stop()
            load_end = os.getloadavg()
            jvm = spark._jvm
            jvm.java.lang.System.gc()
            heap = jvm.java.lang.management.ManagementFactory.getMemoryMXBean().getHeapMemoryUsage()
            live_heap_mb = heap.getUsed() / 2**20
            table_rows = None
            if contender == "kg":
                from deltalake import DeltaTable

                table_rows = DeltaTable(table).to_pyarrow_dataset().count_rows()
        finally:
            spark.stop()
    return {"contender": contender, "topics": count, "rows": rows, "table_rows": table_rows,
            "progress": [{"batchId": p["batchId"], "numInputRows": p["numInputRows"], "durationMs": p["durationMs"]}
                         for p in progress],
            "peak_rss_mb": {k: v / 1024 for k, v in memory.peak_kb.items()}, "live_heap_mb": live_heap_mb,
            "runner_cmdlines": memory.runner_cmdlines, "load_start": load_start, "load_end": load_end}


def _child(spec: Mapping[str, Any], bound_s: float) -> Dict[str, Any]:
    """:func:`run_child` in a fresh interpreter; its JSON answer is the last line of its stdout."""
    proc = subprocess.run([sys.executable, "-m", "bench.planning_scale", "--child", json.dumps(spec)],
                          stdout=subprocess.PIPE, text=True, timeout=bound_s + 120)
    if proc.returncode != 0:
        raise RuntimeError(f"the {spec['contender']} query of {spec['topics']} topics failed ({proc.returncode})")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


# -- kafka-group's planning alone, in this process ---------------------------------------------------------


def planning_alone(servers: str, count: int, partitions: int, workdir: str, rounds: int = 8,
                   skip: int = 2) -> Dict[str, Any]:
    """``SourceDriver.next_offsets`` of a query subscribed to the first ``count`` topics (every partition
    owned, an offsets table), each plan landed in the table as DeltaSink lands it (ranges only) before the
    next; new records keep every partition plannable (the backlog was produced first). Median and max ms
    of the plans after the first ``skip``, and of the landing commits."""
    from kafka_group.config.options import parse_source_options
    from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
    from kafka_group.driver_factory import build_source_driver
    from kafka_group.formats import read_offset_document, write_offset_document
    from kafka_group.read.record_schema import arrow_schema

    table = os.path.join(workdir, f"alone-{uuid.uuid4().hex[:6]}")
    group = f"scale-alone-{uuid.uuid4().hex[:8]}"
    total = count * partitions
    driver = build_source_driver(parse_source_options({
        "kafka.bootstrap.servers": servers, "subscribepattern": topics_pattern(count), "kafka.group.id": group,
        "startingoffsets": "earliest", "kafka.session.timeout.ms": "6000", "offsets.table": table}))
    plans: List[float] = []
    commits: List[float] = []
    try:
        start = driver.initial_offsets()
        for _ in range(rounds):
            t = time.perf_counter()
            end = driver.next_offsets(start, total)  # one record per partition: every partition planned
            plans.append((time.perf_counter() - t) * 1000)
            if end is None:
                raise RuntimeError("nothing to plan: the backlog ran out")
            t = time.perf_counter()
            ranges = end.planned_ranges()
            store = DeltaOffsetStore(table, group)  # what DeltaSink does per batch
            store.check(ranges)
            store.commit([], arrow_schema(False), ranges)
            commits.append((time.perf_counter() - t) * 1000)
            driver.on_batch_running(end)
            driver.on_batch_committed(end)
            start = read_offset_document(write_offset_document(end))
        owned = len(driver.owned())
    finally:
        driver.close()
    return {"topics": count, "owned": owned, "plan_ms": {"median": statistics.median(plans[skip:]),
                                                         "max": max(plans[skip:]), "all": plans},
            "commit_ms": {"median": statistics.median(commits[skip:]), "max": max(commits[skip:]), "all": commits}}


# -- the run ------------------------------------------------------------------------------------------------


def _produce(servers: str, topics: Sequence[str], partitions: int, records: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "linger.ms": 20, "acks": "1",
                         "queue.buffering.max.messages": 1_000_000})
    value = os.urandom(100)
    for topic in topics:
        for p in range(partitions):
            for _ in range(records):
                producer.produce(topic, value, None, p)
        producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("not every record reached the broker")


def _load(load: Sequence[float]) -> str:
    return " / ".join(f"{x:.2f}" for x in load)


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        print(json.dumps(run_child(json.loads(argv[1])), default=str))
        return 0
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--topics", default="10,50,200", help="topic counts, comma-separated")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--records", type=int, default=30, help="records produced to every partition")
    parser.add_argument("--batches", type=int, default=6, help="micro-batches the backlog is read in")
    parser.add_argument("--skip", type=int, default=2, help="first batches with rows left out of the figures")
    parser.add_argument("--contenders", default="kg,s1", help="comma-separated: kg, s1")
    parser.add_argument("--cores", type=int, default=2, help="local[cores]")
    parser.add_argument("--bound", type=float, default=600.0, help="seconds one query may take")
    parser.add_argument("--results-dir", default=RESULTS_DIR)
    args = parser.parse_args(argv)
    from bench.run import _versions
    from kafka_group_devbroker import start_cluster

    counts = [int(n) for n in args.topics.split(",")]
    contenders = [c for c in args.contenders.split(",") if c]
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    lines: List[str] = []

    def say(text: str = "") -> None:
        lines.append(text)
        print(text, flush=True)

    say(f"command: python -m bench.planning_scale {' '.join(argv)}".rstrip())
    say(f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; machine: {os.cpu_count()} CPUs, "
        f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB; load average at start "
        f"{_load(os.getloadavg())}")
    say("versions: " + ", ".join(f"{k} {v}" for k, v in _versions().items()))
    workdir = tempfile.mkdtemp(prefix="kafka-group-planning-scale-")
    cluster = start_cluster("kafka", brokers=1)
    results: List[Dict[str, Any]] = []
    alone: Optional[Dict[str, Any]] = None
    try:
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        servers = cluster.bootstrap_servers
        names = topic_names(max(counts))
        futures = AdminClient({"bootstrap.servers": servers}).create_topics(
            [NewTopic(n, num_partitions=args.partitions, replication_factor=1) for n in names], request_timeout=120)
        for future in futures.values():
            future.result(120)
        _produce(servers, names, args.partitions, args.records)
        say(f"workload: {len(names)} topics of {args.partitions} partitions, {args.records} records of 100 B per "
            f"partition; each query reads its topics' backlog in {args.batches} batches (maxOffsetsPerTrigger), the "
            f"first {args.skip} with rows left out; local[{args.cores}]")
        for count in counts:
            for contender in contenders:
                backlog = count * args.partitions * args.records
                spec = {"contender": contender, "servers": servers, "topics": count, "partitions": args.partitions,
                        "records": args.records, "max_offsets": -(-backlog // args.batches), "cores": args.cores,
                        "workdir": workdir, "bound_s": args.bound}
                r = _child(spec, args.bound)
                r["planning"] = planning_summary(r["progress"], args.skip)
                results.append(r)
                p, m = r["planning"], r["peak_rss_mb"]
                say(f"{count} topics ({count * args.partitions:,} partitions), {CONTENDERS[contender]}: planning "
                    f"median {p['planning']['median']:.0f} ms, max {p['planning']['max']:.0f} ms (latestOffset "
                    f"{p['latestOffset']['median']:.0f}, queryPlanning {p['queryPlanning']['median']:.0f}) over "
                    f"{p['batches']} batches; peak RSS MB: python driver {m['python driver']:.0f}, planning process "
                    f"{m['planning process']:.0f}, Spark JVM {m['spark jvm']:.0f}; JVM live heap {r['live_heap_mb']:.0f}"
                    f" MB; load {_load(r['load_start'])} -> {_load(r['load_end'])}")
        alone = planning_alone(servers, max(counts), args.partitions, workdir, rounds=min(8, args.records))
        say(f"kafka-group planning alone (SourceDriver.next_offsets in one process, {alone['owned']:,} partitions "
            f"owned, the offsets table landed between plans): median {alone['plan_ms']['median']:.0f} ms, max "
            f"{alone['plan_ms']['max']:.0f} ms; the offsets commit (check + commit) median "
            f"{alone['commit_ms']['median']:.0f} ms; load {_load(os.getloadavg())}")
        say()
        for line in table_lines(results, args.partitions):
            say(line)
        say()
        biggest = {r["contender"]: r for r in results if r["topics"] == max(counts)}
        if "kg" in biggest:
            kg = biggest["kg"]["planning"]["planning"]
            say(f"target: planning <= 200 ms per batch with {max(counts)} topics: median {kg['median']:.0f} ms, max "
                f"{kg['max']:.0f} ms: {'HOLDS' if kg['max'] <= 200 else 'median holds' if kg['median'] <= 200 else 'MISSED'}")
        os.makedirs(args.results_dir, exist_ok=True)
        out = os.path.join(args.results_dir, f"planning-scale-{stamp}.json")
        with open(out, "w", encoding="utf-8") as f:
            json.dump({"started": stamp, "argv": argv, "versions": _versions(), "cpus": os.cpu_count(),
                       "results": results, "alone": alone, "lines": lines}, f, indent=1, default=str)
        say(f"load average at end {_load(os.getloadavg())}; results written to {out}")
        return 0
    finally:
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def table_lines(results: Sequence[Mapping[str, Any]], partitions: int) -> List[str]:
    """The Markdown table: one row per topic count and contender, planning and memory with the ratio to (S1)."""
    lines = ["| topics (partitions) | contender | planning median (max) ms | / (S1) | latestOffset ms | queryPlanning ms "
             "| python driver MB | planning process MB | Spark JVM RSS MB | JVM live heap MB |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    base = {r["topics"]: r for r in results if r["contender"] == "s1"}
    for r in results:
        p, m = r["planning"], r["peak_rss_mb"]
        s1 = base.get(r["topics"])
        ratio = "-" if s1 is None or s1 is r else f"{p['planning']['median'] / max(1.0, s1['planning']['planning']['median']):.2f}x"
        lines.append(f"| {r['topics']} ({r['topics'] * partitions:,}) | {CONTENDERS[r['contender']]} | "
                     f"{p['planning']['median']:.0f} ({p['planning']['max']:.0f}) | {ratio} | "
                     f"{p['latestOffset']['median']:.0f} | {p['queryPlanning']['median']:.0f} | "
                     f"{m['python driver']:.0f} | {m['planning process']:.0f} | {m['spark jvm']:.0f} | "
                     f"{r['live_heap_mb']:.0f} |")
    return lines


if __name__ == "__main__":
    sys.exit(main())
