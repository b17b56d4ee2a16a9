"""The Delta application transaction ids of the offsets table, current and pre-issue-26 forms.

Each topic-partition's position is the version of the transaction
``kafka-group.v2:<group>:<topic>:<partition>`` (:func:`transaction_id`), the group and the topic
percent-encoded (``:`` is ``%3A``, ``%`` is ``%25``), so every id names one group, topic and
partition. The owner :data:`OWNER_ID`, whose version is a hash of the group id
(:func:`owner_version`), binds a table to one consumer group from its first commit.

Tables written before issue 26 hold ``kafka-group:<group>:<topic>:<partition>`` positions
(:func:`legacy_transaction_id`) and a ``kafka-group:<group>`` marker (:func:`legacy_marker_id`),
ambiguous when a group id holds ``:``; they are read only.

A partition's start chosen by positioning before anything of it landed (``startingOffsets``, the
group's offset, the checkpoint's) is recorded as its position and as the version of
``kafka-group.v2:<group>:<topic>:<partition>:start`` (:func:`start_transaction_id`): a position
equal to its recorded start is a start, not something the table read (issue 33, finding 4). A
topic's partition count, taken while the table held nothing of the topic, is the version of
``kafka-group.v2:<group>:<topic>:partitions`` (:func:`partitions_transaction_id`): a partition
numbered from it on was added since (review of issue 33's fix, finding 1).
"""

from __future__ import annotations

import functools
import hashlib
import urllib.parse

from kafka_group.offsets import TopicPartition

__all__ = [
    "OWNER_ID",
    "legacy_marker_id",
    "legacy_transaction_id",
    "owner_version",
    "partitions_transaction_id",
    "start_transaction_id",
    "transaction_id",
]

_PREFIX = "kafka-group.v2"
#: The app id whose version binds a table to one group (:func:`owner_version`).
OWNER_ID = f"{_PREFIX}:owner"
_LEGACY_PREFIX = "kafka-group"


@functools.lru_cache(maxsize=4096)
def _encode(text: str) -> str:
    """``text`` percent-encoded (UTF-8), with no ``:`` left in it (cached: a plan of 1,600 partitions encodes
    the group and each topic at every planning call, a tenth of the plan's time before)."""
    return urllib.parse.quote(text, safe="")


def transaction_id(group: str, tp: TopicPartition) -> str:
    """The Delta application transaction id holding ``tp``'s position for ``group``:
    ``kafka-group.v2:<group>:<topic>:<partition>``, group and topic percent-encoded."""
    return f"{_PREFIX}:{_encode(group)}:{_encode(tp.topic)}:{tp.partition}"


def start_transaction_id(group: str, tp: TopicPartition) -> str:
    """The Delta application transaction id recording the start positioning chose for ``tp`` before
    anything of it landed: ``kafka-group.v2:<group>:<topic>:<partition>:start`` (no position id ends so)."""
    return f"{transaction_id(group, tp)}:start"


def partitions_transaction_id(group: str, topic: str) -> str:
    """The Delta application transaction id recording how many partitions ``topic`` had while the table
    held nothing of it: ``kafka-group.v2:<group>:<topic>:partitions`` (no position id ends so)."""
    return f"{_PREFIX}:{_encode(group)}:{_encode(topic)}:partitions"


def legacy_transaction_id(group: str, tp: TopicPartition) -> str:
    """The id tables written before issue 26 hold ``tp``'s position of ``group`` under (read only)."""
    return f"{_LEGACY_PREFIX}:{group}:{tp.topic}:{tp.partition}"


def legacy_marker_id(group: str) -> str:
    """The marker tables written before issue 26 carry for ``group`` (read only; ambiguous with a
    position of a group whose id is a prefix of this one's)."""
    return f"{_LEGACY_PREFIX}:{group}"


def owner_version(group: str) -> int:
    """The version of :data:`OWNER_ID` that binds a table to ``group``: the first 63 bits of the
    SHA-256 of its id (a Delta transaction version is a non-negative long)."""
    # 'surrogatepass': a group id read back from a commit's metadata may hold a lone surrogate, which
    # strict UTF-8 refuses; every id that strict UTF-8 encodes hashes as before.
    return int.from_bytes(hashlib.sha256(group.encode("utf-8", "surrogatepass")).digest()[:8], "big") >> 1
