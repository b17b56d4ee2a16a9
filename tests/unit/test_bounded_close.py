"""Closing a group member is bounded whatever the cluster does: the last commits' answers and the client's close.

With the cluster gone a synchronous commit or a client's close could wait for ever: a query stopped during a Kafka
outage left its source runner behind its JVM (``tests/integration/test_stop_during_outage.py``). Here a client
that never answers stands for that cluster; the process-level bound is in ``test_sigterm_handler.py``.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, List, Optional

from confluent_kafka import TopicPartition as KafkaTopicPartition

from kafka_group.group.member_commits import MemberCommits
from kafka_group.group.offset_commits import close_within
from kafka_group.offsets import TopicPartition

TP = TopicPartition("t", 0)


class SilentClient:
    """A Kafka client whose cluster does not answer: commits are never answered, close never returns until
    :attr:`release` is set (set it at the end: the close thread is left behind)."""

    def __init__(self, answer: Optional[Callable[[List[KafkaTopicPartition]], None]] = None) -> None:
        self.commits: List[List[KafkaTopicPartition]] = []
        self.synchronous_commits = 0
        self.release = threading.Event()
        self._answer = answer

    def commit(self, offsets: List[KafkaTopicPartition], asynchronous: bool = True) -> Any:
        if not asynchronous:
            self.synchronous_commits += 1
            self.release.wait()  # what librdkafka's synchronous commit did with the coordinator gone
        self.commits.append(offsets)
        return None

    def poll(self, timeout: float) -> None:
        if self._answer is not None and self.commits:
            self._answer(self.commits.pop())
        else:
            self.release.wait(timeout)

    def close(self) -> None:
        self.release.wait()


def member_commits(client: SilentClient) -> MemberCommits:
    lock, state = threading.RLock(), threading.RLock()
    thread = threading.Thread(target=lambda: None)  # a polling thread that has ended
    return MemberCommits(client, lock, state, {TP}, thread, "g")  # type: ignore[arg-type]


def test_a_closing_member_stops_waiting_for_commit_answers_the_cluster_never_gives() -> None:
    client = SilentClient()
    commits = member_commits(client)
    try:
        commits.commit({TP: 7})  # queued by the planning thread, sent by the flush
        assert commits.flush(timeout_s=0.5) is False  # returns: unanswered, it gives up
        assert client.commits == [[KafkaTopicPartition("t", 0, 7)]]
        assert client.synchronous_commits == 0  # never the unbounded synchronous commit
    finally:
        client.release.set()


def test_a_closing_member_returns_once_the_cluster_answered_its_last_commits() -> None:
    commits: MemberCommits

    def accept(offsets: List[KafkaTopicPartition]) -> None:
        commits.on_commit(None, offsets)

    client = SilentClient(answer=accept)
    commits = member_commits(client)
    commits.commit({TP: 7})
    assert commits.flush(timeout_s=60) is True


def test_a_client_close_that_never_returns_is_given_up_after_its_bound() -> None:
    client = SilentClient()
    try:
        assert close_within(client, 0.5, "the member of group 'g'") is False
    finally:
        client.release.set()
    quick = SilentClient()
    quick.release.set()
    assert close_within(quick, 60, "the member of group 'g'") is True


def test_an_assign_mode_commit_the_coordinator_never_answers_is_given_up_after_its_bound() -> None:
    """``assign`` with ``kafka.group.id`` commits through a committer, also in the SIGTERM handler: its
    commit waits for the answer within a bound, never in librdkafka's unbounded synchronous commit."""
    from kafka_group.group.offset_commits import GroupOffsetCommitter

    committer = GroupOffsetCommitter({"bootstrap.servers": "127.0.0.1:9"}, "g")  # nothing listens there
    try:
        assert committer.commit({TP: 7}, timeout_s=0.5) is False
    finally:
        committer.close(timeout_s=0.5)  # returns: librdkafka's close waits for that commit (45 s here)


def test_a_closing_member_gives_up_the_lock_a_stuck_polling_thread_holds() -> None:
    """The polling thread can be stuck holding the consumer lock (a synchronous commit inside a revoke, with the
    coordinator gone): the flush waits for that lock within its bound too, and gives up."""
    client = SilentClient()
    commits = member_commits(client)
    held, done = threading.Event(), threading.Event()

    def stuck_poller() -> None:
        with commits._lock:  # noqa: SLF001 (the lock the member shares with its polling thread)
            held.set()
            done.wait()

    poller = threading.Thread(target=stuck_poller, daemon=True)
    poller.start()
    held.wait(60)
    finished: List[bool] = []
    closer = threading.Thread(target=lambda: finished.append(commits.flush(timeout_s=0.5)), daemon=True)
    try:
        closer.start()
        closer.join(60)
        assert finished == [False], "the flush waited for the stuck polling thread's lock without a bound"
    finally:
        done.set()
        client.release.set()
