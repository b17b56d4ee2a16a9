"""docs/troubleshooting.md quotes messages the code prints, so the page cannot drift from the code.

Each line of the page's ``text`` blocks that starts with ``kafka_group.errors.<Class>: `` is a connector message:
``<Class>`` is a class of :mod:`kafka_group.errors`, and the text between the page's ``<...>`` placeholders (the parts
that vary) is text of the string literals in ``connector/`` and ``python/`` (f-strings and concatenations included;
a message built from several literals is checked piece by piece, the ". " and ": " that join them left out). The
``orders-bronze failed:`` lines, real messages with their values, are checked by
``tests/integration/test_stream_errors.py``, which raises them.
"""

from __future__ import annotations

import ast
import pathlib
import re
from functools import lru_cache
from typing import Iterator, List

import kafka_group.errors

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "troubleshooting.md"
#: A message line of the page: the class and the text.
_OWN = re.compile(r"^kafka_group\.errors\.(\w+): (.+)$")
_PLACEHOLDER = re.compile(r"<[^<>]*>")
#: Between placeholders, pieces shorter than this (": ", ". ") are joins, not wording.
_SHORTEST = 4


def _pieces(node: ast.AST) -> Iterator[str]:
    """The constant text of a string expression, a formatted value as a break (``\\x00``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, ast.JoinedStr):
        for part in node.values:
            yield part.value if isinstance(part, ast.Constant) and isinstance(part.value, str) else "\x00"
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        yield from _pieces(node.left)
        yield from _pieces(node.right)
    else:
        yield "\x00"


@lru_cache(maxsize=1)
def source_text() -> str:
    """Every string literal of the sources, their constant parts separated by ``\\x00``."""
    parts: List[str] = []
    for folder in ("connector", "python"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.Constant, ast.JoinedStr, ast.BinOp)):
                    parts.append("".join(_pieces(node)))
    return "\x00".join(parts)


def quoted_messages() -> List[str]:
    text = PAGE.read_text(encoding="utf-8")
    lines = [line for block in re.findall(r"```text\n(.*?)```", text, re.S) for line in block.splitlines()]
    return [line for line in lines if _OWN.match(line)]


def test_the_page_quotes_at_least_ten_of_the_connector_s_messages() -> None:
    assert len(quoted_messages()) >= 10


def test_every_quoted_message_is_one_the_code_prints() -> None:
    known = source_text()
    drifted = []
    for line in quoted_messages():
        found = _OWN.match(line)
        assert found is not None
        cls, message = found.groups()
        if not isinstance(getattr(kafka_group.errors, cls, None), type):
            drifted.append(f"{cls}: no such class in kafka_group.errors")
            continue
        pieces = [p.lstrip(".: ") for p in _PLACEHOLDER.split(message) if len(p.strip(".: ")) >= _SHORTEST]
        assert max(map(len, pieces)) >= 25, f"too little of the message is quoted to check: {line}"
        drifted += [f"{piece!r} (in: {line[:80]}...)" for piece in pieces if piece not in known]
    assert drifted == [], "quoted text the code does not print:\n" + "\n".join(drifted)


def test_a_changed_word_is_caught() -> None:
    known = source_text()
    assert "could not reach the Kafka cluster at '" in known
    assert "could not contact the Kafka cluster at '" not in known
