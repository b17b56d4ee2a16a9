"""Event-time alignment of partitions: hold back those whose records run ahead.

Joining streams of different speeds (Flink calls it watermark alignment): when partitions carry
data of different times, a query that reads them all at once lets the fast ones
run hours ahead. With ``flow.alignment.maxDrift`` set, each batch reads no record
whose timestamp is ``maxDrift`` or more ahead of the *slowest* owned partition:
the partition with a backlog whose next record is the oldest. Partitions without
a backlog are idle and hold nobody back.

Per batch this costs one small fetch of the next record of each partition with a
backlog (its timestamp), then a binary search over record times for the
partitions that may read up to the bound: about log2(the most records one
partition can take in a batch) small fetches, all partitions at once.

A backlog with no record the reader can see (only a transaction's end marker, or
an aborted transaction, under ``read_committed``) has no time and holds nobody:
its partition reads to its end, which moves its position past the marker. Only a
partition whose next record could not be fetched in time is held.

A record time later than now (a producer's clock, or a CreateTime set by hand) counts as now:
otherwise one record stamped in the far future holds its partition back for as long as any
other partition has a backlog (their records are older than now, so the bound never reaches
it). Such a time is logged once per record when it is more than ``maxDrift`` ahead of now.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable, Dict, Mapping, Optional, Set, Tuple

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kafka_group.auth.clients import new_consumer
from kafka_group.config.client_config import reader_config
from kafka_group.errors import KafkaGroupError
from kafka_group.offsets import TopicPartition

__all__ = ["AlignmentView", "EventTimeAlignment"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AlignmentView:
    """What alignment decided for one batch."""

    limits: Dict[TopicPartition, int]
    """Per partition with a backlog, the offset its batch must stop before."""
    next_timestamps: Dict[TopicPartition, int]
    """The timestamp (ms) of each backlogged partition's next record."""
    slowest: Optional[TopicPartition]
    """The partition whose next record is the oldest."""
    bound_ms: Optional[int]
    """No record at or after this time is read in the batch."""


class EventTimeAlignment:
    """Computes per-partition read limits that keep partitions within ``max_drift_ms`` of the slowest.

    Parameters
    ----------
    client_config : mapping of str to str
        The user's Kafka client settings, for the peeking reader.
    group_id : str or None
        Only to satisfy the client (the reader never joins).
    max_drift_ms : int
        ``flow.alignment.maxDrift``.
    timeout_ms : int
        The bound on each peek.
    clock : callable
        Now, in seconds since the epoch (record times later than now count as now).
    """

    def __init__(self, client_config: Mapping[str, str], group_id: Optional[str], max_drift_ms: int,
                 timeout_ms: int, *, clock: Callable[[], float] = time.time) -> None:
        config = reader_config(client_config, group_id)
        # One record per partition is all a peek needs: keep fetches small.
        config.update({"max.partition.fetch.bytes": "65536", "fetch.max.bytes": "1048576",
                       "queued.max.messages.kbytes": "1024"})
        self._config = config
        self._consumer: Optional[Consumer] = None
        self.max_drift_ms = max_drift_ms
        self._timeout_s = timeout_ms / 1000
        self._clock = clock
        #: The future-stamped records already logged (one line per record, not per batch).
        self._logged_future: Set[Tuple[TopicPartition, int]] = set()

    def view(self, positions: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
             max_take: Optional[int] = None) -> AlignmentView:
        """The limits of the next batch.

        Parameters
        ----------
        positions : mapping of TopicPartition to int
            The next offset to read of each plannable partition.
        latest : mapping of TopicPartition to int
            The end of each partition.
        max_take : int, optional
            The most records any one partition can get in the batch (its cap or the
            batch budget): limits further away need not be found.
        """
        backlogged = {tp: pos for tp, pos in positions.items() if latest.get(tp, pos) > pos}
        first, invisible = self._records_at(backlogged)
        # Nothing visible up to the end: no time, nothing to hold; the range reads past the markers.
        done = {tp: latest[tp] for tp in invisible}
        if not first:
            return AlignmentView({**backlogged, **done}, {}, None, None)
        stamps = {tp: ts for tp, (_, ts) in first.items()}
        slowest = min(stamps, key=lambda tp: (stamps[tp], tp))
        bound = stamps[slowest] + self.max_drift_ms
        limits = {tp: pos for tp, pos in backlogged.items()
                  if tp not in invisible and (tp not in stamps or stamps[tp] >= bound)}
        limits.update(done)
        ahead = {tp: first[tp][0] for tp in backlogged if tp in stamps and stamps[tp] < bound}
        limits.update(self._search_limits(ahead, latest, bound, max_take))
        held = sorted(tp for tp in backlogged if limits.get(tp, latest[tp]) < latest[tp])
        if held:
            logger.info(
                "event-time alignment: slowest %s at %s; reading nothing at or after %s (maxDrift %d ms), "
                "limiting %s", slowest, _iso(stamps[slowest]), _iso(bound), self.max_drift_ms,
                ", ".join(f"{tp}<{limits[tp]}" for tp in held),
            )
        return AlignmentView(limits, stamps, slowest, bound)

    def close(self) -> None:
        """Release the peeking reader."""
        if self._consumer is not None:
            consumer, self._consumer = self._consumer, None
            try:
                consumer.close()
            except KafkaGroupError as exc:  # the error callback, served by close(): told by view() already
                logger.debug("closing the alignment's reader: %s", exc)

    def _search_limits(self, readable: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
                       bound: int, max_take: Optional[int]) -> Dict[TopicPartition, int]:
        """Per partition, the first offset whose record time is ``bound`` or later (or its end).

        ``readable`` gives, per partition, the offset of a record known to be earlier
        than ``bound``. A binary search over record times, all partitions at once:
        each step fetches one record per partition still searching. Record times
        within a partition are taken as non-decreasing (CreateTime out of order
        only makes the limit approximate). The broker's own time index (ListOffsets
        by timestamp) is not used: the development broker answers it wrongly (see
        docs/brokers.md), and this needs nothing but Fetch.
        """
        low = dict(readable)
        high = {tp: latest[tp] if max_take is None else min(latest[tp], off + max_take + 1)
                for tp, off in readable.items()}
        while True:
            middle = {tp: (low[tp] + high[tp]) // 2 for tp in low if high[tp] - low[tp] > 1}
            if not middle:
                return high
            found, _ = self._records_at(middle)
            for tp, mid in middle.items():
                record = found.get(tp)
                if record is None or record[0] >= high[tp] or record[1] >= bound:
                    high[tp] = mid
                else:
                    low[tp] = record[0]

    def _records_at(self, positions: Mapping[TopicPartition, int]
                    ) -> Tuple[Dict[TopicPartition, Tuple[int, int]], Set[TopicPartition]]:
        """:meth:`_first_records`, with each record time later than now counted as now (see the
        module docstring), logging a time more than ``maxDrift`` ahead once per record."""
        found, ended = self._first_records(positions)
        now_ms = int(self._clock() * 1000)
        for tp, (offset, stamp) in found.items():
            if stamp <= now_ms:
                continue
            if stamp - now_ms > self.max_drift_ms and (tp, offset) not in self._logged_future:
                if len(self._logged_future) > 10_000:
                    self._logged_future.clear()
                self._logged_future.add((tp, offset))
                logger.warning(
                    "event-time alignment: the record at offset %d of %s has timestamp %d (%s), more than maxDrift "
                    "(%d ms) ahead of now; alignment counts it as now, so it holds neither its partition nor "
                    "the others", offset, tp, stamp, _iso(stamp), self.max_drift_ms)
            found[tp] = (offset, now_ms)
        return found, ended

    def _first_records(self, positions: Mapping[TopicPartition, int]
                       ) -> Tuple[Dict[TopicPartition, Tuple[int, int]], Set[TopicPartition]]:
        """(offset, timestamp ms) of the first record at or after each position, and the
        partitions that reached their end with no record to see from there (a transaction's
        end marker, an aborted transaction); partitions that time out are in neither."""
        if not positions:
            return {}, set()
        if self._consumer is None:
            # The connector's error callback: a refused login raises out of consume() (it held the
            # partitions as if their records were slow) and a token provider is served.
            self._consumer = new_consumer(self._config, client="alignment")
        consumer = self._consumer
        consumer.assign([KafkaTopicPartition(tp.topic, tp.partition, pos) for tp, pos in positions.items()])
        found: Dict[TopicPartition, Tuple[int, int]] = {}
        done: Set[TopicPartition] = set()
        ended: Set[TopicPartition] = set()
        deadline = time.monotonic() + self._timeout_s
        try:
            while len(done) < len(positions) and time.monotonic() < deadline:
                for message in consumer.consume(num_messages=len(positions), timeout=0.2):
                    tp = TopicPartition(str(message.topic()), int(message.partition() or 0))
                    if tp not in positions or tp in done:
                        continue
                    error = message.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            done.add(tp)
                            ended.add(tp)
                        else:
                            logger.warning("peeking at record times of %s: %s", tp, error.str())
                        continue
                    offset = int(message.offset() or 0)
                    if offset >= positions[tp]:
                        found[tp] = (offset, message.timestamp()[1])
                        done.add(tp)
        except KafkaException as exc:
            logger.warning("peeking at record times failed: %s", exc)
        finally:
            consumer.unassign()
        missing = sorted(set(positions) - done)
        if missing:
            logger.warning("no record time for %s within %g s; alignment holds them this batch",
                           ",".join(str(tp) for tp in missing), self._timeout_s)
        return found, ended


def _iso(ms: int) -> str:
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))
    except (OverflowError, OSError, ValueError):  # a record time no calendar of this platform holds
        return f"{ms} ms"
