"""Integration tests of the embedded Kafka cluster (librdkafka mock brokers).

Needs the ``kafka-group-devbroker`` distribution installed (``scripts/venv.sh`` does).
Waits are bounded so a broken cluster fails instead of hanging; nothing asserts
how long an operation takes.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any, Iterator, Optional

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition  # noqa: E402

from kafka_group_devbroker import EmbeddedKafka  # noqa: E402
from kafka_group.errors import EmbeddedBrokerError  # noqa: E402
from tests.support import wait_for  # noqa: E402

BOUND_S = 180.0  # upper bound for any wait; only there to avoid hanging
CLIENT_CONF = {"fetch.queue.backoff.ms": 20}


# -- helpers ---------------------------------------------------------------------


def process_gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (absent, or a zombie nobody reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            state = stat.read().rsplit(b")", 1)[1].split()[0]
        return state in (b"Z", b"X")
    except FileNotFoundError:
        return True
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


def read_line(stream: Any, bound: float = BOUND_S) -> bytes:
    """One line from a pipe, waiting at most ``bound`` seconds."""
    with selectors.DefaultSelector() as sel:
        sel.register(stream, selectors.EVENT_READ)
        if not sel.select(timeout=bound):
            pytest.fail(f"no line from the child within {bound:g} s")
    line: bytes = stream.readline()
    return line


def kill_if_running(proc: "subprocess.Popen[bytes]") -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=10)


def produce(bootstrap: str, topic: str, count: int, partitions: int) -> list[Optional[KafkaError]]:
    errors: list[Optional[KafkaError]] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(
            topic, key=str(i).encode(), value=f"value-{i}".encode(), partition=i % partitions,
            on_delivery=lambda err, msg: errors.append(err),
        )
        producer.poll(0)
    remaining = producer.flush(BOUND_S)
    assert remaining == 0, f"{remaining} message(s) not delivered"
    return errors


def key(message: Message) -> bytes:
    """The key of a consumed record (every record here has one)."""
    found = message.key()
    assert found is not None, message
    return found


def partition(message: Message) -> int:
    """The partition of a consumed record."""
    found = message.partition()
    assert found is not None, message
    return found


def offset(message: Message) -> int:
    """The offset of a consumed record."""
    found = message.offset()
    assert found is not None, message
    return found


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[Message]:
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"test-{topic}", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", **CLIENT_CONF,
    })
    try:
        consumer.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(partitions)])
        messages: list[Message] = []

        def read_all() -> bool:
            for msg in consumer.consume(num_messages=expected - len(messages), timeout=1.0):
                assert msg.error() is None, msg.error()
                messages.append(msg)
            return len(messages) >= expected

        wait_for(read_all, f"{expected} messages of {topic}", BOUND_S, interval_s=0)
        return messages
    finally:
        consumer.close()


# -- fixtures --------------------------------------------------------------------


@pytest.fixture(scope="module")
def kafka() -> Iterator[EmbeddedKafka]:
    cluster = EmbeddedKafka(brokers=3)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def host_process() -> Iterator["subprocess.Popen[bytes]"]:
    """A broker host launched the way a parent would, with stdin as a pipe."""
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kafka_group_devbroker.broker_host", "--exit-on-stdin-eof", "--brokers", "1"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=child_env(),
        )
        try:
            yield proc
        finally:
            kill_if_running(proc)
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None and not pipe.closed:
                    pipe.close()


# -- tests -----------------------------------------------------------------------


def test_produce_and_consume_1000_messages_on_8_partitions(kafka: EmbeddedKafka) -> None:
    kafka.create_topic("orders", 8)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    metadata = producer.list_topics("orders", timeout=BOUND_S)
    assert len(metadata.brokers) == 3
    assert sorted(metadata.topics["orders"].partitions) == list(range(8))

    errors = produce(kafka.bootstrap_servers, "orders", 1000, 8)
    assert errors == [None] * 1000

    messages = consume_all(kafka.bootstrap_servers, "orders", 8, 1000)
    assert len(messages) == 1000
    assert sorted(int(key(m)) for m in messages) == list(range(1000))
    per_partition: dict[int, list[int]] = {}
    for msg in messages:
        assert msg.value() == f"value-{int(key(msg))}".encode()
        assert int(key(msg)) % 8 == msg.partition()
        per_partition.setdefault(partition(msg), []).append(offset(msg))
    assert {p: sorted(offsets) for p, offsets in per_partition.items()} == {p: list(range(125)) for p in range(8)}

    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": "wm", **CLIENT_CONF})
    try:
        for p in range(8):
            assert consumer.get_watermark_offsets(TopicPartition("orders", p), timeout=BOUND_S) == (0, 125)
    finally:
        consumer.close()


def test_ping_reports_cluster_state(kafka: EmbeddedKafka) -> None:
    kafka.create_topic("pinged", 2)
    info = kafka.ping()
    assert info["bootstrap_servers"] == kafka.bootstrap_servers
    assert info["pid"] == kafka.pid
    assert info["brokers"] == 3
    assert info["topics"]["pinged"] == 2


def test_create_existing_topic_fails_with_kafka_code(kafka: EmbeddedKafka) -> None:
    kafka.create_topic("twice", 1)
    with pytest.raises(EmbeddedBrokerError) as excinfo:
        kafka.create_topic("twice", 1)
    assert excinfo.value.kafka_error_code == 36  # TOPIC_ALREADY_EXISTS


def test_broker_down_and_up(kafka: EmbeddedKafka) -> None:
    kafka.create_topic("flaky", 6)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    metadata = producer.list_topics("flaky", timeout=BOUND_S)
    address = {b.id: (b.host, b.port) for b in metadata.brokers.values()}
    led_by_2 = [p for p, pm in metadata.topics["flaky"].partitions.items() if pm.leader == 2]

    def accepts(broker_id: int) -> bool:
        try:
            socket.create_connection(address[broker_id], timeout=5).close()
        except OSError:
            return False
        return True

    assert accepts(2)
    kafka.broker_down(2)
    try:
        assert not accepts(2)
        assert accepts(1) and accepts(3)
        # Messages for partitions led by broker 2 wait in the producer until it is back.
        for p in led_by_2:
            producer.produce("flaky", value=b"while-down", partition=p)
        producer.poll(0)
    finally:
        kafka.broker_up(2)
    assert accepts(2)
    assert producer.flush(BOUND_S) == 0

    errors = produce(kafka.bootstrap_servers, "flaky", 60, 6)
    assert errors == [None] * 60
    messages = consume_all(kafka.bootstrap_servers, "flaky", 6, 60 + len(led_by_2))
    assert len(messages) == 60 + len(led_by_2)

    with pytest.raises(EmbeddedBrokerError):
        kafka.broker_down(42)


def test_push_request_errors_fails_next_produce(kafka: EmbeddedKafka) -> None:
    kafka.create_topic("errors", 1)
    kafka.push_request_errors(0, [10])  # Produce -> MESSAGE_TOO_LARGE, not retried
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    results: list[Optional[KafkaError]] = []
    for _ in range(2):
        producer.produce("errors", value=b"x", partition=0, on_delivery=lambda err, msg: results.append(err))
        assert producer.flush(BOUND_S) == 0
    assert results[0] is not None and results[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert results[1] is None


def test_delete_records_moves_low_watermark(kafka: EmbeddedKafka) -> None:
    kafka.create_topic("retention", 1)
    assert produce(kafka.bootstrap_servers, "retention", 100, 1) == [None] * 100
    kafka.delete_records("retention", 0, 40)
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": "ret", **CLIENT_CONF})
    try:
        assert consumer.get_watermark_offsets(TopicPartition("retention", 0), timeout=BOUND_S) == (40, 100)
    finally:
        consumer.close()
    messages = consume_all(kafka.bootstrap_servers, "retention", 1, 60)
    assert [m.offset() for m in messages] == list(range(40, 100))
    with pytest.raises(EmbeddedBrokerError) as excinfo:
        kafka.delete_records("retention", 0, 1000)
    assert excinfo.value.kafka_error_code == 1  # OFFSET_OUT_OF_RANGE


def test_delete_topic(kafka: EmbeddedKafka) -> None:
    kafka.create_topic("doomed", 2)
    kafka.delete_topic("doomed")
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "allow.auto.create.topics": False})
    assert "doomed" not in producer.list_topics(timeout=BOUND_S).topics
    with pytest.raises(EmbeddedBrokerError):
        kafka.delete_topic("doomed")


def test_attach_controls_without_owning(kafka: EmbeddedKafka) -> None:
    attached = EmbeddedKafka.attach(kafka.control_port)
    assert attached.bootstrap_servers == kafka.bootstrap_servers
    assert attached.pid == kafka.pid
    with attached:
        attached.create_topic("via-attach", 3)
    assert kafka.running
    assert kafka.ping()["topics"]["via-attach"] == 3


def test_topics_at_start_and_stop_ends_host() -> None:
    cluster = EmbeddedKafka(brokers=1, topics={"initial": 5})
    try:
        cluster.start()
        pid = cluster.pid
        metadata = Producer({"bootstrap.servers": cluster.bootstrap_servers}).list_topics("initial", timeout=BOUND_S)
        assert len(metadata.topics["initial"].partitions) == 5
    finally:
        cluster.stop()
    assert not cluster.running
    assert process_gone(pid)
    cluster.stop()  # idempotent


def test_start_failure_reports_host_stderr() -> None:
    cluster = EmbeddedKafka(brokers=1, topics={"bad": 0})
    try:
        with pytest.raises(EmbeddedBrokerError, match="partitions must be at least 1"):
            cluster.start()
    finally:
        cluster.stop()


def test_host_exits_when_stdin_closes(host_process: "subprocess.Popen[bytes]") -> None:
    assert host_process.stdout is not None and host_process.stdin is not None
    ready = json.loads(read_line(host_process.stdout))
    assert ready["pid"] == host_process.pid
    assert set(ready) == {"bootstrap_servers", "control_port", "pid"}
    assert EmbeddedKafka.attach(ready["control_port"]).ping()["pid"] == host_process.pid

    host_process.stdin.close()  # what the OS does when the parent dies
    assert host_process.wait(timeout=BOUND_S) == 0


def test_host_exits_on_sigterm(host_process: "subprocess.Popen[bytes]") -> None:
    assert host_process.stdout is not None
    json.loads(read_line(host_process.stdout))
    host_process.send_signal(signal.SIGTERM)
    assert host_process.wait(timeout=BOUND_S) == 0


def test_host_exits_when_parent_is_killed() -> None:
    script = (
        "import sys, time\n"
        "from kafka_group_devbroker import EmbeddedKafka\n"
        "k = EmbeddedKafka().start()\n"
        "print(k.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, env=child_env())
    host_pid: Optional[int] = None
    try:
        assert parent.stdout is not None
        host_pid = int(read_line(parent.stdout))
        assert not process_gone(host_pid)
        parent.kill()  # SIGKILL: no atexit, no cleanup in the parent
        parent.wait(timeout=BOUND_S)
        wait_for(lambda: process_gone(host_pid or 0), f"host pid {host_pid} to exit", BOUND_S, interval_s=0.05)
    finally:
        kill_if_running(parent)
        if parent.stdout is not None:
            parent.stdout.close()
        if host_pid is not None and not process_gone(host_pid):
            os.kill(host_pid, signal.SIGKILL)
