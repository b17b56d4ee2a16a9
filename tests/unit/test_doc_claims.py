"""Every claim of ``docs/`` that something is tested names a test that exists and runs in CI's default run.

The claims, how they are found and the tests that back them: ``tests/doc_claims.py``. A test is found in its
file's syntax tree (never imported); one marked ``slow`` or a ``long_tier`` case (the long tier, which CI does
not run) does not back a claim.
"""

from __future__ import annotations

import textwrap
from typing import List

import pytest

from tests.doc_claims import (
    CLAIMS, NAMED_IN_BACKTICKS, NOT_CLAIMS, Claim, backing, check_test, claim_blocks, docs, resolve_named, all_test_files,
)

_FIX = ("name its test in the text (`tests/<tier>/test_file.py::test_name`) or add a Claim to CLAIMS in "
        "tests/doc_claims.py quoting the claim with the tests that back it; if no test backs it, say so in the "
        "page (\"not tested here\") instead of claiming it")


def _problems(claims: List[Claim]) -> List[str]:
    problems: List[str] = []
    for page in docs():
        text = page.read_text(encoding="utf-8")
        for block in claim_blocks(page.name, text):
            if any(doc == block.doc and quote in block.text for doc, quote, _ in NOT_CLAIMS):
                continue
            tests = backing(block, [])  # the tests the block names itself; CLAIMS' are checked below
            if not tests and not backing(block, claims):
                first = block.text.strip().splitlines()[0].strip()
                problems.append(f"docs/{block.doc}:{block.line}: a claim of being tested backed by no test: "
                                f"{first[:100]!r}: {_FIX}")
            for reference in tests:
                why = check_test(_qualified(reference))
                if why is not None:
                    problems.append(f"docs/{block.doc}:{block.line}: {why}")
    for claim in claims:  # every entry, also those quoting a claim the scan does not find by its words
        for reference in claim.tests:
            why = check_test(reference)
            if why is not None:
                problems.append(f"docs/{claim.doc}: {claim.quote[:60]!r}: {why}")
    return problems


def _qualified(reference: str) -> str:
    """A test named in a page as ``test_file.py::name``: its file in whichever tier has it."""
    from tests.doc_claims import ROOT

    file = reference.split("::")[0]
    if file.startswith("tests/"):
        return reference
    for tier in ("unit", "integration", "cluster"):
        if (ROOT / "tests" / tier / file).is_file():
            return f"tests/{tier}/{reference}"
    return reference


def test_every_claim_of_being_tested_names_a_test_that_runs_in_ci() -> None:
    problems = _problems(list(CLAIMS))
    assert not problems, "\n".join(problems)


def test_every_test_a_page_names_exists_and_runs_in_ci() -> None:
    """A test file or function a page names in backticks (`test_x.py`, `test_x`, `test_some_behaviour`)."""
    files = all_test_files()
    problems = []
    for page in docs():
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for name in NAMED_IN_BACKTICKS.findall(line):
                why = resolve_named(name, files)
                if why is not None:
                    problems.append(f"docs/{page.name}:{number}: {why}")
    assert not problems, "\n".join(problems)


def test_every_entry_quotes_its_page_as_it_is_now() -> None:
    pages = {page.name: " ".join(page.read_text(encoding="utf-8").split()) for page in docs()}
    stale = [f"{claim.doc}: {claim.quote!r}" for claim in CLAIMS if " ".join(claim.quote.split()) not in pages.get(claim.doc, "")]
    stale += [f"{doc}: {quote!r}" for doc, quote, _ in NOT_CLAIMS if quote not in pages.get(doc, "")]
    assert not stale, ("these entries of tests/doc_claims.py quote text no longer in their page (the claim moved or "
                       "went: update or drop the entry):\n" + "\n".join(stale))


def test_a_claim_without_a_test_is_found_and_named() -> None:
    page = textwrap.dedent("""\
        # A page

        - Kafka's quotas: a throttled fetch is waited for (tested on Apache Kafka).
        - Not tested here: real clouds.
        """)
    blocks = list(claim_blocks("page.md", page))
    assert [b.line for b in blocks] == [3]
    assert backing(blocks[0], []) == []
    assert backing(blocks[0], [Claim("page.md", "a throttled fetch is waited for", ("tests/x.py::y",))]) == ["tests/x.py::y"]


@pytest.mark.parametrize("reference, says", [
    ("tests/integration/test_nothing_here.py::test_x", "does not exist"),
    ("tests/integration/test_retention.py::test_no_such_test", "has no test test_no_such_test"),
    ("tests/integration/test_retention.py::test_retention_with_offsets_table[no-such-case]", "has no case"),
    ("test_retention.py::test_retention_with_offsets_table", "is not of the form"),
])
def test_a_reference_to_no_test_is_refused(reference: str, says: str) -> None:
    why = check_test(reference)
    assert why is not None and says in why, why


def test_a_slow_test_or_long_tier_case_does_not_back_a_claim(tmp_path: object) -> None:
    # test_examples.py's demo test is marked slow (CI runs the demo itself, scripts/demo.sh)
    why = check_test("tests/integration/test_examples.py::"
                     "test_demo_shows_two_members_a_stop_a_kill_and_a_restart_and_lands_every_record_once")
    assert why is not None and "marked slow" in why
