"""The driver's consumer-group member: joins the group and tracks what it owns.

One :class:`GroupMember` per streaming query, in the process that plans its
micro-batches. It subscribes with confluent-kafka and keeps the partitions the
group assigns to it *paused*: the member never fetches records (executors read
planned ranges themselves); it only holds the assignment that decides which
partitions each micro-batch plans.

A daemon thread polls the consumer so rebalance callbacks run and the member
stays alive between triggers and during long batches (``max.poll.interval.ms``
is measured between polls, not between batches). Every consumer call is made
under one lock.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kafka_group.auth.access_errors import access_error
from kafka_group.auth.clients import new_consumer
from kafka_group.config.client_config import member_config, uses_consumer_protocol
from kafka_group.errors import GroupMembershipError, KafkaGroupError
from kafka_group.group.member_commits import MemberCommits
from kafka_group.group.member_close import release
from kafka_group.group.offset_commits import CLIENT_CLOSE_TIMEOUT_S, close_within
from kafka_group.group.static_member import StaticRejoin
from kafka_group.offsets import TopicPartition
from kafka_group.rebalance_event import RebalanceEvent

__all__ = ["GroupMember"]

logger = logging.getLogger(__name__)

_POLL_TIMEOUT_S = 0.05
_IDLE_BETWEEN_POLLS_S = 0.05


class GroupMember:
    """A consumer-group member that owns partitions but reads none.

    Parameters
    ----------
    client_config : mapping of str to str
        The user's ``kafka.*`` settings without the prefix.
    group_id : str
        The group to join.
    topics : sequence of str
        Topics to subscribe to, or a single pattern (see ``pattern``).
    pattern : str, optional
        A regular expression every subscribed topic must match in full.
    leave_on_close : bool, default True
        With ``group.instance.id`` (a static member): whether :meth:`close` leaves the group, so the other members
        take its partitions over at once, or keeps them for the session timeout (a planned restart that must not
        rebalance the group). A dynamic member always leaves.
    """

    def __init__(
        self,
        client_config: Mapping[str, str],
        group_id: str,
        topics: Sequence[str] = (),
        pattern: Optional[str] = None,
        *,
        leave_on_close: bool = True,
    ) -> None:
        config = member_config(client_config, group_id)
        # Whether rebalances hand this member only the partitions added or removed, so the
        # callbacks must use incremental_assign (and not clear what it owns): cooperative
        # strategies of the classic protocol, and always the consumer protocol of KIP-848
        # (librdkafka's rebalance_protocol() is COOPERATIVE there, and a plain assign()
        # fails with "Changes to the current assignment must be made using
        # incremental_assign()"). The Python client does not expose rebalance_protocol(),
        # so the settings decide.
        self._incremental = (uses_consumer_protocol(config)
                             or "cooperative" in config.get("partition.assignment.strategy", ""))
        # _lock guards the consumer (poll runs under it, so rebalance callbacks do);
        # _state guards what planning reads, so it never waits for a rebalance callback.
        self._lock = threading.RLock()
        # Reentrant too (the SIGTERM handler closes on a thread of its own, never inside a locked block).
        self._state = threading.RLock()
        # Shared with the member's commits (MemberCommits reads it): changed in place, never replaced.
        self._owned: set[TopicPartition] = set()
        self._generation = 0
        self._member_id = ""
        self._events: List[RebalanceEvent] = []
        self._first_assignment = threading.Event()
        self._closed = threading.Event()
        self._close_after_poll = False  # close() was called on the polling thread (see close)
        self._poll_error: Optional[BaseException] = None
        self._listeners: List[Callable[[RebalanceEvent], None]] = []
        self.group_id = group_id
        self._config = config
        self._leave_on_close = leave_on_close
        # When a refused static member joins again (see _on_error).
        self._static = StaticRejoin(config, group_id, self._state)
        self._subscription = [f"^({pattern})$"] if pattern is not None else list(topics)
        self._thread = threading.Thread(target=self._poll_loop, name=f"kafka-group-member-{group_id}", daemon=True)
        self._join()
        logger.info("joining consumer group '%s' with subscription %s", group_id, self._subscription)
        self._thread.start()

    def _join(self) -> None:
        """Create the client and its commits, and subscribe. Caller: the constructor, or the polling thread under the
        consumer lock (a refused static member joining again)."""
        # A refused login reaches the member only through the error callback (see _on_error).
        try:
            self._consumer = new_consumer(self._config, client="driver", group=self.group_id, error_cb=self._on_error,
                                          on_commit=self._on_commit)
        except KafkaException as exc:
            raise GroupMembershipError.from_kafka(
                f"could not create the group member of group '{self.group_id}': {exc}", exc
            ) from exc
        # Its commits to the group, queued by other threads and sent by the polling thread.
        self._commits = MemberCommits(self._consumer, self._lock, self._state, self._owned, self._thread,
                                      self.group_id)
        self._consumer.subscribe(
            self._subscription, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )

    # -- assignment ---------------------------------------------------------------

    def owned(self) -> FrozenSet[TopicPartition]:
        """The partitions the group currently assigns to this member."""
        with self._state:
            self._raise_poll_error()
            return frozenset(self._owned)

    @property
    def generation(self) -> int:
        """How many rebalances changed this member's assignment (0 before the first)."""
        with self._state:
            return self._generation

    @property
    def member_id(self) -> str:
        """The member id the coordinator gave this member ("" before the first join)."""
        with self._state:
            return self._member_id

    def events(self) -> List[RebalanceEvent]:
        """The rebalance events so far, oldest first."""
        with self._state:
            return list(self._events)

    def add_listener(self, listener: Callable[[RebalanceEvent], None]) -> None:
        """Call ``listener`` after each rebalance event.

        It runs in the polling thread, inside the rebalance callback: a revoke is
        not complete (the next owner does not get the partitions) until every
        listener has returned, so a listener may wait, boundedly, for work on the
        revoked partitions to finish, or call :meth:`close`. The partitions have
        already left :meth:`owned` when it runs.
        """
        with self._state:
            self._listeners.append(listener)

    def wait_for_assignment(self, timeout_s: float) -> bool:
        """Wait until the group has assigned partitions (possibly none) to this member.

        Returns
        -------
        bool
            Whether an assignment arrived within ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        while not self._first_assignment.wait(0.1):
            self._raise_poll_error()
            if time.monotonic() > deadline:
                return False
        return True

    # -- offsets ------------------------------------------------------------------

    def committed(self, partitions: Iterable[TopicPartition], timeout_s: float) -> Dict[TopicPartition, int]:
        """The group's committed offsets of ``partitions`` (partitions without one are left out)."""
        request = [KafkaTopicPartition(tp.topic, tp.partition) for tp in partitions]
        if not request:
            return {}
        with self._lock:
            try:
                answer = self._consumer.committed(request, timeout=timeout_s)
            except KafkaException as exc:
                raise GroupMembershipError.from_kafka(
                    f"could not read the committed offsets of group '{self.group_id}': {exc}", exc
                ) from exc
        return {TopicPartition(k.topic, k.partition): k.offset for k in answer if k.offset >= 0}

    def commit(self, positions: Mapping[TopicPartition, int], generation: Optional[int] = None) -> bool:
        """Commit positions to the group, so Kafka's lag tools see this member's progress.

        Called from Spark's planning thread after each batch, from the polling
        thread inside a revoke callback, and on shutdown. From the polling thread
        it waits for the coordinator's answer; from any other thread it only queues
        the positions for the polling thread, which sends them between two polls
        (see :meth:`MemberCommits.commit <kafka_group.group.member_commits.MemberCommits.commit>`).

        Parameters
        ----------
        positions : mapping of TopicPartition to int
            The positions to commit.
        generation : int, optional
            The :attr:`generation` read before ``positions`` were computed. Positions of a partition no
            longer owned, or assigned again since (revoked and given back: another member may have moved
            the group's offset meanwhile), are stale and dropped, never sent (review of issue 26,
            finding 5). None: the caller owns the partitions throughout (the polling thread, in a revoke).

        Returns
        -------
        bool
            Whether the commit succeeded (polling thread) or was queued (other
            threads); a failure is logged and loses nothing, the positions are
            kept elsewhere.
        """
        return self._commits.commit(positions, generation)

    def commit_and_wait(self, positions: Mapping[TopicPartition, int], generation: Optional[int],
                        timeout_s: float) -> None:
        """Commit ``positions`` and wait until the coordinator acknowledged them (a start the next owner of
        a partition must find, review of issue 26 finding 8). Stale positions (see :meth:`commit`) are
        dropped, not waited for; answers a rebalance or a coordinator move gives are retried within
        ``timeout_s``, each time for the positions still current. Caller: Spark's planning thread (the
        polling thread commits synchronously).

        Raises
        ------
        GroupMembershipError
            The coordinator refused the commit (not retriable), kept refusing it, or did not answer, within
            ``timeout_s``.
        """
        self._commits.commit_and_wait(positions, generation, timeout_s)

    def _on_commit(self, error: Optional[KafkaError], partitions: List[KafkaTopicPartition]) -> None:
        # Polling thread, inside poll(), under the consumer lock: the answer to an asynchronous commit.
        self._commits.on_commit(error, partitions)

    # -- lifecycle ----------------------------------------------------------------

    def close(self) -> None:
        """Leave the group (the others rebalance at once) and release the client.

        Any thread may call it. On the polling thread (a rebalance listener, :meth:`add_listener`, inside the
        client's ``poll()``) it only asks and returns; a thread of its own closes the member after ``poll()``.

        Each step is bounded, whatever the cluster does: the polling thread's end (5 s), the answers to the
        last commits (:data:`~kafka_group.group.member_commits.FLUSH_TIMEOUT_S`, the wait for the consumer lock
        included), the consumer lock for the close (the same bound as the close), the client's close, which
        leaves the group (:data:`~kafka_group.group.offset_commits.CLIENT_CLOSE_TIMEOUT_S`; librdkafka's own
        close has no bound: with the brokers not answering it waited for minutes).
        """
        if self._closed.is_set():
            return
        self._closed.set()
        if threading.current_thread() is self._thread:
            self._close_after_poll = True  # read by the polling thread once poll() returned (see _poll_loop)
            logger.info("the member of group '%s' closes once its rebalance callback returned", self.group_id)
            return
        self._thread.join(timeout=5)
        self._release()

    def _release(self) -> None:
        """The rest of :meth:`close`, once the polling thread stopped (or is stuck)."""
        release(self._consumer, self._lock, self._commits, self._config, self.group_id, leave=self._leave_on_close,
                owns_nothing=self._owns_nothing, poll_timeout_s=_POLL_TIMEOUT_S)

    # -- internals ----------------------------------------------------------------

    def _poll_loop(self) -> None:
        try:
            self._poll_until_closed()
        finally:
            if self._close_after_poll:  # close() was called inside a callback: release the member, off this thread
                threading.Thread(target=self._release, name=f"kafka-group-member-close-{self.group_id}",
                                 daemon=True).start()

    def _poll_until_closed(self) -> None:
        while not self._closed.is_set():
            try:
                with self._lock:
                    if self._closed.is_set():
                        return
                    if self._static.due():  # a refused static member's dead client, replaced after a pause
                        # Bounded as every close here: a refused client talks to a coordinator that may not answer.
                        close_within(self._consumer, CLIENT_CLOSE_TIMEOUT_S, f"the refused client of group "
                                     f"'{self.group_id}'", fault_point="group.before_refused_client_close")
                        self._join()
                    self._commits.send_queued()
                    message = self._consumer.poll(_POLL_TIMEOUT_S)
                error = message.error() if message is not None else None
                if error is not None:
                    self._on_error(error, message.topic() if message is not None else None)
            except Exception as exc:  # poll() also raises a bare KafkaError when a rebalance callback fails
                if self._closed.is_set():
                    return
                logger.error("the member of group '%s' failed while polling: %s", self.group_id, exc)
                with self._state:
                    self._poll_error = exc
                return
            time.sleep(_IDLE_BETWEEN_POLLS_S)

    def _on_error(self, error: KafkaError, topic: Optional[str] = None) -> None:
        """A message's error or the error callback's (which also runs inside ``committed()`` and ``close()``:
        it records, never raises). A refused login or a missing group or topic ACL fails the member with the
        connector's error, raised by :meth:`owned` and :meth:`wait_for_assignment` (librdkafka retries them
        for ever: the query planned empty batches). Caller: whichever thread is inside the client."""
        refused = access_error(error, self._config, topic=topic, group=self.group_id)
        if self._static.unreleased(error, assigned=self._first_assignment.is_set()):
            gave_up = self._static.refused()
            if gave_up is not None:
                with self._state:
                    self._poll_error = gave_up
        elif refused is not None:
            with self._state:
                again = str(self._poll_error) == str(refused)  # librdkafka retries a login every few 100 ms
                self._poll_error = refused
            if not again:
                logger.error("the member of group '%s' failed: %s", self.group_id, refused)
        elif error.fatal() or error.code() == KafkaError._FATAL:  # a message's error carries only the code
            with self._state:
                self._poll_error = KafkaException(error)
            logger.error("fatal error in the member of group '%s': %s", self.group_id, error.str())
        else:
            logger.debug("member of group '%s': %s", self.group_id, error.str())

    def _owns_nothing(self) -> bool:
        with self._state:
            return not self._owned

    def _raise_poll_error(self) -> None:
        if isinstance(self._poll_error, KafkaGroupError):
            raise self._poll_error  # a refused login or a missing ACL: its own error says what to fix
        if self._poll_error is not None:
            raise GroupMembershipError(
                f"the member of group '{self.group_id}' failed: {self._poll_error}"
            ) from self._poll_error

    def _on_assign(self, consumer: Any, partitions: List[KafkaTopicPartition]) -> None:
        # Polling thread, inside poll(), under the consumer lock.
        if self._incremental:
            consumer.incremental_assign(partitions)
        else:
            consumer.assign(partitions)
        if partitions:
            # Held, never fetched: executors read the planned ranges themselves.
            consumer.pause(partitions)
        added = frozenset(TopicPartition(p.topic, p.partition) for p in partitions)
        with self._state:
            if not self._incremental:
                self._owned.clear()
            self._owned.update(added)
        self._record("assign", added)
        self._first_assignment.set()

    def _on_revoke(self, consumer: Any, partitions: List[KafkaTopicPartition]) -> None:
        self._remove("revoke", partitions)

    def _on_lost(self, consumer: Any, partitions: List[KafkaTopicPartition]) -> None:
        self._remove("lost", partitions)

    def _remove(self, kind: str, partitions: List[KafkaTopicPartition]) -> None:
        removed = frozenset(TopicPartition(p.topic, p.partition) for p in partitions)
        with self._state:
            self._owned.difference_update(removed)
            self._commits.pending.removed(removed)
        self._record(kind, removed)

    def _record(self, kind: str, partitions: FrozenSet[TopicPartition]) -> None:
        # Rebalance callbacks run inside poll(), under the consumer lock.
        member_id = self._consumer.memberid() or ""
        with self._state:
            self._generation += 1
            self._member_id = member_id
            if kind == "assign":
                self._commits.pending.assigned(partitions, self._generation)
            event = RebalanceEvent(kind, partitions, self._generation, frozenset(self._owned), self.group_id,
                                   member_id)
            self._events.append(event)
            del self._events[:-100]
            listeners = list(self._listeners)
            owned = sorted(self._owned)
        logger.info(
            "group '%s' member %s rebalance #%d: %s %s (%s); now owns %s",
            self.group_id,
            member_id or "(no id yet)",
            event.generation,
            kind,
            ",".join(str(tp) for tp in sorted(partitions)) or "nothing",
            event.cause,
            ",".join(str(tp) for tp in owned) or "nothing",
        )
        for listener in listeners:
            try:
                listener(event)
            except Exception:  # a user's listener must not break the member
                logger.exception("rebalance listener %r failed", listener)
