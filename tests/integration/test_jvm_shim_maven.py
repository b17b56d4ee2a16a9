"""The JVM shim's own Maven build: it compiles, and its parser test passes on the shared samples.

``jvm-shim/pom.xml`` builds the same sources the Python package compiles on first use;
its JUnit test reads the sample documents of ``tests/data/formats``, which the Python
format tests read too, so both parsers of query progress are held to one set of
documents. Maven fetches Spark (``provided``) and JUnit into its local cache on first use.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.support import REPO

pytestmark = pytest.mark.integration


@pytest.mark.skipif(shutil.which("mvn") is None, reason="needs Maven ('mvn' on PATH)")
def test_shim_builds_with_maven_and_its_parser_test_reads_the_shared_samples() -> None:
    done = subprocess.run(
        ["mvn", "-B", "-f", str(REPO / "jvm-shim" / "pom.xml"), "test"],
        cwd=REPO, capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    runs = re.findall(r"Tests run: (\d+), Failures: (\d+), Errors: (\d+), Skipped: (\d+)\s*$", done.stdout, re.M)
    assert runs, done.stdout[-3000:]
    total, failures, errors, _ = (int(n) for n in runs[-1])
    assert total >= 5 and failures == 0 and errors == 0
