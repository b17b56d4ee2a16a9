"""The last steps of a group member's close: its last commits sent, the group left, the client closed.

Used by :class:`~kafka_group.group.membership.GroupMember`, whose ``close()`` may be called on any thread, its
own polling thread included (a rebalance listener): there it only asks, and a thread of its own runs
:func:`release` once the polling thread's ``poll()`` returned.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Mapping

from kafka_group.group.member_commits import MemberCommits
from kafka_group.group.offset_commits import CLIENT_CLOSE_TIMEOUT_S, close_within
from kafka_group.group.static_member import leave_as_static

__all__ = ["release"]

logger = logging.getLogger(__name__)


def release(consumer: Any, lock: threading.RLock, commits: MemberCommits, config: Mapping[str, str], group_id: str,
            *, leave: bool, owns_nothing: Callable[[], bool], poll_timeout_s: float) -> None:
    """Send the member's last commits, leave the group (a static member too when ``leave``) and close
    ``consumer``, each step bounded (see ``GroupMember.close``). Caller: the thread closing the member, never its
    polling thread, which has stopped (or is stuck talking to a coordinator that does not answer)."""
    commits.flush()
    # The polling thread may still hold the lock, stuck talking to an unreachable coordinator: closing the
    # client under it would pull the client from under that call, so the close waits for it within its
    # bound and otherwise leaves the client as it is (the group drops the member at its session timeout).
    if not lock.acquire(timeout=CLIENT_CLOSE_TIMEOUT_S):
        logger.warning("the member of group '%s' was not closed: its polling thread kept the client busy for "
                       "%g s (the Kafka cluster does not answer); the group drops it when its session times "
                       "out", group_id, CLIENT_CLOSE_TIMEOUT_S)
        return
    try:
        commits.abandon()
        if leave:
            leave_as_static(consumer, config, group_id, owns_nothing, poll_timeout_s)
        left = close_within(consumer, CLIENT_CLOSE_TIMEOUT_S, f"the member of group '{group_id}'")
    finally:
        lock.release()
    if left:
        logger.info("left consumer group '%s'", group_id)
