"""The pieces of ``examples/demo.py``: a live producer, the member processes and the final check.

A member is ``examples/orders_to_delta.py`` in a process of its own (a Spark driver with its JVM and
Python workers, in a process group of its own so that SIGKILL reaches all of them). It reports
each landed batch as a JSON line on stdout; its stderr (Spark's log) goes to a file under the
demo's ``logs/`` folder.
"""

from __future__ import annotations

import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Dict, List, Optional, Tuple

TOPIC = "orders"
GROUP = "orders-bronze"
PARTITIONS = 8
#: The file that marks a folder as the demo's output (deleted without asking when the demo runs again).
MARKER = ".kafka-group-demo"
MEMBER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "orders_to_delta.py")


class DemoError(Exception):
    """A step of the demo did not happen; the message says which and where to look."""


@dataclass
class Produced:
    """What the producer wrote: records acknowledged, and per partition the first and end offsets."""

    count: int
    starts: Dict[int, int]
    ends: Dict[int, int]


class OrderProducer:
    """Produces JSON order events at a steady rate from a thread of its own until :meth:`finish`."""

    def __init__(self, servers: str, *, rate: int, seed: int) -> None:
        from confluent_kafka import Consumer, Producer
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]  # re-exported without __all__

        admin = AdminClient({"bootstrap.servers": servers})
        if TOPIC not in admin.list_topics(timeout=30).topics:  # a cluster of yours (the embedded one has it)
            admin.create_topics([NewTopic(TOPIC, PARTITIONS)])[TOPIC].result(30)
        probe = Consumer({"bootstrap.servers": servers, "group.id": "orders-demo-probe", "enable.auto.commit": False})
        try:
            partitions = sorted(probe.list_topics(TOPIC, timeout=30).topics[TOPIC].partitions)
            self.starts = {p: self._high(probe, p) for p in partitions}
        finally:
            probe.close()
        self._producer: Optional[Any] = Producer({"bootstrap.servers": servers, "linger.ms": 20})
        self._rate, self._rng = rate, random.Random(seed)
        self._ends = dict(self.starts)
        self._count, self._failed, self._sent = 0, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="order-producer", daemon=True)

    @staticmethod
    def _high(consumer: Any, partition: int) -> int:
        from confluent_kafka import TopicPartition

        return int(consumer.get_watermark_offsets(TopicPartition(TOPIC, partition), timeout=30)[1])

    def starting_offsets_json(self) -> str:
        """``startingOffsets`` for the members: where this run's records begin in each partition."""
        return json.dumps({TOPIC: {str(p): o for p, o in self.starts.items()}})

    def start(self) -> None:
        self._thread.start()

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._failed += 1
            return
        self._count += 1
        self._ends[msg.partition()] = max(self._ends[msg.partition()], msg.offset() + 1)

    def _event(self) -> Tuple[bytes, bytes]:
        customer = f"c{self._rng.randrange(20000):05d}"
        event = {
            "order_id": f"o{self._sent:08d}", "customer_id": customer,
            "amount": round(self._rng.uniform(2, 500), 2), "currency": self._rng.choice(["EUR", "USD", "GBP"]),
            "status": self._rng.choice(["created", "paid", "shipped", "delivered", "cancelled"]),
            "items": self._rng.randint(1, 9),
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(1_790_000_000 + self._sent)),
        }
        return customer.encode(), json.dumps(event).encode()

    def _run(self) -> None:
        """Thread: a tenth of the rate every 0.1 s until stopped."""
        assert self._producer is not None
        tick = time.monotonic()
        while not self._stop.is_set():
            for _ in range(max(1, self._rate // 10)):
                key, value = self._event()
                while True:
                    try:
                        self._producer.produce(TOPIC, key=key, value=value, on_delivery=self._delivered)
                        break
                    except BufferError:
                        self._producer.poll(0.05)
                self._sent += 1
            self._producer.poll(0)
            tick += 0.1
            self._stop.wait(max(0.0, tick - time.monotonic()))

    def finish(self) -> Produced:
        """Stop producing; wait until every record is acknowledged."""
        self._stop.set()
        self._thread.join()
        assert self._producer is not None
        left = self._producer.flush(60)
        if left or self._failed:
            raise DemoError(f"the producer could not deliver {left + self._failed} order events")
        return Produced(self._count, dict(self.starts), dict(self._ends))

    def close(self) -> None:
        """Stop producing and let go of the client (before the cluster stops: its connections would complain)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if self._producer is not None:
            self._producer.flush(5)  # a demo that failed early: what is still queued, briefly
        self._producer = None  # the last reference: librdkafka closes its connections here


class Member:
    """One member of the group: ``orders_to_delta.py`` in a process (and process group) of its own."""

    def __init__(self, name: str, servers: str, table: str, checkpoint: str, logs: str, group: str,
                 starting_offsets: str, session_timeout_ms: int) -> None:
        self.name = name
        self._command = [sys.executable, MEMBER_SCRIPT, "--local", "1", "--bootstrap-servers", servers,
                         "--table", table, "--checkpoint", checkpoint, "--name", name, "--group", group,
                         "--starting-offsets", starting_offsets, "--session-timeout-ms", str(session_timeout_ms)]
        self._logs = logs
        self._runs = 0
        self.process: Optional["subprocess.Popen[str]"] = None
        self.events: "queue.Queue[Tuple[str, Dict[str, Any]]]" = queue.Queue()

    @property
    def log(self) -> str:
        return os.path.join(self._logs, f"member-{self.name}-{self._runs}.log")

    def start(self) -> None:
        """Start the member's process; its stdout lines arrive in :attr:`events`."""
        self._runs += 1
        with open(self.log, "w", encoding="utf-8") as log:
            self.process = subprocess.Popen(self._command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=log, text=True, start_new_session=True)
        assert self.process.stdout is not None
        threading.Thread(target=self._read, args=(self.process, self.process.stdout), daemon=True,
                         name=f"member-{self.name}").start()

    def _read(self, process: "subprocess.Popen[str]", stdout: IO[str]) -> None:
        """Thread: the process's JSON lines into :attr:`events`, then its exit."""
        for line in stdout:
            try:
                self.events.put((self.name, json.loads(line)))
            except ValueError:
                pass  # not one of the member's lines
        self.events.put((self.name, {"event": "exited", "code": process.wait(), "pid": process.pid}))

    def send(self, command: str) -> None:
        assert self.process is not None and self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()

    def kill(self) -> None:
        """SIGKILL the member's whole process group: its driver, JVM and Python workers."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def exit(self, timeout: float = 60.0) -> None:
        """Stop the query and the process; killed if it does not end within ``timeout``."""
        if self.process is None or self.process.poll() is not None:
            return
        try:
            self.send("exit")
            self.process.wait(timeout)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()


@dataclass
class Group:
    """What the members last reported, updated from their events; :meth:`wait` drives it."""

    members: Dict[str, Member]
    timeout: float
    owned: Dict[str, List[int]] = field(default_factory=dict)
    landed: Dict[str, int] = field(default_factory=dict)
    running: Dict[str, bool] = field(default_factory=dict)
    verbose: bool = False

    def _apply(self, name: str, event: Dict[str, Any]) -> None:
        kind = event.get("event")
        if self.verbose:
            print(f"          member {name}: {json.dumps(event)}", flush=True)
        if kind == "started":
            self.owned[name], self.landed[name], self.running[name] = [], 0, True
        elif kind == "batch":
            self.owned[name] = list(event.get("owned", []))
            self.landed[name] = self.landed.get(name, 0) + (1 if event.get("rows") else 0)
        elif kind == "stopped":
            self.owned[name], self.running[name] = [], False
        elif kind == "failed":
            raise DemoError(f"member {name}'s query failed: {event.get('error')} (log: {self.members[name].log})")
        elif kind == "exited":
            process = self.members[name].process
            if process is not None and process.pid == event.get("pid") and event.get("code") not in (0, -9):
                raise DemoError(f"member {name} exited with code {event.get('code')}; its log: "
                                f"{self.members[name].log}")

    def wait(self, done: Callable[["Group"], bool], what: str) -> None:
        """Apply the members' events until ``done(self)``; DemoError after :attr:`timeout` seconds."""
        deadline = time.monotonic() + self.timeout
        while not done(self):
            if time.monotonic() > deadline:
                logs = ", ".join(m.log for m in self.members.values())
                raise DemoError(f"waited {self.timeout:.0f} s for {what}; the members' logs: {logs}")
            for member in self.members.values():
                try:
                    while True:
                        self._apply(*member.events.get_nowait())
                except queue.Empty:
                    pass
            time.sleep(0.1)

    def sharing(self, first: str, second: str) -> bool:
        a, b = set(self.owned.get(first, ())), set(self.owned.get(second, ()))
        return bool(a) and bool(b) and not a & b and len(a | b) == PARTITIONS

    def owns_all(self, name: str) -> bool:
        return len(self.owned.get(name, ())) == PARTITIONS

    def stopped(self, name: str) -> bool:
        return not self.running.get(name, False)

    def landed_since_join(self, name: str) -> bool:
        return self.landed.get(name, 0) > 0 and bool(self.owned.get(name))

    def stop_all(self) -> None:
        for member in self.members.values():
            if member.process is not None and member.process.poll() is None:
                member.kill()


def committed_offsets(table: str, group: str, partitions: List[int]) -> Dict[int, Optional[int]]:
    """Each partition's offset committed in the Delta table (None: nothing yet)."""
    from deltalake import DeltaTable

    from kafka_group.delta.offsets.offsets_table import transaction_id
    from kafka_group.offsets import TopicPartition

    if not os.path.isdir(os.path.join(table, "_delta_log")):
        return {p: None for p in partitions}
    delta = DeltaTable(table)
    return {p: delta.transaction_version(transaction_id(group, TopicPartition(TOPIC, p))) for p in partitions}


@dataclass
class Result:
    """The table's rows checked against what was produced."""

    ok: bool
    rows: int
    produced: int
    lines: List[str]

    def report(self, table: str, seconds: float) -> str:
        verdict = ("every record landed exactly once: none missing, none twice" if self.ok
                   else "MISMATCH: records missing or landed twice (see the rows above)")
        return "\n".join([
            "",
            "What this showed:",
            "  - Two Spark queries were two members of one Kafka consumer group: Kafka split the topic's",
            "    partitions between them, as between any two consumers of a group.",
            "  - When a member stopped or was killed, the other took its partitions over and went on",
            "    exactly where the last Delta commit left each one: a batch's rows and its Kafka offsets",
            "    are one Delta commit, so nothing was lost or landed twice.",
            "",
            f"Delta table {shown(table)}: {self.rows:,} rows for {self.produced:,} events produced, in {seconds:.1f} s",
            *self.lines,
            verdict,
        ])


def shown(path: str) -> str:
    """``path`` as a person reads it: relative to the working folder when it is inside it."""
    relative = os.path.relpath(path)
    return relative if not relative.startswith("..") else path


def check_table(table: str, group: str, produced: Produced) -> Result:
    """Read the table back: per partition, rows, who landed them, offsets and the committed offset."""
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    data = DeltaTable(table).to_pyarrow_dataset().to_table(columns=["partition", "offset", "landed_by"])
    committed = committed_offsets(table, group, sorted(produced.ends))
    lines = [f"{'partition':>9} {'rows':>8} {'landed by A':>12} {'landed by B':>12} {'offsets':>17} "
             f"{'committed':>10}"]
    ok = data.num_rows == produced.count
    for p in sorted(produced.ends):
        rows = data.filter(pc.equal(data.column("partition"), p))
        offsets = rows.column("offset")
        start, end = produced.starts[p], produced.ends[p]
        by = {name: int(pc.sum(pc.equal(rows.column("landed_by"), name)).as_py() or 0) for name in ("A", "B")}
        distinct = len(pc.unique(offsets)) if len(offsets) else 0
        exact = (len(offsets) == distinct == end - start and committed[p] == end
                 and (end == start or (pc.min(offsets).as_py() == start and pc.max(offsets).as_py() == end - 1)))
        ok = ok and exact
        shown = f"{committed[p]:,}" if committed[p] is not None else "-"
        lines.append(f"{p:>9} {len(offsets):>8,} {by['A']:>12,} {by['B']:>12,} {f'{start:,}-{end - 1:,}':>17} "
                     f"{shown:>10}")
    return Result(ok, data.num_rows, produced.count, lines)
