"""Unit tests' shared fixtures."""

from __future__ import annotations

from typing import Iterator

import pytest


@pytest.fixture(autouse=True)
def _forget_registered_secrets() -> Iterator[None]:
    """Each test starts with the secrets registered before it (none of another test's): the registry of
    :mod:`kafka_group.redaction` is per process, and a test's secret would be scrubbed from the next one's text."""
    from kafka_group import redaction

    saved = redaction._secrets, redaction._pattern
    yield
    redaction._secrets, redaction._pattern = saved
