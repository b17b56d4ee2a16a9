"""A Spark Python worker's peak memory into ``DeltaSink`` by backlog size, each backlog drained
as one batch in a fresh Spark session (Spark reuses its workers, and a worker keeps the memory
it once used).

    python -m bench.memory_plateau                      # 250,000 to 16,000,000 records of 100 B, 64 partitions
    python -m bench.memory_plateau --records 250000,1000000

One line per backlog, each a ratio to the previous one. A task holds at most librdkafka's
prefetch (``queued.max.messages.kbytes``, 64 MiB, overshot by one fetch of up to
``fetch.max.bytes``, 50 MiB), one Arrow batch and one Parquet row group of the sink; the peak
grows with the backlog until a task's share of it passes those bounds, and is flat beyond.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from typing import List, Optional

from bench.spark_runs import run_query
from bench.workload import Workload, produce


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--records", default="250000,1000000,4000000,16000000",
                        help="comma-separated backlogs (records of 100 B)")
    parser.add_argument("--partitions", type=int, default=64)
    args = parser.parse_args(argv)

    from kafka_group_devbroker import start_cluster

    from bench.run import _spark

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    workdir = tempfile.mkdtemp(prefix="kafka-group-memory-")
    cluster = start_cluster("kafka", brokers=1)
    try:
        tiny = Workload("memory-warm", 8, 800)
        backlogs = [Workload(f"memory-{n}", args.partitions, int(n)) for n in args.records.split(",")]
        for w in [tiny, *backlogs]:
            cluster.create_topic(w.topic, w.partitions)
            produce(cluster.bootstrap_servers, w)
        previous: Optional[float] = None
        for w in backlogs:
            spark = _spark(2)
            try:
                run_query(spark, cluster.bootstrap_servers, tiny.topic, workdir, sink="delta")
                run = run_query(spark, cluster.bootstrap_servers, w.topic, workdir, sink="delta", sample_memory=True)
            finally:
                spark.stop()
            peak = run.peak_worker_rss_mb or 0.0
            ratio = "" if previous is None else f" = {peak / previous:.2f}x the previous backlog's"
            print(f"{w.records:>11,} records in one batch into DeltaSink, fresh session: peak {peak:.0f} MB in one "
                  f"Python worker{ratio} ({run.rows:,} rows, {run.rate:,.0f} rec/s)", flush=True)
            previous = peak
        return 0
    finally:
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
