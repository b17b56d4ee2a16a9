"""Trigger thresholds: ``minOffsetsPerTrigger`` and ``maxTriggerDelay``, with Spark's meaning.

A trigger whose plan holds fewer than ``minOffsetsPerTrigger`` records is skipped
(the source hands Spark its start back, so no batch runs and nothing is
committed), unless ``maxTriggerDelay`` has passed since the last batch ran: then
the batch runs with what waits. As in Spark's Kafka source, the first trigger of
a query always runs (the delay counts from the epoch), and an AvailableNow run
ignores the minimum (it must end).

The records counted are those waiting, as Spark's ``KafkaMicroBatchStream.delayBatch``
counts them: latest minus position over the planned partitions, *before* the rate
limits (``maxOffsetsPerTrigger``, ``maxOffsetsPerPartition``, event-time alignment)
cut the batch; only a partition paused by hand (``flow.pause``) does not count.
Counting what the capped plan reads instead made ``maxOffsetsPerPartition=1000`` on
4 partitions with ``minOffsetsPerTrigger=5000`` wait the whole ``maxTriggerDelay``
at every trigger, whatever the backlog (issue 26).

The gate keeps what the next progress event shows under ``@flow.trigger``: the
thresholds, how many triggers were skipped before the batch, the records that
waited at the last skip, and why the batch ran (``minOffsetsPerTrigger``: enough
records waited; ``maxTriggerDelay``: the delay passed).
"""

from __future__ import annotations

import logging
import time
from typing import AbstractSet, Any, Callable, Dict, Mapping, Optional

from kafka_group.offsets import TopicPartition

__all__ = ["DELAY_PASSED", "ENOUGH_RECORDS", "TriggerGate", "backlog"]

logger = logging.getLogger(__name__)

ENOUGH_RECORDS = "minOffsetsPerTrigger"
DELAY_PASSED = "maxTriggerDelay"


def backlog(positions: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
            paused: AbstractSet[TopicPartition] = frozenset()) -> int:
    """The records :meth:`TriggerGate.admit` counts: ``latest - position`` summed over the partitions
    of ``positions`` that ``latest`` knows and that are not paused by hand (before any rate limit).

    Parameters
    ----------
    positions : mapping of TopicPartition to int
        Where each partition would be planned from.
    latest : mapping of TopicPartition to int
        The end of each partition (an AvailableNow run is not gated).
    paused : set of TopicPartition
        Partitions paused by ``flow.pause``: their backlog does not make a trigger run.

    Returns
    -------
    int
        The records waiting.
    """
    return sum(max(0, latest[tp] - pos) for tp, pos in positions.items() if tp in latest and tp not in paused)


class TriggerGate:
    """Decides whether a planned batch runs now or its trigger is skipped.

    Parameters
    ----------
    min_records : int
        ``minOffsetsPerTrigger``.
    max_delay_ms : int
        ``maxTriggerDelay`` in milliseconds.
    clock : callable
        Milliseconds now (wall clock; a test passes its own).

    Notes
    -----
    Caller: Spark's planning thread only (``latestOffset`` and the progress report).
    """

    def __init__(self, min_records: int, max_delay_ms: int,
                 clock: Callable[[], float] = lambda: time.time() * 1000) -> None:
        self.min_records = min_records
        self.max_delay_ms = max_delay_ms
        self._clock = clock
        self._last_trigger_ms = 0.0  # as in Spark: the first trigger always runs
        self._skipped = 0  # triggers skipped since the last batch
        self._waiting: Optional[int] = None  # records at the last skip
        self._last_batch: Dict[str, Any] = {}  # what the last batch that ran reports

    def admit(self, records: int) -> bool:
        """Whether a trigger with ``records`` waiting runs a batch (True) or is skipped (False).

        As in Spark's Kafka source, the delay is measured from the last trigger that was let
        through, and a trigger when the delay has passed is let through (and restarts the
        delay) even with nothing to read; the caller then runs no batch.

        Parameters
        ----------
        records : int
            The records waiting (:func:`backlog`; 0 when there is nothing to read).
        """
        now = self._clock()
        if now - self._last_trigger_ms >= self.max_delay_ms:
            reason = DELAY_PASSED if records < self.min_records else ENOUGH_RECORDS
        elif records >= self.min_records:
            reason = ENOUGH_RECORDS
        else:
            if records > 0:
                self._skipped += 1
                self._waiting = records
                logger.info("trigger skipped: %d records wait, fewer than minOffsetsPerTrigger=%d; maxTriggerDelay "
                            "(%d ms) passes in %d ms", records, self.min_records, self.max_delay_ms,
                            self.max_delay_ms - (now - self._last_trigger_ms))
            return False
        self._last_trigger_ms = now
        if records > 0:
            if self._skipped:
                logger.info("a batch runs with %d records waiting after %d skipped trigger(s): %s", records,
                            self._skipped,
                            "enough records wait" if reason == ENOUGH_RECORDS else "maxTriggerDelay passed")
            self._last_batch = {"skipped": self._skipped, "waiting": self._waiting, "ranBecause": reason}
            self._skipped, self._waiting = 0, None
        return True

    def report(self) -> Dict[str, Any]:
        """``@flow.trigger`` of the progress report: the thresholds; while triggers are skipped,
        ``skipped`` (so far) and ``waiting`` (records at the last skip, fewer than the minimum);
        after a batch ran, the triggers skipped before it, the records that waited at the last
        skip and why it ran (``ranBecause``)."""
        doc: Dict[str, Any] = {"minOffsetsPerTrigger": self.min_records, "maxTriggerDelayMs": self.max_delay_ms}
        if self._skipped:
            doc.update(skipped=self._skipped, waiting=self._waiting, ranBecause=None)
        else:
            doc.update(self._last_batch)
        return doc
