"""A plain-text reference to a section of the README or of a page names a heading that exists.

Links (``[x](page.md#anchor)``) are checked by the strict docs build; text that names a section in words is
not: ``the README's "Schema Registry"``, ``README "Running on a cluster"``, ``README, *Secrets from the
platform*``, ``tables.md's "Table properties"``, ``([tables.md](tables.md), "Table properties the sink
honours")``, ``("Limits" in exactly-once.md)``. Each such reference in ``README.md``, ``CONTRIBUTING.md``,
``SECURITY.md`` and ``docs/*.md`` must match a heading of the file it names (the heading's text, or its
start, ignoring case and backticks); a section that moved or was renamed fails here until the text follows.
"""

from __future__ import annotations

import pathlib
import re
from typing import Iterator, List, Optional, Tuple

from tests.doc_claims import ROOT

#: The pages read, and the files a reference may name (the README, other root files, pages of docs/).
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "SECURITY.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Files of other projects a page may quote by section (Delta's protocol): not checked here.
EXTERNAL = {"PROTOCOL.md"}
_FILE = r"(?P<file>README(?:\.md)?|[A-Za-z][\w./-]*\.md)"
_QUOTED = r"(?:\"(?P<q>[^\"]{2,80})\"|\*(?P<s>[^*]{2,80})\*)"
#: ``README's "X"``, ``README "X"``, ``README, *X*``, ``page.md's "X"``, ``[page.md](page.md), "X"``.
_AFTER = re.compile(_FILE + r"(?:\]\([^)]*\))?(?:'s|,)?\s+" + _QUOTED)
#: ``("X" in page.md)``, ``"X" in the README``.
_BEFORE = re.compile(r"\"(?P<q>[^\"]{2,80})\"\s+in\s+(?:the\s+)?" + _FILE)
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def _normal(text: str) -> str:
    return " ".join(text.replace("`", "").replace("*", "").strip().rstrip(".:").split()).lower()


def references(text: str) -> Iterator[Tuple[str, str]]:
    """Each ``(file, section)`` a page's text names in words (fenced code left out)."""
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    prose = " ".join(prose.split())  # a reference may wrap
    for pattern in (_AFTER, _BEFORE):
        for match in pattern.finditer(prose):
            section = match.group("q") or (match.groupdict().get("s") or "")
            yield match.group("file"), section


def target(page: pathlib.Path, name: str) -> Optional[pathlib.Path]:
    """The file ``name`` means when ``page`` says it (None: not a file of this repository's docs)."""
    if name in ("README", "README.md"):
        return ROOT / "README.md"
    for base in (page.parent, ROOT / "docs", ROOT):
        candidate = (base / name).resolve()
        if candidate.is_file():
            return candidate
    return None


def headings(path: pathlib.Path) -> List[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return [_normal(m.group(1)) for m in map(_HEADING.match, text.splitlines()) if m]


def broken() -> List[str]:
    problems: List[str] = []
    for page in PAGES:
        for name, section in references(page.read_text(encoding="utf-8")):
            if name in EXTERNAL:
                continue
            path = target(page, name)
            wanted = _normal(section)
            if path is None:
                problems.append(f"{page.relative_to(ROOT)}: names {name} (\"{section}\"), which is not a file here")
            elif not any(h == wanted or h.startswith(wanted) for h in headings(path)):
                problems.append(f"{page.relative_to(ROOT)}: names {name}'s section \"{section}\", which "
                                f"{path.relative_to(ROOT)} has no heading for")
    return problems


def test_every_section_named_in_words_exists() -> None:
    assert broken() == [], (
        "a page names a section that is not there (moved or renamed?): link it instead "
        "([title](page.md#anchor), which the strict docs build checks) or name its heading as it is now")


def test_the_patterns_find_each_way_of_naming_a_section() -> None:
    text = ('see the README\'s "Schema\nRegistry", README "Running on a cluster", README, *Secrets from the '
            'platform*, ([tables.md](tables.md), "Table properties the sink honours"), '
            'tables.md\'s "Unity Catalog" and ("Limits" in exactly-once.md).\n```\nREADME "in code"\n```')
    assert list(references(text)) == [
        ("README", "Schema Registry"), ("README", "Running on a cluster"), ("README", "Secrets from the platform"),
        ("tables.md", "Table properties the sink honours"), ("tables.md", "Unity Catalog"),
        ("exactly-once.md", "Limits"),
    ]


def test_a_missing_section_is_found_and_an_existing_one_is_not() -> None:
    page = ROOT / "docs" / "cdc.md"
    assert any(_normal("Table properties the sink honours") == h for h in headings(ROOT / "docs" / "tables.md"))
    assert target(page, "tables.md") == ROOT / "docs" / "tables.md"
    assert target(page, "README") == ROOT / "README.md"
    assert "schema registry" not in headings(ROOT / "README.md")
