"""Shared harness for tests that run several DeltaSink queries of one group as processes.

A background producer keeps writing to every partition; queries run
``tests.integration.delta_query`` in process groups of their own (killed at the
end whatever happened); the table is read back with the writer of each row.
"""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import threading
from collections import Counter
from types import TracebackType
from typing import Dict, List, Optional, Sequence, Tuple, Type

from deltalake import DeltaTable

from tests.conftest import produce

REPO = pathlib.Path(__file__).resolve().parents[2]


class BackgroundProducer:
    """Produces ``per_tick`` records to each partition every half second, counting what it sent."""

    def __init__(self, servers: str, topic: str, partitions: int, per_tick: int) -> None:
        self._servers, self._topic, self._per_tick = servers, topic, per_tick
        self._produced: Dict[int, int] = {p: 0 for p in range(partitions)}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def produce(self, per_partition: int) -> None:
        """Produce ``per_partition`` records to each partition now."""
        with self._lock:
            produce(self._servers, self._topic, {p: per_partition for p in self._produced})
            for p in self._produced:
                self._produced[p] += per_partition

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(30)

    def expected(self) -> Counter[Tuple[int, int]]:
        """Every (partition, offset) produced so far, once."""
        with self._lock:
            return Counter((p, o) for p, n in self._produced.items() for o in range(n))

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self.produce(self._per_tick)


class GroupQueries:
    """Starts DeltaSink queries of one group into one table; kills the survivors on exit."""

    def __init__(self, servers: str, topic: str, group: str, workdir: pathlib.Path, max_offsets: int) -> None:
        self.table = workdir / "table"
        self._servers, self._topic, self._group = servers, topic, group
        self._workdir, self._max_offsets = workdir, max_offsets
        self._processes: List["subprocess.Popen[bytes]"] = []

    def start(self, name: str, run_seconds: int, options: Sequence[str] = (),
              extra: Sequence[str] = ()) -> "subprocess.Popen[bytes]":
        """Start query ``name`` (checkpoint ``chk-<name>``, log ``<name>.log``) for ``run_seconds``.

        ``options`` are extra source options, ``KEY=VALUE``; ``extra`` are further
        arguments of ``tests.integration.delta_query`` (``--batch-sleep``, ``--record-reads``). The query also stops
        (leaving the group) once :meth:`stop_file` of ``name`` exists.
        """
        command = [sys.executable, "-m", "tests.integration.delta_query", self._servers, self._topic, self._group,
                   str(self.table), str(self.checkpoint(name)), "--run-seconds", str(run_seconds),
                   "--max-offsets", str(self._max_offsets), "--stop-file", str(self.stop_file(name))]
        for option in options:
            command += ["--option", option]
        command += list(extra)
        env = {**os.environ, "KAFKA_GROUP_LOG_LEVEL": "INFO"}
        process = subprocess.Popen(command, cwd=REPO, start_new_session=True, env=env, stdout=subprocess.DEVNULL,
                                   stderr=open(self._workdir / f"{name}.log", "ab"))
        self._processes.append(process)
        return process

    def stop_file(self, name: str) -> pathlib.Path:
        """Create this file to make query ``name`` stop (``query.stop()``: its member leaves the group)."""
        return self._workdir / f"stop-{name}"

    def reads(self) -> Counter[Tuple[int, int]]:
        """How often each (partition, offset) was read by the queries started with ``--record-reads``
        pointing into the work folder as ``reads-<name>.txt``."""
        counts: Counter[Tuple[int, int]] = Counter()
        for path in self._workdir.glob("reads-*.txt"):
            for line in path.read_text().splitlines():
                partition, offset = line.split()
                counts[(int(partition), int(offset))] += 1
        return counts

    def checkpoint(self, name: str) -> pathlib.Path:
        return self._workdir / f"chk-{name}"

    def log(self, name: str) -> str:
        return (self._workdir / f"{name}.log").read_text()

    def rows(self) -> List[Tuple[int, int, int]]:
        """(partition, offset, writer pid) of every row in the table."""
        if not (self.table / "_delta_log").exists():
            return []
        data = DeltaTable(str(self.table)).to_pyarrow_dataset().to_table(
            columns=["partition", "offset", "writer_pid"])
        return list(zip(data.column("partition").to_pylist(), data.column("offset").to_pylist(),
                        data.column("writer_pid").to_pylist()))

    def landed(self) -> Counter[Tuple[int, int]]:
        """How often each (partition, offset) is in the table."""
        return Counter((p, o) for p, o, _ in self.rows())

    def wrote(self, process: "subprocess.Popen[bytes]") -> bool:
        """Whether ``process`` has landed any row."""
        return any(pid == process.pid for _, _, pid in self.rows())

    def __enter__(self) -> "GroupQueries":
        return self

    def __exit__(self, kind: Optional[Type[BaseException]], value: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> None:
        for process in self._processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)
