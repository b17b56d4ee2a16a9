"""Chaos run: three queries of one group over a 16-partition topic, SIGKILLed and restarted at random
while a producer keeps writing; at the end every produced record must be in the Delta table exactly once.

    python -m tests.chaos --seconds 600 --seed 7      # long, on demand
    python -m tests.chaos --seconds 60                # short (what CI runs, through tests/integration/test_chaos.py)

Prints one figure per line: kills, restarts, rebalances, records produced, records landed,
duplicates, missing. Exit code 0 when nothing is duplicated or missing.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import signal
import sys
import tempfile
import time
from typing import Dict, List, Optional

from tests.support import BackgroundProducer, Cluster, GroupQueries, create_topic, unique_name, wait_for

QUERIES = ("a", "b", "c")


def run_chaos(kafka: Cluster, workdir: pathlib.Path, seconds: float, seed: int, partitions: int = 16) -> Dict[str, int]:
    """Run the chaos scenario on the cluster ``kafka`` (Apache Kafka or the mock); return its figures."""
    rng = random.Random(seed)
    servers = kafka.bootstrap_servers
    topic = create_topic(kafka, partitions, "chaos")
    group = unique_name("chaos-group")
    producer = BackgroundProducer(servers, topic, partitions, per_tick=2)
    kills = restarts = 0
    with GroupQueries(servers, topic, group, workdir, max_offsets=200) as queries:
        running = {name: queries.start(name, int(seconds) + 600) for name in QUERIES}
        producer.produce(20)
        producer.start()
        try:
            wait_for(lambda: len(queries.rows()) > 0, "the first batch", 240)
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                time.sleep(rng.uniform(3, 12))
                name = rng.choice(QUERIES)
                process = running[name]
                if process.poll() is None:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(30)
                    kills += 1
                time.sleep(rng.uniform(0, 6))
                running[name] = queries.start(name, int(seconds) + 600)
                restarts += 1
        finally:
            producer.stop()
        expected = producer.expected()

        def caught_up() -> bool:
            for name, process in running.items():
                if process.poll() is not None:  # a query failed on its own: restart it, like a job scheduler
                    running[name] = queries.start(name, 600)
            return set(queries.landed()) >= set(expected)

        try:
            wait_for(caught_up, "the queries to land every record", 420)
        except AssertionError:
            pass
        landed = queries.landed()
        rebalances = sum(queries.log(name).count(" rebalance #") for name in QUERIES)
    duplicates = sum(n - 1 for n in landed.values() if n > 1)
    missing = sum(1 for key in expected if key not in landed)
    extra = sum(1 for key in landed if key not in expected)
    return {"kills": kills, "restarts": restarts, "rebalances": rebalances, "records_produced": len(expected),
            "records_landed": sum(landed.values()), "duplicates": duplicates, "missing": missing,
            "unexpected": extra}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to kill and restart queries")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args(argv)
    from kafka_group_devbroker import start_cluster
    from tests.support import BROKER_ENGINE

    workdir = pathlib.Path(args.workdir or tempfile.mkdtemp(prefix="kafka-group-chaos-"))
    with start_cluster(BROKER_ENGINE, brokers=3) as kafka:
        figures = run_chaos(kafka, workdir, args.seconds, args.seed)
    for key, value in figures.items():
        print(f"{key}: {value}")
    print(json.dumps(figures))
    return 0 if figures["duplicates"] == figures["missing"] == figures["unexpected"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
