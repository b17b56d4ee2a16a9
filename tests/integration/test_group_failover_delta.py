"""Two queries of one consumer group writing one Delta table: one is killed and comes back."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import threading
from collections import Counter
from typing import Dict, List

import pytest
from deltalake import DeltaTable

from tests.conftest import produce, unique_name, wait_for

pytestmark = pytest.mark.integration

REPO = pathlib.Path(__file__).resolve().parents[2]


def landed(table: pathlib.Path) -> Counter:  # type: ignore[type-arg]
    if not (table / "_delta_log").exists():
        return Counter()
    data = DeltaTable(str(table)).to_pyarrow_dataset().to_table(columns=["partition", "offset", "writer_pid"])
    return Counter(zip(data.column("partition").to_pylist(), data.column("offset").to_pylist()))


def writers(table: pathlib.Path) -> set:  # type: ignore[type-arg]
    if not (table / "_delta_log").exists():
        return set()
    data = DeltaTable(str(table)).to_pyarrow_dataset().to_table(columns=["writer_pid"])
    return set(data.column("writer_pid").to_pylist())


def test_two_queries_one_group_one_killed_and_restarted(kafka, make_topic, tmp_path) -> None:  # type: ignore[no-untyped-def]
    topic, group, table = make_topic(6), unique_name("group"), tmp_path / "table"
    produced: Dict[int, int] = {p: 0 for p in range(6)}
    lock = threading.Lock()
    stop_producing = threading.Event()

    def produce_more(per_partition: int) -> None:
        with lock:
            produce(kafka.bootstrap_servers, topic, {p: per_partition for p in produced})
            for p in produced:
                produced[p] += per_partition

    def keep_producing() -> None:
        while not stop_producing.wait(0.5):
            produce_more(5)

    def start(name: str) -> subprocess.Popen:  # type: ignore[type-arg]
        command = [sys.executable, "-m", "tests.integration.delta_query", kafka.bootstrap_servers, topic, group,
                   str(table), str(tmp_path / f"chk-{name}"), "--run-seconds", "240", "--max-offsets", "200"]
        return subprocess.Popen(command, cwd=REPO, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=open(tmp_path / f"{name}.log", "ab"))

    def everything_landed_once() -> bool:
        with lock:
            want = sum(produced.values())
        got = landed(table)
        return sum(got.values()) == want and all(n == 1 for n in got.values())

    processes: List[subprocess.Popen] = []  # type: ignore[type-arg]
    producer = threading.Thread(target=keep_producing, daemon=True)
    try:
        produce_more(50)
        first, second = start("a"), start("b")
        processes += [first, second]
        producer.start()
        wait_for(lambda: {first.pid, second.pid} <= writers(table), "both queries to land records", 180)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(30)
        before = len(landed(table))
        wait_for(lambda: len(landed(table)) > before + 60, "the survivor to keep landing", 120)
        again = start("a")
        processes.append(again)
        wait_for(lambda: again.pid in writers(table), "the restarted query to get partitions back", 180)
        stop_producing.set()
        producer.join(30)
        wait_for(everything_landed_once, "every produced record to land exactly once", 180)
        assert landed(table) == Counter((p, o) for p, n in produced.items() for o in range(n))
    finally:
        stop_producing.set()
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)
