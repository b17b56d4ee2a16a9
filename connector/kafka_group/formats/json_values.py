"""What the format readers share: JSON values read with errors that name the document.

Every reader of :mod:`kafka_group.formats` fails with :class:`~kafka_group.errors.FormatError`
naming the document, what was expected and what was found; these helpers say it the same way.
"""

from __future__ import annotations

from typing import Any, FrozenSet, Mapping

from kafka_group.errors import FormatError
from kafka_group.json_text import INT32_MAX, INT64_MAX, NotJson, in_range, parse_json, show
from kafka_group.offsets import TopicPartition

__all__ = ["NOT_JSON", "is_offset", "loads", "partition_lists", "partition_number", "show", "source_offset_value"]


def loads(text: str, what: str, expected: str) -> Any:
    try:
        return parse_json(text)
    except NotJson as exc:
        raise FormatError(f"{what} is not JSON ({exc}): expected {expected}, found {show(text)}") from None


def is_offset(value: Any) -> bool:
    """Whether ``value`` is a Kafka offset: a whole number from 0 to a Java long's largest."""
    return in_range(value, 0, INT64_MAX)


def partition_number(what: str, topic: str, key: Any) -> int:
    if isinstance(key, str) and key.isdigit() and key.isascii() and len(key) <= 10:
        key = int(key)
    if in_range(key, 0, INT32_MAX):
        return int(key)
    raise FormatError(f"{what}: partition {show(key)} of topic {show(topic, 100)} must be a whole number from 0 "
                      f"to {INT32_MAX}")


def partition_lists(what: str, value: Any) -> FrozenSet[TopicPartition]:
    """``{"orders": [0, 3]}`` (the form reports use) as a set of partitions."""
    if not isinstance(value, Mapping):
        raise FormatError(f"{what} must be an object of partition lists like {{\"orders\": [0, 3]}}, found {show(value)}")
    found: set[TopicPartition] = set()
    for topic, partitions in value.items():
        if not isinstance(partitions, list):
            raise FormatError(f"{what}: topic {show(topic, 100)} must map to a list of partitions, found "
                              f"{show(partitions)}")
        found.update(TopicPartition(str(topic), partition_number(what, str(topic), p)) for p in partitions)
    return frozenset(found)


#: What :func:`source_offset_value` returns for an offset that is not JSON (another source's).
NOT_JSON = object()


def source_offset_value(value: Any) -> Any:
    """A source offset as progress holds it, parsed: None, the JSON value, or ``NOT_JSON``.

    Spark embeds offsets as JSON values in ``progress.json`` (``null`` when there is
    none); pyspark's ``SourceProgress`` turns them back into JSON text (``"null"``).
    """
    if value is None:
        return None
    if isinstance(value, str):
        if not value.strip():
            return None
        try:
            return parse_json(value)
        except NotJson:
            return NOT_JSON  # another source's offset, as Spark printed it (or too deep to be ours)
    return value
