"""The keyed sink's MERGE at scale: 100,000 changes into a 10,000,000-row table, delta-rs on one process.

    python -m bench.keyed_merge_scale /tmp/merge-scale-table

Builds the table once (ten appends of 1,000,000 rows with ascending ids, so each file covers its own id
range; a second run reuses it), then MERGEs two change sets of 100,000 updates with the keyed sink's
SCD1 clauses and commit properties (:mod:`kafka_group.delta.keyed.commit`): the newest 1% of ids (keys
clustered in one file, as fresh rows usually are) and ids drawn at random over the whole table (every
file holds a changed key). Prints each MERGE's wall time, delta-rs's metrics and the process's peak RSS.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time


def main(path: str) -> None:
    import numpy as np
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake
    from deltalake.transaction import CommitProperties, Transaction

    from kafka_group.delta.keyed.change_rules import DELETE_COLUMN, SEQ, scd1_clauses
    from kafka_group.delta.keyed.commit import _merge

    rows, changes = 10_000_000, 100_000
    if not os.path.isdir(path):
        for i in range(10):
            ids = np.arange(i * 1_000_000, (i + 1) * 1_000_000, dtype=np.int64)
            write_deltalake(path, pa.table({"id": ids, "v": ids * 2, "name": pa.array(np.char.add("n", ids.astype(str))),
                                            "__SEQUENCE": np.zeros(len(ids), np.int64)}), mode="append")
    clauses = scd1_clauses(["id"], ["id", "v", "name"])
    rng = np.random.default_rng(1)
    for label, ids in (("clustered (the newest 1% of ids)", np.arange(rows - changes, rows, dtype=np.int64)),
                       ("random over all ids", rng.choice(rows, changes, replace=False).astype(np.int64))):
        table = DeltaTable(path)
        source = pa.table({"id": ids, "v": ids, "name": pa.array(["x"] * changes), SEQ: np.full(changes, table.version() + 1, np.int64),
                           DELETE_COLUMN: np.zeros(changes, bool)})
        start = time.perf_counter()
        metrics = _merge(table, source, clauses,
                         CommitProperties(app_transactions=[Transaction("bench", table.version())],
                                          max_commit_retries=0))
        took = time.perf_counter() - start
        print(f"{label}: {took:.1f} s", json.dumps({k: v for k, v in metrics.items() if k.startswith("num_")}),
              f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MB", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
