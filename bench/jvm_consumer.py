"""Baseline (K): Kafka's own consumer benchmark (``kafka-consumer-perf-test``), the JVM client's
limit on this broker and machine.

It runs ``org.apache.kafka.tools.ConsumerPerformance`` from the ``kafka`` bundle that
:mod:`kafka_group_devbroker.jars` fetched for the broker (the class behind
``bin/kafka-consumer-perf-test.sh``), in its own JVM, subscribed to the whole
topic with a fresh group, until it has read every record.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from typing import Dict

from bench.workload import Workload

__all__ = ["ConsumerPerfResult", "consumer_perf_test"]


@dataclass(frozen=True)
class ConsumerPerfResult:
    """What ``kafka-consumer-perf-test`` printed.

    Attributes
    ----------
    records : int
        Records consumed.
    seconds : float
        Its whole run from the first poll (``end.time - start.time``), group join included.
    fetch_seconds : float
        The run without the group join (``fetch.time.ms``): what the rate is judged on, like
        the micro-batch time of the Spark runs, which leaves out the query's start.
    """

    records: int
    seconds: float
    fetch_seconds: float

    @property
    def rate(self) -> float:
        """Records per second of fetch time."""
        return self.records / self.fetch_seconds


def consumer_perf_test(servers: str, workload: Workload, *, timeout_ms: int = 120_000) -> ConsumerPerfResult:
    """Run ``kafka-consumer-perf-test`` over the whole topic of ``workload``.

    Parameters
    ----------
    servers : str
        Bootstrap servers.
    workload : Workload
        The topic and its record count.
    timeout_ms : int, default 120000
        The tool's ``--timeout``: the longest wait for a record.

    Returns
    -------
    ConsumerPerfResult
    """
    from kafka_group_devbroker.apache_kafka import _java  # the broker's own way to find Java 17
    from kafka_group_devbroker.jars import classpath

    with tempfile.TemporaryDirectory(prefix="consumer-perf-") as folder:
        config = os.path.join(folder, "consumer.properties")
        with open(config, "w") as f:
            f.write("auto.offset.reset=earliest\n")
        log4j = os.path.join(folder, "log4j2.properties")
        with open(log4j, "w") as f:
            f.write("rootLogger.level=ERROR\nrootLogger.appenderRef.stderr.ref=STDERR\n"
                    "appender.stderr.type=Console\nappender.stderr.name=STDERR\nappender.stderr.target=SYSTEM_ERR\n"
                    "appender.stderr.layout.type=PatternLayout\nappender.stderr.layout.pattern=%m%n\n")
        command = [
            _java(), "-Xmx1g", "-XX:+UseG1GC", f"-Dlog4j2.configurationFile={log4j}",
            "-cp", os.pathsep.join(classpath("kafka")), "org.apache.kafka.tools.ConsumerPerformance",
            "--bootstrap-server", servers, "--topic", workload.topic, "--messages", str(workload.records),
            "--group", f"bench-perf-{uuid.uuid4().hex[:8]}", "--timeout", str(timeout_ms),
            "--command-config", config, "--hide-header",
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_ms / 1000 + 120)
    if done.returncode != 0:
        raise RuntimeError(f"kafka-consumer-perf-test failed ({done.returncode}): {done.stderr[-2000:]}")
    return _parse(done.stdout, workload.records)


def _parse(stdout: str, expected: int) -> ConsumerPerfResult:
    """Read the tool's CSV line: start.time, end.time, data.consumed.in.MB, MB.sec,
    data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec."""
    lines = [line for line in stdout.splitlines() if line.count(",") >= 9]
    if not lines:
        raise RuntimeError(f"kafka-consumer-perf-test printed no result line: {stdout[-2000:]!r}")
    fields = [field.strip() for field in lines[-1].split(",")]
    values: Dict[str, float] = {
        "records": float(fields[4]), "rebalance_ms": float(fields[6]), "fetch_ms": float(fields[7]),
    }
    records = int(values["records"])
    if records < expected:
        raise RuntimeError(f"kafka-consumer-perf-test read {records:,} of {expected:,} records")
    total_ms = values["rebalance_ms"] + values["fetch_ms"]
    return ConsumerPerfResult(records, total_ms / 1000, values["fetch_ms"] / 1000)
