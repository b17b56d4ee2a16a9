"""Profile the executor read path (:func:`kafka_group.read.fetch.read_range`) in one process.

Run from the repository root, with ``pyinstrument`` installed::

    python -m bench.profile_read --records 240000 --partitions 8

It produces the records to the embedded broker, reads every partition once to
warm up, then once under pyinstrument, and prints the call tree and the rate.
A second module can be compared with ``--fetch-module /path/to/old/fetch.py``.
"""

from __future__ import annotations

import argparse
import os
import importlib.util
import sys
import time
from typing import Any, List, Optional

from bench.baselines import python_read_path
from bench.workload import Workload, produce


def _load(path: Optional[str]) -> Any:
    if path is None:
        from kafka_group.read import fetch

        return fetch.read_range
    spec = importlib.util.spec_from_file_location("fetch_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fetch_under_test"] = module
    spec.loader.exec_module(module)
    return module.read_range


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--records", type=int, default=240_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--fetch-module", default=None, help="a fetch.py to profile instead of the installed one")
    args = parser.parse_args(argv)
    from pyinstrument import Profiler

    from kafka_group_devbroker import start_cluster

    read = _load(args.fetch_module)
    workload = Workload("profile", args.partitions, args.records, value_bytes=args.value_bytes)
    embedded = start_cluster(os.environ.get("KAFKA_GROUP_BENCH_BROKER", "kafka"), brokers=1)
    try:
        embedded.create_topic(workload.topic, workload.partitions)
        produce(embedded.bootstrap_servers, workload)
        python_read_path(embedded.bootstrap_servers, workload, read)
        profiler = Profiler(interval=0.0005)
        cpu = time.process_time()
        profiler.start()
        seconds = python_read_path(embedded.bootstrap_servers, workload, read)
        profiler.stop()
        cpu = time.process_time() - cpu
        print(profiler.output_text(unicode=False, show_all=False))
        print(f"{workload.describe()}: {workload.records / seconds:,.0f} rec/s under the profiler "
              f"({cpu:.2f} s CPU of this process for {seconds:.2f} s)")
    finally:
        embedded.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
