"""The compiled read path's librdkafka lines go to the ``kafka_group.librdkafka`` logger, as the Python
clients' do, never raw to stderr (an unreachable broker printed ``%3|...|FAIL|`` lines there)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from kafka_group.read.read_path import native_module
from tests.support import REPO

_SCRIPT = textwrap.dedent("""
    import logging, sys, time
    logging.basicConfig(stream=sys.stdout, level=logging.DEBUG, format="%(name)s %(levelname)s %(message)s")
    from kafka_group.read.native_client import NativeConsumer
    from kafka_group.read.read_path import native_module
    class Seen(logging.Handler):
        failed = False
        def emit(self, record):
            Seen.failed = Seen.failed or "FAIL" in record.getMessage()
    logging.getLogger("kafka_group.librdkafka").addHandler(Seen())
    consumer = NativeConsumer(native_module(), {"bootstrap.servers": "127.0.0.1:9", "group.id": "g",
                                                "client.id": "probe-reader", "reconnect.backoff.ms": "50"})
    deadline = time.monotonic() + 30  # until librdkafka's first failed connection is logged
    while not Seen.failed and time.monotonic() < deadline:
        consumer.log_lines()
        time.sleep(0.02)
    consumer.close()
""")


def test_an_unreachable_broker_is_logged_through_the_logger_not_printed_to_stderr() -> None:
    if native_module() is None:
        pytest.skip("the compiled read path is not built here (python native/build_native.py --inplace)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(REPO / p) for p in ("connector", "python"))}
    done = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=60, env=env,
                          cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert "|FAIL|" not in done.stderr and "%3|" not in done.stderr, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("kafka_group.librdkafka ")]
    assert any("FAIL" in line and "Connection refused" in line and "probe-reader" in line for line in lines), \
        done.stdout
    assert all(" ERROR " in line for line in lines if "FAIL" in line), lines
