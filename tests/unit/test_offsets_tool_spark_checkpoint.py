"""``kafka-group-offsets from-spark-checkpoint``: a format("kafka") query's checkpoint as startingOffsets JSON.

The checkpoints here are written in the layout Spark writes (``metadata``, ``offsets/N`` with a version line, the
batch's metadata and one line per source, ``commits/N``); the integration test
``tests/integration/test_migration_from_spark_kafka.py`` reads a real one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from kafka_group.errors import ConfigError
from kafka_group.offsets_tool import main
from kafka_group.offsets_tool.spark_checkpoint import positions_from_checkpoint, starting_offsets_json

QUERY_ID = "4f0c6d6e-7a57-4a3e-9a3c-2b1f0d3b8e10"


def checkpoint(tmp_path: Path, batches: Dict[int, List[str]], committed: List[int]) -> Path:
    """A checkpoint whose ``offsets/N`` hold ``batches[N]`` (one line per source) and ``commits/N`` each of
    ``committed``, with the .crc files Spark's file system leaves beside them."""
    root = tmp_path / "chk"
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "metadata").write_text(json.dumps({"id": QUERY_ID}) + "\n")
    for batch, sources in batches.items():
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1765000000000 + batch, "conf": {}}
        (root / "offsets" / str(batch)).write_text("\n".join(["v1", json.dumps(meta), *sources]))
        (root / "offsets" / f".{batch}.crc").write_bytes(b"crc")
    for batch in committed:
        (root / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    return root


def test_the_last_batch_with_a_commit_marker_gives_the_positions(tmp_path: Path) -> None:
    root = checkpoint(tmp_path, {0: ['{"orders":{"1":5,"0":7}}'], 1: ['{"orders":{"0":20,"1":12}}'],
                                 2: ['{"orders":{"0":31,"1":12}}']}, committed=[0, 1])
    positions = positions_from_checkpoint(str(root))
    assert (positions.batch_id, positions.source) == (1, "commits")
    assert starting_offsets_json(positions) == '{"orders":{"0":20,"1":12}}'


def test_a_batch_delta_holds_past_the_last_marker_counts_as_finished(tmp_path: Path) -> None:
    root = checkpoint(tmp_path, {0: ['{"t":{"0":5}}'], 1: ['{"t":{"0":9}}']}, committed=[0])
    asked: List[str] = []

    def delta_batch(query_id: str) -> Optional[int]:
        asked.append(query_id)
        return 1

    positions = positions_from_checkpoint(str(root), delta_batch=delta_batch)
    assert asked == [QUERY_ID]
    assert (positions.batch_id, positions.source, positions.offsets) == (1, "delta", {"t": {0: 9}})
    # a table behind the markers (or without the query's transaction) changes nothing
    assert positions_from_checkpoint(str(root), delta_batch=lambda _: None).batch_id == 0


def test_several_sources_need_the_kafka_one_named(tmp_path: Path) -> None:
    root = checkpoint(tmp_path, {0: ['{"a":{"0":1}}', '{"b":{"0":2}}']}, committed=[0])
    with pytest.raises(ConfigError, match="--source"):
        positions_from_checkpoint(str(root))
    assert positions_from_checkpoint(str(root), source_index=1).offsets == {"b": {0: 2}}
    with pytest.raises(ConfigError, match="has 2 source"):
        positions_from_checkpoint(str(root), source_index=2)


@pytest.mark.parametrize("batches, committed, message", [
    ({}, [], "has no offset log"),
    ({0: ['{"t":{"0":5}}']}, [], "no batch of the query"),
    ({1: ['{"t":{"0":5}}']}, [0], "is gone"),
    ({0: ["-"]}, [0], "not a Kafka source's"),
    ({0: ['{"path":"/data/file.json"}']}, [0], "not a Kafka source's"),
])
def test_what_cannot_be_read_is_named(tmp_path: Path, batches: Dict[int, List[str]], committed: List[int],
                                      message: str) -> None:
    root = checkpoint(tmp_path, batches, committed)
    with pytest.raises(ConfigError, match=message):
        positions_from_checkpoint(str(root))


def test_the_command_prints_the_json_alone_on_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = checkpoint(tmp_path, {0: ['{"orders":{"0":3}}'], 1: ['{"orders":{"0":8,"2":4}}']}, committed=[0, 1])
    assert main(["from-spark-checkpoint", str(root)]) == 0
    shown = capsys.readouterr()
    assert shown.out == '{"orders":{"0":8,"2":4}}\n'
    assert "batch 1" in shown.err and "startingOffsets" in shown.err
    assert main(["from-spark-checkpoint", str(tmp_path / "nowhere")]) == 2
    assert "error: " in capsys.readouterr().err
