"""The connector's log cleanup beside a multi-part checkpoint a crashed writer left incomplete, read by delta-spark.

Beside ``tests/unit/test_delta_log_cleanup.py`` (delta-rs reads the table there): delta-spark, the independent
reader, also loads every version within ``delta.logRetentionDuration`` after the connector's own commit
checkpointed the table and cleaned its log up.
"""

from __future__ import annotations

import pathlib

import pytest
from pyspark.sql import SparkSession

from tests.unit.test_delta_log_cleanup import _age, _crashed_multi_part_checkpoint, _land, _log
from tests.unit.test_delta_own_commit import _batch, _tracked_table

pytestmark = pytest.mark.integration


def test_delta_spark_reads_every_retained_version_after_cleanup_beside_an_incomplete_checkpoint(
        spark: SparkSession, tmp_path: pathlib.Path) -> None:
    _tracked_table(tmp_path, ["inCommitTimestamp"], {"delta.enableInCommitTimestamps": "true",
                                                     "delta.checkpointInterval": "4"})  # 30 days of log retention
    store = _land(tmp_path, 6)  # versions 1 to 6, three rows each; the own commit checkpointed version 4
    _crashed_multi_part_checkpoint(tmp_path, 6)
    assert _batch(tmp_path, store, 18, 3) == 7
    _age(tmp_path, 6, days=40)  # versions 0 to 6 expired; 7 (within retention) must stay readable
    assert _batch(tmp_path, store, 21, 3) == 8  # due: a checkpoint of 8, then the cleanup
    reader = spark.read.format("delta")
    assert reader.load(str(tmp_path)).count() == 24
    assert reader.option("versionAsOf", 7).load(str(tmp_path)).count() == 21, _log(tmp_path)
