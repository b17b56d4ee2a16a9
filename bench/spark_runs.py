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
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["QueryRun", "run_query", "WorkerMemory", "DeltaSparkIdempotentWrite", "CpuSampler", "one_task_per_range"]


@dataclass
class QueryRun:
    """One ``Trigger.AvailableNow`` query: wall time, rows and each batch's progress."""

    seconds: float
    rows: int
    batches: List[Dict[str, Any]] = field(default_factory=list)
    peak_worker_rss_mb: Optional[float] = None
    peak_workers_total_rss_mb: Optional[float] = None
    workers_seen: int = 0
    #: Rows in the Delta table after the run (sink "delta"), read with delta-rs.
    table_rows: Optional[int] = None
    #: CPU seconds per wall second of the micro-batches by kind of process
    #: (:class:`CpuSampler`), when sampled.
    cpu_per_second: Optional[Dict[str, float]] = None

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
            "table_rows": self.table_rows,
            "cpu_per_second": self.cpu_per_second,
        }


class WorkerMemory:
    """Samples the RSS of this process's Spark Python workers (``pyspark.daemon``/``worker``
    descendants of this process) in a background thread; the peak of each worker is its peak
    during this run (its VmHWM is reset when first seen)."""

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
                    if pid not in self.pids:
                        _reset_peak(pid)  # Spark reuses its workers: their VmHWM would carry earlier runs' peaks
                    rss = _status_kb(pid, "VmRSS")
                    hwm = _status_kb(pid, "VmHWM")
                except OSError:
                    continue
                self.pids.add(pid)
                total += rss
                self.peak_one_kb = max(self.peak_one_kb, rss, hwm)
            self.peak_total_kb = max(self.peak_total_kb, total)
            self._stop.wait(self._interval)


class CpuSampler:
    """CPU seconds used during a run by each kind of process: this Python process (the driver's
    Python), its Java descendants (the Spark JVM), its Python descendants (Spark's Python workers and
    the source's planning process) and the broker's JVMs.

    A background thread reads ``utime + stime`` of every such process every ``interval`` seconds
    into :attr:`series` (a worker that exits between two samples loses at most one interval of its
    time); :meth:`window` gives the CPU per second of each kind between two times.
    """

    KINDS = ("driver", "spark_jvm", "python_workers", "broker")

    def __init__(self, broker_pids: List[int], interval: float = 0.1) -> None:
        self._broker = set(broker_pids)
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)
        self._ticks = os.sysconf("SC_CLK_TCK")
        self._first: Dict[int, float] = {}
        self._last: Dict[int, float] = {}
        self._kind: Dict[int, str] = {}
        #: (wall clock time, CPU seconds used so far by each kind), one per sample.
        self.series: List[Tuple[float, Dict[str, float]]] = []

    def __enter__(self) -> "CpuSampler":
        self._sample(initial=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sample(initial=False)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._sample(initial=False)

    def _sample(self, *, initial: bool) -> None:
        self._read_all(initial=initial)
        totals = {kind: 0.0 for kind in self.KINDS}
        for pid, last in self._last.items():
            totals[self._kind[pid]] += last - self._first.get(pid, 0.0)
        self.series.append((time.time(), totals))

    def window(self, start: float, end: float) -> Optional[Dict[str, float]]:
        """CPU seconds per second of each kind between two wall clock times (widened to the
        samples around them); None when the samples do not cover the window."""
        before = [s for s in self.series if s[0] <= start]
        after = [s for s in self.series if s[0] >= end]
        if not before or not after:
            return None
        (t0, c0), (t1, c1) = before[-1], after[0]
        return {kind: (c1[kind] - c0[kind]) / (t1 - t0) for kind in self.KINDS}

    def _read_all(self, *, initial: bool) -> None:
        me = os.getpid()
        for pid in [me, *_descendants(me), *self._broker]:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                cpu = (int(fields[11]) + int(fields[12])) / self._ticks
                if pid not in self._kind:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmd = f.read()
                    self._kind[pid] = ("driver" if pid == me else "broker" if pid in self._broker
                                       else "spark_jvm" if b"java" in cmd.split(b"\0")[0] else "python_workers")
            except (OSError, ValueError, IndexError):
                continue
            if initial:
                self._first[pid] = cpu
            self._last[pid] = cpu


def _reset_peak(pid: int) -> None:
    """Reset a process's peak RSS (VmHWM) to its current RSS (Linux ``clear_refs`` 5); without the
    permission, VmHWM stays the process's lifetime peak."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


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
    broker_pids: Optional[List[int]] = None,
) -> QueryRun:
    """Run one ``Trigger.AvailableNow`` query from earliest with a fresh group.

    Parameters
    ----------
    sink : {"noop", "delta"}
        Spark's ``noop`` sink, or exactly-once Delta: for ``source_format="kafka-group"``
        :class:`DeltaSink` with option ``offsets.table``; for Spark's own ``"kafka"``
        source a ``foreachBatch`` writing with delta-spark and ``txnAppId``/``txnVersion``
        (:class:`DeltaSparkIdempotentWrite`, the pattern Delta's documentation gives).
    source_format : {"kafka-group", "kafka"}
        This connector, or Spark's built-in Kafka source (its own consumer group per query).
    """
    from pyspark_kafka_group import DeltaSink

    name = f"{source_format}-{sink}-{topic}-{uuid.uuid4().hex[:8]}"
    table = os.path.join(workdir, name, "table")
    checkpoint = os.path.join(workdir, name, "checkpoint")
    ours = source_format == "kafka-group"
    reader = (spark.readStream.format(source_format)
              .option("kafka.bootstrap.servers", servers)
              .option("subscribe", topic)
              .option("startingOffsets", "earliest"))
    if ours:
        from pyspark_kafka_group import cluster_options

        # sized by the session, as the README says to: fetch.maxTasks = 2 x its parallelism (issue 34)
        reader = (reader.option("kafka.group.id", f"bench-{name}").option("kafka.session.timeout.ms", "6000")
                  .options(**cluster_options(spark)))
    if max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", max_offsets_per_trigger)
    if min_partitions is not None:
        reader = reader.option("minPartitions", min_partitions)
    if sink == "delta" and ours:
        reader = reader.option("offsets.table", table)
    for key, value in (extra_options or {}).items():
        reader = reader.option(key, value)
    stream = reader.load()
    writer = stream.writeStream.option("checkpointLocation", checkpoint).trigger(availableNow=True)
    if sink == "noop":
        writer = writer.format("noop")
    elif ours:
        writer = writer.foreachBatch(DeltaSink(table))
    else:
        writer = writer.foreachBatch(DeltaSparkIdempotentWrite(table, app_id=name))
    memory = WorkerMemory() if sample_memory else None
    cpu = CpuSampler(broker_pids) if broker_pids is not None else None
    if memory is not None:
        memory.__enter__()
    if cpu is not None:
        cpu.__enter__()
    try:
        started = time.monotonic()
        query = writer.start()
        query.awaitTermination()
        seconds = time.monotonic() - started
    finally:
        if cpu is not None:
            cpu.__exit__(None, None, None)
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
    if cpu is not None and batches:
        # The micro-batches only, as the throughput figures: from the first trigger's start to the
        # last one's end (progress timestamps are the triggers' start times).
        starts = [_epoch(str(_as_dict(p)["timestamp"])) for p in query.recentProgress]
        end = starts[-1] + batches[-1]["durationMs"].get("triggerExecution", 0) / 1000
        run.cpu_per_second = cpu.window(starts[0], end)
    if sink == "delta":
        from deltalake import DeltaTable

        run.table_rows = DeltaTable(table).to_pyarrow_dataset().count_rows() if rows else 0
    shutil.rmtree(os.path.join(workdir, name), ignore_errors=True)
    return run


class DeltaSparkIdempotentWrite:
    """Baseline (S2)'s ``foreachBatch`` function: append each micro-batch to a Delta table with
    delta-spark, made idempotent by ``txnAppId``/``txnVersion`` (Delta's documented pattern for
    exactly-once ``foreachBatch`` writes: a replayed batch id is skipped).

    Caller: the query's micro-batch thread on the driver.
    """

    def __init__(self, table: str, *, app_id: str) -> None:
        self._table = table
        self._app_id = app_id

    def __call__(self, batch: Any, batch_id: int) -> None:
        (batch.write.format("delta").mode("append")
         .option("txnAppId", self._app_id).option("txnVersion", batch_id).save(self._table))


def one_task_per_range(ranges: int) -> Dict[str, Any]:
    """Source options that restore the plan before packing: one Spark task per partition's range.

    ``fetch.minRecordsPerTask=1`` lets every range be its own task, and
    ``fetch.maxTasks`` is the number of ranges of a batch (the workload's
    partitions): a higher cap would cut the ranges into ``total / maxTasks``-record
    pieces, each its own task (``fetch.maxTasks=1000`` would run the 2,000,000-record
    batch as 1,000 tasks of 2,000 records, not 64).
    """
    return {"fetch.minRecordsPerTask": 1, "fetch.maxTasks": ranges}


def _epoch(iso: str) -> float:
    """Seconds since the epoch of a progress timestamp such as ``2026-11-24T16:29:41.123Z``."""
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _as_dict(progress: Any) -> Dict[str, Any]:
    if isinstance(progress, dict):
        return progress
    import json

    return dict(json.loads(progress.json))


def median(values: List[float]) -> float:
    """The median, or NaN for no values."""
    return statistics.median(values) if values else float("nan")
