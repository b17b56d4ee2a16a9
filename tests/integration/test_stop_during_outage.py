"""A query stopped while its brokers are down leaves no process behind (classic session).

Seen after a run: the driver-side streaming source runner of a query stopped while its Kafka cluster was
gone still ran 30 minutes later, its parent gone, SIGTERM ignored: its SIGTERM handler was leaving the
group, inside a synchronous offset commit that waits for a coordinator for ever. Here, as a user meets it:
records flow into Delta, the cluster stops answering (its broker's JVM stopped with SIGSTOP: connections
stay open, nothing answers), the user stops the query and the session, the cluster goes away (SIGKILL);
every process the query's driver started must end within a bound. The same under Spark Connect:
``tests/integration/test_spark_connect.py``. A broker that is killed outright, not frozen, refuses
connections, and the client gives up by itself: the frozen one is the case that hung.

The cluster is this test's own Apache Kafka (the run's ``kafka`` fixture must stay up for the other tests).
"""

from __future__ import annotations

import pathlib
import subprocess

import pytest

from kafka_group_devbroker import ApacheKafka
from tests.support import (BROKER_ENGINE, REPO, delta_query_command, freeze, kill_survivors, produce, source_runners,
                           table_offsets, unique_name, wait_for, wait_until_stopped_query_ended)
from tests.support_child_jvm import child_env

pytestmark = [
    pytest.mark.integration,
    pytest.mark.crash,
    pytest.mark.skipif(BROKER_ENGINE != "kafka", reason="freezes and kills a real Apache Kafka node"),
]


def test_a_query_stopped_while_its_brokers_are_down_leaves_no_process(tmp_path: pathlib.Path) -> None:
    topic, group, table = unique_name("outage"), unique_name("group"), tmp_path / "table"
    cluster = ApacheKafka(1, {topic: 3}).start()
    runners: dict[int, str] = {}
    stop_file = tmp_path / "stop"
    log = open(tmp_path / "query.log", "wb")
    command = delta_query_command(cluster.bootstrap_servers, topic, group, table, tmp_path / "chk",
                                  "--run-seconds", "600", "--stop-file", str(stop_file))
    driver = subprocess.Popen(command, cwd=REPO, start_new_session=True, stdout=subprocess.DEVNULL, stderr=log,
                              env=child_env({"KAFKA_GROUP_LOG_LEVEL": "INFO"}))
    try:
        produce(cluster.bootstrap_servers, topic, {p: 20 for p in range(3)})
        wait_for(lambda: len(table_offsets(table)) == 60 or driver.poll() is not None, "the first records", 240)
        assert driver.poll() is None, (tmp_path / "query.log").read_text()[-3000:]
        runners.update(source_runners(driver.pid))
        assert len(runners) == 1, runners  # the query's one source runner, a child of the driver's JVM
        freeze(cluster)  # the cluster stops answering while the query runs
        stop_file.touch()  # the user stops the query and the session
        try:
            driver.wait(180)
        except subprocess.TimeoutExpired:
            pytest.fail("the driver did not end within 180 s of query.stop() and spark.stop()")
        cluster.broker_down(1)  # the cluster goes away
        wait_until_stopped_query_ended(runners, "classic", tmp_path / "query.log")
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait(30)
        kill_survivors(runners)
        log.close()
        cluster.stop()
