"""JSON text from outside the connector (options, checkpoints, progress, request files), parsed so
that every way it can be malformed is one error the caller turns into its own.

:func:`json.loads` fails in more ways than :class:`json.JSONDecodeError`: nesting deeper than the
interpreter's recursion limit raises :class:`RecursionError` (``"[" * 100000``), a number of more
than 4300 digits a plain :class:`ValueError` (Python's int-to-str limit), bytes that are not UTF-8
a :class:`UnicodeDecodeError`. :func:`parse_json` turns each into :class:`NotJson` with a short
reason, and refuses documents nested deeper than :data:`MAX_DEPTH` (none of the connector's is
deeper than 6; deeper ones only make every later walk over them a recursion risk). The numbers
the connector reads from JSON (partitions, offsets, timestamps, transaction versions) are checked
against the ranges Kafka and Delta give them with :func:`in_range`.

The readers (:mod:`kafka_group.offsets`, :mod:`kafka_group.formats`, the flow-control channel)
raise their own :mod:`kafka_group.errors` class with the reason; this module raises no error of
the hierarchy itself, so that each message names its document.
"""

from __future__ import annotations

import json
from typing import Any, List, Tuple, Union

__all__ = ["INT32_MAX", "INT64_MAX", "MAX_DEPTH", "ExactNumber", "NotJson", "compact", "in_range", "parse_json", "show"]

#: Nesting levels a document may have (objects and lists).
MAX_DEPTH = 64
#: The largest Kafka partition number (a Java int).
INT32_MAX = 2**31 - 1
#: The largest Kafka offset or timestamp, and Delta transaction version (a Java long).
INT64_MAX = 2**63 - 1


class NotJson(ValueError):
    """The text is not a JSON document the connector reads; ``str()`` is the reason, without the text."""


class ExactNumber(float):
    """A JSON number with a fraction or an exponent, as :func:`parse_json` gives it with ``exact_numbers``:
    its float value (for arithmetic and comparisons), and :attr:`text`, the literal as written
    (``12345678901234567.89`` has no exact float; ``1e400`` none at all), which :func:`compact` writes back."""

    __slots__ = ("text",)
    text: str

    def __new__(cls, text: str) -> "ExactNumber":
        number = super().__new__(cls, text)
        number.text = text
        return number


def parse_json(text: Union[str, bytes], *, exact_numbers: bool = False) -> Any:
    """The JSON value of ``text``.

    Parameters
    ----------
    text : str or bytes
        The document (bytes: UTF-8, or UTF-16/32 as :func:`json.loads` detects).
    exact_numbers : bool, default False
        Numbers with a fraction or an exponent become :class:`ExactNumber` (a float that keeps its
        literal) instead of plain floats; whole numbers are exact ints either way.

    Raises
    ------
    NotJson
        Malformed JSON (with the position), nesting deeper than :data:`MAX_DEPTH`, a number
        Python does not convert, or bytes that are not UTF-8.
    """
    try:
        value = json.loads(text, parse_float=ExactNumber) if exact_numbers else json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotJson(f"{exc.msg} at character {exc.pos}") from None
    except RecursionError:
        raise NotJson(f"nested more than {MAX_DEPTH} levels deep") from None
    except UnicodeDecodeError as exc:
        raise NotJson(f"not UTF-8 (byte {exc.start})") from None
    except ValueError as exc:  # a number beyond Python's int-to-str limit
        raise NotJson(str(exc).split(";")[0]) from None
    if depth_exceeds(value, MAX_DEPTH):
        raise NotJson(f"nested more than {MAX_DEPTH} levels deep")
    return value


def depth_exceeds(value: Any, limit: int) -> bool:
    """Whether ``value`` nests objects and lists more than ``limit`` levels deep (no recursion)."""
    stack: List[Tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def compact(value: Any) -> str:
    """``value`` (of :func:`parse_json`) as compact JSON text: no blanks between items, text as is (not
    ``\\u`` escaped), each :class:`ExactNumber` as its literal. Objects and lists are nested at most
    :data:`MAX_DEPTH` levels in what :func:`parse_json` returns, so the recursion is bounded."""
    if isinstance(value, ExactNumber):
        return value.text
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(key, ensure_ascii=False)}:{compact(item)}"
                              for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(compact(item) for item in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def in_range(value: Any, low: int, high: int) -> bool:
    """Whether ``value`` is a whole number (not a bool) with ``low <= value <= high``."""
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def show(value: Any, limit: int = 200) -> str:
    """``value`` as JSON for an error message, shortened; never fails (a value too deep for JSON, or
    with a number beyond Python's int-to-str limit, is named by its type)."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        text = f"a {type(value).__name__}"
    return text if len(text) <= limit else text[: limit - 3] + "..."
