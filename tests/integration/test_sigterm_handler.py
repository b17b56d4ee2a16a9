"""A second SIGTERM while the first one's handler is still closing must not deadlock the process.

Seen in the parity tests (tests/integration/test_parity_spark_kafka.py): Spark's
streaming source runner of a failed kafka-group query got SIGTERM twice; the
second ran the handler again inside the first one's ``threading.Event.set()``
(flow channel close) and waited for ever on the Event's non-reentrant lock.
The runner outlived its JVM, every thread parked on a futex. This test runs
the handler in a child process (no broker, no Spark) with a ``close`` that
holds a plain lock while a second SIGTERM arrives.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.integration

_CHILD = textwrap.dedent("""
    import os, signal, sys, threading
    from kafka_group.membership import leave_group_on_sigterm

    lock = threading.Lock()
    closed = []

    def close():
        with lock:                       # like Event.set(): a non-reentrant lock held while closing
            os.kill(os.getpid(), signal.SIGTERM)   # the second SIGTERM arrives now
            for _ in range(1000):        # bytecodes: the interpreter runs pending handlers here
                pass
            closed.append(True)
        sys.stdout.write("closed\\n")
        sys.stdout.flush()

    leave_group_on_sigterm(close)
    os.kill(os.getpid(), signal.SIGTERM)
    threading.Event().wait(120)          # the handler ends the process; never reached
    sys.stdout.write("still alive\\n")
""")


def test_second_sigterm_during_close_neither_deadlocks_nor_recloses() -> None:
    child = subprocess.Popen([sys.executable, "-c", _CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = child.communicate(timeout=60)  # a bound: a deadlocked child never ends by itself
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
        pytest.fail(f"the process hung after a second SIGTERM during close (deadlock); stdout {out!r} stderr {err[-2000:]!r}")
    print(f"exit {child.returncode}, stdout {out!r}")
    assert out == "closed\n", err[-2000:]  # closed exactly once, and never went on running
    assert child.returncode == -signal.SIGTERM
