"""A keyed batch into a table with deletion vectors never collects its change set to the driver.

Each measurement is a fresh driver process (tests/integration/keyed_driver_memory.py) that lands a
warm-up batch, then one batch of N random-key upserts of ~400 bytes, and reports its own peak RSS
(``ru_maxrss`` of the Python driver alone; Spark's JVM is another process). N grows tenfold, from
~20 MB of changes to ~200 MB: a driver that collected them (the driver MERGE holds the change set
as Arrow, and more while converting it) would grow its peak by far more than the bound below.
The same holds for a batch that is mostly deletes of long keys: their tombstones are written by the
executors too (``--deletes``), and every delete is recorded.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from typing import Dict

import pytest

from tests.support import REPO

pytestmark = pytest.mark.integration

SMALL, LARGE = 50_000, 500_000
#: ~400 bytes per change: LARGE is ~200 MB of changes. The driver's peak may grow by a quarter of that at most.
GROWTH_BOUND_KIB = 48 * 1024


def _peak_growth(table: pathlib.Path, changes: int, *options: str) -> Dict[str, int]:
    result = subprocess.run([sys.executable, "-m", "tests.integration.keyed_driver_memory", str(table), str(changes),
                             *options],
                            cwd=REPO, env={**os.environ, "PYSPARK_PYTHON": sys.executable}, capture_output=True,
                            timeout=900, start_new_session=True)
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    report: Dict[str, int] = json.loads(result.stdout.decode().strip().splitlines()[-1])
    return report


def test_the_drivers_peak_memory_stays_flat_while_the_change_set_grows_tenfold(tmp_path: pathlib.Path) -> None:
    small = _peak_growth(tmp_path / "small", SMALL)
    large = _peak_growth(tmp_path / "large", LARGE)
    grown = (large["after_kib"] - large["before_kib"]) - (small["after_kib"] - small["before_kib"])
    assert grown < GROWTH_BOUND_KIB, (small, large)


def test_the_drivers_peak_memory_stays_flat_while_a_batch_of_deletes_grows_tenfold(tmp_path: pathlib.Path) -> None:
    small = _peak_growth(tmp_path / "small", SMALL, "--deletes")
    large = _peak_growth(tmp_path / "large", LARGE, "--deletes")
    grown = (large["after_kib"] - large["before_kib"]) - (small["after_kib"] - small["before_kib"])
    assert grown < GROWTH_BOUND_KIB, (small, large)
    # every delete became a tombstone: one per key whose latest event of its batch is a delete
    assert small["tombstones"] == small["deletes"] and large["tombstones"] == large["deletes"], (small, large)
