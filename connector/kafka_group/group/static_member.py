"""A static member of the group (``group.instance.id``, KIP-345): its leave on close, and its join again while a
predecessor still holds its instance id.

A static member's partitions survive its restart: the group waits for it until its session times out. Two things
follow that a dynamic member never meets, both here, both used by
:class:`~kafka_group.group.membership.GroupMember`:

- its ``close()`` does not leave the group, so a member that should leave (``leave_on_close``) unsubscribes first
  (:func:`leave_as_static`);
- under the consumer protocol (KIP-848) the broker refuses its join while a predecessor that did not leave (a
  crashed query) holds the id (UNRELEASED_INSTANCE_ID, fatal to the client): :class:`StaticRejoin` says when to
  join again with a new client, and when to give up naming the option.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Mapping, Optional

from confluent_kafka import KafkaError, KafkaException

from kafka_group.config.client_config import uses_consumer_protocol
from kafka_group.errors import GroupMembershipError

__all__ = ["StaticRejoin", "leave_as_static"]

logger = logging.getLogger(__name__)

#: A static member refused because its instance id is still held (see StaticRejoin) joins again with a new client
#: after this pause, and fails after trying for this long.
_REJOIN_PAUSE_S = 1.0
_UNRELEASED_RETRY_S = 300.0
#: The longest a static member's close waits for its revoke before its leave (see leave_as_static).
_STATIC_LEAVE_TIMEOUT_S = 2.0


class StaticRejoin:
    """When a refused static member joins again, and when it gives up.

    Parameters
    ----------
    config : mapping of str to str
        The member's librdkafka settings (``group.instance.id`` among them, or not: then nothing is refused).
    group_id : str
        The group, for messages.
    state : threading.RLock
        The member's state lock, which guards this object's fields too.
    """

    def __init__(self, config: Mapping[str, str], group_id: str, state: threading.RLock) -> None:
        self._config = config
        self._group_id = group_id
        self._state = state
        # When the refused member joins again: set under the state lock, read by the polling thread. And until
        # when it may keep trying.
        self._rejoin_at: Optional[float] = None
        self._rejoin_until: Optional[float] = None

    def unreleased(self, error: KafkaError, assigned: bool) -> bool:
        """Whether ``error`` is the broker's refusal of this static member's join because its instance id is still
        held (UNRELEASED_INSTANCE_ID, consumer protocol): librdkafka raises it as a fatal error whose code is only
        ``_FATAL``, its text the refusal's. Never once the member was ``assigned``: a refusal then means another
        live member took the id, which is fatal."""
        if "group.instance.id" not in self._config or assigned:
            return False
        if error.code() == KafkaError.UNRELEASED_INSTANCE_ID:
            return True
        return (error.code() == KafkaError._FATAL
                and KafkaError(KafkaError.UNRELEASED_INSTANCE_ID).str() in error.str())

    def refused(self) -> Optional[GroupMembershipError]:
        """Record a refusal: the client is dead (the refusal is fatal to it); the polling thread joins again with a
        new one after :data:`_REJOIN_PAUSE_S` (:meth:`due`), for at most :data:`_UNRELEASED_RETRY_S`. Returns the
        member's error once that time is over, naming the option, else None. Caller: whichever thread is inside
        the client (the polling thread, in practice)."""
        now = time.monotonic()
        with self._state:
            first = self._rejoin_until is None
            if first:
                self._rejoin_until = now + _UNRELEASED_RETRY_S
            assert self._rejoin_until is not None
            if now > self._rejoin_until:
                return GroupMembershipError(
                    f"option 'kafka.group.instance.id': the instance id '{self._config['group.instance.id']}' is still "
                    f"held by another member of group '{self._group_id}' after {_UNRELEASED_RETRY_S:g} s of trying: "
                    "give each query of the group its own id")
            if self._rejoin_at is None:  # the dead client reports the refusal again at each poll: keep the pause
                self._rejoin_at = now + _REJOIN_PAUSE_S
        if first:
            logger.warning("group '%s' refused the static member '%s': a member that did not leave (a crashed run) "
                           "still holds that instance id until its session times out; joining again every %g s",
                           self._group_id, self._config["group.instance.id"], _REJOIN_PAUSE_S)
        return None

    def due(self) -> bool:
        """Whether the pause after a refusal is over (then the caller replaces the client; asking again says no
        until the next refusal). Caller: the polling thread, under the consumer lock."""
        with self._state:
            due = self._rejoin_at is not None and time.monotonic() >= self._rejoin_at
            if due:
                self._rejoin_at = None
        return due


def leave_as_static(consumer: Any, config: Mapping[str, str], group_id: str, revoked: Callable[[], bool],
                    poll_timeout_s: float) -> None:
    """Leave the group explicitly, a static member that should (the caller decides: ``leave_on_close``).

    KIP-345: a static member's ``close()`` does not leave the group, so its partitions wait for it until its
    session times out; librdkafka's ``unsubscribe()`` does leave (classic protocol: a LeaveGroup naming the
    instance id, after the revoke). So the member unsubscribes and serves its revoke (polls of ``poll_timeout_s``
    until ``revoked()`` says it owns nothing), for at most :data:`_STATIC_LEAVE_TIMEOUT_S`, before the client
    closes. Nothing for a dynamic member, nor under the consumer protocol of KIP-848: there librdkafka's leave of
    a static member is always the temporary one (its partitions wait for the session timeout whichever call
    leaves; measured on Apache Kafka 4.3 with librdkafka 2.16). Caller: the thread closing the member, under the
    consumer lock, the polling thread stopped.
    """
    if "group.instance.id" not in config or uses_consumer_protocol(config):
        return
    deadline = time.monotonic() + _STATIC_LEAVE_TIMEOUT_S
    try:
        consumer.unsubscribe()
        while True:
            consumer.poll(poll_timeout_s)  # serves the revoke; librdkafka leaves once it is done
            if revoked() or time.monotonic() > deadline:
                break
    except (KafkaException, RuntimeError) as exc:
        logger.warning("the static member of group '%s' could not leave the group: %s; its partitions wait "
                       "for its session timeout", group_id, exc)
        return
    logger.info("static member of group '%s' left the group (instance id '%s')", group_id, config["group.instance.id"])
