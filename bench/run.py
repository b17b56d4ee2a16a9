"""Performance of the ``kafka-group`` source against what users would pick instead, each figure a
ratio to a baseline measured in the same run.

Run from the repository root (the package and the development brokers installed, Java 17 and
Maven present; the jars are fetched on first use)::

    python -m bench.run --quick        # about 4 minutes: 8 and 64 partitions, smaller workloads
    python -m bench.run                # about 12 minutes: the workloads of the issue

It starts Apache Kafka (KRaft, one broker on loopback) and produces one topic per workload:
values of 100 B and 1 KiB, each over 8, 64 and 1,000 partitions. On every workload, in
interleaved repetitions (the best of ``--repeat`` is kept, so every contender sees the same
load):

- (S1) Spark's own ``format("kafka")`` into ``noop``; (S2) ``format("kafka")`` + ``foreachBatch``
  writing Delta with delta-spark and ``txnAppId``/``txnVersion``; the ``kafka-group`` source into
  ``noop`` and into the exactly-once ``DeltaSink``. All in one Spark ``local[2]`` session with
  the spark-sql-kafka-0-10 and delta-spark jars; ``Trigger.AvailableNow`` from ``earliest``,
  one batch for the backlog (the drain) and batches of ``maxOffsetsPerTrigger`` (steady).
- (K) ``kafka-consumer-perf-test``; (a) one confluent-kafka consumer; (a2) the connector's read
  path to Arrow in one process; (b) kcat.

Then the fixed cost of a warm tiny batch (into ``noop`` and Delta, both sources), the planning
time (no new data, 64 and 1,000 partitions owned), the Python workers' peak memory by backlog
size, and the read path in ``local[1]`` against ``local[2]``. Every figure is printed on its own
line; all of them go to ``bench/results/<timestamp>.json`` and a plot to
``bench/results/<timestamp>.png``.

Spark throughput is judged on micro-batch time (the sum of the batches' ``triggerExecution``),
which leaves out the query's one-time start, as (K)'s ``fetch.time.ms`` leaves out its group
join. Spark's Kafka source is run with ``kafka.fetch.max.wait.ms=10``: with its default (500 ms)
every task waits that long at the end of its partition (measured, printed as its own line), and
the targets are judged against the faster of the two.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from bench import baselines
from bench.jvm_consumer import consumer_perf_test
from bench.planning_cost import delta_history, planning_ms
from bench.spark_runs import QueryRun, median, run_query
from bench.workload import Workload, produce

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")

#: Options given to Spark's own Kafka source in (S1) and (S2): see the module docstring.
SPARK_KAFKA_TUNED = {"kafka.fetch.max.wait.ms": "10"}

#: The broker's JVMs, whose CPU time the Spark runs account for (set once the broker runs).
BROKER_PIDS: List[int] = []


class Report:
    """Prints one figure per line and keeps them for the results file."""

    def __init__(self) -> None:
        self.figures: Dict[str, Any] = {}
        self.lines: List[str] = []

    def line(self, text: str) -> None:
        """Print a line at once."""
        self.lines.append(text)
        print(text, flush=True)

    def figure(self, key: str, text: str, **values: Any) -> None:
        """Print a figure and record it under ``key``."""
        self.figures[key] = dict(values, text=text)
        self.line(text)


@dataclass(frozen=True)
class Contender:
    """A Spark query the benchmark runs: a source format into a sink."""

    key: str
    label: str
    source_format: str
    sink: str
    extra_options: Optional[Dict[str, str]] = None


KG_NOOP = Contender("kg_noop", "kafka-group -> noop", "kafka-group", "noop")
S1 = Contender("s1", "(S1) format(kafka) -> noop", "kafka", "noop", SPARK_KAFKA_TUNED)
KG_DELTA = Contender("kg_delta", "kafka-group + DeltaSink", "kafka-group", "delta")
S2 = Contender("s2", "(S2) format(kafka) + delta-spark txnAppId", "kafka", "delta", SPARK_KAFKA_TUNED)
S1_DEFAULTS = Contender("s1_defaults", "(S1) with Spark's defaults", "kafka", "noop")
SPARK_CONTENDERS = (KG_NOOP, S1, KG_DELTA, S2)


def _verdict(ok: bool) -> str:
    return "HOLDS" if ok else "MISSED"


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f}/{five:.2f}"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="8 and 64 partitions, smaller workloads, one repetition")
    parser.add_argument("--records", type=int, help="records of each 100 B workload (default 1,000,000; quick 400,000)")
    parser.add_argument("--large-records", type=int,
                        help="records of each 1 KiB workload (default 200,000; quick 100,000)")
    parser.add_argument("--partitions", help="comma-separated partition counts (default 8,64,1000; quick 8,64)")
    parser.add_argument("--repeat", type=int, help="interleaved repetitions, best kept (default 2; quick 1)")
    parser.add_argument("--tiny-batches", type=int, help="micro-batches of the fixed-cost runs (default 25; quick 12)")
    parser.add_argument("--steady-batches", type=int, default=10,
                        help="batches of the steady runs (maxOffsetsPerTrigger = records / this)")
    parser.add_argument("--skip-spark", action="store_true", help="baselines and planning only")
    parser.add_argument("--results-dir", default=RESULTS_DIR)
    args = parser.parse_args(argv)

    quick = args.quick
    records = args.records or (400_000 if quick else 1_000_000)
    large_records = args.large_records or (100_000 if quick else 200_000)
    partition_counts = [int(p) for p in (args.partitions or ("8,64" if quick else "8,64,1000")).split(",")]
    repeat = args.repeat or (1 if quick else 2)
    tiny_batches = args.tiny_batches or (12 if quick else 25)

    from kafka_group_devbroker import DevelopmentCluster, start_cluster

    report = Report()
    started = time.time()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(started))
    workdir = tempfile.mkdtemp(prefix="kafka-group-bench-")
    results: Dict[str, Any] = {
        "started": stamp, "quick": quick, "argv": sys.argv[1:],
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "loadavg_start": os.getloadavg()},
    }
    report.line(f"machine: {os.cpu_count()} CPUs, load average at start {os.getloadavg()}")
    scaling = baselines.cpu_scaling()
    report.figure("machine_scaling", f"machine: two CPU-bound Python processes do {scaling:.2f}x the work of one "
                  "(2.00x on two idle, independent cores): the ceiling of any local[1] -> local[2] gain",
                  ratio=scaling)
    cluster: Optional[DevelopmentCluster] = None
    spark: Any = None
    try:
        cluster = start_cluster("kafka", brokers=1)
        servers = cluster.bootstrap_servers
        BROKER_PIDS[:] = list(getattr(cluster, "pids", []))
        results["versions"] = _versions()
        report.line("versions: " + ", ".join(f"{k} {v}" for k, v in results["versions"].items()))

        workloads: List[Workload] = [
            Workload(f"bench-{vb}b-{p}p", p, n, value_bytes=vb)
            for vb, n in ((100, records), (1024, large_records)) for p in partition_counts
        ]
        mid = 64 if 64 in partition_counts else partition_counts[-1]
        quarter = Workload(f"bench-100b-{mid}p-quarter", mid, records // 4)
        tiny = Workload("bench-tiny", 8, 8 * 10 * tiny_batches)
        for w in workloads + [quarter, tiny]:
            cluster.create_topic(w.topic, w.partitions)
            seconds = produce(servers, w)
            report.line(f"workload {w.topic}: {w.describe()}; produced in {seconds:.1f} s")
        results["workloads"] = {w.topic: w.to_json() for w in workloads + [quarter, tiny]}

        # -- single-process baselines ---------------------------------------------------------------
        rates: Dict[str, Dict[str, float]] = {w.topic: {} for w in workloads}
        for w in workloads:
            measured: Dict[str, List[float]] = {"k": [], "a": [], "a2": [], "b": []}
            for _ in range(repeat):
                measured["k"].append(consumer_perf_test(servers, w).rate)
                measured["a"].append(w.records / baselines.raw_consume(servers, w))
                measured["a2"].append(w.records / baselines.python_read_path(servers, w))
                kcat = baselines.kcat_drain(servers, w)
                if kcat is not None:
                    measured["b"].append(w.records / kcat)
            top = {key: max(values) for key, values in measured.items() if values}
            rates[w.topic].update(top)
            k = top["k"]
            report.figure(f"k[{w.topic}]", f"[{w.topic}] (K) kafka-consumer-perf-test: {k:,.0f} rec/s "
                          f"({k * (w.key_bytes + w.value_bytes) / 1e6:.0f} MB/s) = 1.00x (K)", rate=k)
            report.figure(f"a[{w.topic}]", f"[{w.topic}] (a) one confluent-kafka consumer, one process: "
                          f"{top['a']:,.0f} rec/s = {top['a'] / k:.2f}x (K)", rate=top["a"], ratio_to_k=top["a"] / k)
            report.figure(f"a2[{w.topic}]", f"[{w.topic}] (a2) the connector's read path to Arrow, one process: "
                          f"{top['a2']:,.0f} rec/s = {top['a2'] / k:.2f}x (K)", rate=top["a2"],
                          ratio_to_k=top["a2"] / k)
            if "b" in top:
                report.figure(f"b[{w.topic}]", f"[{w.topic}] (b) kcat -C -e to /dev/null: {top['b']:,.0f} rec/s = "
                              f"{top['b'] / k:.2f}x (K)", rate=top["b"], ratio_to_k=top["b"] / k)
            else:
                report.figure(f"b[{w.topic}]", f"[{w.topic}] (b) kcat: unavailable (not installed)", rate=None)

        # -- planning ---------------------------------------------------------------------------------
        for owned_topic, target in ((f"bench-100b-{mid}p", 20.0), ("bench-100b-1000p", 200.0)):
            if owned_topic not in rates:
                continue
            plan = planning_ms(servers, owned_topic, rounds=30 if target == 20.0 else 15)
            report.figure(f"planning[{plan['owned']}]", f"planning, no new data, {plan['owned']} partitions owned: "
                          f"median {plan['median_ms']:.1f} ms (p90 {plan['p90_ms']:.1f}) = "
                          f"{plan['median_ms'] / target:.2f}x the {target:.0f} ms target: "
                          f"{_verdict(plan['median_ms'] <= target)}", target_ms=target, **plan)

        history = delta_history(workdir, commits=130 if quick else 250)
        report.figure("delta_history", f"Delta commit (open store + check + commit, the sink's per-batch path) over "
                      f"{history['commits']} commits, median of 10: {history['first_ms']:.1f} ms at versions 1-10, "
                      f"{history['before_checkpoint_ms']:.1f} ms at 90-99, {history['after_checkpoint_ms']:.1f} ms at "
                      f"100-109, {history['last_ms']:.1f} ms at the last 10; checkpoints written by delta-rs: "
                      f"{', '.join(history['checkpoints']) or 'none'}", **history)

        if args.skip_spark:
            return 0

        # -- Spark local[2] ---------------------------------------------------------------------------
        spark = _spark(2)
        for contender in (KG_NOOP, S1):  # warms the JVM, the Python workers and both sources' code
            _run(spark, servers, tiny, workdir, contender)
        report.line(f"Spark local[2] warm ({_load()})")

        drains: Dict[str, Dict[str, QueryRun]] = {}
        for w in workloads:
            best = drains[w.topic] = _best_of(spark, servers, w, workdir, SPARK_CONTENDERS, repeat)
            for key, run in best.items():
                rates[w.topic][key] = run.rate
            _report_pair(report, w, "drain", best, KG_NOOP, S1, "read path")
            _report_pair(report, w, "drain", best, KG_DELTA, S2, "end to end, exactly once")
            report.figure(f"cpu[{w.topic}]", f"[{w.topic}] CPU seconds per second of the drain's batch "
                          f"({_load()}): " + "; ".join(
                              f"{c.label}: {_cpu(best[c.key])}" for c in SPARK_CONTENDERS),
                          **{c.key: best[c.key].cpu_per_second for c in SPARK_CONTENDERS})

        middle = [w for w in workloads if w.partitions == mid]
        for w in middle:
            default = _run(spark, servers, w, workdir, S1_DEFAULTS)
            tuned = drains[w.topic]["s1"]
            report.figure(f"s1_defaults[{w.topic}]", f"[{w.topic}] (S1) with Spark's defaults "
                          f"(kafka.fetch.max.wait.ms=500): {default.rate:,.0f} rec/s = "
                          f"{default.rate / tuned.rate:.2f}x (S1) with kafka.fetch.max.wait.ms=10", **default.to_json())

        # Steady: the same backlog in batches of maxOffsetsPerTrigger; Spark's consumer pool and
        # this source's client pool both reuse their clients across the batches.
        for w in middle:
            per_batch = w.records // args.steady_batches
            best = _best_of(spark, servers, w, workdir, SPARK_CONTENDERS, repeat, max_offsets_per_trigger=per_batch)
            for key, run in best.items():
                rates[w.topic][f"steady_{key}"] = run.rate
            _report_pair(report, w, f"steady {per_batch:,}/batch", best, KG_NOOP, S1, "read path")
            _report_pair(report, w, f"steady {per_batch:,}/batch", best, KG_DELTA, S2, "end to end, exactly once")

        # Memory: the Python workers' peak RSS into DeltaSink for a quarter of the backlog and for all of
        # it, in a fresh session: Spark reuses its workers, and a worker keeps the memory it once used
        # (allocators do not give it back), so after the other runs both would show the largest earlier peak.
        spark.stop()
        spark = _spark(2)
        _run(spark, servers, tiny, workdir, KG_DELTA)
        part = _run(spark, servers, quarter, workdir, KG_DELTA, sample_memory=True)
        full = _run(spark, servers, next(w for w in middle if w.value_bytes == 100), workdir, KG_DELTA,
                    sample_memory=True)
        report.figure("memory", f"[bench-100b-{mid}p] Python workers' peak RSS, end to end, fresh session: "
                      f"{part.peak_worker_rss_mb:.0f} MB in one worker for {part.rows:,} records (a quarter), then "
                      f"{full.peak_worker_rss_mb:.0f} MB for {full.rows:,} = "
                      f"{(full.peak_worker_rss_mb or 0) / (part.peak_worker_rss_mb or 1):.2f}x for 4x the backlog; "
                      f"target flat (<= 1.25x): "
                      f"{_verdict((full.peak_worker_rss_mb or 0) <= 1.25 * (part.peak_worker_rss_mb or 1))}",
                      full_mb=full.peak_worker_rss_mb, quarter_mb=part.peak_worker_rss_mb,
                      full_records=full.rows, quarter_records=part.rows)

        # Fixed cost of a warm tiny batch: 80 records from 8 partitions per batch.
        fixed: Dict[str, List[float]] = {}
        per_tiny = 10 * tiny.partitions
        for contender in SPARK_CONTENDERS:
            tiny_run = _run(spark, servers, tiny, workdir, contender, max_offsets_per_trigger=per_tiny)
            fixed[contender.key] = tiny_run.warm_batch_seconds()
        for ours, theirs, what in ((KG_NOOP, S1, "noop"), (KG_DELTA, S2, "Delta")):
            mine, base = median(fixed[ours.key]), median(fixed[theirs.key])
            verdict = f"; target <= 1.0x: {_verdict(mine <= base)}" if what == "Delta" else " (no target)"
            report.figure(f"fixed_cost[{what}]", f"fixed cost of a warm batch of {per_tiny} records into {what}: "
                          f"{ours.label} median {mine * 1000:.0f} ms, {theirs.label} {base * 1000:.0f} ms = "
                          f"{mine / base:.2f}x{verdict}",
                          ours_s=fixed[ours.key], theirs_s=fixed[theirs.key], ratio=mine / base)

        # local[1] against local[2]: the read path's gain from a second core.
        spark.stop()
        spark = _spark(1)
        _run(spark, servers, tiny, workdir, KG_NOOP)
        for w in middle:
            ones = _best_of(spark, servers, w, workdir, (KG_NOOP, S1), repeat)
            one, one_s1 = ones[KG_NOOP.key], ones[S1.key]
            two, two_s1 = drains[w.topic]["kg_noop"], drains[w.topic]["s1"]
            gain, gain_s1 = two.rate / one.rate, two_s1.rate / one_s1.rate
            report.figure(f"cores[{w.topic}]", f"[{w.topic}] read path local[2] {two.rate:,.0f} rec/s = {gain:.2f}x "
                          f"local[1] ({one.rate:,.0f} rec/s); target >= 1.7x: {_verdict(gain >= 1.7)}; (S1) gains "
                          f"{gain_s1:.2f}x ({one_s1.rate:,.0f} to {two_s1.rate:,.0f} rec/s); CPU per second of the "
                          f"batch, local[1]: {_cpu(one)}; local[2]: {_cpu(two)}",
                          local1=one.to_json(), gain=gain, s1_local1=one_s1.to_json(), s1_gain=gain_s1)
        results["rates"] = rates
        return 0
    finally:
        if spark is not None:
            spark.stop()
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        results["machine"]["loadavg_end"] = os.getloadavg()
        results["seconds"] = time.time() - started
        results["figures"] = report.figures
        os.makedirs(args.results_dir, exist_ok=True)
        out = os.path.join(args.results_dir, f"{stamp}{'-quick' if quick else ''}")
        results["lines"] = report.lines
        with open(out + ".json", "w") as f:
            json.dump(results, f, indent=1, default=str)
        if results.get("rates"):
            from bench.plot import draw_rates
            from bench.report_table import markdown_table

            with open(out + ".md", "w") as f:
                f.write(markdown_table(results) + "\n\nPrinted lines:\n\n" +
                        "".join(f"    {line}\n" for line in report.lines))

            draw_rates(results["rates"], out + ".png", title=f"records/s by workload, {stamp}")
            print(f"plot written to {out}.png", flush=True)
        print(f"load average at end {os.getloadavg()}; results written to {out}.json "
              f"({results['seconds']:.0f} s)", flush=True)


def _spark(cores: int) -> Any:
    """A ``local[cores]`` session with Spark's Kafka source and delta-spark on its classpath."""
    from kafka_group_devbroker.jars import classpath
    from pyspark_kafka_group.spark_session import local_session

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return local_session(
        "kafka-group-bench", cores=cores, extra_jars=classpath("spark-kafka") + classpath("delta-spark"),
        extra_conf={"spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
                    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
                    # delta-spark rebuilds the table's state (its set transactions, for txnAppId) as a
                    # Spark job of 50 partitions by default: 2.4-6.8 s per batch on local[2], 0.5 s with
                    # one partition per core (measured); (S2) gets the faster setting.
                    "spark.databricks.delta.snapshotPartitions": str(cores),
                    # Spark's Kafka source on 1,000 partitions of 1 KiB ran the 1 GiB default heap out
                    # of memory (local mode: tasks and driver share one JVM); the machine has 24 GiB.
                    "spark.driver.memory": "4g",
                    "spark.ui.showConsoleProgress": "false"},
    )


def _run(spark: Any, servers: str, w: Workload, workdir: str, contender: Contender, *,
         max_offsets_per_trigger: Optional[int] = None, sample_memory: bool = False) -> QueryRun:
    run = run_query(spark, servers, w.topic, workdir, sink=contender.sink, source_format=contender.source_format,
                    extra_options=contender.extra_options, max_offsets_per_trigger=max_offsets_per_trigger,
                    sample_memory=sample_memory, broker_pids=BROKER_PIDS)
    if run.rows != w.records or (contender.sink == "delta" and run.table_rows != w.records):
        raise RuntimeError(f"{contender.label} on {w.topic}: {run.rows:,} rows read, {run.table_rows} in the table, "
                           f"of {w.records:,} records")
    return run


def _best_of(spark: Any, servers: str, w: Workload, workdir: str, contenders: Sequence[Contender], repeat: int,
             **options: Any) -> Dict[str, QueryRun]:
    """Each contender's fastest run (least micro-batch time) of ``repeat``, the contenders taking
    turns so that all see the same load."""
    runs: Dict[str, List[QueryRun]] = {c.key: [] for c in contenders}
    for _ in range(repeat):
        for contender in contenders:
            runs[contender.key].append(_run(spark, servers, w, workdir, contender, **options))
    return {key: min(rs, key=lambda r: r.batch_seconds) for key, rs in runs.items()}


def _cpu(run: QueryRun) -> str:
    """``broker 0.12, spark_jvm 0.40, python_workers 1.02, driver 0.01 = 1.55`` for a run's batches."""
    used = run.cpu_per_second or {}
    return ", ".join(f"{kind} {value:.2f}" for kind, value in used.items()) + f" = {sum(used.values()):.2f}"


def _report_pair(report: Report, w: Workload, mode: str, best: Dict[str, QueryRun], ours: Contender,
                 theirs: Contender, what: str) -> None:
    mine, base = best[ours.key], best[theirs.key]
    ratio = mine.rate / base.rate
    report.figure(f"{mode.split()[0]}_{ours.key}[{w.topic}]",
                  f"[{w.topic}] {mode}, {what}: {ours.label} {mine.rate:,.0f} rec/s "
                  f"({mine.batch_seconds:.2f} s, {len(mine.batches)} batches) = {ratio:.2f}x {theirs.label} "
                  f"({base.rate:,.0f} rec/s, {base.batch_seconds:.2f} s); target >= 1.0x: {_verdict(ratio >= 1.0)}",
                  ratio=ratio, ours=mine.to_json(), theirs=base.to_json())


def _versions() -> Dict[str, str]:
    import confluent_kafka
    import deltalake
    import pyarrow
    import pyspark
    from kafka_group_devbroker.jars import DELTA_SPARK_VERSION, KAFKA_VERSION, SPARK_VERSION

    return {"kafka": KAFKA_VERSION, "pyspark": pyspark.__version__, "spark-sql-kafka": SPARK_VERSION,
            "delta-spark": DELTA_SPARK_VERSION, "confluent_kafka": confluent_kafka.__version__,
            "librdkafka": confluent_kafka.libversion()[0], "deltalake": deltalake.__version__,
            "pyarrow": pyarrow.__version__}


if __name__ == "__main__":
    sys.exit(main())
