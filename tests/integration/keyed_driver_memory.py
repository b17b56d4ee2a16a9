"""Keyed batches landed by a fresh driver process, which reports its own peak memory.

    python -m tests.integration.keyed_driver_memory TABLE CHANGES [--copy-on-write] [--driver-merge] [--scd 1|2] [--deletes]

A warm-up batch of 1,000 changes lands first (the session, the table, the imports), then one batch of
CHANGES random-key upserts of ~400 bytes each (keys spread over 10 x CHANGES, into the table the
warm-up created). The process prints one JSON line: the Python driver's peak RSS (``ru_maxrss`` of
this process alone: Spark's JVM is a child process, not counted) before and after the measured batch,
and the table's rows then (``rows``, and how many have ``v`` / ``extra`` not NULL, and how many of the
warm-up's keys are left).

``--copy-on-write``: the table has no deletion vectors, and two measured batches follow the warm-up:
the first holds a truncate (its first record: the table is emptied, the warm-up's rows gone) and
CHANGES upserts; the second (``ignore_null_updates=True``) upserts the same keys, every other one with
``v`` NULL and the others with ``extra`` NULL (but the first record's key, which the truncate dropped):
every row keeps its ``v`` and ``extra`` or takes the new ones (the replaced rows' values read by the
executors). ``--driver-merge`` (for contrast) creates the table with the
change data feed enabled, which only delta-rs's MERGE on the driver writes. ``--scd 2``: the measured
batch is SCD type 2's (every event is the change set) instead of SCD type 1's. ``--deletes`` (alone):
nine changes in ten are deletes (``op = 'd'``) and the keys are ~400-byte strings, so the batch's
tombstones are what would weigh on the driver; the line then holds the tombstones' rows after the
batch and the deletes the two batches hold (one per key: the latest event of each) instead of the rows.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
from typing import Any, Optional


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("table")
    parser.add_argument("changes", type=int)
    parser.add_argument("--copy-on-write", action="store_true")
    parser.add_argument("--driver-merge", action="store_true")
    parser.add_argument("--scd", type=int, default=1, choices=(1, 2))
    parser.add_argument("--deletes", action="store_true")
    args = parser.parse_args(argv)
    if args.deletes:
        return _deletes(args.table, args.changes)

    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    from kafka_group.delta.keyed.change_rules import KeyedSpec
    from kafka_group.delta.keyed.commit import KeyedOffsetStore
    from kafka_group.delta.keyed.create import created_properties
    from kafka_group.delta.keyed.tombstones import Tombstones
    from pyspark_kafka_group.session.spark_session import local_session
    from pyspark_kafka_group.sink.landing import land_changes

    spark = local_session("keyed-driver-memory", extra_conf={"spark.sql.shuffle.partitions": "8"})
    stores_extra = KeyedSpec.build(["id"], None, None, None, ["value", "offset"], 1, apply_as_truncates="value = 't'")
    keeps_nulls = KeyedSpec.build(["id"], None, None, None, ["value", "offset"], 1, ignore_null_updates=True)
    plain = KeyedSpec.build(["id"], None, None, None, ["value", "offset"], args.scd)
    first = stores_extra if args.copy_on_write else plain
    properties = created_properties({"delta.enableDeletionVectors": "false"} if args.copy_on_write else None, first)
    if args.driver_merge:
        DeltaTable.create(args.table, pa.schema([("id", pa.int64()), ("v", pa.string()), ("extra", pa.string()),
                                                 ("__SEQUENCE", pa.int64())]),
                          configuration={"delta.enableChangeDataFeed": "true"})
    store = KeyedOffsetStore(args.table, "memory-group", {})
    tombstones = Tombstones(args.table, {}, stores_extra, 3600.0)

    def batch(n: int, seed: int, key_seed: int, *, truncate: bool = False, null_every: int = 0) -> Any:
        v = "repeat(CAST(id AS STRING), 40)"
        return spark.range(n).selectExpr(
            f"CAST(pmod(xxhash64(id, {key_seed}), {10 * max(n, args.changes)}) AS BIGINT)"
            + (" - 1000000000000" if key_seed == 0 else "") + " AS id",
            (f"CASE WHEN pmod(id, {null_every}) = 1 THEN NULL ELSE {v} END AS v" if null_every else f"{v} AS v"),
            (f"CASE WHEN pmod(id, {null_every}) = 0 AND id > 0 THEN NULL ELSE 'extra-{seed}' END AS extra" if null_every
             else f"'extra-{seed}' AS extra"), ("CASE WHEN id = 0 THEN 't' ELSE 'x' END" if truncate else "'x'") + " AS value",
            f"id + {seed} * 100000000 AS offset")

    def land(frame: Any, batch_id: int, spec: KeyedSpec) -> None:
        land_changes(frame, batch_id, [], store, spec, transform=None, partition_by=None,
                     tombstones_of=lambda _path, _spec: tombstones, table_properties=properties)

    land(batch(1000, 1, 0), 0, first)  # the warm-up: its keys are negative, apart from the others'
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if args.copy_on_write:
        land(batch(args.changes, 2, 7, truncate=True), 1, stores_extra)
        land(batch(args.changes, 3, 7, null_every=2), 2, keeps_nulls)
    else:
        land(batch(args.changes, 2, 2), 1, plain)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    counts = pa.table(QueryBuilder().register("t", DeltaTable(args.table)).execute(
        "SELECT count(*) AS n, count(v) AS v, count(extra) AS extra, count(CASE WHEN id < 0 THEN 1 END) AS warm "
        "FROM t").read_all()).to_pylist()[0]
    print(json.dumps({"changes": args.changes, "before_kib": before, "after_kib": after, "rows": counts["n"],
                      "v": counts["v"], "extra": counts["extra"], "warm": counts["warm"]}), flush=True)
    spark.stop()
    return 0


def _deletes(table: str, changes: int) -> int:
    """``--deletes``: a warm-up, then one SCD1 batch of ``changes`` events, nine in ten deletes of long keys."""
    from deltalake import DeltaTable
    from pyspark.sql import functions as F

    from kafka_group.delta.keyed.change_rules import KeyedSpec
    from kafka_group.delta.keyed.commit import KeyedOffsetStore
    from kafka_group.delta.keyed.create import created_properties
    from kafka_group.delta.keyed.tombstones import Tombstones
    from pyspark_kafka_group.session.spark_session import local_session
    from pyspark_kafka_group.sink.landing import land_changes

    spark = local_session("keyed-driver-memory", extra_conf={"spark.sql.shuffle.partitions": "8"})
    spec = KeyedSpec.build(["id"], None, "op = 'd'", None, ["value", "op", "offset"], 1)
    properties = created_properties(None, spec)
    store = KeyedOffsetStore(table, "memory-group", {})
    tombstones = Tombstones(table, {}, spec, 3600.0)

    def batch(n: int, seed: int) -> Any:
        key = f"CAST(pmod(xxhash64(id, {seed}), {10 * max(n, changes)}) AS BIGINT)"
        return spark.range(n).selectExpr(f"concat(CAST({key} AS STRING), repeat('k', 400)) AS id",
                                         "repeat(CAST(id AS STRING), 40) AS v", "'x' AS value",
                                         "IF(id % 10 = 0, 'u', 'd') AS op", f"id + {seed} * 100000000 AS offset")

    def deleted_keys(n: int, seed: int) -> int:
        """The keys whose latest event (by offset) of the batch is a delete: its tombstones."""
        return int(batch(n, seed).groupBy("id").agg(F.max_by("op", "offset").alias("op")).where("op = 'd'").count())

    def land(n: int, batch_id: int) -> None:
        land_changes(batch(n, batch_id + 1), batch_id, [], store, spec, transform=None, partition_by=None,
                     tombstones_of=lambda _path, _spec: tombstones, table_properties=properties)

    land(1000, 0)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    land(changes, 1)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"changes": changes, "before_kib": before, "after_kib": after,
                      "tombstones": DeltaTable(tombstones.path).to_pyarrow_dataset().count_rows(),
                      "deletes": deleted_keys(1000, 1) + deleted_keys(changes, 2)}), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
