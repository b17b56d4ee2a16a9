"""The Delta commit failing half-way (its log on a full disk): nothing partial is visible, offsets do
not advance, and the next run recovers with every record exactly once."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
from collections import Counter
from typing import Iterator

import pytest
from deltalake import DeltaTable

from kafka_group.delta.offsets.offsets_table import transaction_id
from kafka_group.offsets import TopicPartition
from tests.support import Cluster, MakeTopic, REPO, delta_query_command, produce, table_offsets, tmpfs, unique_name

pytestmark = pytest.mark.integration


@pytest.fixture
def tiny_disk(tmp_path: pathlib.Path) -> Iterator[pathlib.Path]:
    """A 1 MiB tmpfs (needs root, as in CI's container); skipped where it cannot be mounted."""
    with tmpfs(tmp_path / "tiny", "1m") as mount:
        yield mount


def run_query(servers: str, topic: str, group: str, table: pathlib.Path, checkpoint: pathlib.Path,
              log: pathlib.Path) -> int:
    command = delta_query_command(servers, topic, group, table, checkpoint, "--available-now")
    with open(log, "ab") as err:
        return subprocess.run(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=err, timeout=300).returncode


def state(table: pathlib.Path, topic: str, group: str) -> tuple[Counter[tuple[int, int]], dict[int, int | None]]:
    dt = DeltaTable(str(table))
    rows = table_offsets(table)
    positions = {p: dt.transaction_version(transaction_id(group, TopicPartition(topic, p))) for p in range(2)}
    return rows, positions


def test_commit_on_a_full_disk_changes_nothing_and_the_next_run_recovers(
    kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path, tiny_disk: pathlib.Path
) -> None:
    topic, group = make_topic(2), unique_name("group")
    table, checkpoint, log = tmp_path / "table", tmp_path / "chk", tmp_path / "query.log"
    produce(kafka.bootstrap_servers, topic, {0: 50, 1: 50})
    assert run_query(kafka.bootstrap_servers, topic, group, table, checkpoint, log) == 0
    before = state(table, topic, group)
    assert before[1] == {0: 50, 1: 50}

    # Move the table's log onto the tiny disk and fill it up.
    for entry in (table / "_delta_log").iterdir():
        shutil.copy2(entry, tiny_disk / entry.name) if entry.is_file() else shutil.copytree(entry, tiny_disk / entry.name)
    shutil.rmtree(table / "_delta_log")
    os.symlink(tiny_disk, table / "_delta_log")
    with open(tiny_disk / "filler", "wb", buffering=0) as filler:
        try:
            while True:
                filler.write(b"\0" * 4096)
        except OSError:
            pass

    produce(kafka.bootstrap_servers, topic, {0: 30, 1: 30}, start=50)
    assert run_query(kafka.bootstrap_servers, topic, group, table, checkpoint, log) != 0
    assert "No space left on device" in log.read_text() or "os error 28" in log.read_text()
    assert state(table, topic, group) == before  # no partial data visible, offsets where they were

    os.unlink(tiny_disk / "filler")
    assert run_query(kafka.bootstrap_servers, topic, group, table, checkpoint, log) == 0
    rows, positions = state(table, topic, group)
    assert rows == Counter((p, o) for p in range(2) for o in range(80))
    assert positions == {0: 80, 1: 80}
