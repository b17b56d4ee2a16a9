"""Where DeltaSink reads a batch's plan from: the local disk or Spark, by the checkpoint's scheme."""

from __future__ import annotations

from typing import Optional

import pytest

from pyspark_kafka_group.delta_sink import _local_path


@pytest.mark.parametrize(("location", "local"), [
    ("/chk/offsets/3", "/chk/offsets/3"),
    ("chk/offsets/3", "chk/offsets/3"),
    ("file:///chk/offsets/3", "/chk/offsets/3"),
    ("file:/chk/offsets/3", "/chk/offsets/3"),
    ("dbfs:/chk/offsets/3", None),
    ("s3a://bucket/chk/offsets/3", None),
    ("abfss://c@account.dfs.core.windows.net/chk/offsets/3", None),
    ("hdfs://namenode:8020/chk/offsets/3", None),
])
def test_only_local_locations_are_read_from_the_disk(location: str, local: Optional[str]) -> None:
    assert _local_path(location) == local
