"""The size limits of the layout: no module over 400 lines but declaration tables, at most 15 modules at the top of
``kafka_group``.

A module past 400 lines holds more than one responsibility more often than not; split it along a real seam (one
responsibility per module), never by cutting it in half. A declaration table (one entry per option) is long by
nature and is exempt, each exemption with its reason. ``kafka_group``'s top level keeps the shared bases (the offset
model, errors, redaction, JSON text) and the driver; everything else lives in the folder of its concern.
"""

from __future__ import annotations

import pathlib
from typing import Dict, List

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: The shipped sources the limits apply to.
SOURCES = (ROOT / "connector", ROOT / "python")
#: The most lines a module may have.
MAX_LINES = 400
#: Modules allowed past MAX_LINES (paths relative to the repository), each with its reason.
EXEMPT: Dict[str, str] = {
    # a declaration table: one OptionSpec per option (spelling, default, parser, docs), read by every other module
    "connector/kafka_group/config/option_catalog.py": "declaration table",
}
#: The most modules directly in connector/kafka_group (its __init__.py not counted).
MAX_TOP_LEVEL = 15


def _lines(path: pathlib.Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _long_modules() -> Dict[str, int]:
    return {path.relative_to(ROOT).as_posix(): _lines(path) for source in SOURCES for path in source.rglob("*.py")
            if _lines(path) > MAX_LINES}


def test_no_module_is_over_the_line_limit_but_declaration_tables() -> None:
    over = sorted(f"{name}: {lines} lines" for name, lines in _long_modules().items() if name not in EXEMPT)
    assert over == [], (f"modules over {MAX_LINES} lines (split each along a real seam, or, for a declaration "
                        "table, add it to EXEMPT with its reason):\n" + "\n".join(over))


def test_every_exemption_is_still_needed() -> None:
    """An exempt module that was split or shrank leaves the list, so the list never hides a new long module."""
    long = _long_modules()
    stale = sorted(name for name in EXEMPT if name not in long)
    assert stale == [], f"exempt but no longer over {MAX_LINES} lines (or gone): remove from EXEMPT: {stale}"


def test_the_top_of_kafka_group_holds_at_most_15_modules() -> None:
    top: List[str] = sorted(path.name for path in (ROOT / "connector" / "kafka_group").glob("*.py")
                            if path.name != "__init__.py")
    assert len(top) <= MAX_TOP_LEVEL, (f"{len(top)} modules directly in connector/kafka_group (at most "
                                       f"{MAX_TOP_LEVEL}); move some into the folder of their concern: {top}")
