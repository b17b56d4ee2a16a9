"""Seconds from a Kafka produce to the Delta commit that makes the record visible, same run.

Run from the repository root (the package and the development brokers installed, Java 17 and
Maven present; the spark-sql-kafka-0-10 and delta-spark jars are fetched on first use)::

    python -m bench.latency                  # 1,000, 10,000 and 50,000 records/s, 10 s ramp-up + 60 s each
    python -m bench.latency --quick          # the same rates, 5 s ramp-up + 20 s each
    python -m bench.latency --rates 10000 --contenders kg

One Apache Kafka broker (KRaft, loopback, ``kafka_group_devbroker``). For each rate and each
contender, a fresh topic of ``--partitions`` partitions and a producer in its own process that
sends records of ``--value-bytes`` random bytes at a steady rate (round robin over the
partitions, ``linger.ms`` 5), each stamped by the producer at ``produce()`` (Kafka's record
timestamp, ``CreateTime``). The query starts first, from ``earliest``, with Spark's default
trigger (the next batch as soon as the last one ends), on ``local[--cores]``; the producer starts once
it has run its first trigger (started, joined its group, planned nothing):

- **kafka-group + DeltaSink** (``kg``): this connector with its default options, sized by the
  session (``cluster_options``), into ``DeltaSink`` (data and offsets in one Delta commit);
- **(S2)** (``s2``): Spark's ``format("kafka")`` + ``foreachBatch`` appending with delta-spark and
  ``txnAppId``/``txnVersion``, with ``kafka.fetch.max.wait.ms=10`` and
  ``spark.databricks.delta.snapshotPartitions`` = cores, as ``bench.run`` gives it.

The contenders run one after the other (never at once on the shared cores), each on its own topic
of the same setup. A record's latency is the timestamp of the Delta commit that added its file
(``inCommitTimestamp`` when the table has in-commit timestamps, else ``commitInfo.timestamp``,
from the table's ``_delta_log``) minus its Kafka timestamp: every ``add`` of a version's log file
is read with pyarrow. Only records produced in the steady window count: after ``--ramp`` seconds
(the first batches with rows: tasks and Python workers start), for ``--seconds``; the producer goes on for
``--tail`` seconds more, so that the window's last records land under the same load. Each
table is checked first: every produced record once (``partition``/``offset`` unique and
contiguous from 0).

Printed per rate: median, p90, p99 and max of each contender and each one's ratio to (S2); the
load average beside every figure; and the breakdown of a batch's time by phase, from Spark's
``StreamingQueryProgress.durationMs`` of the window's batches (median and p90 of each phase, the
wait between two triggers) and, for ``DeltaSink``, the sink's own phases (timed around its
functions in this process). All figures go to ``bench/results/latency-<UTC timestamp>.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

__all__ = ["percentile", "summarize", "commit_versions", "record_latencies", "check_exactly_once",
           "batch_phases", "main"]

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")

#: The durationMs keys of StreamingQueryProgress, in the order a micro-batch runs them.
PHASES = ("latestOffset", "getBatch", "queryPlanning", "walCommit", "addBatch", "commitOffsets",
          "triggerExecution")
CONTENDERS = {"kg": "kafka-group + DeltaSink", "kg-keep": "kafka-group + DeltaSink, table kept (bench patch)",
              "s2": "(S2) format(kafka) + delta-spark txnAppId"}


# -- pure parts (unit-tested: tests/unit/test_bench_latency.py) ----------------------------------------------


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ascending ``sorted_values``, by the nearest rank (a value that
    occurred: p99 of 100 values is the 99th smallest); NaN for none."""
    if not sorted_values:
        return float("nan")
    if not 0 <= q <= 100:
        raise ValueError(f"a percentile is within 0-100, got {q}")
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return float(sorted_values[rank - 1])


def summarize(values: Sequence[float]) -> Dict[str, float]:
    """Count, median, p90, p99 and max of ``values``."""
    ordered = sorted(values)
    return {"count": len(ordered), "median": percentile(ordered, 50), "p90": percentile(ordered, 90),
            "p99": percentile(ordered, 99), "max": float(ordered[-1]) if ordered else float("nan")}


@dataclass
class Version:
    """One commit of a Delta table: when it became visible and the files it added."""

    version: int
    timestamp_ms: int
    adds: List[str] = field(default_factory=list)
    in_commit_timestamp: bool = False


def commit_versions(table: str) -> List[Version]:
    """Every commit of ``table`` (a local path) from its ``_delta_log/<version>.json`` files: the commit's
    timestamp (``commitInfo.inCommitTimestamp`` when present, else ``commitInfo.timestamp``, else the log
    file's modification time) and the paths (unquoted, relative to the table) of its ``add`` actions with
    ``dataChange`` (the sink's compaction rewrites rows already added, with ``dataChange=false``)."""
    log = os.path.join(table, "_delta_log")
    versions: List[Version] = []
    for name in sorted(os.listdir(log)):
        if not (name.endswith(".json") and name[:-5].isdigit()):
            continue
        path = os.path.join(log, name)
        found = Version(int(name[:-5]), int(os.stat(path).st_mtime * 1000))
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    continue
                action = json.loads(line)
                if "commitInfo" in action:
                    info = action["commitInfo"]
                    if "inCommitTimestamp" in info:
                        found.timestamp_ms, found.in_commit_timestamp = int(info["inCommitTimestamp"]), True
                    elif "timestamp" in info:
                        found.timestamp_ms = int(info["timestamp"])
                elif "add" in action and action["add"].get("dataChange", True):  # not a compaction's rewrite
                    found.adds.append(urllib.parse.unquote(action["add"]["path"]))
        versions.append(found)
    return versions


@dataclass
class Landed:
    """The records of a table with the commit that added each, as parallel columns."""

    partition: List[int]
    offset: List[int]
    produced_ms: List[int]
    committed_ms: List[int]
    version: List[int]

    def latencies_ms(self, window: Tuple[float, float]) -> List[int]:
        """Commit minus produce time of the records produced in ``[start, end)`` (epoch ms)."""
        start, end = window
        return [c - p for p, c in zip(self.produced_ms, self.committed_ms) if start <= p < end]


def record_latencies(table: str, versions: Optional[List[Version]] = None) -> Landed:
    """Each record of ``table`` (a local path) with the version that added it: the columns ``partition``,
    ``offset`` and ``timestamp`` (Kafka's, the produce time) of every file of every ``add``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    landed = Landed([], [], [], [], [])
    for v in versions if versions is not None else commit_versions(table):
        for path in v.adds:
            rows = pq.read_table(os.path.join(table, path), columns=["partition", "offset", "timestamp"])
            stamps = rows.column("timestamp")
            per_ms = {"s": 0.001, "ms": 1, "us": 1000, "ns": 1_000_000}[stamps.type.unit]
            produced = [int(t // per_ms) for t in stamps.cast(pa.int64()).to_pylist()]
            landed.partition.extend(rows.column("partition").to_pylist())
            landed.offset.extend(rows.column("offset").to_pylist())
            landed.produced_ms.extend(produced)
            landed.committed_ms.extend([v.timestamp_ms] * rows.num_rows)
            landed.version.extend([v.version] * rows.num_rows)
    return landed


def check_exactly_once(landed: Landed, partitions: int) -> Dict[int, int]:
    """Each partition's record count; raises ``AssertionError`` when a record is there twice or one is
    missing (every partition's offsets must be exactly ``0 .. count - 1``)."""
    seen: Dict[int, set[int]] = {p: set() for p in range(partitions)}
    duplicates = 0
    for p, o in zip(landed.partition, landed.offset):
        if o in seen[p]:
            duplicates += 1
        seen[p].add(o)
    gaps = {p: len(s) for p, s in seen.items() if s and (min(s) != 0 or max(s) != len(s) - 1)}
    if duplicates or gaps:
        raise AssertionError(f"{duplicates} records landed twice; partitions with gaps (records held): {gaps}")
    return {p: len(s) for p, s in seen.items()}


def batch_phases(progress: Sequence[Mapping[str, Any]], window: Tuple[float, float]) -> Dict[str, Any]:
    """The breakdown of the window's batches with rows (trigger start in ``[start, end)``, epoch ms):
    median and p90 of each ``durationMs`` phase, the rest of ``triggerExecution`` (``other``), and the
    wait from a trigger's end to the next trigger with rows (``trigger wait``: the no-data triggers and
    Spark's polling delay between them); rows per batch."""
    with_rows = sorted((p for p in progress if p.get("numInputRows", 0) > 0), key=lambda p: _epoch_ms(p["timestamp"]))
    chosen = [p for p in with_rows if window[0] <= _epoch_ms(p["timestamp"]) < window[1]]
    phases: Dict[str, List[float]] = {}
    for p in chosen:
        durations = p["durationMs"]
        for key in PHASES:
            phases.setdefault(key, []).append(float(durations.get(key, 0)))
        named = sum(float(durations.get(k, 0)) for k in PHASES if k != "triggerExecution")
        phases.setdefault("other", []).append(float(durations.get("triggerExecution", 0)) - named)
    waits = []
    for a, b in zip(with_rows, with_rows[1:]):
        if a in chosen:
            end = _epoch_ms(a["timestamp"]) + float(a["durationMs"].get("triggerExecution", 0))
            waits.append(_epoch_ms(b["timestamp"]) - end)
    phases["trigger wait"] = waits
    out: Dict[str, Any] = {key: {"median": percentile(sorted(v), 50), "p90": percentile(sorted(v), 90)}
                           for key, v in phases.items()}
    out["batches"] = len(chosen)
    out["rows per batch"] = percentile(sorted(float(p["numInputRows"]) for p in chosen), 50)
    return out


def _epoch_ms(iso: str) -> float:
    """Milliseconds since the epoch of a progress timestamp such as ``2026-11-24T16:29:41.123Z``."""
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000


# -- the producer (its own process) ----------------------------------------------------------------------


def produce_steadily(servers: str, topic: str, partitions: int, rate: int, seconds: float, value_bytes: int) -> int:
    """Send ``rate`` records per second for ``seconds``, each at the moment it is due (ticks of 1 ms);
    returns the records delivered. Caller: ``python -m bench.latency --produce`` (a process of its own, so
    that neither the driver's Python nor the query slows the pace)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "linger.ms": 5, "acks": "1", "compression.type": "none",
                         "queue.buffering.max.messages": 1_000_000})
    pool = os.urandom(value_bytes * 64 + 4096)
    spread = len(pool) - value_bytes
    sent = 0
    total = int(rate * seconds)
    started = time.monotonic()
    produce_one = producer.produce
    while sent < total:
        due = min(total, int((time.monotonic() - started) * rate))
        while sent < due:
            start = (sent * 61) % spread
            try:
                produce_one(topic, pool[start:start + value_bytes], None, sent % partitions)
            except BufferError:
                producer.poll(0.01)
                continue
            sent += 1
        producer.poll(0)
        time.sleep(0.001)
    if producer.flush(60):
        raise RuntimeError(f"not every record reached '{topic}'")
    return sent


# -- the Spark side --------------------------------------------------------------------------------------


class SinkPhases:
    """Times DeltaSink's phases in this process (the driver, where ``foreachBatch`` runs), by wrapping its
    functions while the context is open: reading the batch's plan from the checkpoint, opening the table
    (and its conditional-put check), the offsets check, the Spark job that reads Kafka and writes the Parquet
    files (``write_files``), the Delta commit, and the whole call. One dict of milliseconds per batch."""

    def __init__(self) -> None:
        self.batches: List[Dict[str, float]] = []
        self._current: Optional[Dict[str, float]] = None
        self._restore: List[Tuple[Any, str, Any]] = []

    def _wrap(self, owner: Any, name: str, label: str, *, whole: bool = False) -> None:
        original = getattr(owner, name)
        timer = self

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if whole:
                timer._current = {}
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                spent = (time.perf_counter() - started) * 1000
                if timer._current is not None:
                    timer._current[label] = timer._current.get(label, 0.0) + spent
                if whole and timer._current is not None:
                    timer.batches.append(timer._current)
                    timer._current = None

        self._restore.append((owner, name, original))
        setattr(owner, name, timed)

    def __enter__(self) -> "SinkPhases":
        from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
        from pyspark_kafka_group.sink import delta_sink

        self._wrap(delta_sink.DeltaSink, "__call__", "sink total", whole=True)
        self._wrap(delta_sink.DeltaSink, "_read_offsets_file", "read plan (checkpoint)")
        self._wrap(DeltaOffsetStore, "__init__", "open table")
        self._wrap(DeltaOffsetStore, "check_conditional_put", "open table")
        self._wrap(DeltaOffsetStore, "check", "offsets check")
        self._wrap(delta_sink, "write_files", "Spark job: read + write files")
        self._wrap(DeltaOffsetStore, "commit", "Delta commit")
        return self

    def __exit__(self, *exc: Any) -> None:
        for owner, name, original in reversed(self._restore):
            setattr(owner, name, original)
        self._restore.clear()

    def summary(self, skip: int) -> Dict[str, Dict[str, float]]:
        """Median and p90 of each phase over the batches after the first ``skip``."""
        chosen = self.batches[skip:]
        labels = sorted({k for b in chosen for k in b})
        out = {}
        for label in labels:
            values = sorted(b.get(label, 0.0) for b in chosen)
            out[label] = {"median": percentile(values, 50), "p90": percentile(values, 90)}
        if chosen:
            rest = sorted(b.get("sink total", 0.0) - sum(v for k, v in b.items() if k != "sink total") for b in chosen)
            out["sink: rest"] = {"median": percentile(rest, 50), "p90": percentile(rest, 90)}
        return out


def stage_times(spark: Any, window: Tuple[float, float], cores: int) -> Dict[str, Dict[str, float]]:
    """The Spark stages submitted in ``window`` (epoch ms), from the driver's status store (as the UI shows
    them): median and p90 of each stage's wall time (submission to completion), of its tasks' run time
    (summed over its tasks: the Kafka read, the Python workers, the file writes), of their deserialization,
    and of the rest (wall minus the tasks' time spread over ``cores``: scheduling, task launch, results)."""
    store = spark.sparkContext._jsc.sc().statusStore()
    walls, runs, deserialize, rest, tasks = [], [], [], [], []
    # stageList's Scala default arguments, which py4j does not fill in; the answer is a Scala Seq
    stages = store.stageList(None, *(getattr(store, f"stageList$default${i}")() for i in range(2, 6)))
    for stage in (stages.apply(i) for i in range(stages.size())):
        submitted, completed = stage.submissionTime(), stage.completionTime()
        if not (submitted.isDefined() and completed.isDefined()):
            continue
        start, end = float(submitted.get().getTime()), float(completed.get().getTime())
        if not window[0] <= start < window[1]:
            continue
        wall, run, load = end - start, float(stage.executorRunTime()), float(stage.executorDeserializeTime())
        walls.append(wall)
        runs.append(run)
        deserialize.append(load)
        rest.append(wall - (run + load) / max(1, min(int(stage.numTasks()), cores)))
        tasks.append(float(stage.numTasks()))
    out = {}
    for label, values in (("stage wall", walls), ("task run (sum)", runs), ("task deserialize (sum)", deserialize),
                          ("wall - task time", rest), ("tasks per stage", tasks)):
        ordered = sorted(values)
        out[label] = {"median": percentile(ordered, 50), "p90": percentile(ordered, 90)}
    out["stages"] = {"median": float(len(walls)), "p90": float(len(walls))}
    return out


@contextlib.contextmanager
def kept_offset_stores() -> Iterator[None]:
    """While open, DeltaSink keeps one offsets store per table, group and storage options from batch to batch
    instead of opening the table again at every batch (a candidate cut, measured as contender ``kg-keep``:
    each batch's ``check`` still brings the kept table up to its latest version, incrementally). A patch of
    this process's ``pyspark_kafka_group.sink.delta_sink`` module, not a change of the connector."""
    from pyspark_kafka_group.sink import delta_sink

    original = getattr(delta_sink, "DeltaOffsetStore")
    kept: Dict[Tuple[str, str, Tuple[Tuple[str, str], ...]], Any] = {}

    def store(path: str, group: str, options: Optional[Mapping[str, str]] = None) -> Any:
        key = (path, group, tuple(sorted((options or {}).items())))
        if key not in kept:
            kept[key] = original(path, group, options)
        return kept[key]

    setattr(delta_sink, "DeltaOffsetStore", store)
    try:
        yield
    finally:
        setattr(delta_sink, "DeltaOffsetStore", original)


def _spark(cores: int) -> Any:
    """``bench.run``'s session (Spark's Kafka source and delta-spark on the classpath, delta-spark's
    ``snapshotPartitions`` = cores), keeping every batch's progress."""
    from bench.run import _spark as bench_session

    spark = bench_session(cores)
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "10000")
    return spark


@dataclass
class Outcome:
    """One contender at one rate."""

    contender: str
    rate: int
    produced: int
    latency: Dict[str, float]
    phases: Dict[str, Any]
    sink_phases: Dict[str, Any]
    versions: int
    versions_in_window: int
    load_start: Tuple[float, float, float]
    load_end: Tuple[float, float, float]
    cpu_per_second: Optional[Dict[str, float]] = None
    commit_vs_file_ms: Optional[Dict[str, float]] = None
    #: The worst latency (ms) of the records produced in each second of the run, from the producer's start.
    worst_by_second: List[int] = field(default_factory=list)
    #: The Spark stages of the window (:func:`stage_times`).
    stages: Dict[str, Dict[str, float]] = field(default_factory=dict)
    #: Every batch with rows: (trigger start in ms from the producer's start, rows, triggerExecution ms).
    batches: List[Tuple[int, int, int]] = field(default_factory=list)


def _query(spark: Any, contender: str, servers: str, topic: str, table: str, checkpoint: str,
           extra: Mapping[str, str]) -> Any:
    from bench.spark_runs import DeltaSparkIdempotentWrite
    from pyspark_kafka_group import DeltaSink, cluster_options

    if contender.startswith("kg"):
        reader = (spark.readStream.format("kafka-group").option("kafka.group.id", f"latency-{uuid.uuid4().hex[:8]}")
                  .option("kafka.session.timeout.ms", "6000").option("offsets.table", table)
                  .options(**cluster_options(spark)))
        sink: Any = DeltaSink(table)
    else:
        reader = spark.readStream.format("kafka").option("kafka.fetch.max.wait.ms", "10")
        sink = DeltaSparkIdempotentWrite(table, app_id=checkpoint)
    for key, value in extra.items():
        reader = reader.option(key, value)
    stream = (reader.option("kafka.bootstrap.servers", servers).option("subscribe", topic)
              .option("startingOffsets", "earliest").load())
    return stream.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint).start()


def _wait_landed(table: str, expected: int, bound_s: float, query: Any) -> int:
    """Rows in ``table`` once it holds ``expected`` (or at the bound): read with delta-rs."""
    from deltalake import DeltaTable

    deadline = time.monotonic() + bound_s
    rows = 0
    while time.monotonic() < deadline:
        if query.exception() is not None:
            raise RuntimeError(f"the query failed: {query.exception()}")
        try:
            rows = DeltaTable(table).to_pyarrow_dataset().count_rows()
        except Exception:  # not created yet
            rows = 0
        if rows >= expected:
            return rows
        time.sleep(0.5)
    return rows


def _wait_first_progress(query: Any, bound_s: float) -> None:
    """Until the query has run its first trigger (started, joined its group, planned), at most ``bound_s``."""
    deadline = time.monotonic() + bound_s
    while query.lastProgress is None:
        if query.exception() is not None:
            raise RuntimeError(f"the query failed: {query.exception()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the query ran no trigger within {bound_s:.0f} s")
        time.sleep(0.2)


def run_one(spark: Any, cluster: Any, contender: str, rate: int, args: argparse.Namespace, workdir: str,
            extra: Mapping[str, str]) -> Outcome:
    """One contender at one rate on a fresh topic: produce, run the query, measure."""
    from bench.spark_runs import CpuSampler, _as_dict

    servers = cluster.bootstrap_servers
    topic = f"latency-{contender}-{rate}-{uuid.uuid4().hex[:6]}"
    cluster.create_topic(topic, args.partitions)
    name = f"{contender}-{rate}-{uuid.uuid4().hex[:6]}"
    table, checkpoint = os.path.join(workdir, name, "table"), os.path.join(workdir, name, "checkpoint")
    total_s = args.ramp + args.seconds + args.tail
    load_start = os.getloadavg()
    timer = SinkPhases() if contender.startswith("kg") else None
    query = None
    producer: Optional["subprocess.Popen[str]"] = None
    pids = list(getattr(cluster, "pids", []))
    try:
        with (timer if timer is not None else contextlib.nullcontext()), CpuSampler(pids) as cpu, \
                (kept_offset_stores() if contender == "kg-keep" else contextlib.nullcontext()):
            # The query's start (the group's join, the first, empty batch) before the first record: the ramp-up
            # then holds only the first batches with rows (task and worker start), not the query's start.
            query = _query(spark, contender, servers, topic, table, checkpoint, extra)
            _wait_first_progress(query, args.drain_bound)
            producer = subprocess.Popen(
                [sys.executable, "-m", "bench.latency", "--produce", servers, topic, str(args.partitions), str(rate),
                 str(total_s), str(args.value_bytes)], stdout=subprocess.PIPE, text=True)
            started_ms = time.time() * 1000
            window = (started_ms + args.ramp * 1000, started_ms + (args.ramp + args.seconds) * 1000)
            out, _ = producer.communicate(timeout=total_s + 120)
            if producer.returncode != 0:
                raise RuntimeError(f"the producer failed ({producer.returncode})")
            produced = int(out.strip().splitlines()[-1])
            rows = _wait_landed(table, produced, args.drain_bound, query)
            progress = [_as_dict(p) for p in query.recentProgress]
            query.stop()
            query = None
    finally:
        if producer is not None and producer.poll() is None:
            producer.kill()
            producer.wait(30)
        if query is not None:
            query.stop()
    load_end = os.getloadavg()
    versions = commit_versions(table)
    landed = record_latencies(table, versions)
    counts = check_exactly_once(landed, args.partitions)
    if rows < produced:
        print(f"  {contender} at {rate:,}/s: {sum(counts.values()):,} of {produced:,} records landed within "
              f"{args.drain_bound:.0f} s of the producer's end: it did not keep up", flush=True)
    window_versions = {v for v, p in zip(landed.version, landed.produced_ms) if window[0] <= p < window[1]}
    # the commit timestamp against the moment its log file appeared (local file system): how much the
    # commit's own clock reading leads its visibility
    by_version = {v.version: v for v in versions}
    mtimes = []
    for v in window_versions:
        stat = os.stat(os.path.join(table, "_delta_log", f"{v:020d}.json"))
        mtimes.append(stat.st_mtime * 1000 - by_version[v].timestamp_ms)
    worst: Dict[int, int] = {}
    for p, c in zip(landed.produced_ms, landed.committed_ms):
        second = int((p - started_ms) // 1000)
        worst[second] = max(worst.get(second, 0), c - p)
    batches = [(int(_epoch_ms(p["timestamp"]) - started_ms), int(p["numInputRows"]),
                int(p["durationMs"].get("triggerExecution", 0))) for p in progress if p.get("numInputRows", 0) > 0]
    return Outcome(
        worst_by_second=[worst.get(s, 0) for s in range(int(max(worst, default=-1)) + 1)], batches=batches,
        stages=stage_times(spark, window, args.cores),
        contender=contender, rate=rate, produced=produced, latency=summarize(landed.latencies_ms(window)),
        phases=batch_phases(progress, window),
        sink_phases=timer.summary(skip=2) if timer is not None else {},
        versions=len(versions), versions_in_window=len(window_versions), load_start=load_start, load_end=load_end,
        cpu_per_second=cpu.window(window[0] / 1000, window[1] / 1000),
        commit_vs_file_ms=summarize(mtimes) if mtimes else None,
    )


def _format_ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:,.0f}"


def _load(load: Tuple[float, float, float]) -> str:
    return " / ".join(f"{x:.2f}" for x in load)


def latency_table(outcomes: Sequence[Outcome], labels: Mapping[str, str]) -> List[str]:
    """The Markdown table: one row per rate and contender, the ratio to (S2) of the same rate."""
    lines = ["| records/s | contender | median ms | p90 ms | p99 ms | max ms | / (S2) p50, p99, max | versions "
             "| load (1/5/15 min) start -> end |", "|---|---|---|---|---|---|---|---|---|"]
    base = {o.rate: o for o in outcomes if o.contender == "s2"}
    for o in outcomes:
        s2 = base.get(o.rate)
        ratio = "-" if s2 is None or o is s2 else ", ".join(
            f"{o.latency[k] / s2.latency[k]:.2f}x" for k in ("median", "p99", "max"))
        lines.append(f"| {o.rate:,} | {labels[o.contender]} | {_format_ms(o.latency['median'])} | "
                     f"{_format_ms(o.latency['p90'])} | {_format_ms(o.latency['p99'])} | "
                     f"{_format_ms(o.latency['max'])} | {ratio} | {o.versions_in_window} | "
                     f"{_load(o.load_start)} -> {_load(o.load_end)} |")
    return lines


def phase_table(outcomes: Sequence[Outcome], labels: Mapping[str, str]) -> List[str]:
    """The breakdown: median (p90) milliseconds of each phase per contender and rate."""
    keys = ["trigger wait", *PHASES, "other"]
    lines = ["| records/s | contender | batches | rows/batch | " + " | ".join(keys) + " |",
             "|---|---|---|---|" + "---|" * len(keys)]
    for o in outcomes:
        cells = [f"{o.phases[k]['median']:,.0f} ({o.phases[k]['p90']:,.0f})" if k in o.phases else "-" for k in keys]
        lines.append(f"| {o.rate:,} | {labels[o.contender]} | {o.phases['batches']} | "
                     f"{o.phases['rows per batch']:,.0f} | " + " | ".join(cells) + " |")
    return lines


def sink_table(outcomes: Sequence[Outcome], labels: Mapping[str, str]) -> List[str]:
    """Inside ``addBatch``, DeltaSink's phases: median (p90) milliseconds."""
    chosen = [o for o in outcomes if o.sink_phases]
    if not chosen:
        return []
    keys = ["read plan (checkpoint)", "open table", "offsets check", "Spark job: read + write files",
            "Delta commit", "sink: rest", "sink total"]
    lines = ["| records/s | contender | " + " | ".join(keys) + " |", "|---|---|" + "---|" * len(keys)]
    for o in chosen:
        cells = [f"{o.sink_phases[k]['median']:,.0f} ({o.sink_phases[k]['p90']:,.0f})" if k in o.sink_phases
                 else "-" for k in keys]
        lines.append(f"| {o.rate:,} | {labels[o.contender]} | " + " | ".join(cells) + " |")
    return lines


def stage_table(outcomes: Sequence[Outcome], labels: Mapping[str, str]) -> List[str]:
    """The window's Spark stages: median (p90) milliseconds."""
    keys = ["stages", "tasks per stage", "stage wall", "task deserialize (sum)", "task run (sum)", "wall - task time"]
    lines = ["| records/s | contender | " + " | ".join(keys) + " |", "|---|---|" + "---|" * len(keys)]
    for o in outcomes:
        cells = [f"{o.stages[k]['median']:,.0f} ({o.stages[k]['p90']:,.0f})" if k in o.stages else "-" for k in keys]
        lines.append(f"| {o.rate:,} | {labels[o.contender]} | " + " | ".join(cells) + " |")
    return lines


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--produce":
        servers, topic, partitions, per_second, seconds, value_bytes = argv[1:7]
        print(produce_steadily(servers, topic, int(partitions), int(per_second), float(seconds), int(value_bytes)))
        return 0
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rates", default="1000,10000,50000", help="records per second, comma-separated")
    parser.add_argument("--contenders", default="kg,s2",
                        help="comma-separated, in this order at each rate: kg (kafka-group + DeltaSink), kg-keep (the "
                        "same with its offsets store kept from batch to batch: kept_offset_stores), s2")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=60.0, help="the steady window measured")
    parser.add_argument("--ramp", type=float, default=10.0,
                        help="seconds of records dropped at the start (the first batches with rows: tasks and workers "
                        "start); the query has started before the first record")
    parser.add_argument("--tail", type=float, default=10.0, help="seconds produced after the window")
    parser.add_argument("--cores", type=int, default=2, help="local[cores]")
    parser.add_argument("--drain-bound", type=float, default=120.0,
                        help="seconds to wait after the producer's end for every record to land")
    parser.add_argument("--kg-option", action="append", default=[], metavar="KEY=VALUE",
                        help="a source option for kafka-group (repeatable)")
    parser.add_argument("--quick", action="store_true", help="5 s ramp-up, 20 s window, 5 s tail")
    parser.add_argument("--results-dir", default=RESULTS_DIR)
    args = parser.parse_args(argv)
    if args.quick:
        args.ramp, args.seconds, args.tail = 5.0, 20.0, 5.0
    from bench.run import _versions
    from kafka_group_devbroker import start_cluster

    rates = [int(r) for r in args.rates.split(",")]
    contenders = [c for c in args.contenders.split(",") if c]
    kg_extra = dict(kv.split("=", 1) for kv in args.kg_option)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    lines: List[str] = []

    def say(text: str = "") -> None:
        lines.append(text)
        print(text, flush=True)

    workdir = tempfile.mkdtemp(prefix="kafka-group-latency-")
    cluster = start_cluster("kafka", brokers=1)
    spark: Any = None
    outcomes: List[Outcome] = []
    try:
        spark = _spark(args.cores)
        versions = _versions()
        say(f"machine: {os.cpu_count()} CPUs, load average at start {_load(os.getloadavg())}")
        say("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
        say(f"workload: {', '.join(f'{r:,}' for r in rates)} records/s of {args.value_bytes} B over "
            f"{args.partitions} partitions; {args.ramp:.0f} s ramp-up dropped, {args.seconds:.0f} s measured, "
            f"{args.tail:.0f} s tail; local[{args.cores}], default trigger"
            + (f"; kafka-group options {kg_extra}" if kg_extra else ""))
        for rate in rates:
            for contender in contenders:
                o = run_one(spark, cluster, contender, rate, args, workdir,
                            kg_extra if contender.startswith("kg") else {})
                outcomes.append(o)
                lat = o.latency
                say(f"{rate:,} records/s, {CONTENDERS[contender]}: median {_format_ms(lat['median'])} ms, p90 "
                    f"{_format_ms(lat['p90'])} ms, p99 {_format_ms(lat['p99'])} ms, max {_format_ms(lat['max'])} ms "
                    f"over {lat['count']:,} records and {o.versions_in_window} versions; load {_load(o.load_start)} "
                    f"-> {_load(o.load_end)}; CPU/s {({k: round(v, 2) for k, v in (o.cpu_per_second or {}).items()})}")
                say(f"  worst latency (s) of the records produced in each second: "
                    + " ".join(f"{w / 1000:.1f}" for w in o.worst_by_second))
        say()
        say("Produce -> Delta commit, milliseconds:")
        say()
        for line in latency_table(outcomes, CONTENDERS):
            say(line)
        say()
        say("A batch's time by phase, ms, median (p90), the window's batches with rows (Spark's durationMs):")
        say()
        for line in phase_table(outcomes, CONTENDERS):
            say(line)
        sink = sink_table(outcomes, CONTENDERS)
        if sink:
            say()
            say("Inside addBatch, DeltaSink's phases, ms, median (p90):")
            say()
            for line in sink:
                say(line)
        say()
        for rate in rates:
            by = {o.contender: o for o in outcomes if o.rate == rate}
            if "kg" in by and "kg-keep" in by:
                old, new = by["kg"], by["kg-keep"]
                say(f"before/after at {rate:,} records/s, {CONTENDERS['kg-keep']} / {CONTENDERS['kg']}: "
                    + ", ".join(f"{k} {new.latency[k]:,.0f} / {old.latency[k]:,.0f} ms = "
                                f"{new.latency[k] / old.latency[k]:.2f}x" for k in ("median", "p99", "max"))
                    + f"; addBatch median {new.phases['addBatch']['median']:,.0f} / "
                    f"{old.phases['addBatch']['median']:,.0f} ms, triggerExecution median "
                    f"{new.phases['triggerExecution']['median']:,.0f} / {old.phases['triggerExecution']['median']:,.0f} ms")
        say()
        say("The window's Spark stages (the status store's), ms, median (p90):")
        say()
        for line in stage_table(outcomes, CONTENDERS):
            say(line)
        say()
        for o in outcomes:
            if o.commit_vs_file_ms is not None:
                say(f"{CONTENDERS[o.contender]} at {o.rate:,}/s: log file written after the commit's timestamp by "
                    f"median {o.commit_vs_file_ms['median']:.0f} ms, max {o.commit_vs_file_ms['max']:.0f} ms")
        os.makedirs(args.results_dir, exist_ok=True)
        out = os.path.join(args.results_dir, f"latency-{stamp}.json")
        with open(out, "w", encoding="utf-8") as f:
            json.dump({"started": stamp, "argv": argv, "versions": versions, "cpus": os.cpu_count(),
                       "kg_options": kg_extra, "outcomes": [o.__dict__ for o in outcomes], "lines": lines}, f,
                      indent=1, default=str)
        say(f"load average at end {_load(os.getloadavg())}; results written to {out}")
        return 0
    finally:
        if spark is not None:
            spark.stop()
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
