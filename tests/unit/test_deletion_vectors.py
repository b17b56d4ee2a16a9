"""Deletion vectors (kafka_group.delta.deletion_vectors) against delta-spark's own bytes.

tests/unit/data/dv_table was written by delta-spark 4.4.0: 100 rows (id 0-99, one file), then
``DELETE ... WHERE id IN (3, 4, 7, 11, 18, 29)`` and ``DELETE ... WHERE id = 50``, each leaving a
deletion vector file ('u' descriptors). The inline example is PROTOCOL.md's ("JSON Example 3").
"""

from __future__ import annotations

import json
import pathlib
import uuid

import pyarrow.fs as pafs
import pytest

from kafka_group.delta.deletion_vectors import DeletionVector, deserialize_bitmap, dv_file_bytes
from kafka_group.delta.deletion_vectors import new_file_descriptor, read_deleted_rows, serialize_bitmap
from kafka_group.delta.deletion_vectors import z85_decode, z85_encode
from kafka_group.errors import OffsetStoreError

TABLE = pathlib.Path(__file__).parent / "data" / "dv_table"


def _descriptor(version: int) -> DeletionVector:
    log = TABLE / "_delta_log" / f"{version:020d}.json"
    adds = [json.loads(line)["add"] for line in log.read_text().splitlines() if '"add"' in line]
    dv = DeletionVector.of(adds[0]["deletionVector"])
    assert dv is not None
    return dv


def _fs() -> pafs.FileSystem:
    return pafs.SubTreeFileSystem(str(TABLE), pafs.LocalFileSystem())


def test_z85_round_trips_and_matches_the_zeromq_test_vector() -> None:
    # ZeroMQ RFC 32's test vector: 8 bytes -> "HelloWorld"
    raw = bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])
    assert z85_encode(raw) == "HelloWorld"
    assert z85_decode("HelloWorld") == raw


def test_reads_delta_spark_deletion_vector_files() -> None:
    first, second = _descriptor(2), _descriptor(3)
    assert first.relative_path() == "deletion_vector_a7567e93-e200-48a2-b605-3cb04211cb7d.bin"
    assert sorted(read_deleted_rows(first, _fs(), TABLE.as_uri())) == [3, 4, 7, 11, 18, 29]
    assert sorted(read_deleted_rows(second, _fs(), TABLE.as_uri())) == [3, 4, 7, 11, 18, 29, 50]


def test_reads_the_protocols_inline_example() -> None:
    dv = DeletionVector.of({"storageType": "i", "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L",
                            "sizeInBytes": 40, "cardinality": 6})
    assert sorted(read_deleted_rows(dv, _fs(), TABLE.as_uri())) == [3, 4, 7, 11, 18, 29]


def test_writes_what_delta_spark_writes() -> None:
    # the same rows serialize to delta-spark's very bytes (file format: version, size, bitmap, CRC)
    written = (TABLE / "deletion_vector_a7567e93-e200-48a2-b605-3cb04211cb7d.bin").read_bytes()
    assert dv_file_bytes(serialize_bitmap([3, 4, 7, 11, 18, 29])) == written
    dv = new_file_descriptor(uuid.UUID("a7567e93-e200-48a2-b605-3cb04211cb7d"), serialize_bitmap([3]), 1)
    assert dv.relative_path() == "deletion_vector_a7567e93-e200-48a2-b605-3cb04211cb7d.bin"
    assert dv.to_json()["pathOrInlineDv"] == "R=Fng&S8JzWGO^$lj}y?" and dv.to_json()["offset"] == 1


def test_round_trips_rows_past_32_bits() -> None:
    rows = [0, 5, 2**32 + 1, 2**40, 2**62]
    assert sorted(deserialize_bitmap(serialize_bitmap(rows))) == rows


def test_refuses_corrupt_vectors(tmp_path: pathlib.Path) -> None:
    good = serialize_bitmap([1, 2])
    with pytest.raises(OffsetStoreError, match="magic"):
        deserialize_bitmap(b"\0" * len(good))
    with pytest.raises(OffsetStoreError, match="past its bitmap|ends inside"):
        deserialize_bitmap(good[:12] + b"\x05\x00")
    body = bytearray(dv_file_bytes(good))
    body[-1] ^= 1
    (tmp_path / "deletion_vector_a7567e93-e200-48a2-b605-3cb04211cb7d.bin").write_bytes(bytes(body))
    dv = new_file_descriptor(uuid.UUID("a7567e93-e200-48a2-b605-3cb04211cb7d"), good, 2)
    fs = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    with pytest.raises(OffsetStoreError, match="CRC"):
        read_deleted_rows(dv, fs, tmp_path.as_uri())
    with pytest.raises(OffsetStoreError, match="outside the table"):
        read_deleted_rows(DeletionVector("p", "/etc/deletion_vector.bin", 1, 4, 1), fs, tmp_path.as_uri())
    with pytest.raises(OffsetStoreError, match="storage type"):
        DeletionVector.of({"storageType": "x", "pathOrInlineDv": "", "sizeInBytes": 1, "cardinality": 1})
