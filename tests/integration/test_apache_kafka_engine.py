"""The Apache Kafka engine of the development brokers: the CLI, real kills and restarts, no process left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import List

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.support import Cluster, apache, create_topic, new_consumer, wait_for

pytestmark = pytest.mark.integration


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes: it runs nothing.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _children(pid: int) -> List[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _cli(*args: str) -> "subprocess.Popen[str]":
    return subprocess.Popen(
        [sys.executable, "-m", "kafka_group_devbroker", *args],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )


def test_cli_prints_bootstrap_servers_first_and_stops_every_jvm_on_sigterm() -> None:
    cli = _cli("--engine", "kafka", "--brokers", "3", "--topic", "orders:8")
    try:
        assert cli.stdout is not None
        first = cli.stdout.readline().strip()
        assert first.startswith("bootstrap.servers = 127.0.0.1:"), first
        servers = first.split(" = ", 1)[1]
        assert len(servers.split(",")) == 3
        jvms = _children(cli.pid)
        assert len(jvms) == 3, jvms
        metadata = Consumer({"bootstrap.servers": servers, "group.id": "probe"}).list_topics("orders", timeout=30)
        assert len(metadata.topics["orders"].partitions) == 8
        cli.send_signal(signal.SIGTERM)
        assert cli.wait(timeout=180) == 0
        wait_for(lambda: not any(_alive(pid) for pid in jvms), "every broker JVM to exit", 120)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()


def test_brokers_die_with_a_killed_parent() -> None:
    cli = _cli("--engine", "kafka", "--brokers", "1")
    try:
        assert cli.stdout is not None
        assert cli.stdout.readline().startswith("bootstrap.servers = ")
        jvms = _children(cli.pid)
        assert jvms
        cli.kill()  # SIGKILL: no handler runs, only the kernel's parent-death signal
        cli.wait()
        wait_for(lambda: not any(_alive(pid) for pid in jvms), "the orphaned broker JVM to die", 120)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()


def test_killed_broker_restarts_on_its_data_and_replicas_keep_every_record(kafka_cluster: Cluster) -> None:
    if kafka_cluster.engine != "kafka":
        pytest.skip("real kills need Apache Kafka")
    topic = create_topic(kafka_cluster, 3, "restart")
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "acks": "all"})
    for i in range(300):
        producer.produce(topic, value=str(i).encode(), partition=i % 3)
    assert producer.flush(30) == 0
    apache(kafka_cluster).kill_broker(2)
    for i in range(300, 600):  # written while node 2 is dead: the others lead
        producer.produce(topic, value=str(i).encode(), partition=i % 3)
    assert producer.flush(60) == 0
    apache(kafka_cluster).start_broker(2)
    consumer = new_consumer(kafka_cluster.bootstrap_servers, {"enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
    seen: set[int] = set()

    def read_all() -> bool:
        for message in consumer.consume(600, timeout=1):
            value = message.value()
            if message.error() is None and value is not None:
                seen.add(int(value))
        return len(seen) >= 600

    try:
        wait_for(read_all, "the 600 records", 180, interval_s=0)
    finally:
        consumer.close()
    assert seen == set(range(600))
