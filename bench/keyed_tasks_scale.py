"""The keyed sink's SCD1 MERGE as Spark tasks against (S3) delta-spark's MERGE, random keys, deletion vectors.

    python -m bench.keyed_tasks_scale --rows 1000000 10000000 --changes 100000 [--cores 2] [--workdir DIR]
    python -m bench.keyed_tasks_scale --cluster standalone --rows 10000000 100000000 --changes 1000000

For each table size: delta-spark builds one table (``id`` 0..rows-1 ascending in files of 1,000,000
rows, ``v``, ``__SEQUENCE``; no deletion vectors), copied once per contender (the copies of the
contenders with deletion vectors get them by ``ALTER TABLE``), then one batch of ``changes`` random-key
updates (keys drawn over the whole table: every file holds one) lands in each, through:

- **kafka-group** (``kg``): the keyed sink's landing (:func:`pyspark_kafka_group.sink.landing.land_changes`)
  into the table with deletion vectors: the change set as a DataFrame, the MERGE's scan, join and
  deletion vectors as Spark tasks, one commit with the offsets;
- **kafka-group, no deletion vectors** (``kg-nodv``): the same landing into the table without them,
  copy-on-write as Spark tasks (the executors rewrite every file a key is in); last at each size,
  only at sizes up to ``--nodv-max-rows`` and while its time at the size before, scaled by the rows,
  stays under ``--nodv-budget`` seconds (a skip is printed with its reason);
- **(S3)**: delta-spark's ``MERGE`` of the same change set into the table with deletion vectors,
  latest per key, made idempotent with ``spark.databricks.delta.write.txnAppId`` / ``txnVersion`` as
  Delta's documentation shows.

``--cluster standalone`` runs them on the standalone cluster of the test tier
(``kafka_group_devbroker.spark_standalone``: a master and ``--cores`` one-core workers on loopback, each
executor its own JVM and Python workers), stopped at the end whatever happened; ``local`` (the
default) on ``local[cores]``.

A warm-up batch (10,000 changes into 1,000,000 rows, (S3) and kafka-group) runs first, not measured.
No Kafka: all read the same change set from Spark (``spark.range`` hashed to keys), so the figures are
the MERGE's. Printed per run: wall time of the batch; the driver's peak memory during the batch (the
Python driver's and, on the cluster, the driver JVM's ``VmHWM``, reset before the batch: on the
tasks the Python driver holds no change set, delta-spark's driver work is in the JVM);
CPU seconds per distinct changed key: on the cluster the executors' (their JVMs and Python workers)
and the driver's apart, in local mode the whole process tree's (driver and executors share one JVM).
Every table is checked afterwards (row count, and the changed rows' values), and the batch's commit
printed as its log records it (operation and metrics: files removed and added, rows copied). With two sizes, the
executors' CPU is split into a part per table row and a part per change, and a 32-core cluster's
batch into 10,000,000,000 rows estimated from them (printed as such: an extrapolation). Everything
printed goes to ``bench/results/keyed-tasks-<cluster>-<UTC timestamp>.json`` too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import time
from typing import Any, Dict, List, Optional


def _tree_cpu(pid: int) -> float:
    """CPU seconds (user + system, children reaped included) of ``pid`` and its live descendants (the JVM
    and its Python workers), from ``/proc``."""
    stats: Dict[int, List[str]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stats[int(entry)] = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
    tree, grew = {pid}, True
    while grew:
        more = {p for p, fields in stats.items() if int(fields[1]) in tree} - tree
        tree |= more
        grew = bool(more)
    ticks = os.sysconf("SC_CLK_TCK")
    return sum(sum(int(x) for x in stats[p][11:15]) for p in tree if p in stats) / ticks


def _build(spark: Any, path: str, rows: int) -> None:
    """The table, without deletion vectors (the contenders' copies get them by ``ALTER TABLE``)."""
    files = max(1, rows // 1_000_000)
    (spark.range(0, rows, 1, files).selectExpr("id", "concat('v', id) AS v", "0L AS __SEQUENCE")
     .write.format("delta").mode("overwrite").save(path))


def _copy(spark: Any, base: str, path: str, deletion_vectors: bool) -> None:
    shutil.rmtree(path, ignore_errors=True)
    shutil.copytree(base, path)
    if deletion_vectors:
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")


def _reset_peak(pid: Optional[int]) -> None:
    """Reset ``pid``'s peak RSS (``VmHWM``) to its current RSS (Linux ``clear_refs``)."""
    if pid is not None:
        try:
            with open(f"/proc/{pid}/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            pass


def _peak_mb(pid: Optional[int]) -> Optional[int]:
    """``pid``'s peak RSS since its last reset (MB), from ``/proc/<pid>/status``."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        return None
    return None


def _jvm_pid(spark: Any) -> Optional[int]:
    """The driver JVM's pid (pyspark's gateway process, or the java process under it)."""
    pid = int(spark.sparkContext._gateway.proc.pid)
    for candidate in [pid] + [int(p) for p in os.listdir("/proc") if p.isdigit()]:
        try:
            with open(f"/proc/{candidate}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{candidate}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        if comm == "java" and (candidate == pid or int(fields[1]) == pid):
            return candidate
    return None


def _cpu(pid: int) -> float:
    """CPU seconds of ``pid`` alone (user + system, its reaped children's included)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _standalone(cluster: Any, executors: int, executor_memory: str) -> Any:
    """A driver session on ``cluster``: ``executors`` one-core executors running this interpreter, with
    delta-spark, once they registered."""
    from pyspark.sql import SparkSession

    from bench.cluster_scaling import wait_for_executors
    from kafka_group_devbroker.jars import classpath

    os.environ["PYSPARK_PYTHON"] = sys.executable
    # The executors' Python workers start in their work folders: the checkout's paths made absolute.
    paths = [os.getcwd()] + [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    conf = {
        "spark.executor.cores": "1", "spark.cores.max": str(executors), "spark.executor.memory": executor_memory,
        "spark.driver.memory": "2g", "spark.pyspark.python": sys.executable,
        "spark.executorEnv.PYTHONPATH": os.pathsep.join(dict.fromkeys(paths)),
        "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1", "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false", "spark.python.unix.domain.socket.enabled": "true",
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        "spark.jars": ",".join(classpath("delta-spark")),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.databricks.delta.snapshotPartitions": str(executors),
    }
    builder = SparkSession.builder.master(cluster.master_url).appName("kafka-group-keyed-tasks-scale")
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    wait_for_executors(spark, executors)
    return spark


def _changes(spark: Any, rows: int, changes: int, seed: int) -> Any:
    """``changes`` distinct random keys over ``rows`` (a permutation-free hash: duplicates collapse per key)."""
    return spark.range(0, changes, 1, 8).selectExpr(
        f"CAST(pmod(xxhash64(id, {seed}), {rows}) AS BIGINT) AS id", "concat('u', id) AS v", "'u' AS op",
        f"id + {10 * rows} AS offset")


def _kg(spark: Any, path: str, batch: Any, batch_id: int) -> None:
    from kafka_group.delta.keyed.change_rules import KeyedSpec
    from kafka_group.delta.keyed.commit import KeyedOffsetStore
    from kafka_group.delta.keyed.tombstones import Tombstones
    from pyspark_kafka_group.sink.landing import land_changes

    spec = KeyedSpec.build(["id"], None, "op = 'd'", None, ["op", "offset"], 1)
    tombstones = Tombstones(path, {}, spec, 3600.0)
    land_changes(batch, batch_id, [], KeyedOffsetStore(path, "bench-group", {}), spec, transform=None,
                 partition_by=None, tombstones_of=lambda _p, _s: tombstones, table_properties=None)


def _s3(spark: Any, path: str, batch: Any, batch_id: int) -> None:
    from delta.tables import DeltaTable
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    latest = batch.withColumn("_r", F.row_number().over(Window.partitionBy("id").orderBy(F.col("offset").desc()))) \
        .where("_r = 1").drop("_r")
    spark.conf.set("spark.databricks.delta.write.txnAppId", "bench-s3")
    spark.conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
    try:
        (DeltaTable.forPath(spark, path).alias("t").merge(latest.alias("s"), "t.id = s.id")
         .whenMatchedDelete(condition="s.op = 'd' AND s.offset >= t.__SEQUENCE")
         .whenMatchedUpdate(condition="s.op != 'd' AND s.offset >= t.__SEQUENCE",
                            set={"v": "s.v", "__SEQUENCE": "s.offset"})
         .whenNotMatchedInsert(condition="s.op != 'd'", values={"id": "s.id", "v": "s.v", "__SEQUENCE": "s.offset"})
         .execute())
    finally:
        spark.conf.unset("spark.databricks.delta.write.txnAppId")
        spark.conf.unset("spark.databricks.delta.write.txnVersion")


def _last_commit(path: str) -> Dict[str, Any]:
    """The batch's commit as the table's log records it: its operation and metrics (files added and
    removed, rows copied, deletion vectors: what each MERGE rewrote)."""
    from deltalake import DeltaTable

    info = DeltaTable(path).history(1)[0]
    metrics = info.get("operationMetrics") or {}
    if isinstance(metrics, str):
        metrics = json.loads(metrics)
    return {"operation": info.get("operation"), "metrics": metrics}


class _Meter:
    """CPU seconds and peak memory around one batch: on the cluster the executors' processes and the
    driver's apart; in local mode the whole process tree (driver and executors share one JVM)."""

    def __init__(self, spark: Any, cluster: Any) -> None:
        self.cluster = cluster
        self.app_id = spark.sparkContext.applicationId
        self.jvm = _jvm_pid(spark) if cluster is not None else None
        self.before: Dict[str, Optional[int]] = {}

    def _executors(self) -> List[int]:
        return [e.pid for e in self.cluster.executor_pids(self.app_id)]

    def sample(self) -> Dict[str, float]:
        if self.cluster is None:
            return {"tree": _tree_cpu(os.getpid())}
        return {"executor": sum(_tree_cpu(pid) for pid in self._executors()),
                "driver": _cpu(os.getpid()) + (_tree_cpu(self.jvm) if self.jvm is not None else 0.0)}

    def reset(self) -> None:
        _reset_peak(os.getpid())
        _reset_peak(self.jvm)
        self.before = {"driver_python_rss_before_mb": _peak_mb(os.getpid()),
                       "driver_jvm_rss_before_mb": _peak_mb(self.jvm)}

    def peaks(self) -> Dict[str, Optional[int]]:
        """The peaks since :meth:`reset`, and the RSS at the reset (a process's memory not given back
        after an earlier batch is in both)."""
        return {"driver_python_peak_mb": _peak_mb(os.getpid()), "driver_jvm_peak_mb": _peak_mb(self.jvm),
                **self.before}


_LANDERS = {"s3": "_s3", "kg": "_kg", "kg-nodv": "_kg"}


def _estimate(runs: List[Dict[str, Any]], key: str) -> List[Dict[str, Any]]:
    """Per contender with two table sizes at one change count: CPU split into per-row and per-change
    parts, and a 32-core batch of 1,000,000 changes into 10,000,000,000 rows (printed, on paper). The
    copy-on-write contender (``kg-nodv``) is estimated the same way, from its executors' CPU."""
    by: Dict[str, List[Dict[str, Any]]] = {}
    for r in runs:
        by.setdefault(r["contender"], []).append(r)
    estimates = []
    for name, rs in by.items():
        rs = sorted(rs, key=lambda r: r["rows"])
        if len(rs) < 2 or rs[0]["changes"] != rs[-1]["changes"] or rs[0]["rows"] == rs[-1]["rows"]:
            continue
        a, b = rs[0], rs[-1]
        cpu = key
        per_row = (b[cpu] - a[cpu]) / (b["rows"] - a["rows"])
        per_change = (a[cpu] - per_row * a["rows"]) / a["distinct_keys"]
        total = per_row * 1e10 + per_change * 1e6
        estimate = {"estimate": name, "from": cpu, "us_per_row": round(per_row * 1e6, 3),
                    "us_per_change": round(per_change * 1e6, 1), "rows": 10_000_000_000, "changes": 1_000_000}
        estimate.update({"cpu_seconds": round(total), "seconds_on_32_cores": round(total / 32)})
        print(json.dumps(estimate), flush=True)
        estimates.append(estimate)
    return estimates


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--changes", type=int, default=100_000)
    parser.add_argument("--cores", type=int, default=2, help="local cores, or one-core workers on the cluster")
    parser.add_argument("--cluster", choices=("local", "standalone"), default="local")
    parser.add_argument("--executor-memory", default="2g", help="per executor on the standalone cluster")
    parser.add_argument("--contenders", default="s3,kg,kg-nodv")
    parser.add_argument("--nodv-max-rows", type=int, default=10_000_000,
                        help="kg-nodv (copy-on-write, rewriting every file a key is in) only up to this table size")
    parser.add_argument("--nodv-budget", type=float, default=600.0,
                        help="kg-nodv skipped at a size where its last size's time, scaled by the rows, exceeds "
                             "these seconds")
    parser.add_argument("--workdir", default="/tmp/keyed-tasks-scale")
    args = parser.parse_args(argv)
    contenders = [c for c in args.contenders.split(",") if c]
    unknown = set(contenders) - set(_LANDERS)
    if unknown:
        parser.error(f"unknown contenders {sorted(unknown)}: pick from {sorted(_LANDERS)}")

    from bench.run import _spark, _versions

    # SIGTERM (a timeout, a kill by pid) ends the run through the finally below: the cluster stops too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cluster = None
    spark = None
    try:
        if args.cluster == "standalone":
            from kafka_group_devbroker.spark_standalone import SparkStandalone

            gib = int(args.executor_memory.rstrip("gG")) if args.executor_memory[-1] in "gG" else 2
            cluster = SparkStandalone(workers=args.cores, cores=1, memory=f"{gib + 1}g")
            cluster.start()
            spark = _standalone(cluster, args.cores, args.executor_memory)
        else:
            spark = _spark(args.cores)
        _measure(spark, cluster, args, contenders, _versions())
        return 0
    finally:
        if spark is not None:
            spark.stop()
        if cluster is not None:
            cluster.stop()


def _measure(spark: Any, cluster: Any, args: Any, contenders: List[str], versions: Any) -> None:
    spark.conf.set("spark.sql.shuffle.partitions", str(4 * args.cores))
    meter = _Meter(spark, cluster)
    out: Dict[str, Any] = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "argv": sys.argv[1:],
                           "cluster": args.cluster, "cpus": os.cpu_count(), "loadavg_start": os.getloadavg(),
                           "versions": versions, "runs": []}
    print(json.dumps({k: out[k] for k in ("date", "argv", "cluster", "cpus", "loadavg_start")}), flush=True)
    cpu_key = "cpu_seconds" if cluster is None else "executor_cpu_seconds"
    results = f"bench/results/keyed-tasks-{args.cluster}-{out['date'].replace('-', '').replace(':', '')}.json"

    def save() -> None:  # after every run: a later run that fails (a driver out of memory) keeps the earlier ones
        with open(results, "w") as f:
            json.dump(out, f, indent=1)

    # Warm-up, not measured: the executors' JVMs compile the scan, join and write paths once.
    warm = {name: os.path.join(args.workdir, f"warm-{name}") for name in ("s3", "kg")}
    _build(spark, warm["s3"], 1_000_000)
    _copy(spark, warm["s3"], warm["kg"], deletion_vectors=True)
    spark.sql(f"ALTER TABLE delta.`{warm['s3']}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    warm_batch = _changes(spark, 1_000_000, 10_000, seed=1)
    for name, path in warm.items():
        globals()[_LANDERS[name]](spark, path, warm_batch, 1)
        shutil.rmtree(path, ignore_errors=True)
    print(json.dumps({"warmed_up": sorted(warm)}), flush=True)
    for rows in sorted(args.rows):
        nodv = [r for r in out["runs"] if r["contender"] == "kg-nodv"]
        predicted = nodv[-1]["seconds"] * rows / nodv[-1]["rows"] if nodv else 0.0
        here = [c for c in contenders if c != "kg-nodv" or (rows <= args.nodv_max_rows and predicted <= args.nodv_budget)]
        here.sort(key=lambda c: c == "kg-nodv")  # last: it rewrites the whole table
        if len(here) < len(contenders):
            print(json.dumps({"skipped": "kg-nodv", "rows": rows, "why": f"above --nodv-max-rows {args.nodv_max_rows}"
                              if rows > args.nodv_max_rows else f"its last size's time scaled to {rows} rows, "
                              f"{predicted:.0f} s, is past --nodv-budget {args.nodv_budget:.0f} s"}), flush=True)
        base = os.path.join(args.workdir, f"base-{rows}")
        started = time.perf_counter()
        _build(spark, base, rows)
        for name in here:
            _copy(spark, base, os.path.join(args.workdir, f"{name}-{rows}"), deletion_vectors=name != "kg-nodv")
        shutil.rmtree(base, ignore_errors=True)
        print(json.dumps({"built": rows, "tables": here, "seconds": round(time.perf_counter() - started, 1)}), flush=True)
        batch = _changes(spark, rows, args.changes, seed=rows).cache()
        distinct = batch.select("id").distinct().count()
        for name in here:
            path = os.path.join(args.workdir, f"{name}-{rows}")
            land = globals()[_LANDERS[name]]
            meter.reset()
            before, started = meter.sample(), time.perf_counter()
            land(spark, path, batch, 1)
            seconds, after = time.perf_counter() - started, meter.sample()
            run: Dict[str, Any] = {"contender": name, "rows": rows, "changes": args.changes, "distinct_keys": distinct,
                                   "seconds": round(seconds, 1)}
            for part in before:
                used = after[part] - before[part]
                label = "cpu_seconds" if part == "tree" else f"{part}_cpu_seconds"
                run[label] = round(used, 1)
                run[label.replace("_seconds", "_us_per_change")] = round(used / distinct * 1e6)
            run.update(meter.peaks())
            run["commit"] = _last_commit(path)
            count = spark.read.format("delta").load(path).count()
            changed = spark.read.format("delta").load(path).where("v LIKE 'u%'").count()
            run.update({"rows_after": count, "changed_rows": changed, "loadavg": os.getloadavg()})
            assert count == rows and changed == distinct, run
            out["runs"].append(run)
            print(json.dumps(run), flush=True)
            save()
            shutil.rmtree(path, ignore_errors=True)
        batch.unpersist()
        for s3, kg in [(r, k) for r in out["runs"] for k in out["runs"]
                       if r["rows"] == k["rows"] == rows and r["contender"] == "s3" and k["contender"] != "s3"]:
            print(json.dumps({"ratio": f"{kg['contender']} / s3", "rows": rows,
                              "seconds": round(kg["seconds"] / s3["seconds"], 2),
                              cpu_key: round(kg[cpu_key] / max(s3[cpu_key], 0.1), 2)}), flush=True)
    out["estimates"] = _estimate(out["runs"], cpu_key)
    out["loadavg_end"] = os.getloadavg()
    print(json.dumps(out), flush=True)
    save()
    print(f"written to {results}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
