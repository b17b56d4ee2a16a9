"""Delta deletion vectors (DVs): their descriptors, their bytes, and reading and writing them (one owner).

Everything here follows Delta's PROTOCOL.md:

- "Deletion Vector Descriptor Schema": a descriptor is ``storageType`` (``u``: a file relative to
  the table, named from a Z85-encoded UUID after an optional random prefix; ``i``: the bitmap
  inline, Z85-encoded; ``p``: a file at an absolute path), ``pathOrInlineDv``, ``offset`` (absent
  for ``i``), ``sizeInBytes`` (of the serialized bitmap) and ``cardinality``. "Derived Fields":
  ``u`` resolves to ``<table>/<prefix>/deletion_vector_<uuid>.bin``.
- "Deletion Vector Format": the bitmap is the magic number 1681511377 (little endian, 4 bytes)
  then a 64-bit RoaringBitmap in the portable format of the RoaringFormatSpec's 64-bit extension
  (the count of 32-bit buckets as 8 bytes little endian, then per bucket its high 32 bits, 4
  bytes little endian, and a portable 32-bit RoaringBitmap, read and written by pyroaring).
- "Deletion Vector File Storage Format": a DV file is one version byte (1), then per DV its
  size (4 bytes), the bitmap, and the CRC-32 of the bitmap (4 bytes); sizes and checksums are big
  endian (as delta-spark writes them, checked against its files in tests/unit/data). The
  descriptor's ``offset`` is where that size field starts.

Anything that does not match (a wrong magic number, size or checksum, a descriptor of an unknown
storage type) raises :class:`~kafka_group.errors.OffsetStoreError`: a row set read wrongly would
resurrect or lose rows. Nothing read here is executed; a ``p`` path is opened through the table's
file system only when it lies inside the table.

Caller: the keyed sink's own MERGE (:mod:`kafka_group.delta.keyed_own_merge`), on the driver.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Mapping, Optional

from kafka_group.errors import OffsetStoreError

__all__ = [
    "DeletionVector",
    "deserialize_bitmap",
    "dv_file_bytes",
    "new_file_descriptor",
    "read_deleted_rows",
    "serialize_bitmap",
    "z85_decode",
    "z85_encode",
]

MAGIC = 1681511377
NATIVE_MAGIC = 1681511376
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_INDEX = {c: i for i, c in enumerate(_Z85)}


def z85_encode(data: bytes) -> str:
    """Z85 (ZeroMQ RFC 32) of ``data``, whose length is a multiple of 4."""
    if len(data) % 4:
        raise ValueError("Z85 encodes whole 4-byte words")
    out = []
    for (word,) in struct.iter_unpack(">I", data):
        chars = []
        for _ in range(5):
            word, digit = divmod(word, 85)
            chars.append(_Z85[digit])
        out.append("".join(reversed(chars)))
    return "".join(out)


def z85_decode(text: str) -> bytes:
    """The bytes of Z85 ``text`` (a multiple of 5 characters of the Z85 alphabet)."""
    if len(text) % 5:
        raise OffsetStoreError(f"a deletion vector's Z85 text has {len(text)} characters, not a multiple of 5")
    out = bytearray()
    for i in range(0, len(text), 5):
        word = 0
        for c in text[i:i + 5]:
            digit = _Z85_INDEX.get(c)
            if digit is None:
                raise OffsetStoreError("a deletion vector's Z85 text holds a character outside the Z85 alphabet")
            word = word * 85 + digit
        if word > 0xFFFFFFFF:
            raise OffsetStoreError("a deletion vector's Z85 text holds a group above 32 bits")
        out += struct.pack(">I", word)
    return bytes(out)


def serialize_bitmap(rows: Iterable[int]) -> bytes:
    """The RoaringBitmapArray bytes (magic number, then the 64-bit portable bitmap) of ``rows``."""
    from pyroaring import BitMap

    buckets: Dict[int, list[int]] = {}
    for row in rows:
        if row < 0 or row >> 63:
            raise ValueError(f"a deletion vector holds row positions 0 to 2**63-1, not {row}")
        buckets.setdefault(row >> 32, []).append(row & 0xFFFFFFFF)
    out = [struct.pack("<iQ", MAGIC, len(buckets))]
    for high in sorted(buckets):
        bitmap = BitMap(buckets[high])
        bitmap.run_optimize()
        out.append(struct.pack("<I", high) + bitmap.serialize())
    return b"".join(out)


def deserialize_bitmap(data: bytes) -> Any:
    """The row positions (a pyroaring ``BitMap64``) of RoaringBitmapArray ``data``."""
    from pyroaring import BitMap, BitMap64

    if len(data) >= 8 and struct.unpack_from(">i", data)[0] == NATIVE_MAGIC:
        return _deserialize_native(data)
    if len(data) < 12 or struct.unpack_from("<i", data)[0] != MAGIC:
        raise OffsetStoreError("a deletion vector does not start with the RoaringBitmapArray magic number 1681511377")
    (count,) = struct.unpack_from("<Q", data, 4)
    at, rows = 12, BitMap64()
    for index in range(count):
        if at + 4 > len(data):
            raise OffsetStoreError("a deletion vector ends inside its bitmap")
        (high,) = struct.unpack_from("<I", data, at)
        if high >> 31:
            raise OffsetStoreError("a deletion vector holds a bucket key with its most significant bit set")
        bitmap = BitMap.deserialize(data[at + 4:])
        # The last bucket runs to the end; an earlier one is as long as its own serialization.
        size = len(data) - at - 4 if index == count - 1 else len(bitmap.serialize())
        rows |= BitMap64(int(r) | (high << 32) for r in bitmap)
        at += 4 + size
    if at != len(data):
        raise OffsetStoreError(f"a deletion vector holds {len(data) - at} byte(s) past its bitmap")
    return rows


def _deserialize_native(data: bytes) -> Any:
    """delta-spark's older "native" RoaringBitmapArray layout (PROTOCOL.md's inline example is in
    it): big-endian magic 1681511376 and bitmap count, then per bitmap (the i-th holds rows
    ``i << 32 | low``) its size, big endian, and a portable 32-bit bitmap. Read, never written."""
    from pyroaring import BitMap, BitMap64

    (count,) = struct.unpack_from(">i", data, 4)
    at, rows = 8, BitMap64()
    for high in range(max(count, 0)):
        if at + 4 > len(data):
            raise OffsetStoreError("a deletion vector ends inside its bitmap")
        (size,) = struct.unpack_from(">i", data, at)
        if size < 0 or at + 4 + size > len(data):
            raise OffsetStoreError("a deletion vector ends inside its bitmap")
        bitmap = BitMap.deserialize(data[at + 4:at + 4 + size])
        rows |= BitMap64(int(r) | (high << 32) for r in bitmap)
        at += 4 + size
    if at != len(data):
        raise OffsetStoreError(f"a deletion vector holds {len(data) - at} byte(s) past its bitmap")
    return rows


@dataclass(frozen=True)
class DeletionVector:
    """A deletion vector descriptor, as in an ``add``/``remove`` action's ``deletionVector``."""

    storage_type: str
    path_or_inline: str
    offset: Optional[int]
    size_in_bytes: int
    cardinality: int

    @staticmethod
    def of(action: Optional[Mapping[str, Any]]) -> Optional["DeletionVector"]:
        """The descriptor of an action's ``deletionVector`` field (None when absent)."""
        if action is None:
            return None
        storage, where = action.get("storageType"), action.get("pathOrInlineDv")
        offset, size, cardinality = action.get("offset"), action.get("sizeInBytes"), action.get("cardinality")
        if storage not in ("u", "i", "p") or not isinstance(where, str) or not isinstance(size, int) \
                or not isinstance(cardinality, int) or (offset is not None and not isinstance(offset, int)):
            raise OffsetStoreError(f"a deletion vector descriptor of storage type {storage!r} is not one this "
                                   "connector reads (PROTOCOL.md: 'u', 'i' or 'p' with their fields)")
        return DeletionVector(storage, where, offset, size, cardinality)

    def to_json(self) -> Dict[str, Any]:
        """The descriptor as the log's ``deletionVector`` object."""
        out: Dict[str, Any] = {"storageType": self.storage_type, "pathOrInlineDv": self.path_or_inline}
        if self.offset is not None:
            out["offset"] = self.offset
        out.update({"sizeInBytes": self.size_in_bytes, "cardinality": self.cardinality})
        return out

    def relative_path(self) -> str:
        """The DV file of a ``u`` descriptor, relative to the table root (PROTOCOL.md, "Derived Fields")."""
        if self.storage_type != "u" or len(self.path_or_inline) < 20:
            raise OffsetStoreError("only a 'u' deletion vector descriptor names a file relative to the table")
        prefix, encoded = self.path_or_inline[:-20], self.path_or_inline[-20:]
        if prefix and not (prefix.isascii() and prefix.isalnum()):
            raise OffsetStoreError("a deletion vector's random prefix is not a plain folder name")
        name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(encoded))}.bin"
        return f"{prefix}/{name}" if prefix else name


def read_deleted_rows(dv: Optional[DeletionVector], fs: Any, table_root: str) -> Any:
    """The row positions ``dv`` deletes (an empty ``BitMap64`` for None).

    ``fs`` is the table's file system rooted at the table (``table_root`` is the table's URI, to
    turn a ``p`` path inside the table into a relative one).
    """
    from pyroaring import BitMap64

    if dv is None:
        return BitMap64()
    if dv.storage_type == "i":
        data = z85_decode(dv.path_or_inline)[:dv.size_in_bytes]
    else:
        relative = dv.relative_path() if dv.storage_type == "u" else _inside(dv.path_or_inline, table_root)
        at = dv.offset if dv.offset is not None else 1
        with fs.open_input_file(relative) as handle:
            handle.seek(at)
            head = handle.read(4)
            if len(head) != 4 or struct.unpack(">I", head)[0] != dv.size_in_bytes:
                raise OffsetStoreError(f"the deletion vector at {relative}@{at} does not hold {dv.size_in_bytes} bytes "
                                       "as its descriptor says")
            data = handle.read(dv.size_in_bytes)
            crc = handle.read(4)
        if len(data) != dv.size_in_bytes or len(crc) != 4 or struct.unpack(">I", crc)[0] != zlib.crc32(data):
            raise OffsetStoreError(f"the deletion vector at {relative}@{at} fails its CRC-32 check")
    rows = deserialize_bitmap(data)
    if len(rows) != dv.cardinality:
        raise OffsetStoreError(f"a deletion vector holds {len(rows)} rows where its descriptor says {dv.cardinality}")
    return rows


def _inside(absolute: str, table_root: str) -> str:
    root = table_root.rstrip("/") + "/"
    for candidate in (absolute, "file://" + absolute if absolute.startswith("/") else absolute):
        if candidate.startswith(root):
            rest = candidate[len(root):]
            if rest and ".." not in rest.split("/"):
                return rest
    raise OffsetStoreError("a 'p' deletion vector lies outside the table's folder; the connector reads only the "
                           "table's own files")


def dv_file_bytes(bitmap: bytes) -> bytes:
    """A DV file holding one bitmap: version 1, its size, the bitmap, its CRC-32 (its offset is 1)."""
    return b"\x01" + struct.pack(">I", len(bitmap)) + bitmap + struct.pack(">I", zlib.crc32(bitmap))


def new_file_descriptor(file_uuid: uuid.UUID, bitmap: bytes, cardinality: int) -> DeletionVector:
    """The ``u`` descriptor of a DV file named from ``file_uuid`` (at the table root) holding ``bitmap``."""
    return DeletionVector("u", z85_encode(file_uuid.bytes), 1, len(bitmap), cardinality)
