"""Delta deletion vectors (DVs): their descriptors and files, and reading and writing them (one owner).

Everything here follows Delta's PROTOCOL.md (the bitmap inside, "Deletion Vector Format", is
:mod:`kafka_group.delta.log.dv_bitmap`'s):

- "Deletion Vector Descriptor Schema": a descriptor is ``storageType`` (``u``: a file relative to
  the table, named from a Z85-encoded UUID after an optional random prefix; ``i``: the bitmap
  inline, Z85-encoded; ``p``: a file at an absolute path), ``pathOrInlineDv``, ``offset`` (absent
  for ``i``), ``sizeInBytes`` (of the serialized bitmap) and ``cardinality``. "Derived Fields":
  ``u`` resolves to ``<table>/<prefix>/deletion_vector_<uuid>.bin``.
- "Deletion Vector File Storage Format": a DV file is one version byte (1), then per DV its
  size (4 bytes), the bitmap, and the CRC-32 of the bitmap (4 bytes); sizes and checksums are big
  endian (as delta-spark writes them, checked against its files in tests/unit/data). The
  descriptor's ``offset`` is where that size field starts.

Anything that does not match (a wrong size or checksum, a descriptor of an unknown storage type, more or
fewer rows than the descriptor's ``cardinality``, a row at or past the file's ``numRecords``) raises :class:`~kafka_group.errors.OffsetStoreError`: a row set read wrongly would
resurrect or lose rows. Nothing read here is executed; a ``p`` path is opened through the table's
file system only when it lies inside the table.

Caller: the keyed sink's own MERGE (:mod:`kafka_group.delta.keyed.own_merge`), on the driver.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional

from kafka_group.delta.log.dv_bitmap import deserialize_bitmap
from kafka_group.errors import OffsetStoreError

__all__ = [
    "DeletionVector",
    "dv_file_bytes",
    "new_file_descriptor",
    "read_deleted_rows",
    "z85_decode",
    "z85_encode",
]

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


def read_deleted_rows(dv: Optional[DeletionVector], fs: Any, table_root: str, *, num_records: int) -> Any:
    """The row positions ``dv`` deletes from a file of ``num_records`` rows (its physical row
    count): a sorted numpy ``int64`` array, empty for None.

    ``fs`` is the table's file system rooted at the table (``table_root`` is the table's URI, to
    turn a ``p`` path inside the table into a relative one). The rows are counted from the vector's
    headers and checked against the descriptor's ``cardinality`` and ``num_records`` before any is
    expanded (:func:`deserialize_bitmap`).
    """
    import numpy as np

    if dv is None:
        return np.zeros(0, dtype=np.int64)
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
    if dv.cardinality < 0:
        raise OffsetStoreError(f"a deletion vector's descriptor says {dv.cardinality} rows")
    return deserialize_bitmap(data, num_records=num_records, cardinality=dv.cardinality)


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
