"""Two queries of one consumer group writing one Delta table: one is killed and comes back."""

from __future__ import annotations

import pathlib
import os
import signal

import pytest

from tests.support import BackgroundProducer, Cluster, GroupQueries, MakeTopic, unique_name, wait_for

pytestmark = pytest.mark.integration


def test_two_queries_one_group_one_killed_and_restarted(
    kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    topic = make_topic(6)
    producer = BackgroundProducer(kafka.bootstrap_servers, topic, 6, per_tick=5)
    with GroupQueries(kafka.bootstrap_servers, topic, unique_name("group"), tmp_path, max_offsets=200) as queries:
        try:
            producer.produce(50)
            first, second = queries.start("a", 240), queries.start("b", 240)
            producer.start()
            wait_for(lambda: queries.wrote(first) and queries.wrote(second), "both queries to land records", 180)
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(120)
            before = len(queries.rows())
            wait_for(lambda: len(queries.rows()) > before + 60, "the survivor to keep landing", 120)
            again = queries.start("a", 240)
            wait_for(lambda: queries.wrote(again), "the restarted query to get partitions back", 180)
        finally:
            producer.stop()
        wait_for(lambda: queries.landed() == producer.expected(), "every produced record to land exactly once", 180)
