"""Finding 9: a scheduled ``Trigger.AvailableNow`` run started soon after its predecessor crashed.

The killed query's group member stays in the group until its session times out, so
the new run gets no partitions at first. It must not end, successfully, having read
nothing: it waits for the partitions to reach the run's end offsets (in the table)
and reads them once the group gives them to it.
"""

from __future__ import annotations

import pathlib
import os
import signal
from collections import Counter

import pytest

from tests.support import BackgroundProducer, Cluster, GroupQueries, create_topic, unique_name, wait_for

pytestmark = pytest.mark.integration

OPTIONS = ["kafka.session.timeout.ms=30000", "groupJoinTimeoutMs=2000"]


@pytest.mark.crash
def test_available_now_run_after_a_crash_lands_everything(kafka: Cluster, tmp_path: pathlib.Path) -> None:
    topic = create_topic(kafka, 4, "after-crash")
    producer = BackgroundProducer(kafka.bootstrap_servers, topic, 4, per_tick=0)
    with GroupQueries(kafka.bootstrap_servers, topic, unique_name("group"), tmp_path, max_offsets=40) as queries:
        producer.produce(50)
        crashed = queries.start("a", 600, OPTIONS)
        wait_for(lambda: len(queries.rows()) > 0, "the first batch", 180)
        os.killpg(crashed.pid, signal.SIGKILL)  # the driver dies: its member stays in the group
        crashed.wait(120)
        producer.produce(30)
        # The scheduled run, from the same checkpoint, right after the crash.
        run = queries.start("a", 600, OPTIONS, ["--available-now"])
        assert run.wait(300) == 0, queries.log("a")[-3000:]
        assert queries.landed() == producer.expected(), Counter(p for p, _ in queries.landed())


def test_available_now_run_fails_clearly_when_partitions_owned_elsewhere_never_move(
    kafka: Cluster, tmp_path: pathlib.Path
) -> None:
    """Another query of the group holds two partitions and lands nothing (its batch is held):
    the AvailableNow run reads the partitions it gets, then fails naming the ones it waited
    for and the option, instead of ending as if it had read everything."""
    topic = create_topic(kafka, 4, "never-moves")
    producer = BackgroundProducer(kafka.bootstrap_servers, topic, 4, per_tick=0)
    hold = tmp_path / "hold"
    hold.touch()
    with GroupQueries(kafka.bootstrap_servers, topic, unique_name("group"), tmp_path, max_offsets=40) as queries:
        producer.produce(20)
        queries.start("a", 600, ["revokeTimeoutMs=2000"], ["--hold-file", str(hold)])
        wait_for(lambda: "planned 40 records" in queries.log("a"), "the held query's first batch", 180)
        run = queries.start("b", 600, ["availableNowTimeoutMs=5000"], ["--available-now"])
        assert run.wait(300) != 0
        log = queries.log("b")
        assert "AvailableNowIncompleteError" in log and "availableNowTimeoutMs" in log, log[-3000:]
        assert "owned elsewhere" in log
        assert queries.landed() and all(n == 1 for n in queries.landed().values())
