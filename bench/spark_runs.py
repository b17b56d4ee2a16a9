"""Spark measurements: the source into ``noop`` and into :class:`DeltaSink`, per-batch fixed
cost, and the Python workers' memory."""

from __future__ import annotations

import os
import shutil
import statistics
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

__all__ = ["QueryRun", "run_query", "WorkerMemory", "one_task_per_range", "planned_tasks"]


@dataclass
class QueryRun:
    """One ``Trigger.AvailableNow`` query: wall time, rows and each batch's progress."""

    seconds: float
    rows: int
    batches: List[Dict[str, Any]] = field(default_factory=list)
    peak_worker_rss_mb: Optional[float] = None
    peak_workers_total_rss_mb: Optional[float] = None
    workers_seen: int = 0

    @property
    def wall_rate(self) -> float:
        """Rows per second of wall time, from ``start()`` to termination (includes the query's
        start: the planning process, the group join, the first batch's setup)."""
        return self.rows / self.seconds

    @property
    def batch_seconds(self) -> float:
        """Seconds spent in micro-batches: the sum of their ``triggerExecution``."""
        return float(sum(b["durationMs"].get("triggerExecution", 0) for b in self.batches)) / 1000

    @property
    def rate(self) -> float:
        """Rows per second of micro-batch time (what the throughput targets are judged on)."""
        return self.rows / self.batch_seconds

    def warm_batch_seconds(self, skip: int = 3) -> List[float]:
        """``triggerExecution`` of each batch with rows after the first ``skip`` ones, in seconds."""
        with_rows = [b for b in self.batches if b["numInputRows"] > 0]
        return [b["durationMs"].get("triggerExecution", 0) / 1000 for b in with_rows[skip:]]

    def to_json(self) -> Dict[str, Any]:
        """A JSON-able summary (batch details trimmed to durations and rows)."""
        return {
            "seconds": self.seconds, "rows": self.rows, "rate": self.rate, "batch_seconds": self.batch_seconds,
            "wall_rate": self.wall_rate,
            "batches": [{"batchId": b["batchId"], "numInputRows": b["numInputRows"], "durationMs": b["durationMs"]}
                        for b in self.batches],
            "peak_worker_rss_mb": self.peak_worker_rss_mb,
            "peak_workers_total_rss_mb": self.peak_workers_total_rss_mb,
            "workers_seen": self.workers_seen,
        }


class WorkerMemory:
    """Samples the RSS of this process's Spark Python workers (``pyspark.daemon``/``worker``
    descendants of this process) in a background thread."""

    def __init__(self, interval: float = 0.05) -> None:
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="worker-memory", daemon=True)
        self.peak_one_kb = 0
        self.peak_total_kb = 0
        self.pids: set[int] = set()

    def __enter__(self) -> "WorkerMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.is_set():
            total = 0
            for pid in _descendants(me):
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmd = f.read()
                    if b"pyspark.daemon" not in cmd and b"pyspark.worker" not in cmd:
                        continue
                    rss = _status_kb(pid, "VmRSS")
                    hwm = _status_kb(pid, "VmHWM")
                except OSError:
                    continue
                self.pids.add(pid)
                total += rss
                self.peak_one_kb = max(self.peak_one_kb, rss, hwm)
            self.peak_total_kb = max(self.peak_total_kb, total)
            self._stop.wait(self._interval)


def _status_kb(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def _descendants(root: int) -> List[int]:
    parent: Dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            parent[int(entry)] = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError):
            continue
    children: Dict[int, List[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    found: List[int] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def run_query(
    spark: Any,
    servers: str,
    topic: str,
    workdir: str,
    *,
    sink: str,
    max_offsets_per_trigger: Optional[int] = None,
    min_partitions: Optional[int] = None,
    sample_memory: bool = False,
    source_format: str = "kafka-group",
    extra_options: Optional[Dict[str, Any]] = None,
) -> QueryRun:
    """Run one ``Trigger.AvailableNow`` query from earliest with a fresh group.

    Parameters
    ----------
    sink : {"noop", "delta"}
        Spark's ``noop`` sink, or :class:`DeltaSink` with option ``offsets.table``.
    """
    from pyspark_kafka_group import DeltaSink

    name = f"{sink}-{topic}-{uuid.uuid4().hex[:8]}"
    table = os.path.join(workdir, name, "table")
    checkpoint = os.path.join(workdir, name, "checkpoint")
    reader = (spark.readStream.format(source_format)
              .option("kafka.bootstrap.servers", servers)
              .option("subscribe", topic)
              .option("kafka.group.id", f"bench-{name}")
              .option("kafka.session.timeout.ms", "6000")
              .option("startingOffsets", "earliest"))
    if max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", max_offsets_per_trigger)
    if min_partitions is not None:
        reader = reader.option("minPartitions", min_partitions)
    if sink == "delta":
        reader = reader.option("offsets.table", table)
    for key, value in (extra_options or {}).items():
        reader = reader.option(key, value)
    stream = reader.load()
    writer = stream.writeStream.option("checkpointLocation", checkpoint).trigger(availableNow=True)
    writer = writer.format("noop") if sink == "noop" else writer.foreachBatch(DeltaSink(table))
    memory = WorkerMemory() if sample_memory else None
    if memory is not None:
        memory.__enter__()
    try:
        started = time.monotonic()
        query = writer.start()
        query.awaitTermination()
        seconds = time.monotonic() - started
    finally:
        if memory is not None:
            memory.__exit__(None, None, None)
    batches = [{"batchId": p["batchId"], "numInputRows": p["numInputRows"], "durationMs": dict(p["durationMs"])}
               for p in (_as_dict(x) for x in query.recentProgress)]
    rows = sum(b["numInputRows"] for b in batches)
    run = QueryRun(seconds, rows, batches)
    assert rows == 0 or run.batch_seconds > 0
    if memory is not None:
        run.peak_worker_rss_mb = memory.peak_one_kb / 1024
        run.peak_workers_total_rss_mb = memory.peak_total_kb / 1024
        run.workers_seen = len(memory.pids)
    shutil.rmtree(os.path.join(workdir, name), ignore_errors=True)
    return run


def one_task_per_range(ranges: int) -> Dict[str, Any]:
    """Source options that restore the plan before packing: one Spark task per partition's range.

    ``fetch.minRecordsPerTask=1`` lets every range be its own task, and
    ``fetch.maxTasks`` is the number of ranges of a batch (the workload's
    partitions): a higher cap would cut the ranges into ``total / maxTasks``-record
    pieces, each its own task (``fetch.maxTasks=1000`` would run the 2,000,000-record
    batch as 1,000 tasks of 2,000 records, not 64).
    """
    return {"fetch.minRecordsPerTask": 1, "fetch.maxTasks": ranges}


def planned_tasks(servers: str, workload: Any, extra_options: Optional[Dict[str, Any]], *,
                  min_partitions: Optional[int] = None, per_partition: Optional[int] = None) -> int:
    """Tasks the source plans for one batch of ``per_partition`` records from every partition of
    ``workload`` (default: its whole backlog), with the given options: the connector's own option
    parsing and :func:`kafka_group.planning.pack_ranges`, without Spark."""
    from kafka_group.offsets import OffsetRange, TopicPartition
    from kafka_group.options import parse_source_options
    from kafka_group.planning import pack_ranges

    options = {"kafka.bootstrap.servers": servers, "subscribe": workload.topic, "kafka.group.id": "bench-plan"}
    if min_partitions is not None:
        options["minPartitions"] = str(min_partitions)
    options.update({k: str(v) for k, v in (extra_options or {}).items()})
    sizing = parse_source_options(options).task_sizing
    n, parts = workload.records, workload.partitions
    ranges = [OffsetRange(TopicPartition(workload.topic, p), 0,
                          per_partition if per_partition is not None else n // parts + (1 if p < n % parts else 0))
              for p in range(parts)]
    return len(pack_ranges(ranges, sizing))


def _as_dict(progress: Any) -> Dict[str, Any]:
    if isinstance(progress, dict):
        return progress
    import json

    return dict(json.loads(progress.json))


def median(values: List[float]) -> float:
    """The median, or NaN for no values."""
    return statistics.median(values) if values else float("nan")
