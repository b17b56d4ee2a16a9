"""The Spark standalone launcher's pure parts: the master's JSON, executor command lines, errors before a start."""

from __future__ import annotations

import os
import pathlib

import pytest

from kafka_group.errors import EmbeddedBrokerError
from kafka_group_devbroker.spark_standalone import SparkStandalone, alive_workers, executor_from_cmdline, spark_class


def test_alive_workers_counts_only_alive_ones() -> None:
    status = {"workers": [{"id": "w1", "state": "ALIVE"}, {"id": "w2", "state": "DEAD"},
                          {"id": "w3", "state": "ALIVE"}, "not a worker"]}
    assert alive_workers(status) == 2
    assert alive_workers({}) == 0
    assert alive_workers({"workers": "garbage"}) == 0


def test_executor_from_cmdline_reads_app_and_executor_ids() -> None:
    argv = ["/usr/lib/jvm/java-17/bin/java", "-cp", "/x/*", "-Xmx1024M",
            "org.apache.spark.executor.CoarseGrainedExecutorBackend", "--driver-url", "spark://CoarseGrainedScheduler@127.0.0.1:4041",
            "--executor-id", "3", "--hostname", "127.0.0.1", "--cores", "1", "--app-id", "app-20261127-0001",
            "--worker-url", "spark://Worker@127.0.0.1:4043"]
    assert executor_from_cmdline(argv) == ("app-20261127-0001", "3")


def test_executor_from_cmdline_ignores_other_processes() -> None:
    assert executor_from_cmdline(["java", "org.apache.spark.deploy.worker.Worker", "--executor-id", "1"]) is None
    assert executor_from_cmdline(["java", "org.apache.spark.executor.CoarseGrainedExecutorBackend", "--executor-id", "1"]) is None
    assert executor_from_cmdline([]) is None


def test_spark_class_names_a_folder_without_it(tmp_path: pathlib.Path) -> None:
    with pytest.raises(EmbeddedBrokerError, match=r"no executable .*bin/spark-class: point spark_home"):
        spark_class(str(tmp_path))


def test_not_started_says_so_and_bad_sizes_are_refused() -> None:
    cluster = SparkStandalone()
    with pytest.raises(EmbeddedBrokerError, match="not started"):
        cluster.master_url
    assert not cluster.running
    assert cluster.executor_pids() == []
    assert repr(cluster) == "SparkStandalone(not started)"
    cluster.stop()  # idempotent, nothing to stop
    with pytest.raises(EmbeddedBrokerError, match="workers >= 1 and cores >= 1, got 0 and 1"):
        SparkStandalone(workers=0)


def test_a_pid_that_no_longer_runs_the_executor_is_not_signalled() -> None:
    from kafka_group_devbroker.spark_standalone import ExecutorProcess, _still_executor

    assert not _still_executor(ExecutorProcess(pid=os.getpid(), app_id="app-1", executor_id="0", worker=0))
    assert not _still_executor(ExecutorProcess(pid=2**22 + 1, app_id="app-1", executor_id="0", worker=0))
