"""The keyed sink's SCD1 MERGE as Spark tasks against (S3) delta-spark's MERGE, random keys, deletion vectors.

    python -m bench.keyed_tasks_scale --rows 1000000 10000000 --changes 100000 [--cores 2] [--workdir DIR]

For each table size: delta-spark builds two identical tables (``id`` 0..rows-1 ascending in files of
1,000,000 rows, ``v``, ``__SEQUENCE``; deletion vectors enabled), then one batch of ``changes``
random-key updates (keys drawn over the whole table: every file holds one) lands in each, through:

- **kafka-group**: the keyed sink's landing (:func:`pyspark_kafka_group.sink.landing.land_changes`: the
  change set as a DataFrame, the MERGE's scan, join and deletion vectors as Spark tasks, one commit
  with the offsets);
- **(S3)**: delta-spark's ``MERGE`` of the same change set, latest per key, made idempotent with
  ``spark.databricks.delta.write.txnAppId`` / ``txnVersion`` as Delta's documentation shows.

No Kafka: both read the same change set from Spark (``spark.range`` hashed to keys), so the figures are
the MERGE's. Printed per run: wall time of the batch, the Python driver's peak RSS (``ru_maxrss`` of this
process: the kafka-group driver's memory; delta-spark's driver work is in the JVM), and CPU seconds of
the whole process tree (this driver, the Spark JVM, its Python workers: local mode runs driver and
executors in that JVM) per distinct changed key.
Both tables are checked against the changes afterwards (row count, and the changed rows' values).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
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
    files = max(1, rows // 1_000_000)
    (spark.range(0, rows, 1, files).selectExpr("id", "concat('v', id) AS v", "0L AS __SEQUENCE")
     .write.format("delta").option("delta.enableDeletionVectors", "true").mode("overwrite").save(path))
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")


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


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--changes", type=int, default=100_000)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--workdir", default="/tmp/keyed-tasks-scale")
    args = parser.parse_args(argv)

    from bench.run import _spark, _versions

    spark = _spark(args.cores)
    spark.conf.set("spark.sql.shuffle.partitions", str(4 * args.cores))
    tree = os.getpid()  # this driver, its JVM (local mode: the executors too) and the JVM's Python workers
    out: Dict[str, Any] = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "argv": sys.argv[1:],
                           "cpus": os.cpu_count(), "loadavg_start": os.getloadavg(), "versions": _versions(),
                           "runs": []}
    for rows in args.rows:
        tables = {name: os.path.join(args.workdir, f"{name}-{rows}") for name in ("kg", "s3")}
        for path in tables.values():
            shutil.rmtree(path, ignore_errors=True)
            _build(spark, path, rows)
        batch = _changes(spark, rows, args.changes, seed=rows).cache()
        distinct = batch.select("id").distinct().count()
        for name, land in (("s3", _s3), ("kg", _kg)):
            cpu, started = _tree_cpu(tree), time.perf_counter()
            land(spark, tables[name], batch, 1)
            seconds, used = time.perf_counter() - started, _tree_cpu(tree) - cpu
            count = spark.read.format("delta").load(tables[name]).count()
            changed = spark.read.format("delta").load(tables[name]).where("v LIKE 'u%'").count()
            run = {"contender": name, "rows": rows, "changes": args.changes, "distinct_keys": distinct,
                   "seconds": round(seconds, 1), "cpu_seconds": round(used, 1),
                   "cpu_us_per_change": round(used / distinct * 1e6), "driver_peak_rss_mb":
                   resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, "rows_after": count,
                   "changed_rows": changed, "loadavg": os.getloadavg()}
            assert count == rows and changed == distinct, run
            out["runs"].append(run)
            print(json.dumps(run), flush=True)
        batch.unpersist()
    out["loadavg_end"] = os.getloadavg()
    print(json.dumps(out), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
