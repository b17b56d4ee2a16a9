"""The documents a user reads outside the docs site (README.md, CONTRIBUTING.md, SECURITY.md) and the pages of
``docs/``: every relative link names a file that exists (and, with ``#anchor``, a heading of it), the README stays
short and reaches the pages a newcomer needs, and no document names an internal issue number.

``mkdocs build --strict`` (``scripts/docs.sh``, CI) checks the links between the pages of ``docs/``; this test also
covers the three documents at the top, which the site does not build.
"""

from __future__ import annotations

import pathlib
import re
from typing import Iterator, List, Tuple

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOP = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "SECURITY.md"]
DOCUMENTS = TOP + sorted((ROOT / "docs").glob("*.md"))
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """The anchor of a Markdown heading, as GitHub and MkDocs' toc make it (lower case, punctuation dropped)."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    kept = "".join(c for c in text if c.isalnum() or c in " -")
    return "-".join(kept.split())


def _anchors(path: pathlib.Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def _links(path: pathlib.Path) -> Iterator[Tuple[str, str]]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    for target in _LINK.findall(text):
        if not re.match(r"[a-z]+:", target):
            file, _, anchor = target.partition("#")
            yield file, anchor


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_names_a_file_and_heading_that_exist(document: pathlib.Path) -> None:
    broken: List[str] = []
    for file, anchor in _links(document):
        target = (document.parent / file).resolve() if file else document
        if not target.exists():
            broken.append(f"{file}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
            broken.append(f"{file}#{anchor}: no such heading")
    assert broken == []


def test_the_readme_is_short_and_reaches_install_options_limits_and_the_demo_in_one_click() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    targets = {file + ("#" + anchor if anchor else "") for file, anchor in _links(ROOT / "README.md")}
    assert {"docs/install.md", "docs/options.md", "docs/exactly-once.md#limits", "docs/performance.md",
            "CONTRIBUTING.md", "SECURITY.md"} <= targets
    assert "bash scripts/demo.sh" in readme and "bash scripts/test.sh" in readme


@pytest.mark.parametrize("document", DOCUMENTS + [ROOT / "tests" / "README.md", ROOT / "bench" / "README.md"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_no_document_names_an_internal_issue_number(document: pathlib.Path) -> None:
    found = re.findall(r"\bissues? #?\d+", document.read_text(encoding="utf-8"), re.I)
    assert found == [], f"{document.name} names issues a reader cannot follow: {found}"


def test_the_exactly_once_limits_are_one_section_naming_each_limit() -> None:
    page = (ROOT / "docs" / "exactly-once.md").read_text(encoding="utf-8")
    found = re.search(r"^## Limits\n(.*?)(?=^## )", page, re.S | re.M)
    assert found and page.count("\n## Limits\n") == 1
    for limit in ("VACUUM", "Tables the sink refuses", "dbfs:", "shared file system", "Stateless transformations",
                  "One group per table", "AWS_S3_ALLOW_UNSAFE_RENAME"):
        assert limit in found.group(1), limit
