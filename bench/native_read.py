"""The compiled read path against the Python one and the baselines, same run, same broker (docs/native.md).

In one process, per workload: (K) ``kafka-consumer-perf-test``, (a) raw confluent-kafka, (a2) the
Python read path to Arrow, (a2n) the compiled read path to Arrow; CPU seconds per million records
of each (this process's CPU, librdkafka's threads included; (K): its JVM's). With ``--spark``: the
drain into ``noop`` of Spark's ``format("kafka")`` (S1) and of ``kafka-group`` with ``read.path``
``native`` and ``python``, with the CPU of every process but the broker per million records.
Best of ``--repeat`` interleaved rounds; the Spark contenders run in the reverse order every other
round, so none always runs right after the same one. Figures printed as ratios; JSON to
``bench/results/native-<UTC timestamp>.json``.

    python -m bench.native_read                       # 8 partitions, 100 B and 1 KiB, in one process
    python -m bench.native_read --spark --partitions 8,64
    python -m bench.native_read --spark --partitions 1000 --sizes 1024 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional

from bench import baselines
from bench.jvm_consumer import consumer_perf_test
from bench.workload import Workload, produce

__all__ = ["main"]


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(run: Callable[[], float]) -> Dict[str, float]:
    """Seconds and CPU seconds (this process) of ``run``."""
    cpu0 = time.process_time()
    seconds = run()
    return {"seconds": seconds, "cpu": time.process_time() - cpu0}


def _perf(servers: str, w: Workload) -> Dict[str, float]:
    cpu0 = _cpu_children()
    result = consumer_perf_test(servers, w)
    return {"seconds": result.fetch_seconds, "cpu": _cpu_children() - cpu0}


def _in_process(servers: str, w: Workload, repeat: int, native: Any) -> Dict[str, Dict[str, float]]:
    runs: Dict[str, List[Dict[str, float]]] = {"K": [], "a": [], "a2": [], "a2n": []}
    for _ in range(repeat):
        runs["K"].append(_perf(servers, w))
        runs["a"].append(_timed(lambda: baselines.raw_consume(servers, w)))
        runs["a2"].append(_timed(lambda: baselines.python_read_path(servers, w)))
        runs["a2n"].append(_timed(lambda: baselines.python_read_path(servers, w, native=native)))
    return {k: min(v, key=lambda r: r["seconds"]) for k, v in runs.items()}


def _spark_runs(servers: str, w: Workload, repeat: int, broker_pids: List[int]) -> Dict[str, Dict[str, float]]:
    from bench.run import _spark
    from bench.spark_runs import run_query

    spark = _spark(2)
    out: Dict[str, List[Dict[str, float]]] = {"S1": [], "native": [], "python": []}
    with tempfile.TemporaryDirectory(prefix="bench-native-") as workdir:
        for round_number in range(repeat):
            for key in (list(out) if round_number % 2 == 0 else list(reversed(out))):
                if key == "S1":
                    run = run_query(spark, servers, w.topic, workdir, sink="noop", source_format="kafka",
                                    extra_options={"kafka.fetch.max.wait.ms": "10"}, broker_pids=broker_pids)
                else:
                    run = run_query(spark, servers, w.topic, workdir, sink="noop",
                                    extra_options={"read.path": key}, broker_pids=broker_pids)
                assert run.rows == w.records, (key, run.rows)
                used = run.cpu_per_second or {}
                cpu = sum(v for k, v in used.items() if k != "broker") * run.batch_seconds
                out[key].append({"seconds": run.batch_seconds, "cpu": cpu})
    spark.stop()
    return {k: min(v, key=lambda r: r["seconds"]) for k, v in out.items()}


def _per_million(run: Dict[str, float], records: int) -> float:
    return run["cpu"] / records * 1e6


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records of 100 B (1 KiB: a fifth)")
    parser.add_argument("--partitions", default="8")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--spark", action="store_true", help="also the Spark drains into noop")
    parser.add_argument("--sizes", default="100,1024", help="value sizes in bytes (1 KiB and up: a fifth of the records)")
    args = parser.parse_args(argv)
    from kafka_group.read.read_path import native_module
    from kafka_group_devbroker import start_cluster

    native = native_module()
    if native is None:
        print("the compiled read path is not built (python native/build_native.py --inplace)", file=sys.stderr)
        return 1
    results: Dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                               "librdkafka_native": native.librdkafka_version(), "workloads": []}
    cluster = start_cluster("kafka", brokers=1)
    try:
        servers = cluster.bootstrap_servers
        broker_pids = list(getattr(cluster, "pids", []))
        for partitions in [int(p) for p in args.partitions.split(",")]:
            for value_bytes in [int(v) for v in args.sizes.split(",")]:
                records = args.records if value_bytes < 1024 else args.records // 5
                w = Workload(f"native-{partitions}p-{value_bytes}b-{os.getpid()}", partitions, records,
                             value_bytes=value_bytes)
                cluster.create_topic(w.topic, partitions)
                produce(servers, w)
                entry: Dict[str, Any] = {"workload": w.to_json(), "load_start": os.getloadavg()[0]}
                best = _in_process(servers, w, args.repeat, native)
                entry["in_process"] = best
                rate = {k: records / v["seconds"] for k, v in best.items()}
                print(f"{w.describe()}: records/s (K) {rate['K']:,.0f}, (a) {rate['a']:,.0f}, (a2) python "
                      f"{rate['a2']:,.0f}, (a2n) native {rate['a2n']:,.0f}; (a2n)/(K) {rate['a2n'] / rate['K']:.2f}x, "
                      f"(a2n)/(a) {rate['a2n'] / rate['a']:.2f}x, (a2n)/(a2) {rate['a2n'] / rate['a2']:.2f}x; CPU s per "
                      "million records: " + ", ".join(f"{k} {_per_million(v, records):.2f}" for k, v in best.items()))
                if args.spark:
                    spark_best = _spark_runs(servers, w, args.repeat, broker_pids)
                    entry["spark"] = spark_best
                    srate = {k: records / v["seconds"] for k, v in spark_best.items()}
                    print(f"  Spark into noop, records/s of batch time: (S1) {srate['S1']:,.0f}, kafka-group native "
                          f"{srate['native']:,.0f} ({srate['native'] / srate['S1']:.2f}x S1), python "
                          f"{srate['python']:,.0f} ({srate['python'] / srate['S1']:.2f}x S1); CPU s per million "
                          "records (all but the broker): " + ", ".join(
                              f"{k} {_per_million(v, records):.2f}" for k, v in spark_best.items()))
                entry["load_end"] = os.getloadavg()[0]
                results["workloads"].append(entry)
    finally:
        cluster.stop()
    os.makedirs("bench/results", exist_ok=True)
    path = f"bench/results/native-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    with open(path, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
