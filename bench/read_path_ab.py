"""The executor read path of two revisions, interleaved on one broker: did a change cost it anything?

``python -m bench.read_path_ab --before REV --after REV`` checks both revisions out into
temporary worktrees, produces the workloads once on one Apache Kafka broker, then reads every
workload with baseline (a2) (:func:`bench.baselines.python_read_path`: the connector's read path
to Arrow in one process) of each revision in turn, in a shuffled order each round, each run in a
fresh interpreter whose ``PYTHONPATH`` is that revision's sources. Interleaving puts both
revisions under the same load, which a before-and-after pair of whole benchmark runs cannot
(other work on the machine moves a run's own baseline by 2x). It prints, per workload, the
median and best of each revision and their ratio.

Written for issue 26 item 7 (the byte cap on Arrow batches, 3ca5693): ``--before 3ca5693^
--after 3ca5693``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from bench.workload import Workload, produce

REPO = Path(__file__).resolve().parents[1]

#: Run in the revision's interpreter environment: read the workload with its own (a2) baseline; print records/s.
_CHILD = ("import json, sys; from bench.workload import Workload; from bench.baselines import python_read_path; "
          "w = Workload(*json.loads(sys.argv[2])); print(w.records / python_read_path(sys.argv[1], w))")


def _read_rate(root: Path, servers: str, workload: Workload) -> float:
    """Records/s of ``workload`` through the read path of the revision checked out at ``root``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(root / p) for p in ("", "connector", "python", "devbroker"))}
    spec = json.dumps([workload.topic, workload.partitions, workload.records, workload.key_bytes, workload.value_bytes])
    out = subprocess.run([sys.executable, "-c", _CHILD, servers, spec], cwd=root, env=env,
                         capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main(argv: Optional[List[str]] = None) -> int:
    """Parse the flags, run the rounds, print one line per workload; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m bench.read_path_ab", description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the revision without the change (git rev)")
    parser.add_argument("--after", required=True, help="the revision with the change (git rev)")
    parser.add_argument("--rounds", type=int, default=6, help="runs of each revision per workload (default 6)")
    args = parser.parse_args(argv)

    from kafka_group_devbroker import start_cluster

    workloads = [Workload("ab-100b-8p", 8, 400_000, value_bytes=100), Workload("ab-1024b-8p", 8, 100_000, value_bytes=1024),
                 Workload("ab-100b-64p", 64, 400_000, value_bytes=100)]
    with tempfile.TemporaryDirectory(prefix="kafka-group-ab-") as scratch:
        roots: Dict[str, Path] = {}
        for label, rev in (("before", args.before), ("after", args.after)):
            roots[label] = Path(scratch) / label
            subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(roots[label]), rev],
                           check=True, capture_output=True)
        cluster = start_cluster("kafka", brokers=1)
        try:
            for w in workloads:
                cluster.create_topic(w.topic, w.partitions)
                produce(cluster.bootstrap_servers, w)
            rates: Dict[Tuple[str, str], List[float]] = {(w.topic, label): [] for w in workloads for label in roots}
            order = list(roots)
            rng = random.Random(26)
            for _ in range(args.rounds):
                for w in workloads:
                    rng.shuffle(order)
                    for label in order:
                        rates[(w.topic, label)].append(_read_rate(roots[label], cluster.bootstrap_servers, w))
        finally:
            cluster.stop()
            for root in roots.values():
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(root)], check=False)
    print(f"read path (a2), {args.rounds} interleaved runs each, load average now {os.getloadavg()}")
    for w in workloads:
        before, after = rates[(w.topic, "before")], rates[(w.topic, "after")]
        print(f"[{w.topic}] after {statistics.median(after):,.0f} rec/s = "
              f"{statistics.median(after) / statistics.median(before):.2f}x before "
              f"({statistics.median(before):,.0f} rec/s), medians; best {max(after):,.0f} vs {max(before):,.0f} = "
              f"{max(after) / max(before):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
