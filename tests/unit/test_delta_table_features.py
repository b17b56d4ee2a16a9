"""Table features the sink cannot honour are refused before any file is written (no process: the
tables are Delta logs written by hand, with the protocol and properties delta-spark writes).

Issue 15, item 3: a column-mapped table took the sink's files, written under the logical column
names, so delta-spark read NULLs (delta-rs committed them); a table with a writer feature delta-rs lacks (row tracking,
in-commit timestamps) failed only at the commit, after the files were written, and as
"concurrent writers kept winning".
"""

from __future__ import annotations

import json
import os
import pathlib
import uuid
from typing import Any, Dict, List, Mapping, Optional

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kafka_group.delta.files.commit_files import DataFile
from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
from kafka_group.errors import OffsetStoreError, UnsupportedTableFeatureError
from kafka_group.offsets import OffsetRange, TopicPartition

_COLUMNS = [("value", "string"), ("partition", "integer"), ("offset", "long")]
_ROWS = pa.table({"value": pa.array(["a"]), "partition": pa.array([0], pa.int32()), "offset": pa.array([0], pa.int64())})


def _table(root: pathlib.Path, protocol: Mapping[str, Any], configuration: Optional[Dict[str, str]] = None,
           field_metadata: Optional[Dict[str, Any]] = None) -> pathlib.Path:
    """A Delta table's first commit (protocol and metadata, no data) and one unreferenced Parquet file."""
    fields: List[Dict[str, Any]] = []
    for number, (name, kind) in enumerate(_COLUMNS, 1):
        metadata = dict(field_metadata or {}) if name == "value" else {}
        if (configuration or {}).get("delta.columnMapping.mode") in ("name", "id"):
            metadata.update({"delta.columnMapping.id": number, "delta.columnMapping.physicalName": f"col-{uuid.uuid4()}"})
        fields.append({"name": name, "type": kind, "nullable": True, "metadata": metadata})
    meta = {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
            "schemaString": json.dumps({"type": "struct", "fields": fields}), "partitionColumns": [],
            "configuration": configuration or {}, "createdTime": 0}
    (root / "_delta_log").mkdir(parents=True)
    (root / "_delta_log" / f"{0:020d}.json").write_text("\n".join(json.dumps(a) for a in (
        {"commitInfo": {"timestamp": 0, "operation": "CREATE TABLE"}}, {"protocol": dict(protocol)},
        {"metaData": meta})) + "\n")
    (root / "data" / "b").mkdir(parents=True)
    pq.write_table(_ROWS, root / "data" / "b" / "part-0.parquet")
    return root


def _land(root: pathlib.Path) -> int:
    """What DeltaSink does: check the offsets and the schema (before writing), then commit one file."""
    store = DeltaOffsetStore(str(root), "g")
    ranges = [OffsetRange(TopicPartition("t", 0), 0, 1)]
    store.check(ranges)
    store.check_schema(_ROWS.schema)
    path = root / "data" / "b" / "part-0.parquet"
    return store.commit([DataFile("data/b/part-0.parquet", os.path.getsize(path), 1)], _ROWS.schema, ranges)


def _log_files(root: pathlib.Path) -> List[str]:
    return sorted(p.name for p in (root / "_delta_log").iterdir())


@pytest.mark.parametrize("protocol, configuration", [
    ({"minReaderVersion": 1, "minWriterVersion": 2}, {}),
    ({"minReaderVersion": 1, "minWriterVersion": 4}, {"delta.enableChangeDataFeed": "true"}),
    ({"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["appendOnly", "changeDataFeed", "invariants",
                                                                       "checkConstraints", "generatedColumns"]},
     {"delta.enableChangeDataFeed": "true", "delta.appendOnly": "true"}),
    ({"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["timestampNtz", "v2Checkpoint"],
      "writerFeatures": ["timestampNtz", "v2Checkpoint"]}, {}),
    # Appends add no deletion vectors; delta-rs commits them (its reader cannot read such a table).
    ({"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
      "writerFeatures": ["deletionVectors"]}, {"delta.enableDeletionVectors": "true"}),
    # delta-rs cannot commit to these: the connector's own commit does (tests/unit/test_delta_own_commit.py).
    ({"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["rowTracking", "domainMetadata"]},
     {"delta.enableRowTracking": "true"}),
    ({"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["inCommitTimestamp"]},
     {"delta.enableInCommitTimestamps": "true"}),
    ({"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["typeWidening", "vacuumProtocolCheck"],
      "writerFeatures": ["typeWidening", "vacuumProtocolCheck", "domainMetadata", "clustering"]}, {}),
], ids=["default", "change-data-feed", "features-appended-as-is", "ntz-and-v2-checkpoints", "deletion-vectors",
        "row-tracking", "in-commit-timestamps", "widening-vacuum-check-clustering"])
def test_tables_the_sink_can_append_to_take_the_batch(tmp_path: pathlib.Path, protocol: Dict[str, Any],
                                                      configuration: Dict[str, str]) -> None:
    assert _land(_table(tmp_path / "t", protocol, configuration)) == 1


@pytest.mark.parametrize("protocol, configuration, named", [
    ({"minReaderVersion": 2, "minWriterVersion": 7, "writerFeatures": ["columnMapping", "icebergCompatV2"]},
     {"delta.enableIcebergCompatV2": "true"}, "icebergCompatV2"),
], ids=["iceberg-compat-v2"])
def test_tables_with_a_feature_the_sink_cannot_honour_are_refused_before_anything_is_written(
        tmp_path: pathlib.Path, protocol: Dict[str, Any], configuration: Dict[str, str], named: str) -> None:
    root = _table(tmp_path / "t", protocol, configuration)
    with pytest.raises(UnsupportedTableFeatureError) as refused:
        _land(root)
    message = str(refused.value)
    assert named in message and str(root) in message and "new table" in message, message
    assert _log_files(root) == [f"{0:020d}.json"], "the refused table was changed"


@pytest.mark.parametrize("protocol, configuration, field_metadata", [
    ({"minReaderVersion": 2, "minWriterVersion": 5}, {"delta.columnMapping.mode": "name"}, None),
    ({"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["columnMapping"],
      "writerFeatures": ["columnMapping"]}, {"delta.columnMapping.mode": "id"}, None),
    ({"minReaderVersion": 1, "minWriterVersion": 3}, {"delta.constraints.positive": "offset >= 0"}, None),
    ({"minReaderVersion": 1, "minWriterVersion": 2}, {},
     {"delta.invariants": json.dumps({"expression": {"expression": "value IS NOT NULL"}})}),
    ({"minReaderVersion": 1, "minWriterVersion": 4}, {}, {"delta.generationExpression": "upper(value)"}),
], ids=["column-mapping-legacy", "column-mapping", "check-constraint", "invariant", "generated"])
def test_files_not_written_for_the_tables_mapping_or_rules_are_refused_at_the_commit(
        tmp_path: pathlib.Path, protocol: Dict[str, Any], configuration: Dict[str, str],
        field_metadata: Optional[Dict[str, Any]]) -> None:
    """Issue 35: DeltaSink writes these tables (physical names, rows checked with Spark); a commit that does
    not say what its files were written for (``contract``) is refused, and nothing lands."""
    root = _table(tmp_path / "t", protocol, configuration, field_metadata)
    with pytest.raises(OffsetStoreError, match="without saying what they were written and checked for"):
        _land(root)
    assert _log_files(root) == [f"{0:020d}.json"], "the table was changed"
