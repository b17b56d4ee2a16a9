"""Pure data-loss decisions: is a planned position still readable, and where does it go if not.

The decisions are pure functions: they take the broker's earliest, latest
(last stable, under ``read_committed``) offsets and high watermarks and talk to
nothing. :func:`checked_positions` alone reads those inputs, through the
driver's collaborator protocols, and moves the offsets table.

Invariants
----------
- A position below the partition's earliest offset lost ``[position, earliest)``
  (retention, deleted records): the partition goes on at its earliest offset.
- A position past the partition's end lost the partition's history (the topic
  was deleted and recreated): it starts over at its earliest offset (0 when not
  known). Not in an AvailableNow run, whose ``latest`` is its fixed target.
- With ``read_committed``, ``latest`` is the last stable offset: a position past
  it is not loss while the high watermark is still at or past it; it waits there
  for the open transaction (planning plans nothing for it meanwhile).
- Every loss fails the query (:class:`DataLossError`) unless ``failOnDataLoss``
  is false; then it is logged and skipped.
- With ``offsets.table`` a skipped loss moves the table's position too: the sink
  lands a range only when the table is at its first offset.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional

from kafka_group.collaborators import Cluster, OffsetStore
from kafka_group.errors import DataLossError
from kafka_group.offsets import TopicPartition

__all__ = [
    "LossCheck", "TableMove", "check_positions", "checked_positions", "moved_partitions", "past_end", "table_moves",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LossCheck:
    """What :func:`check_positions` decided."""

    checked: Dict[TopicPartition, int]
    """The positions to plan from: the given ones, moved past lost offsets."""
    losses: List[str] = field(default_factory=list)
    """One message per partition that lost offsets (empty when ``failOnDataLoss`` raised)."""
    waiting: List[TopicPartition] = field(default_factory=list)
    """Partitions past the last stable offset, waiting for an open transaction (not loss)."""


@dataclass(frozen=True)
class TableMove:
    """One move of the offsets table's position past lost offsets."""

    old: int
    """The table's position the batch was planned from (the move happens only if it is still there)."""
    new: int
    """Where the partition's next range starts."""
    reason: str
    """Recorded in the table's commit."""


def past_end(positions: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int]) -> List[TopicPartition]:
    """Partitions positioned past ``latest``: whose high watermarks the caller must ask for
    (outside AvailableNow runs) before :func:`check_positions` can tell loss from an open
    transaction."""
    return [tp for tp, pos in positions.items() if tp in latest and pos > latest[tp]]


def check_positions(
    positions: Mapping[TopicPartition, int],
    *,
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    high_watermarks: Mapping[TopicPartition, int],
    available_now: bool,
    fail_on_data_loss: bool,
) -> LossCheck:
    """Check planned positions against the broker's offsets.

    Parameters
    ----------
    positions : mapping
        Where each partition would be planned from.
    earliest, latest : mapping
        The broker's earliest and latest (last stable) offsets; in an AvailableNow
        run ``latest`` is capped at the run's target.
    high_watermarks : mapping
        The high watermarks of the partitions of :func:`past_end` (empty in an
        AvailableNow run).
    available_now : bool
        Whether an AvailableNow run fixed the end: then a position past ``latest``
        is past the target, not loss.
    fail_on_data_loss : bool
        The ``failOnDataLoss`` option.

    Raises
    ------
    DataLossError
        At the first loss, when ``fail_on_data_loss``.
    """
    checked = dict(positions)
    losses: List[str] = []
    waiting: List[TopicPartition] = []
    for tp, pos in positions.items():
        first = earliest.get(tp)
        end = latest.get(tp)
        # With read_committed, ``latest`` is the last stable offset: a position past it (read
        # with read_uncommitted before a restart, or committed by a member that did) is not
        # loss while the partition's high watermark is still at or past it: it waits there
        # for the open transaction (plan_batch plans nothing for it meanwhile).
        if end is not None and tp in high_watermarks and end < pos <= high_watermarks[tp]:
            logger.info("%s: position %d is past the last stable offset %d; waiting for the open "
                        "transaction there to end", tp, pos, end)
            waiting.append(tp)
            continue
        if first is not None and pos < first:
            losses.append(_report_loss(
                f"data loss in {tp}: offsets [{pos}, {first}) were removed from the broker (retention or "
                "deleted records) before this query read them", fail_on_data_loss,
            ))
            checked[tp] = first
        elif end is not None and not available_now and pos > end:
            losses.append(_report_loss(
                f"data loss in {tp}: the query is at offset {pos} but the partition now ends at {end} "
                "(was the topic deleted and recreated?)", fail_on_data_loss,
            ))
            checked[tp] = first if first is not None else 0
    return LossCheck(checked, losses, waiting)


def table_moves(planned_from: Mapping[TopicPartition, int], checked: Mapping[TopicPartition, int],
                in_table: Mapping[TopicPartition, int]) -> Dict[TopicPartition, TableMove]:
    """The offsets-table moves past skipped loss (``failOnDataLoss=false``).

    The sink lands a range only when the table is at its first offset; without the
    move the table would stay at the old position and refuse every later batch of
    the partition, so it would never advance again. A partition the table has not
    seen (not in ``in_table``) needs no move. The caller makes each move only if the
    table is still at ``old``; one whose table position changed meanwhile (another
    member, a reset) is left out of this batch and follows the table at the next.
    """
    moves: Dict[TopicPartition, TableMove] = {}
    for tp, new in checked.items():
        old = planned_from[tp]
        if new == old or tp not in in_table:
            continue
        reason = (f"failOnDataLoss=false: offsets [{old}, {new}) of {tp} are no longer on the broker"
                  if new > old else f"failOnDataLoss=false: {tp} ends before position {old}; restarting at {new}")
        moves[tp] = TableMove(old, new, reason)
    return moves


def moved_partitions(planned_from: Mapping[TopicPartition, int],
                     checked: Mapping[TopicPartition, int]) -> List[TopicPartition]:
    """The partitions whose checked position differs from where they were planned from."""
    return [tp for tp, pos in checked.items() if pos != planned_from[tp]]


def checked_positions(
    plannable: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    *,
    cluster: Cluster,
    store: Optional[OffsetStore],
    available_now: bool,
    fail_on_data_loss: bool,
) -> Dict[TopicPartition, int]:
    """Read the broker's offsets, check ``plannable`` (:func:`check_positions`) and, with ``offsets.table``,
    move the table past skipped loss (:func:`table_moves`): a partition whose table position changed
    meanwhile is left out of the result (this batch). ``latest`` as for :func:`check_positions`.

    Caller: Spark's planning thread (``latestOffset``), before the batch is planned.

    Raises
    ------
    DataLossError
        At the first loss, when ``fail_on_data_loss``.
    """
    ahead = past_end(plannable, latest)
    checked = check_positions(
        plannable, earliest=cluster.earliest_offsets(plannable), latest=latest,
        high_watermarks=cluster.high_watermarks(ahead) if ahead and not available_now else {},
        available_now=available_now, fail_on_data_loss=fail_on_data_loss,
    ).checked
    moved = moved_partitions(plannable, checked)
    if store is None or not moved:
        return checked
    for tp, move in table_moves(plannable, checked, store.positions(moved)).items():
        if not store.move(tp, move.old, move.new, reason=move.reason):
            logger.warning("offsets.table no longer has %s at %d; not planning it in this batch", tp, move.old)
            del checked[tp]
    return checked


def _report_loss(text: str, fail_on_data_loss: bool) -> str:
    if fail_on_data_loss:
        raise DataLossError(text + ". Set option 'failOnDataLoss' to 'false' to skip them and go on")
    logger.warning("%s; skipping them because failOnDataLoss is false", text)
    return text
