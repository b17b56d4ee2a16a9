"""How long a query restarted on its checkpoint takes to land its first batch, and how long its group's other
member waits for its partitions after a clean stop.

Run from the repository root::

    python -m bench.restart_latency [--protocols classic,consumer] [--modes dynamic,static]

For each group protocol and each membership mode (``dynamic``: no ``kafka.group.instance.id``, the default;
``static``: one stable instance id for the query), a DeltaSink query (``tests/integration/delta_query.py``, its own
process) joins a group that another member (a dynamic one, in this process) already belongs to, lands a batch, and
ends, first by SIGKILL of its process group, then by a clean stop (``query.stop()``). After each end it is started
again on the same checkpoint. Printed per case: the seconds from the restarted process's start to the first batch it
plans (not the replay of the batch its predecessor left unfinished, which needs no assignment), and, after the clean stop, the seconds from the query's exit to the other member owning every partition. The
classic protocol's session timeout is librdkafka's default (45 s); the consumer protocol's is set to Kafka's default
(45 s) for the group (group config ``consumer.session.timeout.ms``; the development broker's is 10 s). A figure of
``none`` means nothing happened within the bound (90 s).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import signal
import subprocess
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

_BOUND_S = 90.0
_PARTITIONS = 4


def _landed_by(table: pathlib.Path, pid: int) -> bool:
    """Whether the process ``pid`` landed a batch in the Delta table ``table``."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        rows = DeltaTable(str(table)).to_pyarrow_table(columns=["writer_pid"])
    except TableNotFoundError:
        return False
    return pid in set(rows.column("writer_pid").to_pylist())


def _wait(condition: Callable[[], bool], bound_s: float = _BOUND_S) -> Optional[float]:
    """Seconds until ``condition()`` holds, or None past ``bound_s``."""
    started = time.monotonic()
    while time.monotonic() - started < bound_s:
        if condition():
            return time.monotonic() - started
        time.sleep(0.2)
    return None


def _consumer_session(servers: str, group: str, session_ms: int) -> None:
    """Give ``group`` Kafka's default session of the consumer protocol (the development broker's is 10 s): the
    group config ``consumer.session.timeout.ms`` (KIP-848)."""
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType  # type: ignore[attr-defined]  # re-exported without __all__

    entry = ConfigEntry("consumer.session.timeout.ms", str(session_ms),
                        incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    admin = AdminClient({"bootstrap.servers": servers})  # kept while the answer is awaited
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def _members(servers: str, group: str) -> int:
    """How many members ``group`` has now (-1 if the cluster did not say)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": servers})  # kept while the answer is awaited
    try:
        return len(admin.describe_consumer_groups([group])[group].result(10).members)
    except Exception:  # a bench: any failure to answer is "not yet"
        return -1


def _case(cluster: Any, protocol: str, mode: str, workdir: pathlib.Path) -> Dict[str, Optional[float]]:
    from kafka_group.group.membership import GroupMember
    from tests.support import REPO, create_topic, delta_query_command, produce, unique_name
    from tests.support_child_jvm import child_env

    servers = cluster.bootstrap_servers
    topic, group = create_topic(cluster, _PARTITIONS, "restart"), unique_name("restart-group")
    produce(servers, topic, {p: 20000 for p in range(_PARTITIONS)})
    table, checkpoint = workdir / f"{protocol}-{mode}-table", workdir / f"{protocol}-{mode}-chk"
    stop_file = workdir / f"{protocol}-{mode}-stop"
    options = ["--option", f"kafka.group.protocol={protocol}"]
    other_config = {"bootstrap.servers": servers}
    if protocol == "classic":
        options += ["--option", "kafka.session.timeout.ms=45000", "--option", "kafka.heartbeat.interval.ms=3000"]
    else:
        other_config["group.protocol"] = "consumer"
        _consumer_session(servers, group, 45000)
    if mode == "static":
        options += ["--option", f"kafka.group.instance.id={group}-query"]
    command = delta_query_command(servers, topic, group, table, checkpoint, "--max-offsets", "40",
                                  "--run-seconds", "600", "--stop-file", str(stop_file), *options)
    other = GroupMember(other_config, group, [topic])
    figures: Dict[str, Optional[float]] = {}
    # "restart after clean stop" with "other member owns all" first: the restart waits for the stop to finish.
    processes: List["subprocess.Popen[bytes]"] = []

    log = workdir / f"{group}.log"

    def start() -> Tuple["subprocess.Popen[bytes]", Optional[float]]:
        # The first batch the run plans itself: a restart first replays the batch its predecessor planned and did
        # not finish, which needs no partition of the group (the connector logs "planned ..." for a new batch only).
        since = log.stat().st_size if log.exists() else 0
        process = subprocess.Popen(command, cwd=REPO, env=child_env({"KAFKA_GROUP_LOG_LEVEL": "INFO"}),
                                   start_new_session=True, stdout=subprocess.DEVNULL, stderr=open(log, "ab"))
        processes.append(process)

        def planned() -> bool:
            with open(log, "rb") as text:
                text.seek(since)
                return b"source_driver: planned " in text.read()

        seconds = _wait(lambda: planned() or process.poll() is not None)
        return process, (seconds if planned() else None)  # None: it failed or planned nothing

    try:
        _wait(lambda: len(other.owned()) == _PARTITIONS)
        first, figures["first start"] = start()
        _wait(lambda: _landed_by(table, first.pid))
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(30)
        again, figures["restart after SIGKILL"] = start()
        # The clean stop from a settled group: the killed member gone (its session over), the restart and the other
        # member its only members.
        _wait(lambda: _members(servers, group) == 2, 120)
        stop_file.touch()  # the query stops within its next half second, its member leaving then
        figures["other member owns all after clean stop"] = _wait(lambda: len(other.owned()) == _PARTITIONS)
        again.wait(120)
        stop_file.unlink()
        _, figures["restart after clean stop"] = start()
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)
        other.close()
    return figures


def main(argv: Optional[List[str]] = None) -> int:
    """Run each case and print one line per figure."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--protocols", default="classic,consumer")
    parser.add_argument("--modes", default="dynamic,static")
    args = parser.parse_args(argv)
    from kafka_group_devbroker import start_cluster

    cluster = start_cluster("kafka", 1)
    try:
        with tempfile.TemporaryDirectory(prefix="restart-latency-") as folder:
            for protocol in args.protocols.split(","):
                for mode in args.modes.split(","):
                    figures = _case(cluster, protocol, mode, pathlib.Path(folder))
                    for name, seconds in figures.items():
                        shown = "none" if seconds is None else f"{seconds:.1f} s"
                        print(f"{protocol:8} {mode:7} {name}: {shown}", flush=True)
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
