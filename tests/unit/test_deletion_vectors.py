"""Deletion vectors (kafka_group.delta.log.deletion_vectors, .dv_bitmap) against delta-spark's own bytes.

tests/unit/data/dv_table was written by delta-spark 4.4.0: 100 rows (id 0-99, one file), then
``DELETE ... WHERE id IN (3, 4, 7, 11, 18, 29)`` and ``DELETE ... WHERE id = 50``, each leaving a
deletion vector file ('u' descriptors). The inline example is PROTOCOL.md's ("JSON Example 3").
"""

from __future__ import annotations

import json
import pathlib
import struct
import tracemalloc
import uuid
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow.fs as pafs
import pytest
from pyroaring import BitMap

from kafka_group.delta.log.deletion_vectors import DeletionVector, dv_file_bytes, new_file_descriptor
from kafka_group.delta.log.deletion_vectors import read_deleted_rows, z85_decode, z85_encode
from kafka_group.delta.log.dv_bitmap import deserialize_bitmap, serialize_bitmap
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
    assert _read(first, 100).tolist() == [3, 4, 7, 11, 18, 29]
    assert _read(second, 100).tolist() == [3, 4, 7, 11, 18, 29, 50]


def test_reads_the_protocols_inline_example() -> None:
    dv = DeletionVector.of({"storageType": "i", "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L",
                            "sizeInBytes": 40, "cardinality": 6})
    assert _read(dv, 30).tolist() == [3, 4, 7, 11, 18, 29]


def test_writes_what_delta_spark_writes() -> None:
    # the same rows serialize to delta-spark's very bytes (file format: version, size, bitmap, CRC)
    written = (TABLE / "deletion_vector_a7567e93-e200-48a2-b605-3cb04211cb7d.bin").read_bytes()
    assert dv_file_bytes(serialize_bitmap([3, 4, 7, 11, 18, 29])) == written
    dv = new_file_descriptor(uuid.UUID("a7567e93-e200-48a2-b605-3cb04211cb7d"), serialize_bitmap([3]), 1)
    assert dv.relative_path() == "deletion_vector_a7567e93-e200-48a2-b605-3cb04211cb7d.bin"
    assert dv.to_json()["pathOrInlineDv"] == "R=Fng&S8JzWGO^$lj}y?" and dv.to_json()["offset"] == 1


def test_round_trips_rows_past_32_bits() -> None:
    rows = [0, 5, 2**32 + 1, 2**40, 2**62]
    assert deserialize_bitmap(serialize_bitmap(rows), num_records=2**62 + 1).tolist() == rows
    assert deserialize_bitmap(serialize_bitmap(np.array(rows[::-1], np.int64)), num_records=2**62 + 1).tolist() == rows


def test_refuses_corrupt_vectors(tmp_path: pathlib.Path) -> None:
    good = serialize_bitmap([1, 2])
    with pytest.raises(OffsetStoreError, match="magic"):
        deserialize_bitmap(b"\0" * len(good), num_records=3)
    with pytest.raises(OffsetStoreError, match="past its bitmap|ends inside"):
        deserialize_bitmap(good[:12] + b"\x05\x00", num_records=3)
    body = bytearray(dv_file_bytes(good))
    body[-1] ^= 1
    (tmp_path / "deletion_vector_a7567e93-e200-48a2-b605-3cb04211cb7d.bin").write_bytes(bytes(body))
    dv = new_file_descriptor(uuid.UUID("a7567e93-e200-48a2-b605-3cb04211cb7d"), good, 2)
    fs = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    with pytest.raises(OffsetStoreError, match="CRC"):
        read_deleted_rows(dv, fs, tmp_path.as_uri(), num_records=3)
    with pytest.raises(OffsetStoreError, match="outside the table"):
        read_deleted_rows(DeletionVector("p", "/etc/deletion_vector.bin", 1, 4, 1), fs, tmp_path.as_uri(),
                          num_records=3)
    with pytest.raises(OffsetStoreError, match="storage type"):
        DeletionVector.of({"storageType": "x", "pathOrInlineDv": "", "sizeInBytes": 1, "cardinality": 1})


# Hostile vectors, built by hand in the portable format (RoaringFormatSpec): a vector's bytes are
# few where its rows are many, so every count is checked from the container headers before a row
# is expanded, and the rows come back as one numpy array (no Python object per row).

def _runs_bitmap(keys: Sequence[int], *, runs: Sequence[Tuple[int, int]] = ((0, 65535),),
                 header_card: Optional[int] = None) -> bytes:
    """A portable 32-bit RoaringBitmap of run containers at ``keys``, each holding ``runs`` ((start, length - 1)
    pairs); ``header_card`` is what the descriptive header claims (its cardinality minus one)."""
    n = len(keys)
    flags = bytearray((n + 7) // 8)
    for i in range(n):
        flags[i // 8] |= 1 << (i % 8)
    card = sum(length + 1 for _, length in runs) - 1 if header_card is None else header_card
    header = b"".join(struct.pack("<HH", k, min(card, 0xFFFF)) for k in keys)
    container = struct.pack("<H", len(runs)) + b"".join(struct.pack("<HH", s, n_) for s, n_ in runs)
    start = 4 + len(flags) + len(header) + (4 * n if n >= 4 else 0)
    offsets = b"".join(struct.pack("<I", start + i * len(container)) for i in range(n)) if n >= 4 else b""
    return struct.pack("<I", 12347 | (n - 1) << 16) + bytes(flags) + header + offsets + container * n


_EMPTY_BITMAP = struct.pack("<II", 12346, 0)


def _vector(buckets: Sequence[Tuple[int, bytes]]) -> bytes:
    return struct.pack("<iQ", 1681511377, len(buckets)) + b"".join(struct.pack("<I", h) + b for h, b in buckets)


def _inline(data: bytes, cardinality: int) -> DeletionVector:
    padded = data + b"\0" * (-len(data) % 4)
    return DeletionVector("i", z85_encode(padded), None, len(data), cardinality)


def _read(dv: Optional[DeletionVector], num_records: int) -> Any:
    return read_deleted_rows(dv, _fs(), TABLE.as_uri(), num_records=num_records)


@pytest.mark.parametrize("num_records, cardinality, message", [
    # its last container's rows start past the file's last row: refused from the headers' keys
    (100, 2**32, "bucket 0 holds rows from 4294901760 on, past the file's last row 99"),
    # counted from the runs' lengths: more rows than the file holds, or than the descriptor says
    (2**32 - 1, 2**32, "deletes at least 4294967296 rows of a file of 4294967295 rows"),
    (2**33, 10, "holds at least 4294967296 rows where its descriptor says 10"),
])
def test_a_full_bucket_of_runs_is_counted_from_its_headers_and_refused_before_it_is_expanded(
        num_records: int, cardinality: int, message: str) -> None:
    full = _runs_bitmap(range(65536))  # 2**32 rows in 0.9 MB; their expansion into Python ints took over an hour
    assert len(BitMap.deserialize(full)) == 2**32  # a valid bitmap, as CRoaring reads it
    tracemalloc.start()
    try:
        with pytest.raises(OffsetStoreError, match=message):
            deserialize_bitmap(_vector([(0, full)]), num_records=num_records, cardinality=cardinality)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20, peak  # nothing per row (2**32 positions would be 32 GiB even in numpy)


def test_a_cardinality_lie_is_refused_before_the_rows_are_expanded() -> None:
    # the header says 1 row per container, the runs hold 65536: the runs' own lengths count
    lie = _runs_bitmap(range(4096), header_card=0)
    tracemalloc.start()
    try:
        with pytest.raises(OffsetStoreError, match="at least 268435456 rows where its descriptor says 4096"):
            _read(_inline(_vector([(0, lie)]), 4096), num_records=2**40)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20, peak


def test_buckets_past_the_files_rows_are_refused_at_the_first_one() -> None:
    # 20,000 empty buckets: each parse re-copied the rest of the vector (quadratic); none may lie
    # past the file's last row, so the second one is already refused
    hostile = _vector([(h, _EMPTY_BITMAP) for h in range(20000)])
    with pytest.raises(OffsetStoreError, match="bucket 1 .*past the file's last row 99"):
        _read(_inline(hostile, 0), num_records=100)
    with pytest.raises(OffsetStoreError, match="out of order"):
        _read(_inline(_vector([(0, _EMPTY_BITMAP), (0, _EMPTY_BITMAP)]), 0), num_records=2**33)
    # delta-spark writes an empty bitmap for each bucket below the highest: taken
    rows = _read(_inline(_vector([(0, _EMPTY_BITMAP), (1, _runs_bitmap([0], runs=[(5, 0)]))]), 1),
                 num_records=2**32 + 10)
    assert rows.tolist() == [2**32 + 5]


@pytest.mark.parametrize("runs, num_records, message", [
    ([(0, 99)], 100, None),  # all 100 rows of a 100-row file: taken
    ([(0, 100)], 100, "101 rows .*file of 100 rows"),
    ([(50, 49), (200, 0)], 300, None),
    ([(50, 49), (200, 0)], 200, "row 200, past the file's last row 199"),
])
def test_rows_are_checked_against_the_files_record_count(runs: List[Tuple[int, int]], num_records: int,
                                                         message: Optional[str]) -> None:
    count = sum(length + 1 for _, length in runs)
    dv = _inline(_vector([(0, _runs_bitmap([0], runs=runs))]), count)
    if message is None:
        rows = _read(dv, num_records)
        assert isinstance(rows, np.ndarray) and rows.dtype == np.int64
        assert rows.tolist() == [r for s, n in runs for r in range(s, s + n + 1)]
    else:
        with pytest.raises(OffsetStoreError, match=message):
            _read(dv, num_records)


@pytest.mark.parametrize("bucket, count", [
    # headers and run lengths agree with the descriptor (20 rows), but the runs overlap
    (_runs_bitmap([0], runs=[(0, 9), (5, 9)]), 20),
    # a bitmap container whose header says 5000 rows holds 65536
    (struct.pack("<IIHHI", 12346, 1, 0, 4999, 16) + b"\xff" * 8192, 5000),
])
def test_containers_that_are_not_what_their_headers_say_are_refused(bucket: bytes, count: int) -> None:
    with pytest.raises(OffsetStoreError, match="bucket 0 is not a valid RoaringBitmap"):
        _read(_inline(_vector([(0, bucket)]), count), 2**16)
