"""docs/dependencies.md's licence table says what the installed distributions' own metadata says.

Each row's licence is compared by family (Apache, MIT, BSD, PSF, ...) with the distribution's
``License-Expression``, else the first line of its ``License``, plus its ``License ::`` classifiers:
a family named on one side and not on the other fails. A distribution the table lists but this
environment lacks is skipped by name (the test environment installs every extra, so none should be).
"""

from __future__ import annotations

import importlib.metadata
import pathlib
import re
from typing import List, Set, Tuple

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

#: Licence families, each with the pattern that finds it in a licence text, an SPDX expression or a classifier.
_FAMILIES = {
    "Apache": r"Apache",
    "MIT": r"\bMIT\b(?!-CMU|-0)",
    "MIT-0": r"\bMIT-0\b",
    "MIT-CMU": r"\bMIT-CMU\b",
    "BSD": r"\bBSD\b|\b[0-9]-Clause BSD\b|\bBSD-[0-9]-Clause\b",
    "0BSD": r"\b0BSD\b",
    "PSF": r"\bPSF\b|Python Software Foundation",
    "Zlib": r"\bZlib\b",
    "CC0": r"\bCC0\b",
}


def _families(text: str) -> Set[str]:
    found = {name for name, pattern in _FAMILIES.items() if re.search(pattern, text)}
    return found - ({"BSD"} if "0BSD" in found and not re.search(r"(?<!0)BSD", text) else set())


def _rows() -> List[Tuple[str, str]]:
    text = (ROOT / "docs" / "dependencies.md").read_text(encoding="utf-8")
    table = text.split("<!-- licences:python -->", 1)[1].split("<!-- /licences:python -->", 1)[0]
    rows = []
    for line in table.strip().splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows.append((cells[0].strip("`"), cells[2]))
    return rows


def _metadata_licence(name: str) -> str:
    """What ``name``'s metadata says of its licence: the expression, else the first line of ``License``,
    and its ``License ::`` classifiers."""
    metadata = importlib.metadata.metadata(name)
    expression, text = (metadata.get_all(field) or [""] for field in ("License-Expression", "License"))
    licence = expression[0] or next(iter(text[0].strip().splitlines()), "")
    classifiers = [c for c in (metadata.get_all("Classifier") or []) if c.startswith("License ::")]
    return " ; ".join([licence, *classifiers])


def test_the_table_lists_every_requirement_of_the_package() -> None:
    listed = {name.lower().replace("_", "-") for name, _ in _rows()}
    requires = importlib.metadata.distribution("pyspark-kafka-group").requires or []
    names = {re.split(r"[\[<>=!~; ]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requires}
    assert names - listed == set(), f"docs/dependencies.md lists no licence for {sorted(names - listed)}"


@pytest.mark.parametrize("name,documented", _rows(), ids=[name for name, _ in _rows()])
def test_the_documented_licence_is_the_distributions(name: str, documented: str) -> None:
    try:
        actual = _metadata_licence(name)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{name} is not installed here")
    assert _families(documented) == _families(actual), (name, documented, actual)
    assert not re.search(r"\bGPL|\bAGPL|\bLGPL|\bSSPL|\bBUSL", actual), (name, actual)  # nothing copyleft
