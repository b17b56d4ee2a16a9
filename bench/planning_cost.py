"""The source's own planning time per trigger, outside Spark, and the Delta commit cost over history."""

from __future__ import annotations

import os
import shutil
import statistics
import time
import uuid
from typing import Any, Dict, List, Optional

__all__ = ["planning_ms", "delta_history"]


def planning_ms(servers: str, topic: str, *, rounds: int = 30, offsets_table: Optional[str] = None) -> Dict[str, Any]:
    """Median and p90 milliseconds of ``SourceDriver.next_offsets`` when no new data arrived.

    The driver joins a fresh group subscribed to ``topic`` (it owns every partition),
    starts at ``latest`` and asks for the next batch ``rounds`` times.
    """
    from kafka_group.formats import read_offset_document, write_offset_document
    from kafka_group.config.options import parse_source_options
    from kafka_group.driver_factory import build_source_driver

    options = {
        "kafka.bootstrap.servers": servers, "subscribe": topic,
        "kafka.group.id": f"bench-plan-{uuid.uuid4().hex[:8]}", "startingoffsets": "latest",
        "kafka.session.timeout.ms": "6000",
    }
    if offsets_table is not None:
        options["offsets.table"] = offsets_table
    driver = build_source_driver(parse_source_options(options))
    try:
        start = driver.initial_offsets()
        owned = len(driver.owned())
        times: List[float] = []
        for _ in range(rounds):
            t = time.perf_counter()
            end = driver.next_offsets(start, None)
            times.append((time.perf_counter() - t) * 1000)
            assert end is None, "new data arrived during the planning benchmark"
            start = read_offset_document(write_offset_document(start))
    finally:
        driver.close()
    times.sort()
    return {"owned": owned, "median_ms": statistics.median(times), "p90_ms": times[int(0.9 * (len(times) - 1))],
            "rounds": rounds}


def delta_history(workdir: str, commits: int = 250, samples: int = 10) -> Dict[str, Any]:
    """Commit ``commits`` offset-only batches through :class:`DeltaOffsetStore` (the sink's own
    commit path, ``create_write_transaction``); time the store's open+check+commit early and late,
    and list the checkpoints delta-rs wrote."""
    import pyarrow as pa

    from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
    from kafka_group.offsets import OffsetRange, TopicPartition
    from kafka_group.read.record_schema import arrow_schema

    path = os.path.join(workdir, f"history-{uuid.uuid4().hex[:8]}")
    schema: pa.Schema = arrow_schema(False)
    tps = [TopicPartition("history", p) for p in range(8)]
    per_commit: List[float] = []
    try:
        for i in range(commits):
            t = time.perf_counter()
            store = DeltaOffsetStore(path, "bench-history")  # what DeltaSink does per batch
            ranges = [OffsetRange(tp, i * 10, (i + 1) * 10) for tp in tps]
            store.check(ranges)
            store.commit([], schema, ranges)
            per_commit.append(time.perf_counter() - t)
        log = os.listdir(os.path.join(path, "_delta_log"))
        checkpoints = sorted(n for n in log if ".checkpoint" in n)
        last_checkpoint = os.path.exists(os.path.join(path, "_delta_log", "_last_checkpoint"))
    finally:
        shutil.rmtree(path, ignore_errors=True)
    def window(start: int) -> float:
        return statistics.median(per_commit[start:start + samples]) * 1000

    # delta-rs checkpoints every 100 commits: the cost rises until version 99, drops after it.
    return {"commits": commits, "first_ms": window(1), "before_checkpoint_ms": window(100 - samples),
            "after_checkpoint_ms": window(100), "last_ms": window(commits - samples),
            "max_ms": max(window(i) for i in range(1, commits - samples + 1, samples)),
            "per_commit_ms": [round(x * 1000, 1) for x in per_commit],
            "checkpoints": checkpoints, "last_checkpoint_file": last_checkpoint}
