"""A short chaos run (tests/chaos.py): random SIGKILLs and restarts of three queries of one group."""

from __future__ import annotations

import pathlib
import pytest

from tests.chaos import run_chaos
from tests.support import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.chaos]


def test_short_chaos_run_loses_and_duplicates_nothing(kafka: Cluster, tmp_path: pathlib.Path) -> None:
    figures = run_chaos(kafka, tmp_path, seconds=30, seed=7)
    print(figures)
    assert figures["kills"] >= 2 and figures["rebalances"] > 0
    assert figures["duplicates"] == 0 and figures["unexpected"] == 0
    assert figures["missing"] == 0, figures
