"""The bitmap of a Delta deletion vector: its bytes, written and read (PROTOCOL.md, "Deletion Vector Format").

The bitmap is the magic number 1681511377 (little endian, 4 bytes) then a 64-bit RoaringBitmap in the
portable format of the RoaringFormatSpec's 64-bit extension (the count of 32-bit buckets as 8 bytes
little endian, then per bucket its high 32 bits, 4 bytes little endian, and a portable 32-bit
RoaringBitmap, written by pyroaring; read here: its rows are counted from its container headers and
checked against the descriptor and the file's row count before pyroaring expands them, into a numpy
array). delta-spark's older "native" layout, magic number 1681511376, is read too, never written.

A vector that does not match (a wrong magic number, a bucket or container past the file's last row, more
rows than the descriptor's ``cardinality`` or the file's ``numRecords``) raises
:class:`~kafka_group.errors.OffsetStoreError` before its rows are expanded: a row set read wrongly would
resurrect or lose rows. Descriptors and DV files: :mod:`kafka_group.delta.log.deletion_vectors`.
"""

from __future__ import annotations

import array
import struct
from typing import Any, Generator, List, NoReturn, Optional, Tuple

from kafka_group.errors import OffsetStoreError

__all__ = ["MAGIC", "NATIVE_MAGIC", "deserialize_bitmap", "serialize_bitmap", "union_rows"]

MAGIC = 1681511377
NATIVE_MAGIC = 1681511376


def serialize_bitmap(rows: Any) -> bytes:
    """The RoaringBitmapArray bytes (magic number, then the 64-bit portable bitmap) of ``rows`` (row
    positions: a numpy integer array, or any iterable of ints; in any order, repeats allowed)."""
    import numpy as np
    from pyroaring import BitMap

    positions = union_rows(rows)
    if len(positions) and positions[0] < 0:
        raise ValueError(f"a deletion vector holds row positions 0 to 2**63-1, not {int(positions[0])}")
    highs = positions >> 32
    keys = union_rows(highs)
    out = [struct.pack("<iQ", MAGIC, len(keys))]
    for high, start, end in zip(keys.tolist(), np.searchsorted(highs, keys, "left").tolist(),
                                np.searchsorted(highs, keys, "right").tolist()):
        lows = (positions[start:end] & 0xFFFFFFFF).astype(np.uint32)
        bitmap = BitMap(array.array("I", lows.tobytes()))  # pyroaring adds an array.array in C
        bitmap.run_optimize()
        out.append(struct.pack("<I", high) + bitmap.serialize())
    return b"".join(out)


def union_rows(*parts: Any) -> Any:
    """The distinct row positions of ``parts`` (numpy integer arrays or iterables of ints), sorted, as
    a numpy ``int64`` array. (Not ``numpy.unique``: numpy 2.4's took 17 s for 10 million sorted
    values here, ``numpy.sort`` 0.2 s.)"""
    import numpy as np

    try:
        arrays = [np.asarray(p if isinstance(p, np.ndarray) else list(p), dtype=np.int64) for p in parts]
    except OverflowError:
        raise ValueError("a deletion vector holds row positions 0 to 2**63-1") from None
    rows = np.sort(np.concatenate(arrays)) if arrays else np.zeros(0, dtype=np.int64)
    return rows[np.concatenate(([True], rows[1:] != rows[:-1]))] if len(rows) else rows


def deserialize_bitmap(data: bytes, *, num_records: int, cardinality: Optional[int] = None) -> Any:
    """The row positions RoaringBitmapArray ``data`` deletes from a file of ``num_records`` rows:
    a sorted numpy ``int64`` array (no Python object per row).

    The rows are counted from the containers' headers (an array or bitmap container's cardinality,
    a run container's run lengths) before any is expanded: a vector of more rows than
    ``cardinality`` (its descriptor's, when given) or than the file holds, or with a bucket or
    container past the file's last row, is refused first, so a few bytes of runs cannot make
    billions of rows. Then each bucket is read by pyroaring (which validates it) and its rows
    checked again: the count, the order, and the last row below ``num_records``.

    Raises
    ------
    OffsetStoreError
        Any of the above, or bytes that are not a RoaringBitmapArray.
    """
    if len(data) >= 8 and struct.unpack_from(">i", data)[0] == NATIVE_MAGIC:
        buckets = _native_buckets(data)
    else:
        buckets = _portable_buckets(data)
    return _rows_of(data, buckets, num_records, cardinality)


#: The cookies of a portable 32-bit RoaringBitmap (RoaringFormatSpec): with run containers (the
#: count of containers in its high 16 bits) and without (the count follows).
_SERIAL_COOKIE = 12347
_SERIAL_COOKIE_NO_RUNCONTAINER = 12346
#: With run containers, the offset header is written only from this many containers on.
_NO_OFFSET_THRESHOLD = 4


#: Walks a vector's buckets: yields (key, where its 32-bit bitmap starts, the end of the bytes it may
#: use) and is sent where the bitmap ended (its length comes from its own headers).
_Buckets = Generator[Tuple[int, int, int], int, None]


def _portable_buckets(data: bytes) -> _Buckets:
    """The buckets of Delta's 64-bit portable layout (the magic number, the count of buckets, then
    per bucket its key and its 32-bit bitmap)."""
    if len(data) < 12 or struct.unpack_from("<i", data)[0] != MAGIC:
        raise OffsetStoreError("a deletion vector does not start with the RoaringBitmapArray magic number 1681511377")
    (count,) = struct.unpack_from("<Q", data, 4)
    if count > (len(data) - 12) // 12:  # a key and the smallest bitmap (8 bytes) per bucket
        raise OffsetStoreError(f"a deletion vector names {count} buckets in {len(data)} bytes: it ends inside its "
                               "bitmap")
    at = 12
    for _ in range(count):
        if at + 4 > len(data):
            raise OffsetStoreError("a deletion vector ends inside its bitmap")
        (high,) = struct.unpack_from("<I", data, at)
        if high >> 31:
            raise OffsetStoreError("a deletion vector holds a bucket key with its most significant bit set")
        at = yield high, at + 4, len(data)
    if at != len(data):
        raise OffsetStoreError(f"a deletion vector holds {len(data) - at} byte(s) past its bitmap")


def _native_buckets(data: bytes) -> _Buckets:
    """The same for delta-spark's older "native" RoaringBitmapArray layout (PROTOCOL.md's inline
    example is in it): big-endian magic 1681511376 and bitmap count, then per bitmap (the i-th holds
    rows ``i << 32 | low``) its size, big endian, and a portable 32-bit bitmap. Read, never written."""
    (count,) = struct.unpack_from(">i", data, 4)
    if count > (len(data) - 8) // 12:
        raise OffsetStoreError("a deletion vector ends inside its bitmap")
    at = 8
    for high in range(max(count, 0)):
        if at + 4 > len(data):
            raise OffsetStoreError("a deletion vector ends inside its bitmap")
        (size,) = struct.unpack_from(">i", data, at)
        if size < 0 or at + 4 + size > len(data):
            raise OffsetStoreError("a deletion vector ends inside its bitmap")
        end = yield high, at + 4, at + 4 + size
        if end != at + 4 + size:
            raise OffsetStoreError(f"a deletion vector's bitmap {high} is not the {size} bytes its size says")
        at = end
    if at != len(data):
        raise OffsetStoreError(f"a deletion vector holds {len(data) - at} byte(s) past its bitmap")


def _rows_of(data: bytes, buckets: _Buckets, num_records: int, cardinality: Optional[int]) -> Any:
    """Count every bucket's rows from its headers (refusing as soon as they are too many), then expand."""
    import numpy as np
    from pyroaring import BitMap

    last = num_records - 1  # the file's last row position
    most = num_records if cardinality is None else min(num_records, cardinality)
    found: List[Tuple[int, int, int, int]] = []  # key, start, end, rows
    total, previous = 0, -1
    try:
        high, start, limit = next(buckets)
        while True:
            if high <= previous:
                raise OffsetStoreError(f"a deletion vector's buckets are out of order ({high} after {previous})")
            if high > last >> 32:
                raise OffsetStoreError(f"a deletion vector's bucket {high} holds rows past the file's last row "
                                       f"{last} (numRecords {num_records})")
            size, rows = _count_bucket(data, start, limit, high, last)
            total += rows
            if total > most:
                _too_many(total, num_records, cardinality)
            found.append((high, start, start + size, rows))
            previous = high
            high, start, limit = buckets.send(start + size)
    except StopIteration:
        pass
    if cardinality is not None and total != cardinality:
        raise OffsetStoreError(f"a deletion vector holds {total} rows where its descriptor says {cardinality}")
    parts = []
    for high, start, stop, rows in found:
        try:
            bitmap = BitMap.deserialize(data[start:stop])
        except ValueError as exc:  # pyroaring's validation: overlapping runs, unsorted arrays, ...
            raise OffsetStoreError(f"a deletion vector's bucket {high} is not a valid RoaringBitmap: {exc}") from None
        if len(bitmap) != rows:
            raise OffsetStoreError(f"a deletion vector's bucket {high} holds {len(bitmap)} rows where its headers "
                                   f"say {rows}")
        parts.append(np.frombuffer(bitmap.to_array(), dtype=np.uint32).astype(np.int64) | (high << 32))
    positions = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    if len(positions) and positions[-1] > last:
        raise OffsetStoreError(f"a deletion vector holds row {int(positions[-1])}, past the file's last row {last} "
                               f"(numRecords {num_records})")
    if np.any(np.diff(positions) <= 0):
        raise OffsetStoreError("a deletion vector holds rows out of order or twice")
    return positions


def _count_bucket(data: bytes, at: int, end: int, high: int, last: int) -> Tuple[int, int]:
    """(its length in bytes, its rows) of the portable 32-bit RoaringBitmap at ``data[at:end]``,
    from its headers and its run containers' lengths, no row expanded. A container keyed past the
    file's ``last`` row is refused."""
    import numpy as np

    def need(upto: int) -> None:
        if upto > end:
            raise OffsetStoreError("a deletion vector ends inside its bitmap")

    need(at + 4)
    (cookie,) = struct.unpack_from("<I", data, at)
    if cookie & 0xFFFF == _SERIAL_COOKIE:
        n = (cookie >> 16) + 1
        need(at + 4 + (n + 7) // 8)
        is_run = np.unpackbits(np.frombuffer(data, np.uint8, (n + 7) // 8, at + 4), bitorder="little")[:n]
        pos, offsets = at + 4 + (n + 7) // 8, n >= _NO_OFFSET_THRESHOLD
    elif cookie == _SERIAL_COOKIE_NO_RUNCONTAINER:
        need(at + 8)
        (n,) = struct.unpack_from("<I", data, at + 4)
        if n > 1 << 16:
            raise OffsetStoreError(f"a deletion vector's bucket {high} names {n} containers (at most 65536)")
        is_run, pos, offsets = np.zeros(n, np.uint8), at + 8, True
    else:
        raise OffsetStoreError(f"a deletion vector's bucket {high} is not a portable RoaringBitmap (cookie {cookie})")
    need(pos + 4 * n)
    header = np.frombuffer(data, "<u2", 2 * n, pos).astype(np.int64)
    keys, cards = header[0::2], header[1::2] + 1
    pos += 4 * n + (4 * n if offsets else 0)
    need(pos)
    if n and np.any(np.diff(keys) <= 0):
        raise OffsetStoreError(f"a deletion vector's bucket {high} holds containers out of order")
    if n and (high << 32 | int(keys[-1]) << 16) > last:
        raise OffsetStoreError(f"a deletion vector's bucket {high} holds rows from "
                               f"{high << 32 | int(keys[-1]) << 16} on, past the file's last row {last}")
    runs_at: List[int] = []  # where each run container's runs start
    runs_n: List[int] = []  # and how many it has
    rows = 0
    for run, card in zip(is_run.tolist(), cards.tolist()):  # scalars only: one step per container
        if run:
            need(pos + 2)
            (runs,) = struct.unpack_from("<H", data, pos)
            runs_at.append(pos + 2)
            runs_n.append(runs)
            pos += 2 + 4 * runs
        else:
            rows += card
            pos += 2 * card if card <= 4096 else 8192
        need(pos)
    if runs_n:  # each run is (start, length - 1): the lengths of all runs, gathered at once
        counts = np.array(runs_n, dtype=np.int64)
        first = np.repeat(np.array(runs_at, dtype=np.int64), counts)
        index = np.arange(len(first), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        where = first + 4 * index + 2
        raw = np.frombuffer(data, np.uint8)
        rows += int(raw[where].astype(np.int64).sum() + (raw[where + 1].astype(np.int64) << 8).sum()) + len(first)
    return pos - at, rows


def _too_many(total: int, num_records: int, cardinality: Optional[int]) -> NoReturn:
    if cardinality is not None and total > cardinality and cardinality <= num_records:
        raise OffsetStoreError(f"a deletion vector holds at least {total} rows where its descriptor says "
                               f"{cardinality} (counted from its headers, before expanding any)")
    raise OffsetStoreError(f"a deletion vector deletes at least {total} rows of a file of {num_records} rows "
                           "(numRecords; counted from its headers, before expanding any)")
