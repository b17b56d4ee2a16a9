"""One executor against two on a Spark standalone cluster: the same drain, the same run (issue 34).

Run from the repository root::

    python -m bench.cluster_scaling [--records 2000000] [--partitions 8] [--repeat 2]

A standalone cluster on loopback (``kafka_group_devbroker.spark_standalone``: a master and
two workers of one core each, every executor its own JVM and Python workers) serves two
applications in turn, interleaved ``--repeat`` times: one with ``spark.cores.max=1`` (one
executor) and one with ``spark.cores.max=2`` (two). Each drains the same topic from
``earliest`` into ``noop`` with ``Trigger.AvailableNow``, sized by the session
(``cluster_options(spark)``: Spark's default parallelism is 2 for both, at least 2 on a
cluster, so both read the same plan of up to 4 tasks). The figure is records/s over
micro-batch time (the sum of the batches' ``triggerExecution``, as ``bench.run``), best of
the repeats, and the two-executor figure is printed as a ratio to the one-executor figure
of the same run. The broker (Apache Kafka, one node) and the driver share the machine's
cores with the executors: on a 2-core machine that bounds the ratio well below 2.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

from bench.spark_runs import QueryRun, run_query
from bench.workload import Workload, produce


def _session(master: str, executors: int) -> Any:
    """A classic session on the standalone cluster with ``executors`` one-core executors, once they registered."""
    from pyspark.sql import SparkSession

    pythonpath = os.pathsep.join(os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
    builder = (SparkSession.builder.master(master).appName(f"kafka-group-cluster-scaling-{executors}")
               .config("spark.executor.cores", "1").config("spark.cores.max", str(executors))
               .config("spark.executor.memory", "1g").config("spark.driver.memory", "1g")
               .config("spark.ui.enabled", "false")
               .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.pyspark.python", sys.executable).config("spark.pyspark.driver.python", sys.executable)
               .config("spark.sql.shuffle.partitions", "2"))
    if pythonpath:  # a checkout run (PYTHONPATH=connector:python:devbroker): the executors import the same code
        builder = builder.config("spark.executorEnv.PYTHONPATH", pythonpath)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    wait_for_executors(spark, executors)
    return spark


def wait_for_executors(spark: Any, executors: int, timeout: float = 120.0) -> None:
    """Return once ``executors`` executors registered with ``spark``'s driver (RuntimeError after ``timeout`` s)."""
    deadline = time.monotonic() + timeout
    while len(spark.sparkContext.statusTracker().getExecutorInfos()) < executors + 1:  # + the driver
        if time.monotonic() > deadline:
            raise RuntimeError(f"{executors} executor(s) did not register within {timeout:.0f} s")
        time.sleep(0.2)


def main(argv: Optional[List[str]] = None) -> int:
    """Run the comparison and print its lines."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)

    from kafka_group_devbroker import start_cluster
    from kafka_group_devbroker.spark_standalone import SparkStandalone
    from pyspark_kafka_group import cluster_options

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    w = Workload(f"cluster-scaling-{args.partitions}", args.partitions, args.records)
    warm = Workload(f"cluster-scaling-warm-{args.partitions}", args.partitions, 8 * args.partitions)
    workdir = tempfile.mkdtemp(prefix="kafka-group-cluster-scaling-")
    kafka = start_cluster(os.environ.get("KAFKA_GROUP_BENCH_BROKER", "kafka"), brokers=1)
    cluster = SparkStandalone(workers=2, cores=1)
    best: Dict[int, QueryRun] = {}
    parallelism: Dict[int, str] = {}
    try:
        cluster.start()
        for topic in (w, warm):
            kafka.create_topic(topic.topic, topic.partitions)
            produce(kafka.bootstrap_servers, topic)
        print(f"machine: {os.cpu_count()} CPUs, load average at start {os.getloadavg()}", flush=True)
        for _ in range(args.repeat):
            for executors in (1, 2):
                spark = _session(cluster.master_url, executors)
                try:
                    sized = cluster_options(spark)
                    parallelism[executors] = sized["fetch.clusterParallelism"]
                    # warm the executors' Python workers on a small topic of its own
                    run_query(spark, kafka.bootstrap_servers, warm.topic, workdir, sink="noop", extra_options=sized)
                    r = run_query(spark, kafka.bootstrap_servers, w.topic, workdir, sink="noop", extra_options=sized)
                finally:
                    spark.stop()
                assert r.rows == w.records, f"read {r.rows} of {w.records} records"
                if executors not in best or r.rate > best[executors].rate:
                    best[executors] = r
        one, two = best[1], best[2]
        label = f"{w.records:,} records ({w.value_bytes} B) over {w.partitions} partitions into noop"
        print(f"{label}, 1 executor x 1 core (parallelism {parallelism[1]}): {one.rate:,.0f} rec/s "
              f"({one.batch_seconds:.2f} s of batches)", flush=True)
        print(f"{label}, 2 executors x 1 core (parallelism {parallelism[2]}): {two.rate:,.0f} rec/s "
              f"({two.batch_seconds:.2f} s of batches) = {two.rate / one.rate:.2f}x 1 executor "
              f"(same run, best of {args.repeat})", flush=True)
        print(f"load average at end {os.getloadavg()}", flush=True)
        return 0
    finally:
        cluster.stop()
        kafka.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
