"""A keyed batch never collects its change set to the driver (SCD1: the latest event per key; SCD2,
``--scd 2``: every event).

Each measurement is a fresh driver process (tests/integration/keyed_driver_memory.py) that lands a
warm-up batch, then the measured batches of N random-key upserts of ~400 bytes, and reports its own
peak RSS (``ru_maxrss`` of the Python driver alone; Spark's JVM is another process). N grows tenfold,
from ~20 MB of changes to ~200 MB: a driver that collected them (the driver MERGE holds the change set
as Arrow, and more while converting it) would grow its peak by far more than the bound below.

Into a table with deletion vectors; and into one without (copy-on-write by the executors), with a batch
holding a truncate, then a batch with ``ignore_null_updates`` (each replaced row's values read by the
executors where the change is NULL). The second also checks what landed. The same holds for a batch
that is mostly deletes of long keys: their tombstones are written by the executors too (``--deletes``),
and every delete is recorded.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from typing import Dict, List

import pytest

from tests.support import REPO

pytestmark = pytest.mark.integration

SMALL, LARGE = 50_000, 500_000
#: ~400 bytes per change: LARGE is ~200 MB of changes. The driver's peak may grow by a quarter of that at most.
GROWTH_BOUND_KIB = 48 * 1024


def _peak_growth(table: pathlib.Path, changes: int, flags: List[str]) -> Dict[str, int]:
    result = subprocess.run([sys.executable, "-m", "tests.integration.keyed_driver_memory", str(table), str(changes),
                             *flags],
                            cwd=REPO, env={**os.environ, "PYSPARK_PYTHON": sys.executable}, capture_output=True,
                            timeout=900, start_new_session=True)
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    report: Dict[str, int] = json.loads(result.stdout.decode().strip().splitlines()[-1])
    return report


@pytest.mark.parametrize("flags", [[], ["--copy-on-write"], ["--scd", "2"]],
                         ids=["deletion-vectors", "copy-on-write-truncate-ignore-null-updates", "scd2-deletion-vectors"])
def test_the_drivers_peak_memory_stays_flat_while_the_change_set_grows_tenfold(tmp_path: pathlib.Path,
                                                                               flags: List[str]) -> None:
    small = _peak_growth(tmp_path / "small", SMALL, flags)
    large = _peak_growth(tmp_path / "large", LARGE, flags)
    grown = (large["after_kib"] - large["before_kib"]) - (small["after_kib"] - small["before_kib"])
    assert grown < GROWTH_BOUND_KIB, (small, large)
    if "--copy-on-write" in flags:  # the truncate emptied the table; no row lost its v or its extra to a NULL
        for report in (small, large):
            assert report["warm"] == 0 and 0 < report["rows"] == report["v"] == report["extra"], report


def test_the_drivers_peak_memory_stays_flat_while_a_batch_of_deletes_grows_tenfold(tmp_path: pathlib.Path) -> None:
    small = _peak_growth(tmp_path / "small", SMALL, ["--deletes"])
    large = _peak_growth(tmp_path / "large", LARGE, ["--deletes"])
    grown = (large["after_kib"] - large["before_kib"]) - (small["after_kib"] - small["before_kib"])
    assert grown < GROWTH_BOUND_KIB, (small, large)
    # every delete became a tombstone: one per key whose latest event of its batch is a delete
    assert small["tombstones"] == small["deletes"] and large["tombstones"] == large["deletes"], (small, large)
