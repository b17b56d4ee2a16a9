"""What the cluster says: reachability, topics and partitions, earliest and latest offsets.

Answers come from an admin client in batched requests (one ListOffsets per
leader broker, not one per partition), so planning stays cheap with many
partitions.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from confluent_kafka import IsolationLevel, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from kafka_group.auth.access_errors import access_error, access_error_of
from kafka_group.auth.clients import new_admin

from kafka_group.config.client_config import isolation_level
from kafka_group.config.source_options import redact_client_config
from kafka_group.errors import BrokerUnavailableError, KafkaGroupError, UnknownTopicOrPartitionError
from kafka_group.offsets import TopicPartition

__all__ = ["ClusterView"]

#: The least time between two renewals of the admin client: a partition that stays without
#: a leader must not cost every plan a new client and a second wait.
_RENEW_INTERVAL_S = 10.0

logger = logging.getLogger(__name__)

_ADMIN_KEYS_DROPPED = frozenset(
    {
        "group.id",
        "group.instance.id",
        "partition.assignment.strategy",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "max.poll.interval.ms",
        "isolation.level",
        "fetch.max.bytes",
        "max.partition.fetch.bytes",
        "fetch.min.bytes",
        "fetch.wait.max.ms",
        "queued.max.messages.kbytes",
        "queued.min.messages",
        "fetch.queue.backoff.ms",
        "enable.partition.eof",
        "check.crcs",
        "group.protocol",
        "group.remote.assignor",
    }
)


class ClusterView:
    """A read-only view of the cluster's metadata and offsets.

    Parameters
    ----------
    client_config : mapping of str to str
        The user's ``kafka.*`` settings without the prefix (consumer-only ones are dropped).
    timeout_ms : int
        The bound on each request, and on the first wait for the cluster.
    servers_option, timeout_option : str
        How errors name the setting of the servers and of ``timeout_ms``: the source's options by
        default, a tool's own flags (``--bootstrap-servers``, ``--timeout-ms``) in a tool.
    """

    def __init__(self, client_config: Mapping[str, str], timeout_ms: int, *,
                 servers_option: str = "option 'kafka.bootstrap.servers'",
                 timeout_option: str = "option 'kafkaConsumer.connectTimeoutMs'") -> None:
        self._servers = client_config.get("bootstrap.servers", "")
        self._servers_option, self._timeout_option = servers_option, timeout_option
        self._timeout_s = timeout_ms / 1000
        # The executors' readers use the same level (client_config.reader_config): with
        # read_committed (the default) the latest offset is the last stable offset, so a plan
        # never reaches into an open transaction the readers cannot see yet.
        self._isolation = (
            IsolationLevel.READ_COMMITTED
            if isolation_level(client_config) == "read_committed"
            else IsolationLevel.READ_UNCOMMITTED
        )
        self._config = {k: v for k, v in client_config.items() if k not in _ADMIN_KEYS_DROPPED}
        logger.debug("admin client settings: %s", redact_client_config(self._config))
        self._admin_lock = threading.Lock()
        self._renewed_at = -_RENEW_INTERVAL_S
        # A refused login reaches the admin client only through its error callback (the request
        # itself fails with "Broker transport failure"): kept here, read when a request fails.
        self._refusal: Optional[KafkaGroupError] = None
        # Whether a topic missing from the listing may be one the principal may not see: ACLs are for
        # authenticated principals (a PLAINTEXT listener's User:ANONYMOUS is left out: one more request
        # per plan for a topic that does not exist yet, which librdkafka's mock cluster never answers).
        self._secured = str(client_config.get("security.protocol", "PLAINTEXT")).upper() != "PLAINTEXT"
        self._admin = self._new_admin()

    def _new_admin(self) -> AdminClient:
        return new_admin(self._config, error_cb=self._on_client_error)

    def _on_client_error(self, error: KafkaError) -> None:
        # Any thread that polls the admin client (see _raise_refusal).
        found = access_error(error, self._config)
        if found is not None:
            self._refusal = found
        else:
            logger.debug("admin client of '%s': %s", self._servers, error.str())

    def _raise_refusal(self, admin: AdminClient, cause: BaseException) -> None:
        """Raise the connector's error for a refused login or a missing ACL behind ``cause``, if that is
        what it was: the error callback's (served here) or ``cause``'s own."""
        admin.poll(0)
        found = self._refusal or access_error_of(cause, self._config)
        if found is not None:
            raise found from cause

    def _renew_admin(self) -> AdminClient:
        """Replace the admin client with a new one, whose metadata is fetched afresh.

        librdkafka's admin client keeps sending ListOffsets to a partition's old leader after
        a broker dies (measured on Apache Kafka 4.3: every later request for those partitions
        timed out and answered offset -1001, for minutes, while a new client answered at once).
        """
        fresh = self._new_admin()
        with self._admin_lock:
            stale, self._admin = self._admin, fresh
            self._renewed_at = time.monotonic()
        del stale  # destroyed here, outside the lock (it waits for its threads)
        return fresh

    def _current_admin(self) -> AdminClient:
        with self._admin_lock:
            admin = self._admin
        admin.poll(0)  # serves its queued log lines and error callbacks (kafka_group.auth.clients)
        return admin

    def topic_partitions(self, topics: Optional[Iterable[str]] = None) -> Dict[str, int]:
        """Partition counts of ``topics`` (all topics when None); unknown topics are left out.

        Raises
        ------
        BrokerUnavailableError
            The cluster did not answer within the timeout.
        AuthenticationError
            The cluster refused the login.
        AuthorizationError
            A topic named in ``topics`` is not one the principal may read (Kafka does not list
            such topics: without this check it would look missing).
        """
        admin = self._current_admin()
        try:
            metadata = admin.list_topics(timeout=self._timeout_s)
        except KafkaException as exc:
            self._raise_refusal(admin, exc)
            raise BrokerUnavailableError.from_kafka(
                f"could not reach the Kafka cluster at '{self._servers}' ({self._servers_option}) "
                f"within {self._timeout_s:g} s: {exc.args[0].str() if exc.args else exc}. Check the servers "
                f"and the network, or raise {self._timeout_option}", exc
            ) from exc
        admin.poll(0)  # what the error callback has to say is of an earlier, passing trouble
        self._refusal = None
        wanted = None if topics is None else set(topics)
        unlisted = sorted(t for t in wanted or () if t not in metadata.topics or metadata.topics[t].error is not None)
        if unlisted and self._secured:
            self._check_topic_access(admin, unlisted)
        return {
            name: len(topic.partitions)
            for name, topic in metadata.topics.items()
            if (wanted is None or name in wanted) and topic.error is None and not name.startswith("__")
        }

    def _check_topic_access(self, admin: AdminClient, topics: Sequence[str]) -> None:
        """Raise AuthorizationError for the first of ``topics`` (absent from the cluster's listing) that
        the principal may not describe; the others do not exist (or did not answer: asked again later)."""
        try:
            futures = admin.describe_topics(TopicCollection(list(topics)), request_timeout=self._timeout_s)
            for topic, future in futures.items():
                try:
                    future.result(timeout=self._timeout_s + 5)
                except KafkaException as exc:
                    found = access_error_of(exc, self._config, topic=topic)
                    if found is not None:
                        raise found from exc
        except (KafkaException, TimeoutError) as exc:
            logger.debug("could not tell whether topics %s are missing or refused: %s", ",".join(topics), exc)

    def matching_partitions(self, pattern: str) -> List[TopicPartition]:
        """Every partition of every topic whose whole name matches ``pattern``."""
        regex = re.compile(pattern)
        counts = self.topic_partitions()
        return [
            TopicPartition(t, p) for t, n in sorted(counts.items()) if regex.fullmatch(t) for p in range(n)
        ]

    def partitions_of(self, topics: Sequence[str]) -> List[TopicPartition]:
        """Every partition of ``topics`` that exist."""
        counts = self.topic_partitions(topics)
        return [TopicPartition(t, p) for t in topics if t in counts for p in range(counts[t])]

    def check_partitions_exist(self, partitions: Sequence[TopicPartition], option: str) -> None:
        """Raise if any of ``partitions`` does not exist on the cluster.

        Raises
        ------
        UnknownTopicOrPartitionError
            Naming the option, the missing topic or partition and what exists.
        """
        counts = self.topic_partitions({tp.topic for tp in partitions})
        for tp in partitions:
            if tp.topic not in counts:
                raise UnknownTopicOrPartitionError(
                    f"option '{option}' names topic '{tp.topic}', which does not exist on the cluster at "
                    f"'{self._servers}': create it first or correct the name"
                )
            if tp.partition >= counts[tp.topic]:
                raise UnknownTopicOrPartitionError(
                    f"option '{option}' names partition {tp.partition} of topic '{tp.topic}', which has "
                    f"partitions 0 to {counts[tp.topic] - 1}: correct the partition number"
                )

    def earliest_offsets(self, partitions: Iterable[TopicPartition]) -> Dict[TopicPartition, int]:
        """The first offset still on the broker, per partition (unknown partitions left out)."""
        return self._list_offsets(partitions, OffsetSpec.earliest())  # type: ignore[no-untyped-call]

    def latest_offsets(self, partitions: Iterable[TopicPartition]) -> Dict[TopicPartition, int]:
        """The end of each partition a plan may reach: with ``isolation.level=read_committed``
        (the default) the last stable offset (the first offset of the earliest open
        transaction, else the high watermark); with read_uncommitted the high watermark."""
        return self._list_offsets(partitions, OffsetSpec.latest())  # type: ignore[no-untyped-call]

    def high_watermarks(self, partitions: Iterable[TopicPartition]) -> Dict[TopicPartition, int]:
        """The offset the next record of each partition will get, whatever the isolation level
        (open transactions included)."""
        return self._list_offsets(partitions, OffsetSpec.latest(),  # type: ignore[no-untyped-call]
                                  isolation=IsolationLevel.READ_UNCOMMITTED)

    def offsets_for_timestamp(self, partitions: Iterable[TopicPartition], timestamp_ms: int) -> Dict[TopicPartition, int]:
        """The first offset whose record time is at or after ``timestamp_ms``, per partition
        (the latest offset where no record is that recent)."""
        partitions = list(partitions)
        found = self.offsets_at_times({tp: timestamp_ms for tp in partitions})
        latest = self.latest_offsets([tp for tp in partitions if found.get(tp) is None])
        return {tp: (offset if offset is not None else latest[tp]) for tp in partitions
                for offset in (found.get(tp),) if offset is not None or tp in latest}

    def offsets_at_times(self, times: Mapping[TopicPartition, int]) -> Dict[TopicPartition, Optional[int]]:
        """Per partition, the first offset whose record time is at or after its time (ms).

        None where no record is that recent (the broker answers -1); partitions the
        cluster did not answer for are left out (asked again at a later plan).
        Caller: Spark's planning thread.
        """
        found: Dict[TopicPartition, Optional[int]] = {}
        by_time: Dict[int, List[TopicPartition]] = {}
        for tp, stamp in times.items():
            by_time.setdefault(stamp, []).append(tp)
        for stamp, partitions in sorted(by_time.items()):
            answered = self._list_offsets(partitions, OffsetSpec.for_timestamp(stamp),  # type: ignore[no-untyped-call]
                                          lowest_valid=-1)
            found.update({tp: (offset if offset >= 0 else None) for tp, offset in answered.items()})
        return found

    def _list_offsets(self, partitions: Iterable[TopicPartition], spec: OffsetSpec,
                      isolation: Optional[IsolationLevel] = None, lowest_valid: int = 0) -> Dict[TopicPartition, int]:
        """Offsets per partition; partitions without an answer are left out.

        ``lowest_valid`` is the lowest offset that is an answer: earliest and latest always
        answer one >= 0; a timestamp no record reaches answers -1 (the caller falls back to
        the end of the partition).

        Partitions the current admin client could not answer for (an error, a timeout, or
        a negative offset where a real one was asked) are asked once more through a new
        admin client: after a broker dies its cached leaders go stale (see ``_renew_admin``).
        """
        wanted = list(partitions)
        answered, unanswered = self._ask_offsets(self._current_admin(), wanted, spec, isolation, lowest_valid)
        if unanswered and time.monotonic() - self._renewed_at >= _RENEW_INTERVAL_S:
            logger.info("no offsets for %d partition(s) (%s...); asking again with fresh cluster metadata",
                        len(unanswered), unanswered[0])
            again, unanswered = self._ask_offsets(self._renew_admin(), unanswered, spec, isolation, lowest_valid)
            answered.update(again)
        for tp in unanswered:
            logger.warning("no offsets for %s: the cluster did not answer; it is left out of this plan", tp)
        return answered

    def _ask_offsets(self, admin: AdminClient, partitions: Sequence[TopicPartition], spec: OffsetSpec,
                     isolation: Optional[IsolationLevel], lowest_valid: int) -> Tuple[Dict[TopicPartition, int], List[TopicPartition]]:
        request = {KafkaTopicPartition(tp.topic, tp.partition): spec for tp in partitions}
        if not request:
            return {}, []
        try:
            futures = admin.list_offsets(
                request, isolation_level=isolation or self._isolation, request_timeout=self._timeout_s
            )
        except KafkaException as exc:
            self._raise_refusal(admin, exc)
            raise BrokerUnavailableError.from_kafka(f"listing offsets at '{self._servers}' failed: {exc}", exc) from exc
        answered: Dict[TopicPartition, int] = {}
        unanswered: List[TopicPartition] = []
        for ktp, future in futures.items():
            tp = TopicPartition(ktp.topic, ktp.partition)
            try:
                offset = int(future.result(timeout=self._timeout_s + 5).offset)
            except KafkaException as exc:
                refused = access_error_of(exc, self._config, topic=tp.topic)
                if refused is not None:
                    raise refused from exc
                if exc.args and exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    logger.warning("no offsets for %s: the cluster does not know it", tp)
                else:
                    logger.debug("no offsets for %s: %s", tp, exc)
                    unanswered.append(tp)
                continue
            except TimeoutError:
                logger.debug("no offsets for %s: no answer in time", tp)
                unanswered.append(tp)
                continue
            if offset < lowest_valid:
                logger.debug("no offsets for %s: answered offset %d", tp, offset)
                unanswered.append(tp)
                continue
            answered[tp] = offset
        return answered, unanswered

