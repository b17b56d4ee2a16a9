"""Where DeltaSink reads a batch's plan from: the local disk or Spark, by the checkpoint's scheme."""

from __future__ import annotations

import pathlib
from typing import Optional

import pytest

from kafka_group.errors import ConfigError
from pyspark_kafka_group.sink.sink_checkpoint import local_path, query_id


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
    assert local_path(location) == local


class _Batch:
    """What ``_read_offsets_file`` uses of a batch: its session (never asked: the files are local)."""

    sparkSession = object()


def test_a_checkpoint_that_already_committed_the_batch_is_not_this_querys(tmp_path: pathlib.Path) -> None:
    # Spark calls foreachBatch for batch N only while <checkpoint>/commits/N does not exist
    # (MicroBatchExecution.populateStartOffsets replays N only when the commit log ends at N-1).
    from pyspark_kafka_group.sink.delta_sink import DeltaSink

    chk = tmp_path / "chk"
    (chk / "offsets").mkdir(parents=True)
    (chk / "commits").mkdir()
    for n in (2, 3):
        (chk / "offsets" / str(n)).write_text(f"v1\n{{}}\nplan {n}\n")
    (chk / "commits" / "2").write_text("v1\n{}\n")
    sink = DeltaSink(str(tmp_path / "t"), checkpoint_location=str(chk))
    assert sink._read_offsets_file(_Batch(), 3).endswith("plan 3\n")  # a replay of 3 or its first run
    with pytest.raises(ConfigError, match=r"checkpoint_location='.*chk'.*already committed batch 2"):
        sink._read_offsets_file(_Batch(), 2)


@pytest.mark.parametrize("metadata", ['{"id": 5', "[" * 100_000, '{"id": ' + "9" * 5000 + "}"])
def test_a_checkpoint_metadata_file_that_is_not_json_has_noquery_id(metadata: str) -> None:
    assert query_id(metadata) is None
    assert query_id('{"id": "abc"}') == "abc"
