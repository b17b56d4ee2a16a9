"""What encryption and authentication cost (issue 28 item 7): per listener of one secured cluster,
the read path and end to end, against PLAINTEXT and against Spark's ``format("kafka")``.

Run from the repository root (as ``bench.run``: the package and the development brokers
installed, Java 17; the jars are fetched on first use)::

    python -m bench.encryption_cost                   # 1,000,000 records of 100 B over 8 partitions
    python -m bench.encryption_cost --records 300000 --repeat 1

It starts one :class:`~kafka_group_devbroker.secured_kafka.SecuredKafka` (Apache Kafka with
PLAINTEXT, SSL with client certificates, and SASL_SSL listeners), produces one topic through
PLAINTEXT, and reads all of it through each listener:

- **read path**: the connector's executor read path to Arrow in this one process (as
  ``bench.run``'s (a2): :func:`bench.baselines.python_read_path`), with the listener's librdkafka
  settings;
- **end to end**: ``kafka-group -> noop`` and ``format("kafka") -> noop`` (with
  ``kafka.fetch.max.wait.ms=10`` as (S1)), one ``Trigger.AvailableNow`` drain each, both given the
  SAME Java/Spark option map (:meth:`SecuredKafka.java_options`: JAAS, JKS stores), in one Spark
  ``local[2]`` session.

Listeners: ``PLAINTEXT``; ``SSL`` (TLS with a client certificate: mTLS); ``SASL_SSL`` with
SCRAM-SHA-512 (TLS and a salted challenge login). Every figure is the best of ``--repeat``
interleaved runs (every listener and contender takes its turn in each round, each round
starting with another listener) and printed as
records/s and as a ratio to the same contender on PLAINTEXT; the last lines give
kafka-group / format("kafka") per listener: the target is the same ratio as on PLAINTEXT (TLS
should cost both sources alike). Results go to ``bench/results/encryption-<UTC timestamp>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

from bench import baselines
from bench.run import RESULTS_DIR, SPARK_KAFKA_TUNED, Report, _spark, _versions
from bench.spark_runs import run_query
from bench.workload import Workload, produce

#: Listener label to the :data:`~kafka_group_devbroker.secured_kafka.SECURITY_MODES` entry (None: PLAINTEXT).
LISTENERS: Tuple[Tuple[str, Optional[str]], ...] = (
    ("PLAINTEXT", None),
    ("SSL (mTLS)", "ssl"),
    ("SASL_SSL/SCRAM-SHA-512", "sasl_ssl-scram-sha-512"),
)

#: The contenders: key to label.
CONTENDERS = {"read_path": "read path to Arrow, one process", "kg": "kafka-group -> noop",
              "spark": "format(\"kafka\") -> noop"}


def main(argv: Optional[List[str]] = None) -> int:
    """Run the benchmark; return the exit status."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records of 100 B (default 1,000,000)")
    parser.add_argument("--partitions", type=int, default=8, help="partitions of the topic (default 8)")
    parser.add_argument("--repeat", type=int, default=2, help="interleaved rounds, best kept (default 2)")
    parser.add_argument("--skip-spark", action="store_true", help="the read path only")
    parser.add_argument("--results-dir", default=RESULTS_DIR)
    args = parser.parse_args(argv)

    from kafka_group_devbroker.secured_kafka import SecuredKafka

    report = Report()
    started = time.time()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(started))
    workdir = tempfile.mkdtemp(prefix="kafka-group-bench-tls-")
    w = Workload(f"bench-tls-{args.partitions}p", args.partitions, args.records)
    results: Dict[str, Any] = {
        "started": stamp, "argv": sys.argv[1:], "workload": w.to_json(),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "loadavg_start": os.getloadavg()},
    }
    report.line(f"machine: {os.cpu_count()} CPUs, load average at start {os.getloadavg()}")
    cluster = SecuredKafka(topics={w.topic: w.partitions})
    spark: Any = None
    try:
        cluster.start()
        results["versions"] = _versions()
        report.line("versions: " + ", ".join(f"{k} {v}" for k, v in results["versions"].items()))
        seconds = produce(cluster.bootstrap_servers, w)
        report.line(f"workload {w.topic}: {w.describe()}; produced in {seconds:.1f} s")
        if not args.skip_spark:
            spark = _spark(2)
        rates: Dict[str, Dict[str, List[float]]] = {label: {key: [] for key in CONTENDERS} for label, _ in LISTENERS}
        for round_ in range(args.repeat):
            # Each round starts with another listener, so that no listener always runs first (or last).
            for label, mode in LISTENERS[round_ % len(LISTENERS):] + LISTENERS[:round_ % len(LISTENERS)]:
                librdkafka = cluster.client_config(mode) if mode else {"bootstrap.servers": cluster.bootstrap_servers}
                servers = librdkafka.pop("bootstrap.servers")
                security = librdkafka
                rates[label]["read_path"].append(w.records / baselines.python_read_path(servers, w, security=security))
                if spark is None:
                    continue
                java = ({k: v for k, v in cluster.java_options(mode).items() if k != "kafka.bootstrap.servers"}
                        if mode else {})
                spark_options = {**SPARK_KAFKA_TUNED, **java}
                for key, source, extra in (("kg", "kafka-group", java), ("spark", "kafka", spark_options)):
                    run = run_query(spark, servers, w.topic, workdir, sink="noop", source_format=source,
                                    extra_options=extra)
                    if run.rows != w.records:
                        raise RuntimeError(f"{CONTENDERS[key]} over {label}: {run.rows:,} rows of {w.records:,}")
                    rates[label][key].append(run.rate)
            report.line(f"round {round_ + 1} of {args.repeat} done ({_load()})")
        best = {label: {key: max(values) for key, values in by.items() if values} for label, by in rates.items()}
        results["rates"], results["best"] = rates, best
        plain = best["PLAINTEXT"]
        for key, what in CONTENDERS.items():
            if key not in plain:
                continue
            for label, _ in LISTENERS:
                report.figure(f"{key}[{label}]", f"{what:<34} {label:<24} {best[label][key]:>12,.0f} rec/s = "
                              f"{best[label][key] / plain[key]:.2f}x PLAINTEXT", rate=best[label][key],
                              ratio_to_plaintext=best[label][key] / plain[key])
        if "kg" in plain:
            for label, _ in LISTENERS:
                ratio = best[label]["kg"] / best[label]["spark"]
                report.figure(f"kg_vs_spark[{label}]", f"kafka-group / format(\"kafka\"), end to end, {label:<24} "
                              f"{ratio:.2f}x (PLAINTEXT {plain['kg'] / plain['spark']:.2f}x)", ratio=ratio)
    finally:
        from kafka_group.read.default_pool import default_pool

        default_pool().close_all()  # the read path's pooled clients, one per listener
        if spark is not None:
            spark.stop()
        cluster.stop()
        results["seconds"] = time.time() - started
        results["machine"]["loadavg_end"] = os.getloadavg()
        results["figures"] = report.figures
        os.makedirs(args.results_dir, exist_ok=True)
        out = os.path.join(args.results_dir, f"encryption-{stamp}.json")
        with open(out, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2, sort_keys=True)
        print(f"load average at end {os.getloadavg()}; results written to {out} ({results['seconds']:.0f} s)",
              flush=True)
    return 0


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f}/{five:.2f}"


if __name__ == "__main__":
    sys.exit(main())
