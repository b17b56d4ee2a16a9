"""One keyed batch landed by a fresh driver process, which reports its own peak memory.

    python -m tests.integration.keyed_driver_memory TABLE CHANGES [--driver-merge] [--scd 1|2]

A warm-up batch of 1,000 changes lands first (the session, the table, the imports), then one batch of
CHANGES random-key upserts of ~400 bytes each (keys spread over 10 x CHANGES, into the table the
warm-up created). The process prints one JSON line: the Python driver's peak RSS (``ru_maxrss`` of
this process alone: Spark's JVM is a child process, not counted) before and after the measured batch.
``--driver-merge`` creates the table without deletion vectors (the MERGE on the driver) for contrast;
``--scd 2`` lands SCD type 2 (every event is the change set) instead of SCD type 1.
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
    parser.add_argument("--scd", type=int, default=1, choices=(1, 2))
    args = parser.parse_args(argv)

    from kafka_group.delta.keyed.change_rules import KeyedSpec
    from kafka_group.delta.keyed.commit import KeyedOffsetStore
    from kafka_group.delta.keyed.create import created_properties
    from kafka_group.delta.keyed.tombstones import Tombstones
    from pyspark_kafka_group.session.spark_session import local_session
    from pyspark_kafka_group.sink.landing import land_changes

    spark = local_session("keyed-driver-memory", extra_conf={"spark.sql.shuffle.partitions": "8"})
    spec = KeyedSpec.build(["id"], None, None, None, ["value", "offset"], args.scd)
    properties = created_properties({"delta.enableDeletionVectors": "false"} if args.driver_merge else None, spec)
    store = KeyedOffsetStore(args.table, "memory-group", {})
    tombstones = Tombstones(args.table, {}, spec, 3600.0)

    def batch(n: int, seed: int) -> Any:
        return spark.range(n).selectExpr(
            f"CAST(pmod(xxhash64(id, {seed}), {10 * max(n, args.changes)}) AS BIGINT) AS id",
            "repeat(CAST(id AS STRING), 40) AS v", "'x' AS value",
            f"id + {seed} * 100000000 AS offset")

    def land(n: int, batch_id: int) -> None:
        land_changes(batch(n, batch_id + 1), batch_id, [], store, spec, transform=None, partition_by=None,
                     tombstones_of=lambda _path, _spec: tombstones, table_properties=properties)

    land(1000, 0)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    land(args.changes, 1)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"changes": args.changes, "before_kib": before, "after_kib": after}), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
