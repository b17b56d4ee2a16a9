"""Review of issue 33's fix, finding 3: the planning call that ends an AvailableNow run commits what landed to
the group (:meth:`GroupCommits.settle`) and must return, whatever the group answers: the records have landed.

No process: committers in memory, as the group client answers them.
"""

from __future__ import annotations

import logging
import threading
from typing import Mapping, Optional

import pytest

from kafka_group.errors import AuthenticationError
from kafka_group.group.group_commits import GroupCommits
from kafka_group.offsets import TopicPartition

T0 = TopicPartition("t", 0)


class _RefusedLogin:
    """GroupOffsetCommitter's commit when the broker refuses the login: its poll(0) serves the error callback,
    which raises AuthenticationError (a KafkaGroupError, not a GroupMembershipError)."""

    def commit(self, positions: Mapping[TopicPartition, int], generation: Optional[int] = None) -> bool:
        raise AuthenticationError("the broker refused the login (SASL): check kafka.sasl.jaas.config")

    def commit_and_wait(self, positions: Mapping[TopicPartition, int], generation: Optional[int],
                        timeout_s: float) -> None:
        self.commit(positions, generation)

    def close(self) -> None:
        pass


class _Unanswered(_RefusedLogin):
    """A synchronous commit whose coordinator never answers (it ignores ``timeout_s``: the caller's wait must be
    bounded by itself)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def commit_and_wait(self, positions: Mapping[TopicPartition, int], generation: Optional[int],
                        timeout_s: float) -> None:
        self.release.wait(5.0)  # answered at last (so that a commit that is waited for ends the test)


def test_a_refused_login_at_the_end_of_an_available_now_run_is_logged_not_raised(
        caplog: pytest.LogCaptureFixture) -> None:
    commits = GroupCommits(_RefusedLogin(), commit_starts=False, start_timeout_s=1.0)
    with caplog.at_level(logging.WARNING):
        commits.settle({T0: 10})
    assert "refused the login" in caplog.text


def test_the_final_commit_of_an_available_now_run_is_bounded_by_connect_timeout(
        caplog: pytest.LogCaptureFixture) -> None:
    committer = _Unanswered()
    commits = GroupCommits(committer, commit_starts=False, start_timeout_s=0.05)
    try:
        with caplog.at_level(logging.WARNING):
            commits.settle({T0: 10})  # returns although the commit never answers
        assert "kafkaConsumer.connectTimeoutMs" in caplog.text
    finally:
        committer.release.set()
