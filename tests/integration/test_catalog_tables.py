"""DeltaSink and the source on a Delta table named in a real metastore, classic and Spark Connect.

Each mode runs in a process of its own (``tests/integration/catalog_query.py``): a process holds
one SparkContext, and Spark's Hive support (the metastore, embedded Derby, in a temporary folder)
is chosen when the session is made; the suite's session has none. The table is created by name
with ``CREATE TABLE ... USING delta`` (delta-spark's ``DeltaCatalog`` over Spark's session catalog),
written by ``DeltaSink(table=<name>)``, and read back by name by delta-spark.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
from collections import Counter
from typing import Any, Dict

import pytest

from tests.support import Cluster, MakeTopic, long_tier, produce, unique_name

pytestmark = pytest.mark.integration

REPO = pathlib.Path(__file__).resolve().parents[2]


def run_catalog_query(tmp_path: pathlib.Path, *, fault_point: str = "", **command: Any) -> Dict[str, Any]:
    """Run ``catalog_query.py`` with ``command`` in ``tmp_path`` (its metastore, warehouse and derby.log there).

    With ``fault_point``, the development package's crash hook SIGKILLs the process (its group) when the
    connector reaches that point; the answer is then ``{"killed": True}``.
    """
    work = tmp_path / "catalog"
    work.mkdir(exist_ok=True)
    command = {"work": str(work), "checkpoint": str(tmp_path / "checkpoint"), **command}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(REPO / p) for p in ("connector", "python", "devbroker", "."))}
    if fault_point:
        env["KAFKA_GROUP_FAULT_POINT"] = fault_point
    with open(tmp_path / "catalog.log", "ab") as log:
        done = subprocess.run([sys.executable, str(REPO / "tests" / "integration" / "catalog_query.py"),
                               json.dumps(command)], cwd=work, env=env, stdout=subprocess.PIPE, stderr=log,
                              timeout=900, check=False, start_new_session=True)
    if fault_point:
        assert done.returncode == -signal.SIGKILL, f"not killed at {fault_point} (exit {done.returncode})"
        return {"killed": True}
    lines = done.stdout.decode().strip().splitlines()
    assert lines, f"catalog_query.py answered nothing (exit {done.returncode}); see {tmp_path / 'catalog.log'}"
    answer: Dict[str, Any] = json.loads(lines[-1])
    return answer


@pytest.mark.parametrize("mode, runs", [long_tier("classic", 2, id="classic"), pytest.param("connect", 1, id="connect")])
def test_a_table_named_in_the_metastore_takes_batches_by_its_name(
        kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path, mode: str, runs: int) -> None:
    topic = make_topic(2)
    produce(kafka.bootstrap_servers, topic, {0: 5, 1: 4})
    answer = run_catalog_query(tmp_path, mode=mode, servers=kafka.bootstrap_servers, topic=topic,
                               group=unique_name("catalog"), db="sales", table="orders_bronze", runs=runs)
    assert "error" not in answer, answer["error"]
    assert answer["catalog"] == "hive"
    assert answer["location"].rstrip("/").endswith("sales.db/orders_bronze")
    # Read back by name by delta-spark: every record once (classic: a second run, a restart, lands nothing twice).
    assert Counter(map(tuple, answer["rows"])) == Counter([(0, o) for o in range(5)] + [(1, o) for o in range(4)])


#: What a lakehouse platform turns on for a new table: column mapping, row tracking, deletion
#: vectors, in-commit timestamps and liquid clustering, all at once.
PLATFORM_TABLE = ["CLUSTER BY (partition) TBLPROPERTIES ('delta.columnMapping.mode' = 'name', "
                  "'delta.enableRowTracking' = 'true', 'delta.enableDeletionVectors' = 'true', "
                  "'delta.enableInCommitTimestamps' = 'true')"]


def test_a_platform_table_named_in_the_metastore_survives_a_sigkill_mid_batch_and_delta_spark_maintains_it(
        kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path) -> None:
    topic, group = make_topic(2), unique_name("catalog")
    produce(kafka.bootstrap_servers, topic, {0: 6, 1: 5})
    common: Dict[str, Any] = dict(mode="classic", servers=kafka.bootstrap_servers, topic=topic, group=group,
                                  db="sales", table="orders_bronze", ddl_tail=PLATFORM_TABLE, if_not_exists=True)
    # Killed between the batch's files and its commit: nothing of it is visible.
    run_catalog_query(tmp_path, fault_point="sink.before_commit", **common)
    answer = run_catalog_query(tmp_path, maintain=True, **common)
    assert "error" not in answer, answer["error"]
    wanted = Counter([(0, o) for o in range(6)] + [(1, o) for o in range(5)])
    assert Counter(map(tuple, answer["rows"])) == wanted  # every record once, read by name by delta-spark
    assert Counter(map(tuple, answer["rows_after_maintenance"])) == wanted
    assert {"columnMapping", "rowTracking", "deletionVectors", "inCommitTimestamp", "clustering"} <= \
        set(answer["features"]), answer["features"]
