"""The source, DeltaSink and flow control through Spark Connect sessions.

Each Connect client is a process of its own with its own local Connect server
(``tests/integration/connect_query.py``): ``builder.remote("local[2]")`` turns a
whole process into Connect mode, and this process keeps the classic session of the
other tests. Two clients (two "clusters") serve every scenario of the module; the
tests produce to the real Kafka and read the Delta table themselves.
"""

from __future__ import annotations

import json
import pathlib
import queue
import subprocess
import sys
import threading
from collections import Counter
from typing import IO, Any, Dict, Iterator, List, Tuple

import pytest

from kafka_group_devbroker import ApacheKafka
from tests.support import (BROKER_ENGINE, Cluster, MakeTopic, describe_group, expected, freeze, group_committed,
                           kill_survivors, listening_addresses, produce, source_runners, table_offsets, table_records,
                           unique_name, wait_for, wait_until_stopped_query_ended)

pytestmark = pytest.mark.integration

REPO = pathlib.Path(__file__).resolve().parents[2]


class ConnectClient:
    """A ``connect_query`` process: one Connect session on its own local Connect server."""

    def __init__(self, name: str, log: pathlib.Path) -> None:
        self.name = name
        self.port = 0  # its Connect server's, once ready
        self._log = open(log, "w")
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.connect_query", name], cwd=REPO,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True,
        )
        self._answers: "queue.Queue[str]" = queue.Queue()
        assert self._process.stdout is not None
        threading.Thread(target=self._read, args=(self._process.stdout,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self._answers.put(line)
        self._answers.put("")

    @property
    def pid(self) -> int:
        """The client's process (its Connect server's JVM is a child of it)."""
        return self._process.pid

    def ready(self, timeout_s: float = 180) -> None:
        """Wait for the client's Connect server to be up (its port is then :attr:`port`)."""
        answer = self._next(timeout_s)
        assert answer.get("ready"), f"client {self.name} did not start"
        self.port = int(answer["port"])

    def call(self, timeout_s: float = 240, **command: Any) -> Dict[str, Any]:
        """Send one command; return its answer (``ok`` false carries ``error``)."""
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps(command) + "\n")
        self._process.stdin.flush()
        return self._next(timeout_s)

    def ok(self, timeout_s: float = 240, **command: Any) -> Dict[str, Any]:
        """:meth:`call`, asserting that the command succeeded."""
        answer = self.call(timeout_s, **command)
        assert answer["ok"], f"{self.name}: {command['op']} failed: {answer.get('error')}"
        return answer

    def _next(self, timeout_s: float) -> Dict[str, Any]:
        try:
            line = self._answers.get(timeout=timeout_s)
        except queue.Empty:
            raise AssertionError(f"client {self.name} did not answer within {timeout_s:g} s") from None
        if not line:
            raise AssertionError(f"client {self.name} exited (code {self._process.wait(30)}); see its log")
        answer: Dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        """Quit the client (its queries stop, its group members leave) and its server."""
        try:
            if self._process.poll() is None:
                assert self._process.stdin is not None
                self._process.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self._process.stdin.flush()
                self._process.wait(120)
        except (OSError, subprocess.TimeoutExpired):
            self._process.kill()
            self._process.wait(30)
        finally:
            self._log.close()


@pytest.fixture(scope="module")
def clients(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tuple[ConnectClient, ConnectClient]]:
    """Two Connect clients, each with its own local Connect server (started side by side)."""
    logs = tmp_path_factory.mktemp("connect-logs")
    first = ConnectClient("connect-a", logs / "a.log")
    second = ConnectClient("connect-b", logs / "b.log")
    try:
        first.ready()
        second.ready()
        yield first, second
    finally:
        first.close()
        second.close()


def query_command(kafka: Cluster, topic: str, group: str, table: pathlib.Path,
                  checkpoint: pathlib.Path) -> Dict[str, Any]:
    return {"servers": kafka.bootstrap_servers, "topic": topic, "group": group, "table": str(table),
            "checkpoint": str(checkpoint)}


def owned(client: ConnectClient, query: str) -> List[int]:
    """The partitions the query owns, from ``flow.status`` over Connect."""
    rows = client.ok(op="flow", call="status", query=query)["result"]
    return sorted(int(row["partition"]) for row in rows)


def test_the_local_connect_server_listens_on_loopback(clients: Tuple[ConnectClient, ConnectClient]) -> None:
    """``local_connect_session`` opens a gRPC endpoint: on 127.0.0.1 unless the settings name an address."""
    for client in clients:
        assert listening_addresses(client.port) == {"127.0.0.1"}, client.name


def test_delta_sink_lands_every_record_once_over_connect(
    clients: Tuple[ConnectClient, ConnectClient], kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    client = clients[0]
    topic, group, table = make_topic(3), unique_name("group"), tmp_path / "table"
    command = query_command(kafka, topic, group, table, tmp_path / "chk")
    produce(kafka.bootstrap_servers, topic, {p: 30 for p in range(3)})
    client.ok(op="available_now", **command)
    assert table_records(table) == expected(topic, {p: 30 for p in range(3)})

    # A second run from the same checkpoint lands only what is new.
    produce(kafka.bootstrap_servers, topic, {p: 20 for p in range(3)}, start=30)
    client.ok(op="available_now", **command)
    assert table_records(table) == expected(topic, {p: 50 for p in range(3)})

    # A sink handed another query's checkpoint refuses before writing anything.
    produce(kafka.bootstrap_servers, topic, {p: 5 for p in range(3)}, start=50)
    wrong = client.call(op="available_now", **{**command, "checkpoint": str(tmp_path / "chk-2"),
                                                "sink_checkpoint": str(tmp_path / "chk")})
    # pyspark 4.2: the batch's Connect session lists the running query, whose id is not the one in
    # chk/metadata. pyspark 4.3: that session lists no query, and the second check refuses: chk has
    # already committed the batch Spark is running. Either way nothing is written.
    assert not wrong["ok"], wrong
    assert ("is the checkpoint of query" in wrong["error"]
            or "has already committed batch 0, which Spark is running now" in wrong["error"]), wrong["error"]
    assert "checkpoint_location=" in wrong["error"]
    assert table_records(table) == expected(topic, {p: 50 for p in range(3)})


@pytest.mark.parametrize("scd_type", [1, 2])
def test_the_keyed_sink_with_a_column_sequence_over_connect_equals_the_oracle(
    clients: Tuple[ConnectClient, ConnectClient], kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path,
    scd_type: int,
) -> None:
    """``DeltaSink(keys=..., sequence_by=F.col("seq"))`` built in a Connect client (a Connect Column, sent to the
    server with the sink): late events and deletes, in two runs, equal the oracle. (A Kafka tombstone has no
    ``seq``: the sink refuses a NULL sequence, so these events have none.)"""
    import random

    from tests.cdc_support import produce_events, random_events, scd1_oracle, scd2_oracle, table_rows

    rng = random.Random(40 + scd_type)
    topic, group, table = make_topic(2), unique_name("group"), tmp_path / "table"
    first = random_events(rng, 10, 80, 2, shuffle_seq=True)
    second = random_events(rng, 10, 60, 2, seq_from=20, shuffle_seq=True)  # sequences among the first run's
    rounds = [[(p, k, {**v, "seq": v["seq"] * 2}) for p, k, v in first if v is not None],
              [(p, k, {**v, "seq": v["seq"] * 2 + 1}) for p, k, v in second if v is not None]]
    command = {**query_command(kafka, topic, group, table, tmp_path / "chk"), "keyed": {"scd_type": scd_type}}
    for events in rounds:
        produce_events(kafka.bootstrap_servers, topic, events)
        clients[0].ok(op="available_now", **command)
    if scd_type == 1:
        want = sorted(((k, v, s) for k, (v, s) in scd1_oracle(rounds, by_offset=False).items()), key=repr)
        assert table_rows(table, ["id", "v", "__SEQUENCE"]) == want
    else:
        assert table_rows(table, ["id", "v", "__START_AT", "__END_AT"]) == scd2_oracle(rounds, by_offset=False)


def test_delta_sink_under_connect_needs_the_checkpoint_location(
    clients: Tuple[ConnectClient, ConnectClient], tmp_path: pathlib.Path
) -> None:
    answer = clients[0].call(op="sink_without_checkpoint", table=str(tmp_path / "table"))
    assert not answer["ok"]
    assert answer["error"].startswith("ConfigError")
    assert "checkpoint_location" in answer["error"]


def test_the_jvm_metrics_listener_says_it_needs_a_classic_session(
    clients: Tuple[ConnectClient, ConnectClient],
) -> None:
    answer = clients[0].call(op="metrics_listener")
    assert not answer["ok"]
    assert answer["error"].startswith("JavaRuntimeError") and "not Spark Connect" in answer["error"]


def test_pause_and_resume_over_connect(
    clients: Tuple[ConnectClient, ConnectClient], kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    client = clients[0]
    topic, group, table = make_topic(4), unique_name("group"), tmp_path / "table"
    produce(kafka.bootstrap_servers, topic, {p: 20 for p in range(4)})
    query = client.ok(op="start", **query_command(kafka, topic, group, table, tmp_path / "chk"))["query"]
    try:
        wait_for(lambda: len(table_offsets(table)) == 80, "the first records")
        paused = client.ok(op="flow", call="pause", query=query, topic=topic, partitions=[1, 2])["result"]
        assert sorted(paused) == [f"{topic}-1", f"{topic}-2"]
        refused = client.call(op="flow", call="pause", query=query, topic="no-such-topic")
        assert not refused["ok"] and "topic 'no-such-topic' is not read by this query" in refused["error"]

        produce(kafka.bootstrap_servers, topic, {p: 10 for p in range(4)}, start=20)

        def count(partition: int) -> int:
            return sum(n for (p, _), n in table_offsets(table).items() if p == partition)

        wait_for(lambda: count(0) == 30 and count(3) == 30, "the unpaused partitions")
        assert count(1) == 20 and count(2) == 20
        wait_for(lambda: {r["partition"]: r["lag"] for r in client.ok(op="flow", call="status", query=query)["result"]
                          if r["paused"]} == {1: 10, 2: 10}, "the status to show the paused partitions' lag")
        resumed = client.ok(op="flow", call="resume", query=query, topic=topic)["result"]
        assert sorted(resumed) == [f"{topic}-1", f"{topic}-2"]
        wait_for(lambda: count(1) == 30 and count(2) == 30, "the resumed partitions")
    finally:
        stopped = client.ok(op="stop", query=query)
    assert stopped["query_error"] is None
    assert table_records(table) == expected(topic, {p: 30 for p in range(4)})


def test_two_connect_clusters_share_a_group_and_take_over(
    clients: Tuple[ConnectClient, ConnectClient], kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    first, second = clients
    topic, group, table = make_topic(4), unique_name("group"), tmp_path / "table"
    produce(kafka.bootstrap_servers, topic, {p: 20 for p in range(4)})
    query_a = first.ok(op="start", **query_command(kafka, topic, group, table, tmp_path / "chk-a"))["query"]
    query_b = second.ok(op="start", **query_command(kafka, topic, group, table, tmp_path / "chk-b"))["query"]
    try:
        wait_for(lambda: len(owned(first, query_a)) == 2 and len(owned(second, query_b)) == 2,
                 "both clusters to own partitions", 180)
        assert set(owned(first, query_a)) | set(owned(second, query_b)) == {0, 1, 2, 3}
        produce(kafka.bootstrap_servers, topic, {p: 10 for p in range(4)}, start=20)
        wait_for(lambda: len(table_offsets(table)) == 120, "the records produced while both run", 180)
        assert second.ok(op="stop", query=query_b)["query_error"] is None
        wait_for(lambda: owned(first, query_a) == [0, 1, 2, 3], "the first cluster to take every partition", 180)
        produce(kafka.bootstrap_servers, topic, {p: 10 for p in range(4)}, start=30)
        wait_for(lambda: len(table_offsets(table)) == 160, "the records produced after the take-over", 180)
    finally:
        stopped = first.ok(op="stop", query=query_a)
        second.call(op="stop", query=query_b)  # already stopped unless the test failed first
    assert stopped["query_error"] is None
    assert table_records(table) == Counter(expected(topic, {p: 40 for p in range(4)}))


def test_an_available_now_run_over_connect_leaves_its_last_batch_in_the_groups_offsets(
    clients: Tuple[ConnectClient, ConnectClient], kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    """Issue 33, finding 7: with ``offsets.table``, ``maxOffsetsPerTrigger`` and ``Trigger.AvailableNow`` under
    Connect, the group's committed offsets lacked the last batch once ``awaitTermination()`` returned (the
    classic session had them): Kafka's lag tools showed it as lag until the next run."""
    topic, group, table = make_topic(2), unique_name("group"), tmp_path / "table"
    produce(kafka.bootstrap_servers, topic, {0: 1500, 1: 1500})
    clients[0].ok(op="available_now", options={"maxOffsetsPerTrigger": "1500"},
                  **query_command(kafka, topic, group, table, tmp_path / "chk"))
    assert table_records(table) == expected(topic, {0: 1500, 1: 1500})
    assert group_committed(kafka.bootstrap_servers, group, topic, 2) == {0: 1500, 1: 1500}
    if BROKER_ENGINE == "kafka":  # Kafka's own lag tool agrees
        rows = describe_group(kafka.bootstrap_servers, group)
        assert {p: (rows[p]["CURRENT-OFFSET"], rows[p]["LAG"]) for p in rows} == {0: ("1500", "0"), 1: ("1500", "0")}


@pytest.mark.crash
@pytest.mark.skipif(BROKER_ENGINE != "kafka", reason="freezes and kills a real Apache Kafka node")
def test_a_query_stopped_while_its_brokers_are_down_leaves_no_process_over_connect(tmp_path: pathlib.Path) -> None:
    """A query stopped under Connect while its cluster does not answer, then its session, then the cluster gone:
    its source runner (a child of the Connect server's JVM) must end, as under a classic session
    (``tests/integration/test_stop_during_outage.py``, which says how it hung). Its own client and cluster: the
    module's clients keep their sessions, the run's ``kafka`` its brokers."""
    topic, group, table = unique_name("outage"), unique_name("group"), tmp_path / "table"
    cluster = ApacheKafka(1, {topic: 3}).start()
    client = ConnectClient("connect-outage", tmp_path / "client.log")
    found: Dict[int, str] = {}
    try:
        client.ready()
        produce(cluster.bootstrap_servers, topic, {p: 20 for p in range(3)})
        query = client.ok(op="start", **query_command(cluster, topic, group, table, tmp_path / "chk"))["query"]
        wait_for(lambda: len(table_offsets(table)) == 60, "the first records", 240)
        found.update(source_runners(client.pid))
        assert len(found) == 1, found  # the query's one source runner, a child of the Connect server's JVM
        freeze(cluster)  # the cluster stops answering
        client.call(op="stop", query=query)  # the user stops the query (its answer does not matter here)
        client.close()  # and the session
        cluster.broker_down(1)  # the cluster goes away
        wait_until_stopped_query_ended(found, "connect", tmp_path / "client.log")
    finally:
        client.close()
        kill_survivors(found)
        cluster.stop()
