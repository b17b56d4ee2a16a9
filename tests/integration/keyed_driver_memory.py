"""One keyed batch landed by a fresh driver process, which reports its own peak memory.

    python -m tests.integration.keyed_driver_memory TABLE CHANGES [--driver-merge] [--deletes]

A warm-up batch of 1,000 changes lands first (the session, the table, the imports), then one batch of
CHANGES random-key upserts of ~400 bytes each (keys spread over 10 x CHANGES, into the table the
warm-up created). The process prints one JSON line: the Python driver's peak RSS (``ru_maxrss`` of
this process alone: Spark's JVM is a child process, not counted) before and after the measured batch.
``--driver-merge`` creates the table without deletion vectors (the MERGE on the driver) for contrast.
``--deletes``: nine changes in ten are deletes (``op = 'd'``) and the keys are ~400-byte strings, so
the batch's tombstones are what would weigh on the driver; the line also holds the tombstones'
rows after the batch and the deletes the two batches hold (one per key: the latest event of each).
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
    parser.add_argument("--driver-merge", action="store_true")
    parser.add_argument("--deletes", action="store_true")
    args = parser.parse_args(argv)

    from kafka_group.delta.keyed.change_rules import KeyedSpec
    from kafka_group.delta.keyed.commit import KeyedOffsetStore
    from kafka_group.delta.keyed.create import created_properties
    from kafka_group.delta.keyed.tombstones import Tombstones
    from pyspark_kafka_group.session.spark_session import local_session
    from pyspark.sql import functions as F

    from pyspark_kafka_group.sink.landing import land_changes

    spark = local_session("keyed-driver-memory", extra_conf={"spark.sql.shuffle.partitions": "8"})
    spec = KeyedSpec.build(["id"], None, "op = 'd'" if args.deletes else None, None, ["value", "op", "offset"], 1)
    properties = created_properties({"delta.enableDeletionVectors": "false"} if args.driver_merge else None, spec)
    store = KeyedOffsetStore(args.table, "memory-group", {})
    tombstones = Tombstones(args.table, {}, spec, 3600.0)

    def batch(n: int, seed: int) -> Any:
        key = f"CAST(pmod(xxhash64(id, {seed}), {10 * max(n, args.changes)}) AS BIGINT)"
        return spark.range(n).selectExpr(
            f"concat(CAST({key} AS STRING), repeat('k', 400)) AS id" if args.deletes else f"{key} AS id",
            "repeat(CAST(id AS STRING), 40) AS v", "'x' AS value",
            "IF(id % 10 = 0, 'u', 'd') AS op" if args.deletes else "'u' AS op",
            f"id + {seed} * 100000000 AS offset")

    def deleted_keys(n: int, seed: int) -> int:
        """The keys whose latest event (by offset) of the batch is a delete: its tombstones."""
        return int(batch(n, seed).groupBy("id").agg(F.max_by("op", "offset").alias("op")).where("op = 'd'").count())

    def land(n: int, batch_id: int) -> None:
        land_changes(batch(n, batch_id + 1), batch_id, [], store, spec, transform=None, partition_by=None,
                     tombstones_of=lambda _path, _spec: tombstones, table_properties=properties)

    land(1000, 0)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    land(args.changes, 1)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    report = {"changes": args.changes, "before_kib": before, "after_kib": after}
    if args.deletes:
        from deltalake import DeltaTable

        report["tombstones"] = DeltaTable(tombstones.path).to_pyarrow_dataset().count_rows()
        report["deletes"] = deleted_keys(1000, 1) + deleted_keys(args.changes, 2)
    print(json.dumps(report), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
