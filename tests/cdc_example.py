"""docs/cdc.md's worked example: its events, and its SCD1 and SCD2 tables as the page prints them.

The page holds three blocks between ``<!-- worked-example:NAME -->`` and ``<!-- /worked-example:NAME -->``
(``events``, ``scd1``, ``scd2``), each a Markdown table; ``tests/integration/test_cdc_auto.py`` produces the
events, lands them with the sink and compares the printed tables with the page's.
"""

from __future__ import annotations

import pathlib
import re
from typing import Any, Dict, List, Sequence

from tests.cdc_support import Event

DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "cdc.md"
_BLOCK = re.compile(r"<!-- worked-example:(\w+) -->\n(.*?)<!-- /worked-example:\1 -->", re.S)


def worked_example_blocks(text: str) -> Dict[str, str]:
    """The page's blocks by name (their text, without the markers)."""
    return {m.group(1): m.group(2) for m in _BLOCK.finditer(text)}


def _cells(line: str) -> List[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def example_events(block: str) -> List[List[Event]]:
    """The events block (``batch | id | name | city | op | ts``) as the batches of events to produce."""
    lines = [line for line in block.splitlines() if line.startswith("|")]
    header = _cells(lines[0])
    batches: Dict[int, List[Event]] = {}
    for line in lines[2:]:
        row = dict(zip(header, _cells(line)))
        value = {"name": row["name"], "city": row["city"], "op": row["op"], "ts": int(row["ts"])}
        batches.setdefault(int(row["batch"]), []).append((0, row["id"], value))
    return [batches[b] for b in sorted(batches)]


def render_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], order_by: Sequence[str] = ("id",)) -> str:
    """``rows`` as the page prints a table: ordered by ``order_by`` (NULL first), NULL as ``NULL``."""
    def order(row: Sequence[Any]) -> Any:
        return tuple((row[columns.index(c)] is not None, row[columns.index(c)] or 0) for c in order_by)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in sorted(rows, key=order):
        lines.append("| " + " | ".join("NULL" if v is None else str(v) for v in row) + " |")
    return "\n".join(lines) + "\n"
