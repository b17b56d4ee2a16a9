"""How the number of Spark tasks per micro-batch drives its cost (evidence for the planning proposals).

Run from the repository root::

    python -m bench.task_overhead

The same records are read with ``Trigger.AvailableNow`` into ``noop`` as 8 tasks
(8 partitions), as 64 tasks (64 partitions; and 8 partitions split with
``minPartitions=64``), and tiny micro-batches into ``noop`` and ``DeltaSink``
from a topic of 1 partition and of 8 partitions (1 or 8 tasks per batch).
Each line is a ratio to the 8-task case of the same run. The source packs a
batch's ranges onto a few tasks by default, so every case here pins the plan to
one task per range (``fetch.minRecordsPerTask=1``, ``fetch.maxTasks`` = the
partitions; see :func:`bench.spark_runs.one_task_per_range`).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from typing import Dict, List, Optional

from bench.spark_runs import median, one_task_per_range, run_query
from bench.workload import Workload, produce


def main(argv: Optional[List[str]] = None) -> int:
    """Run the comparison and print one line per case."""
    from kafka_group_devbroker import start_cluster
    from pyspark_kafka_group.spark_session import local_session

    records = 240_000
    embedded = start_cluster(os.environ.get("KAFKA_GROUP_BENCH_BROKER", "kafka"), brokers=1)
    spark = None
    workdir = tempfile.mkdtemp(prefix="kafka-group-tasks-")
    try:
        servers = embedded.bootstrap_servers
        topics = {"tasks-8": Workload("tasks-8", 8, records), "tasks-64": Workload("tasks-64", 64, records),
                  "tiny-1": Workload("tiny-1", 1, 1_500), "tiny-8": Workload("tiny-8", 8, 1_500)}
        for w in topics.values():
            embedded.create_topic(w.topic, w.partitions)
            produce(servers, w)
        spark = local_session("kafka-group-task-overhead", cores=2)
        run_query(spark, servers, "tiny-8", workdir, sink="noop")  # warm-up
        cases = [("8 tasks (8 partitions)", "tasks-8", None), ("64 tasks (64 partitions)", "tasks-64", None),
                 ("64 tasks (8 partitions, minPartitions=64)", "tasks-8", 64)]
        best: Dict[str, float] = {}
        for _ in range(2):
            for name, topic, mp in cases:
                r = run_query(spark, servers, topic, workdir, sink="noop", min_partitions=mp,
                              extra_options=one_task_per_range(topics[topic].partitions))
                add = sum(b["durationMs"].get("addBatch", 0) for b in r.batches) / 1000
                best[name] = min(best.get(name, 1e9), add)
        base = best[cases[0][0]]
        for name, _, _ in cases:
            print(f"{records:,} records into noop as {name}: addBatch {best[name]:.2f} s = {best[name] / base:.2f}x "
                  f"8 tasks ({records / best[name]:,.0f} rec/s)", flush=True)
        per_batch = {}
        for sink in ("noop", "delta"):
            for topic in ("tiny-1", "tiny-8"):
                r = run_query(spark, servers, topic, workdir, sink=sink, max_offsets_per_trigger=100,
                              extra_options=one_task_per_range(topics[topic].partitions))
                per_batch[(sink, topic)] = median(r.warm_batch_seconds())
            one, eight = per_batch[(sink, "tiny-1")], per_batch[(sink, "tiny-8")]
            print(f"warm micro-batch of 100 records into {sink}: {one:.3f} s as 1 task, {eight:.3f} s as 8 tasks "
                  f"= {one / eight:.2f}x", flush=True)
        return 0
    finally:
        if spark is not None:
            spark.stop()
        embedded.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
