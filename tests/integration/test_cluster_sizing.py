"""A batch's task count follows the session's parallelism, classic and Spark Connect (issue 34, item 3).

Each session runs in a child process (this file run as a script): the suite's shared session
is ``local[2]`` and a process holds one kind of session. The child reads the same topic (eight
partitions) with ``fetch.minRecordsPerTask=1``, so only the cap decides the task count:
``cluster_options(spark)`` hands ``fetch.clusterParallelism`` and ``fetch.maxTasks`` defaults
to twice it; without it the batch runs one task per Kafka partition; ``fetch.maxTasks`` wins.
"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys
from typing import TYPE_CHECKING, Any, Dict

import pytest

if TYPE_CHECKING:  # this file also runs as a script (the Spark child), where 'tests' is not importable
    from tests.support import Cluster, MakeTopic

pytestmark = pytest.mark.integration

PARTITIONS = 8
RECORDS_PER_PARTITION = 20
_REPO = pathlib.Path(__file__).resolve().parents[2]


def _child_run(mode: str, servers: str, topic: str, tmp_path: pathlib.Path) -> Dict[str, Any]:
    result = tmp_path / f"{mode}.json"
    log = tmp_path / f"{mode}.log"
    from tests.support_child_jvm import child_env

    env = child_env({"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable})
    # absolute: a Connect server's Python workers run in a folder of their session, where a relative
    # PYTHONPATH (connector:python:devbroker) finds nothing and another install of the package wins
    env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)
    with open(log, "w") as out:
        code = subprocess.run([sys.executable, __file__, json.dumps(
            {"mode": mode, "servers": servers, "topic": topic, "result": str(result)})],
            cwd=_REPO, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=400).returncode
    assert code == 0, log.read_text()[-6000:]
    answer: Dict[str, Any] = json.loads(result.read_text())
    return answer


def test_the_task_count_follows_the_sessions_parallelism(kafka: Cluster, make_topic: MakeTopic,
                                                         tmp_path: pathlib.Path) -> None:
    from tests.support import produce

    topic = make_topic(PARTITIONS)
    produce(kafka.bootstrap_servers, topic, {p: RECORDS_PER_PARTITION for p in range(PARTITIONS)})
    seen = _child_run("classic", kafka.bootstrap_servers, topic, tmp_path)
    assert seen["local[1]"] == {"parallelism": 1, "sized": 2, "unsized": PARTITIONS, "overridden": 5,
                                "records": PARTITIONS * RECORDS_PER_PARTITION}
    assert seen["local[3]"] == {"parallelism": 3, "sized": 6, "unsized": PARTITIONS, "overridden": 5,
                                "records": PARTITIONS * RECORDS_PER_PARTITION}
    seen = _child_run("connect", kafka.bootstrap_servers, topic, tmp_path)
    assert seen["local[3]"] == {"parallelism": 3, "sized": 6, "unsized": PARTITIONS, "overridden": 5,
                                "records": PARTITIONS * RECORDS_PER_PARTITION}


# -- the child process --------------------------------------------------------------------------


def _measure(spark: Any, servers: str, topic: str) -> Dict[str, int]:
    from pyspark.sql import functions as F

    from pyspark_kafka_group import cluster_options

    def read(**options: str) -> Any:
        return (spark.read.format("kafka-group").option("kafka.bootstrap.servers", servers)
                .option("subscribe", topic).option("startingOffsets", "earliest").option("endingOffsets", "latest")
                .option("fetch.minRecordsPerTask", "1").options(**options).load())

    def tasks(df: Any) -> int:
        return int(df.select(F.spark_partition_id().alias("p")).distinct().count())

    sized = cluster_options(spark)
    return {
        "parallelism": int(sized["fetch.clusterParallelism"]),
        "sized": tasks(read(**sized)),
        "unsized": tasks(read()),
        "overridden": tasks(read(**sized, **{"fetch.maxTasks": "5"})),
        "records": int(read(**sized).count()),
    }


def _child(args: Dict[str, Any]) -> None:
    from pyspark_kafka_group.spark_session import local_connect_session, local_session

    seen: Dict[str, Dict[str, int]] = {}
    if args["mode"] == "classic":
        for cores in (1, 3):
            spark = local_session(f"kafka-group-sizing-{cores}", cores=cores)
            try:
                seen[f"local[{cores}]"] = _measure(spark, args["servers"], args["topic"])
            finally:
                spark.stop()
    else:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        spark = local_connect_session("kafka-group-sizing-connect", cores=3, port=port)
        try:
            seen["local[3]"] = _measure(spark, args["servers"], args["topic"])
        finally:
            spark.stop()
    pathlib.Path(args["result"]).write_text(json.dumps(seen))


if __name__ == "__main__":
    sys.path.insert(0, str(_REPO))
    _child(json.loads(sys.argv[1]))
