"""Records no Kafka client library writes, sent to a real broker as a raw Produce request.

confluent-kafka (and Kafka's Java client) take header keys as text and write them as UTF-8, so a
header key that is not UTF-8, which the protocol allows and a hostile or buggy producer sends, needs
the record batch built here: Produce v3, record batch v2 (``magic`` 2, CRC-32C), one record.
"""

from __future__ import annotations

import socket
import struct
from typing import List, Optional, Sequence, Tuple

__all__ = ["crc32c", "leader", "produce_raw", "record_batch", "zigzag_varint"]


def _crc32c_table() -> List[int]:
    table = []
    for n in range(256):
        crc = n
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC32C = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), as record batches v2 carry it."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC32C[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def zigzag_varint(value: int) -> bytes:
    """``value`` as a zigzag varint (Kafka's record fields, Confluent's Protobuf message indexes)."""
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        bits = zigzag & 0x7F
        zigzag >>= 7
        if zigzag:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def _bytes(value: Optional[bytes]) -> bytes:
    return zigzag_varint(-1) if value is None else zigzag_varint(len(value)) + value


def record_batch(value: bytes, headers: Sequence[Tuple[bytes, Optional[bytes]]], timestamp_ms: int) -> bytes:
    """A record batch v2 of one record (no key) with ``headers`` as raw bytes."""
    body = (b"\x00" + zigzag_varint(0) + zigzag_varint(0) + _bytes(None) + _bytes(value) + zigzag_varint(len(headers))
            + b"".join(_bytes(key) + _bytes(val) for key, val in headers))
    record = zigzag_varint(len(body)) + body
    after_crc = struct.pack(">hiqqqhii", 0, 0, timestamp_ms, timestamp_ms, -1, -1, -1, 1) + record
    after_length = struct.pack(">ib", -1, 2) + struct.pack(">I", crc32c(after_crc)) + after_crc
    return struct.pack(">qi", 0, len(after_length)) + after_length


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def produce_raw(leader: Tuple[str, int], topic: str, partition: int, value: bytes,
                headers: Sequence[Tuple[bytes, Optional[bytes]]], timestamp_ms: int, timeout_s: float = 30) -> None:
    """Append one record to ``topic``-``partition`` through its ``leader`` (host, port), acks=all.

    Raises
    ------
    AssertionError
        The broker refused it (its error code in the message).
    """
    batch = record_batch(value, headers, timestamp_ms)
    partition_data = struct.pack(">ii", partition, len(batch)) + batch
    body = (struct.pack(">hhi", -1, -1, int(timeout_s * 1000)) + struct.pack(">i", 1) + _string(topic)
            + struct.pack(">i", 1) + partition_data)
    request = struct.pack(">hhi", 0, 3, 1) + _string("raw-producer") + body  # Produce v3, correlation id 1
    with socket.create_connection(leader, timeout=timeout_s) as conn:
        conn.sendall(struct.pack(">i", len(request)) + request)
        size = struct.unpack(">i", _read(conn, 4))[0]
        response = _read(conn, size)
    # correlation id, topics [1], name, partitions [1]: index, error code, base offset...
    name_length = struct.unpack(">h", response[8:10])[0]
    at = 10 + name_length + 4
    index, error = struct.unpack(">ih", response[at:at + 6])
    assert (index, error) == (partition, 0), f"the broker refused the raw record: error code {error}"


def _read(conn: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        assert chunk, "the broker closed the connection"
        data.extend(chunk)
    return bytes(data)


def leader(bootstrap_servers: str, topic: str, partition: int) -> Tuple[str, int]:
    """The (host, port) of ``topic``-``partition``'s leader, from the cluster's metadata."""
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": bootstrap_servers}).list_topics(topic, timeout=30)
    broker = metadata.brokers[metadata.topics[topic].partitions[partition].leader]
    return str(broker.host), int(broker.port)
