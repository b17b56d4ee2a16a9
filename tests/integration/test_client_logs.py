"""librdkafka's own log lines go through Python logging, on every client the connector makes.

Before, each client printed them raw on stderr (``%3|...|FAIL|rdkafka#producer-1| ...``): an
unreachable broker gave dozens of lines around the connector's one clear error. Now they are
records of the ``kafka_group.librdkafka`` logger, at their syslog level mapped to Python's,
scrubbed of secrets like every record of the connector, and shown only where logging is set up.
No broker is needed: a bound, never-listening port refuses every connection.
"""

from __future__ import annotations

import logging
import os
import pathlib
import socket
import subprocess
import sys
import time
from typing import Callable, Iterator, List

import pytest

from kafka_group.auth.clients import new_admin, new_consumer
from kafka_group.redaction import register_secret

pytestmark = pytest.mark.integration

ROOT = pathlib.Path(__file__).resolve().parents[2]
LIBRDKAFKA_LOGGER = "kafka_group.librdkafka"
CANARY = "Librdkafka-Log-Canary-4242"


@pytest.fixture()
def refused_address() -> Iterator[str]:
    """host:port of a socket bound and never listening: connections to it are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{sock.getsockname()[1]}"


def _wait_for_record(records: Callable[[], List[logging.LogRecord]], poll: Callable[[], object]) -> logging.LogRecord:
    deadline = time.monotonic() + 180  # a bound for a broken run: the first refusal comes at once
    while time.monotonic() < deadline:
        poll()
        found = [r for r in records() if r.name == LIBRDKAFKA_LOGGER and "Connection refused" in r.getMessage()]
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError("no librdkafka record about the refused connection within 180 s")


def test_admin_and_consumer_log_through_python_logging_scrubbed(
    refused_address: str, caplog: pytest.LogCaptureFixture
) -> None:
    register_secret(CANARY)
    settings = {"bootstrap.servers": refused_address, "client.id": CANARY}
    caplog.set_level(logging.INFO, logger=LIBRDKAFKA_LOGGER)
    admin = new_admin(settings)
    record = _wait_for_record(lambda: caplog.records, lambda: admin.poll(0.1))
    assert record.levelno == logging.ERROR and "FAIL" in record.getMessage()
    assert CANARY not in record.getMessage() and "***" in record.getMessage()
    caplog.clear()
    consumer = new_consumer({**settings, "group.id": "g"}, client="reader")
    try:
        _wait_for_record(lambda: caplog.records, lambda: consumer.poll(0.1))
    finally:
        consumer.close()


def test_unreachable_broker_prints_no_raw_librdkafka_lines(refused_address: str, tmp_path: pathlib.Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(ROOT / p) for p in ("connector", "python"))}
    env.pop("KAFKA_GROUP_LOG_LEVEL", None)
    done = subprocess.run(
        [sys.executable, "-m", "kafka_group.offsets_tool", "show", "--table", str(tmp_path / "t"), "--group", "g",
         "--bootstrap-servers", refused_address, "--topic", "orders", "--timeout-ms", "3000"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert "could not reach the Kafka cluster" in done.stderr
    assert "|FAIL|" not in done.stderr, done.stderr
