"""Functions the cluster tier's tests ship to executors: standard library only, so that an executor's Python
worker imports nothing else of the tests to run them."""

from __future__ import annotations

import os
import pathlib
import time
from typing import Any, Iterator


def gate(folder: str, batches: Iterator[Any]) -> Iterator[Any]:
    """A ``mapInArrow`` function: write ``task-<pid>`` (this Python worker's pid) into ``folder``, then hold
    the task until ``<folder>/go`` exists (at most 180 s), then pass the batches through unchanged."""
    marker = pathlib.Path(folder) / f"task-{os.getpid()}"
    marker.write_text(str(os.getpid()))
    deadline = time.monotonic() + 180
    while not (pathlib.Path(folder) / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    yield from batches
