"""Several queries in one consumer group: partitions split, move on join and leave, never planned twice."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
from collections import Counter
from typing import Callable, Dict, List, Tuple

import pytest
from deltalake import DeltaTable

from tests.conftest import produce, unique_name, wait_for

pytestmark = pytest.mark.integration

REPO = pathlib.Path(__file__).resolve().parents[2]


def table_rows(table: pathlib.Path) -> List[Tuple[int, int, int]]:
    if not (table / "_delta_log").exists():
        return []
    data = DeltaTable(str(table)).to_pyarrow_dataset().to_table(columns=["partition", "offset", "writer_pid"])
    return list(zip(data.column("partition").to_pylist(), data.column("offset").to_pylist(),
                    data.column("writer_pid").to_pylist()))


def planned_ranges(checkpoint: pathlib.Path) -> List[Tuple[int, int, int]]:
    """(partition, from, until) of every batch a query planned and ran to completion, from its checkpoint.

    A batch planned when its query was stopped never ran (no ``commits/<n>``): its
    partitions were released with it, so another owner planning them later is fine.
    """
    ranges = []
    for path in (checkpoint / "offsets").glob("[0-9]*"):
        if not (checkpoint / "commits" / path.name).exists():
            continue
        doc = json.loads(path.read_text().splitlines()[2])
        for topic, partitions in doc.items():
            if topic.startswith("@"):
                continue
            for p, value in partitions.items():
                if isinstance(value, list):
                    ranges.append((int(p), value[0], value[1]))
    return ranges


def test_three_queries_split_partitions_and_never_plan_the_same_offsets(kafka, make_topic, tmp_path) -> None:  # type: ignore[no-untyped-def]
    topic, group, table = make_topic(6), unique_name("group"), tmp_path / "table"
    produced: Dict[int, int] = {p: 0 for p in range(6)}
    lock, stop_producing = threading.Lock(), threading.Event()

    def produce_more(n: int) -> None:
        with lock:
            produce(kafka.bootstrap_servers, topic, {p: n for p in produced})
            for p in produced:
                produced[p] += n

    def keep_producing() -> None:
        while not stop_producing.wait(0.5):
            produce_more(3)

    def start(name: str, run_seconds: int) -> subprocess.Popen:  # type: ignore[type-arg]
        command = [sys.executable, "-m", "tests.integration.delta_query", kafka.bootstrap_servers, topic, group,
                   str(table), str(tmp_path / f"chk-{name}"), "--run-seconds", str(run_seconds),
                   "--max-offsets", "100"]
        env = {**os.environ, "KAFKA_GROUP_LOG_LEVEL": "INFO"}
        return subprocess.Popen(command, cwd=REPO, start_new_session=True, env=env,
                                stdout=subprocess.DEVNULL, stderr=open(tmp_path / f"{name}.log", "ab"))

    def writes(process: subprocess.Popen) -> Callable[[], bool]:  # type: ignore[type-arg]
        return lambda: any(pid == process.pid for _, _, pid in table_rows(table))

    processes: List[subprocess.Popen] = []  # type: ignore[type-arg]
    producer = threading.Thread(target=keep_producing, daemon=True)
    try:
        produce_more(30)
        producer.start()
        first = start("a", 75)
        processes.append(first)
        wait_for(writes(first), "the first query to land records", 180)
        second = start("b", 400)
        processes.append(second)
        wait_for(writes(second), "the second query to take partitions over", 180)
        third = start("c", 400)
        processes.append(third)
        wait_for(writes(third), "the third query to take partitions over", 180)
        assert first.wait(240) == 0, (tmp_path / "a.log").read_text()[-3000:]  # stops by itself, leaving the group
        landed_before = len(table_rows(table))
        wait_for(lambda: len(table_rows(table)) > landed_before + 50, "the others to go on after one left", 180)
        stop_producing.set()
        producer.join(30)
        want = Counter((p, o) for p, n in produced.items() for o in range(n))
        wait_for(lambda: Counter((p, o) for p, o, _ in table_rows(table)) == want, "every record exactly once", 240)
        # At every moment each partition was planned by at most one query: no two plans overlap.
        plans = {name: planned_ranges(tmp_path / f"chk-{name}") for name in ("a", "b", "c")}
        for name, ranges in plans.items():
            for other, other_ranges in plans.items():
                if other <= name:
                    continue
                for p, lo, hi in ranges:
                    for q, olo, ohi in other_ranges:
                        assert p != q or hi <= olo or ohi <= lo, f"{name} planned {p}:[{lo},{hi}), {other} [{olo},{ohi})"
    finally:
        stop_producing.set()
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)
