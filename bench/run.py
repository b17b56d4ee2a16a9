"""Performance benchmarks of the ``kafka-group`` source, each figure a ratio to a baseline of the same run.

Run from the repository root (the package installed, Java 17 present)::

    python -m bench.run --quick        # under 2 minutes
    python -m bench.run                # the full workload, about 4 minutes

It starts the broker (Apache Kafka by default, `--engine mock` for librdkafka's mock cluster), produces the
workloads, measures the baselines (raw confluent-kafka consumption; the
connector's Python read path building Arrow batches; ``kcat``; ``deltalake``
writing the same records), then the source in Spark ``local[2]`` with
``Trigger.AvailableNow`` into ``noop`` and into the exactly-once ``DeltaSink``,
and the fixed cost of a warm micro-batch. The source runs as shipped (default
options: each batch's ranges packed onto at most ``fetch.maxTasks`` tasks of at
least ``fetch.minRecordsPerTask`` records) and, interleaved with it, as the
reference plan it replaced, one task per partition's range
(:func:`bench.spark_runs.one_task_per_range`). Also: the source's planning
time per trigger with no new data (64 and 1,000 partitions), the Delta commit
cost over a long history, and the peak RSS of the Python workers. Each figure
is printed on its own line and all of them are written to
``bench/results/<timestamp>.json``.

Spark throughput is judged on micro-batch time (the sum of the batches'
``triggerExecution``): like the single-process baselines, it leaves out the
one-time start of the query (planning process, group join, about 1-2 s); the
wall time with it is printed too. Each throughput figure is the best of
``--repeat`` runs, baselines and Spark runs alike.

Workload and the broker's bound: the mock keeps at most 5 MiB (or 100,000
record batches) per partition and drops older batches. The run measures that
bound first (records kept of 200,000 produced to one partition) and refuses a
workload whose partitions would exceed it, so the default spreads 2,000,000
records of 100 B over 64 partitions (31,250 each, about 4 MB).
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
from functools import partial
from typing import Any, Dict, List, Optional, Tuple

from bench import baselines
from bench.planning_cost import delta_history, planning_ms
from bench.spark_runs import median, one_task_per_range, planned_tasks, run_query
from bench.workload import Workload, measure_retention, produce

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


class Report:
    """Prints one figure per line and keeps them for the results file."""

    def __init__(self) -> None:
        self.figures: Dict[str, Any] = {}

    def line(self, text: str) -> None:
        """Print a line at once."""
        print(text, flush=True)

    def figure(self, key: str, text: str, **values: Any) -> None:
        """Print a figure and record it under ``key``."""
        self.figures[key] = values
        self.line(text)


def _rate(records: int, seconds: Optional[float]) -> Optional[float]:
    return None if seconds is None else records / seconds


def _best(fn: Any, repeat: int) -> float:
    return float(min(fn() for _ in range(repeat)))


def _times(run: Any) -> str:
    return (f"{run.batch_seconds:.2f} s in {len(run.batches)} batch(es); wall {run.seconds:.2f} s with the query's "
            f"start = {run.wall_rate:,.0f} rec/s")


def _verdict(value: float, target: float, higher_is_better: bool = True) -> str:
    ok = value >= target if higher_is_better else value <= target
    return "HOLDS" if ok else "MISSED"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small workloads, one repetition (a few minutes)")
    parser.add_argument("--records", type=int, help="records of 100 B values (default 2,000,000; quick 240,000)")
    parser.add_argument("--partitions", type=int, help="partitions of each topic (default 64; quick 8)")
    parser.add_argument("--value-bytes", type=int, default=100, help="value size of the main workload")
    parser.add_argument("--large-value-bytes", type=int, default=1024, help="value size of the second workload")
    parser.add_argument("--large-records", type=int,
                        help="records of the large-value workload (default 4,000 per partition, below the mock's bound)")
    parser.add_argument("--repeat", type=int, help="repetitions of each throughput figure, best taken (default 2; quick 1)")
    parser.add_argument("--tiny-batches", type=int, help="micro-batches of the fixed-cost runs (default 25; quick 12)")
    parser.add_argument("--min-partitions", type=int, default=None, help="the source's minPartitions in the Spark runs")
    parser.add_argument("--skip-spark", action="store_true", help="baselines and planning only")
    parser.add_argument("--results-dir", default=RESULTS_DIR)
    parser.add_argument("--engine", choices=("kafka", "mock"), default="kafka",
                        help="broker: Apache Kafka (default; jars fetched by Maven) or librdkafka's mock cluster")
    args = parser.parse_args(argv)

    quick = args.quick
    partitions = args.partitions or (8 if quick else 64)
    records = args.records or (240_000 if quick else 2_000_000)
    large_records = args.large_records or 4_000 * partitions
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
    embedded: Optional[DevelopmentCluster] = None
    spark: Any = None
    try:
        embedded = start_cluster(args.engine, brokers=1)
        servers = embedded.bootstrap_servers
        results["engine"] = args.engine
        results["versions"] = _versions()

        kept, produced = measure_retention(embedded, args.value_bytes)
        kept_large, produced_large = measure_retention(embedded, args.large_value_bytes, records=20_000)
        report.figure("broker_retention",
                      f"broker retention ({args.engine}, one partition): kept {kept:,} of {produced:,} records of "
                      f"{args.value_bytes} B, {kept_large:,} of {produced_large:,} of {args.large_value_bytes} B",
                      kept=kept, produced=produced, kept_large=kept_large, produced_large=produced_large)

        main_w = Workload("bench-main", partitions, records, value_bytes=args.value_bytes)
        small_w = Workload("bench-quarter", partitions, records // 4, value_bytes=args.value_bytes)
        large_w = Workload("bench-large", partitions, large_records, value_bytes=args.large_value_bytes)
        tiny_w = Workload("bench-tiny", 8, 8 * 10 * tiny_batches, value_bytes=args.value_bytes)
        for w in (main_w, small_w, large_w, tiny_w):
            embedded.create_topic(w.topic, w.partitions)
            seconds = produce(servers, w)
            report.line(f"workload {w.topic}: {w.describe()}; produced in {seconds:.1f} s, all retained")
        results["workloads"] = {w.topic: w.to_json() for w in (main_w, small_w, large_w, tiny_w)}

        # -- baselines -------------------------------------------------------------------------
        for w, tag in ((main_w, ""), (large_w, "_large")):
            a = _best(lambda: baselines.raw_consume(servers, w), repeat)
            a2 = _best(lambda: baselines.python_read_path(servers, w), repeat)
            ra, ra2 = w.records / a, w.records / a2
            report.figure(f"a{tag}", f"[{w.topic}] baseline (a) raw consume, one process: {ra:,.0f} rec/s "
                          f"({ra * (w.key_bytes + w.value_bytes) / 1e6:.0f} MB/s) = 1.00x (a)", rate=ra, seconds=a)
            report.figure(f"a2{tag}", f"[{w.topic}] baseline (a2) consume + Arrow batches (read_range), one process: "
                          f"{ra2:,.0f} rec/s = {ra2 / ra:.2f}x (a)", rate=ra2, seconds=a2, ratio_to_a=ra2 / ra)
            kcat = baselines.kcat_drain(servers, w)
            if kcat is None:
                report.figure(f"b{tag}", f"[{w.topic}] baseline (b) kcat: unavailable (kcat not installed)", rate=None)
            else:
                kcat = min([kcat] + [baselines.kcat_drain(servers, w) or kcat for _ in range(repeat - 1)])
                rb = w.records / kcat
                report.figure(f"b{tag}", f"[{w.topic}] baseline (b) kcat -C -e to /dev/null: {rb:,.0f} rec/s = "
                              f"{rb / ra:.2f}x (a)", rate=rb, seconds=kcat, ratio_to_a=rb / ra)
            c = _best(partial(baselines.delta_write, baselines.source_table(w),
                              os.path.join(workdir, "delta-baseline")), repeat)  # the table is freed with the partial
            rc = w.records / c
            report.figure(f"c{tag}", f"[{w.topic}] baseline (c) deltalake.write_deltalake of the same records: "
                          f"{rc:,.0f} rec/s = {rc / ra2:.2f}x (a2)", rate=rc, seconds=c, ratio_to_a2=rc / ra2)
        a2_main = report.figures["a2"]["rate"]
        a2_large = report.figures["a2_large"]["rate"]

        # -- planning ----------------------------------------------------------------------------
        plan_small = planning_ms(servers, main_w.topic)
        report.figure("planning", f"planning, no new data, {plan_small['owned']} partitions owned: median "
                      f"{plan_small['median_ms']:.1f} ms (p90 {plan_small['p90_ms']:.1f}) = "
                      f"{plan_small['median_ms'] / 20:.2f}x the 20 ms target: "
                      f"{_verdict(plan_small['median_ms'], 20, False)}", **plan_small)
        embedded.create_topic("bench-1000", 1000)
        plan_big = planning_ms(servers, "bench-1000", rounds=15)
        report.figure("planning_1000", f"planning, no new data, {plan_big['owned']} partitions owned: median "
                      f"{plan_big['median_ms']:.1f} ms (p90 {plan_big['p90_ms']:.1f}) = "
                      f"{plan_big['median_ms'] / 200:.2f}x the 200 ms target: "
                      f"{_verdict(plan_big['median_ms'], 200, False)}", **plan_big)
        history = delta_history(workdir, commits=130 if quick else 250)
        report.figure("delta_history", f"Delta commit (open store + check + commit, the sink's per-batch path) over "
                      f"{history['commits']} commits, median of 10: {history['first_ms']:.1f} ms at versions 1-10, "
                      f"{history['before_checkpoint_ms']:.1f} ms at 90-99, {history['after_checkpoint_ms']:.1f} ms at "
                      f"100-109, {history['last_ms']:.1f} ms at the last 10 = "
                      f"{history['after_checkpoint_ms'] / history['first_ms']:.2f}x versions 1-10 after a checkpoint; "
                      f"checkpoints written by delta-rs: {', '.join(history['checkpoints']) or 'none'}", **history)

        if args.skip_spark:
            return 0

        # -- Spark ---------------------------------------------------------------------------------
        from pyspark_kafka_group.spark_session import local_session

        t = time.monotonic()
        spark = local_session("kafka-group-bench", cores=2)
        report.line(f"Spark local[2] started in {time.monotonic() - t:.1f} s")
        warm = run_query(spark, servers, tiny_w.topic, workdir, sink="noop")  # warms the JVM and the Python workers
        report.line(f"warm-up query: {warm.rows:,} rows in {warm.seconds:.1f} s")
        mp = args.min_partitions

        # The source as shipped (default options: ranges packed onto at most fetch.maxTasks tasks of at
        # least fetch.minRecordsPerTask records) and, interleaved with it so that both see the same load,
        # the reference plan it replaced: one Spark task per partition's range.
        configs: List[Tuple[str, str, bool, bool]] = [  # key, sink, old plan, sample memory
            ("read", "noop", False, False), ("per_range_read", "noop", True, False),
            ("e2e", "delta", False, True), ("per_range_e2e", "delta", True, False),
        ]
        for w, a2, tag in ((main_w, a2_main, ""), (large_w, a2_large, "_large")):
            shipped_tasks = planned_tasks(servers, w, None, min_partitions=mp)
            old_tasks = planned_tasks(servers, w, one_task_per_range(w.partitions), min_partitions=mp)
            runs: Dict[str, List[Any]] = {key: [] for key, _, _, _ in configs}
            for _ in range(repeat):
                for key, sink, old_plan, sample in configs:
                    extra = one_task_per_range(w.partitions) if old_plan else None
                    r = run_query(spark, servers, w.topic, workdir, sink=sink, min_partitions=mp,
                                  sample_memory=sample, extra_options=extra)
                    assert r.rows == w.records, f"{key} read {r.rows} of {w.records} records"
                    runs[key].append(r)
            best = {key: min(rs, key=lambda r: r.batch_seconds) for key, rs in runs.items()}
            for key, label, target, tasks in (
                    ("read", "read path, source into noop", 1.2, shipped_tasks),
                    ("e2e", "end to end, source into DeltaSink", 0.8, shipped_tasks),
                    ("per_range_read", "REFERENCE one task per range, source into noop", 1.2, old_tasks),
                    ("per_range_e2e", "REFERENCE one task per range, source into DeltaSink", 0.8, old_tasks)):
                r = best[key]
                report.figure(f"{key}{tag}", f"[{w.topic}] {label} ({tasks} tasks): {r.rate:,.0f} rec/s "
                              f"({_times(r)}) = {r.rate / a2:.2f}x (a2); target >= {target}x: "
                              f"{_verdict(r.rate / a2, target)}", ratio_to_a2=r.rate / a2, tasks=tasks, **r.to_json())
            for key in ("read", "e2e"):
                ratio = best[key].batch_seconds / best[f"per_range_{key}"].batch_seconds
                report.figure(f"packing_gain_{key}{tag}", f"[{w.topic}] packing, {key}: micro-batch time "
                              f"{best[key].batch_seconds:.2f} s ({shipped_tasks} tasks) = {ratio:.2f}x that of one "
                              f"task per range ({best[f'per_range_{key}'].batch_seconds:.2f} s, {old_tasks} tasks; "
                              "lower is better)",
                              ratio_to_one_task_per_range=ratio)
            peak_one = max(r.peak_worker_rss_mb or 0 for r in runs["e2e"])
            peak_all = max(r.peak_workers_total_rss_mb or 0 for r in runs["e2e"])
            report.figure(f"memory{tag}", f"[{w.topic}] Python workers' peak RSS, end to end: "
                          f"{peak_one:.0f} MB in one worker, {peak_all:.0f} MB all workers "
                          f"({max(r.workers_seen for r in runs['e2e'])} seen), backlog {w.records:,} records = "
                          f"{w.payload_bytes / 1e6:.0f} MB", backlog_records=w.records,
                          peak_worker_rss_mb=peak_one, peak_total_mb=peak_all)
            if tag == "":
                quarter = run_query(spark, servers, small_w.topic, workdir, sink="delta", min_partitions=mp,
                                    sample_memory=True)
                report.figure("memory_quarter", f"[{small_w.topic}] Python workers' peak RSS, end to end: "
                              f"{quarter.peak_worker_rss_mb:.0f} MB in one worker, "
                              f"{quarter.peak_workers_total_rss_mb:.0f} MB all workers, backlog "
                              f"{small_w.records:,} records = {(quarter.peak_worker_rss_mb or 0) / (peak_one or 1):.2f}x"
                              " the full backlog's peak in one worker", backlog_records=small_w.records,
                              **quarter.to_json())

        per_batch = 10 * 8
        fixed: Dict[str, float] = {}
        for key, sink, old_plan in (("fixed_cost_noop", "noop", False), ("fixed_cost_delta", "delta", False),
                                    ("per_range_fixed_cost_noop", "noop", True),
                                    ("per_range_fixed_cost_delta", "delta", True)):
            extra = one_task_per_range(tiny_w.partitions) if old_plan else None
            tasks = planned_tasks(servers, tiny_w, extra, per_partition=per_batch // tiny_w.partitions)
            tiny = run_query(spark, servers, tiny_w.topic, workdir, sink=sink, max_offsets_per_trigger=per_batch,
                             extra_options=extra)
            warm_s = tiny.warm_batch_seconds()
            med = fixed[key] = median(warm_s)
            label = "REFERENCE one task per range, " if old_plan else ""
            verdict = "; target <= 0.5 s: " + _verdict(med, 0.5, False) if sink == "delta" else ""
            report.figure(key, f"{label}fixed cost per warm micro-batch into {sink} ({per_batch} records per batch "
                          f"over {tiny_w.partitions} partitions = {tasks} task(s), {len(warm_s)} warm batches): "
                          f"median {med:.3f} s = {med / 0.5:.2f}x 0.5 s{verdict}",
                          median_s=med, tasks=tasks, warm_batches_s=warm_s, **tiny.to_json())
        for sink in ("noop", "delta"):
            ratio = fixed[f"fixed_cost_{sink}"] / fixed[f"per_range_fixed_cost_{sink}"]
            report.figure(f"packing_gain_fixed_cost_{sink}", f"packing, fixed cost into {sink}: "
                          f"{fixed[f'fixed_cost_{sink}']:.3f} s = {ratio:.2f}x that of one task per range "
                          f"({fixed[f'per_range_fixed_cost_{sink}']:.3f} s; lower is better)", ratio_to_one_task_per_range=ratio)
        return 0
    finally:
        if spark is not None:
            spark.stop()
        if embedded is not None:
            embedded.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        results["machine"]["loadavg_end"] = os.getloadavg()
        results["seconds"] = time.time() - started
        results["figures"] = report.figures
        os.makedirs(args.results_dir, exist_ok=True)
        out = os.path.join(args.results_dir, f"{stamp}{'-quick' if quick else ''}.json")
        with open(out, "w") as f:
            json.dump(results, f, indent=1, default=str)
        print(f"results written to {out} ({results['seconds']:.0f} s)", flush=True)


def _versions() -> Dict[str, str]:
    import confluent_kafka
    import deltalake
    import pyarrow
    import pyspark

    return {"pyspark": pyspark.__version__, "confluent_kafka": str(confluent_kafka.version()),
            "librdkafka": confluent_kafka.libversion()[0], "deltalake": deltalake.__version__,
            "pyarrow": pyarrow.__version__}


if __name__ == "__main__":
    sys.exit(main())
