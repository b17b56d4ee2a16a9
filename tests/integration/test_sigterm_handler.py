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

import pathlib
import signal
import subprocess
import sys
import textwrap
from typing import Optional

import pytest

from tests.support import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.crash]

_CHILD = textwrap.dedent("""
    import os, signal, sys, threading
    from kafka_group.group.sigterm import leave_group_on_sigterm

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


def run_child_ended_by_sigterm(code: str, *args: str, hang: str, expect: Optional[str] = "closed\n") -> str:
    """Run ``code`` in a child process; it must close exactly once and end by its SIGTERM (the handler ends the
    process with SIGTERM's status, 128 + 15), not by the bound. Returns its stderr; fails naming ``hang`` when it
    deadlocks instead. ``expect``: its whole stdout (None: returns the stdout, unchecked, instead of stderr)."""
    child = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        out, err = child.communicate(timeout=60)  # a bound: a deadlocked child never ends by itself
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
        pytest.fail(f"the process hung {hang} (deadlock); stdout {out!r} stderr {err[-2000:]!r}")
    print(f"exit {child.returncode}, stdout {out!r}")
    if expect is not None:
        assert out == expect, err[-2000:]  # closed exactly once, and never went on running
    assert child.returncode == 128 + signal.SIGTERM, (out, err[-2000:])
    assert "did not finish within" not in err and "did not end within" not in err, err[-2000:]
    return err if expect is not None else out


def test_second_sigterm_during_close_neither_deadlocks_nor_recloses() -> None:
    run_child_ended_by_sigterm(_CHILD, hang="after a second SIGTERM during close")


_LOCKED_CHILD = textwrap.dedent("""
    import os, signal, sys, threading
    from kafka_group.group.sigterm import leave_group_on_sigterm

    lock = threading.Lock()               # like the offsets table's transaction versions: not reentrant

    def close():                          # what SourceDriver.close does: read the table's positions, leave
        with lock:
            sys.stdout.write("closed\\n")
            sys.stdout.flush()

    leave_group_on_sigterm(close, bound_s=10)
    # A planning call on the runner's main thread reads the table's positions under that lock when Spark
    # stops the query: SIGTERM lands between two bytecodes of the locked block.
    with lock:
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):
            pass
    threading.Event().wait(120)           # the runner's next read from its JVM; the handler ends the process
    sys.stdout.write("still alive\\n")
""")


def test_sigterm_while_the_main_thread_holds_a_lock_close_needs_leaves_once_it_is_released() -> None:
    """Spark stopped a query while its runner's main thread read the offsets table's positions under a lock that
    is not reentrant; the handler, run on that thread, closed there and waited for ever on that lock (until the
    process ended without leaving: the group kept the member until its session timed out). The close runs
    once the interrupted call has let the lock go."""
    run_child_ended_by_sigterm(_LOCKED_CHILD, hang="on SIGTERM inside a locked block close needs")


_STORM_CHILD = textwrap.dedent("""
    import os, signal, sys, threading, time
    from kafka_group.group.sigterm import leave_group_on_sigterm

    closes = []

    def close():
        closes.append(threading.current_thread().name)
        time.sleep(0.3)                   # leaving talks to the cluster
        sys.stdout.write("closed\\n" if len(closes) == 1 else f"closed again: {closes}\\n")
        sys.stdout.flush()

    def storm():                          # SIGTERM after SIGTERM, before, during and after the close
        while True:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.0005)

    leave_group_on_sigterm(close, bound_s=30)
    threading.Thread(target=storm, daemon=True).start()
    threading.Event().wait(120)
    sys.stdout.write("still alive\\n")
""")


def test_sigterm_after_sigterm_closes_once_and_ends_the_process() -> None:
    """A SIGTERM landing inside the handler runs it again, on the same thread: the handler must never wait on a
    lock (an Event's, a Thread's start), nor start a second close."""
    run_child_ended_by_sigterm(_STORM_CHILD, hang="under a storm of SIGTERMs")


_BUSY_MAIN_CHILD = textwrap.dedent("""
    import os, signal, sys
    from confluent_kafka import Consumer, TopicPartition
    from kafka_group.group.sigterm import leave_group_on_sigterm

    def close():
        sys.stdout.write("closed\\n")
        sys.stdout.flush()

    leave_group_on_sigterm(close, bound_s=20)
    consumer = Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "log_level": 0})
    os.kill(os.getpid(), signal.SIGTERM)
    # The planning call goes on into a client call that answers after 60 s (nobody listens there): librdkafka
    # waits without looking at signals, so a handler could only run afterwards.
    consumer.committed([TopicPartition("t", 0)], timeout=60)
    sys.stdout.write("still alive\\n")
""")


def test_the_process_ends_once_it_left_even_while_its_main_thread_waits_in_a_client_call() -> None:
    """Once the group is left, the process ends at once, whatever its main thread does (not at the bound)."""
    run_child_ended_by_sigterm(_BUSY_MAIN_CHILD, hang="while the main thread waits in a client call")


_STDERR_STUCK_CHILD = textwrap.dedent("""
    import logging, os, signal, sys, threading
    from kafka_group.group.sigterm import leave_group_on_sigterm

    logging.basicConfig(level=logging.INFO)   # to stderr, a pipe nobody reads (a stalled relay of the JVM)
    leave_group_on_sigterm(lambda: threading.Event().wait(), bound_s=2)   # a close that never returns
    os.kill(os.getpid(), signal.SIGTERM)
    while True:                            # fills the pipe, then blocks in a write holding the handler's lock
        logging.getLogger("planning").info("x" * 1000)
""")


def test_the_bound_ends_the_process_even_when_its_stderr_is_not_read() -> None:
    """The bound's own log line must not keep it from ending the process: another thread stuck writing to a full
    stderr pipe holds the logging handler's lock."""
    child = subprocess.Popen([sys.executable, "-c", _STDERR_STUCK_CHILD], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    try:
        code = child.wait(timeout=60)  # the bound is 2 s; stderr is read only afterwards
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
        pytest.fail("the process outlived its bound while its stderr was not read")
    finally:
        assert child.stderr is not None
        child.stderr.close()
    assert code == 128 + signal.SIGTERM


_FORKING_CHILD = textwrap.dedent("""
    import os, signal, sys, threading, time
    from kafka_group.group.sigterm import leave_group_on_sigterm

    def close():
        sys.stdout.write(f"closed in {os.getpid()}\\n")
        sys.stdout.flush()

    leave_group_on_sigterm(close, bound_s=20)
    pid = os.fork()
    if pid == 0:                           # a process forked by code in the runner: not the source's
        threading.Event().wait(60)
        os._exit(0)
    os.kill(pid, signal.SIGTERM)
    _, status = os.waitpid(pid, 0)
    sys.stdout.write(f"forked child ended by signal {os.WTERMSIG(status) if os.WIFSIGNALED(status) else None}\\n")
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGTERM)   # now the runner itself stops
    threading.Event().wait(60)
""")


def test_a_forked_child_ends_by_its_own_sigterm_and_never_closes_its_parents_member() -> None:
    """A child forked after the handler was installed shares its pipe: SIGTERM to the child woke the parent's close
    thread (the parent left and ended) while the child went on running."""
    out = run_child_ended_by_sigterm(_FORKING_CHILD, hang="after a fork", expect=None)
    lines = out.splitlines()
    assert lines[0] == f"forked child ended by signal {signal.SIGTERM.value}", out
    assert len(lines) == 2 and lines[1].startswith("closed in "), out


_ASSIGN_CHILD = textwrap.dedent("""
    import os, signal, sys, threading
    from kafka_group.group.offset_commits import GroupOffsetCommitter
    from kafka_group.group.sigterm import leave_group_on_sigterm
    from kafka_group.offsets import TopicPartition

    servers, group, topic = sys.argv[1:4]
    committer = GroupOffsetCommitter({"bootstrap.servers": servers}, group)

    def close():                          # what SourceDriver.close does with 'assign' and kafka.group.id
        committer.commit({TopicPartition(topic, 0): 7})
        committer.close()
        sys.stdout.write("closed\\n")
        sys.stdout.flush()

    leave_group_on_sigterm(close)
    # Spark's commit() runs on the runner's main thread, the one Python runs signal
    # handlers in: SIGTERM lands while that thread is inside GroupOffsetCommitter.commit,
    # between two bytecodes of its locked block (the state is held here explicitly).
    with committer._lock:
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):
            pass
    threading.Event().wait(120)           # the runner's next read from its JVM; the handler ends the process
    sys.stdout.write("still alive\\n")
""")


def test_sigterm_during_an_assign_mode_commit_leaves_and_ends_the_process(kafka: Cluster) -> None:
    """Issue 13, finding 8 (the rest): with ``assign`` and ``kafka.group.id`` the lag commits
    go through a GroupOffsetCommitter on the main thread; the SIGTERM handler's close
    commits through it again, once the interrupted commit has let its lock go."""
    from confluent_kafka import KafkaException
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    from tests.support import new_consumer, unique_name, wait_for

    topic, group = unique_name("sigterm-assign"), unique_name("group")
    kafka.create_topic(topic, 1)
    consumer = new_consumer(kafka.bootstrap_servers, group=group)

    def coordinator_answers() -> bool:
        try:
            return consumer.committed([KafkaTopicPartition(topic, 0)], timeout=10)[0].offset < 0
        except KafkaException:  # NOT_COORDINATOR while a fresh broker sets up __consumer_offsets
            return False

    try:  # the group coordinator is up, so the child's one commit is not refused for that
        wait_for(coordinator_answers, "the group coordinator", 180)
    finally:
        consumer.close()
    err = run_child_ended_by_sigterm(_ASSIGN_CHILD, kafka.bootstrap_servers, group, topic,
                                     hang="on SIGTERM during a commit")
    consumer = new_consumer(kafka.bootstrap_servers, group=group)
    try:
        committed = consumer.committed([KafkaTopicPartition(topic, 0)], timeout=10)
    finally:
        consumer.close()
    assert committed[0].offset == 7, err[-2000:]  # the last positions reached the group before the process ended


_STUCK_CHILD = textwrap.dedent("""
    import os, signal, sys, threading
    from kafka_group.group.sigterm import leave_group_on_sigterm

    def close():                          # a client call the cluster never answers
        sys.stdout.write("closing\\n")
        sys.stdout.flush()
        threading.Event().wait()

    leave_group_on_sigterm(close, bound_s=2)
    os.kill(os.getpid(), signal.SIGTERM)
    threading.Event().wait(120)
    sys.stdout.write("still alive\\n")
""")


def test_sigterm_ends_the_process_within_its_bound_when_leaving_the_group_never_returns() -> None:
    """A query stopped while its brokers did not answer left its source runner behind its JVM: the handler's
    close waited for ever in a Kafka client call. Whatever close waits for, the process ends."""
    child = subprocess.Popen([sys.executable, "-c", _STUCK_CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        out, err = child.communicate(timeout=60)  # the bound is 2 s; 60 s is the test's own bound
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
        pytest.fail(f"the process outlived its close's bound; stdout {out!r} stderr {err[-2000:]!r}")
    assert out == "closing\n", err[-2000:]
    assert child.returncode == 128 + signal.SIGTERM
    assert "did not finish within 2 s" in err


_ORPHAN = textwrap.dedent("""
    import sys, threading
    from kafka_group.group.sigterm import leave_group_on_sigterm

    leave_group_on_sigterm(lambda: None, bound_s=2)
    sys.stdout.write("ready\\n")
    sys.stdout.flush()
    threading.Event().wait(120)           # stuck, say in a client call, when its JVM ends without SIGTERM
""")

_PARENT = textwrap.dedent("""
    import os, subprocess, sys
    runner = subprocess.Popen([sys.executable, "-c", sys.argv[1]], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    assert runner.stdout.readline() == "ready\\n"
    sys.stdout.write(f"{runner.pid}\\n")
    sys.stdout.flush()
    os._exit(0)                           # the JVM ends without a word to its runner
""")


def test_a_runner_whose_jvm_is_gone_ends_whatever_its_main_thread_waits_for() -> None:
    """The process exits when its JVM is gone, also when nobody sent it SIGTERM and its main thread is stuck."""
    from tests.support import kill_survivors, still_running, wait_for

    parent = subprocess.run([sys.executable, "-c", _PARENT, _ORPHAN], capture_output=True, text=True, timeout=60)
    pid = int(parent.stdout)
    runner = {pid: pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()}
    try:
        wait_for(lambda: not still_running(runner), "the orphaned runner to end", 60)  # its bound is 2 s
    finally:
        kill_survivors(runner)
