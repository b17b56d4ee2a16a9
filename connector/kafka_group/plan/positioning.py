"""Pure positioning: where a partition that enters this query's ownership starts.

A partition enters ownership at the first assignment, after a rebalance, or at
a restart; it is positioned before it enters a plan. The decisions are pure
functions: they take the checkpoint's, the offsets table's, the group's
committed and the broker's offsets and talk to nothing. :func:`position_new`
alone reads those inputs, through the driver's collaborator protocols, and
applies the decisions in order.

Invariants
----------
- With ``offsets.table`` the table is the source of truth: a partition the table
  has seen starts at the table's position; Spark's checkpoint and Kafka's
  committed offsets are not consulted for it.
- Otherwise (no table, or a partition the table has not seen) the position is the
  furthest of what the query's own offsets (the checkpoint) say and what the group
  has committed: another member may have read the partition meanwhile, or
  positioned it and committed that start before anything landed
  (:mod:`~kafka_group.group.group_commits`), so a member taking a partition over continues
  from the group's position.
- A partition none of these has seen starts at the earliest offset when it was
  added since the table began holding its topic (:func:`added_since`): its number
  is at least the partition count the table recorded with the topic's first starts;
  without a count, the table reads its topic (:func:`topics_read`: it holds a
  position of another partition of the topic that is not a start recorded by
  positioning). CreatePartitions while the query was stopped, as Spark's source
  starts the partitions it discovers; starting it at ``startingOffsets``
  (``latest``) skipped its records after a lost checkpoint (issue 33, finding 4;
  review of its fix, finding 1).
  Otherwise it starts where ``startingOffsets`` says, for the partitions of a new
  query; at the earliest offset for partitions that appeared later (new topics of a
  pattern, added partitions) and for any partition first seen by a query resuming
  from its checkpoint, as in Spark's Kafka source. "Resumed" is the query's own
  state (its checkpoint) and, per topic, the table's; never what the group knows
  of *other* partitions nor which partitions are positioned together: each
  partition is judged as a Java consumer group applies ``auto.offset.reset``, per
  partition, so it starts the same whichever partitions the group assigns with it
  (review of issue 26, finding 3). A partition below the recorded count is a new
  query's whatever landed since: two new queries of a group starting together at
  ``latest`` both start there, whichever lands a batch first.
- Every start is durable where the offsets live: committed to the group when it
  is positioned by a member (:mod:`~kafka_group.group.group_commits`; an ``assign``
  query commits no starts), and recorded in the
  table as the partition's position and recorded start when the table exists, else
  at the first plan after the first batch created it
  (:mod:`~kafka_group.plan.durable_starts`). Losing the checkpoint and the group's
  offsets never moves where a partition starts.
- The group's committed offsets win over ``startingOffsets`` for a new query: that
  is logged, once as a warning, naming the partitions and the option.
"""

from __future__ import annotations

import logging
from typing import AbstractSet, Callable, Dict, FrozenSet, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from kafka_group.collaborators import Cluster, Member
from kafka_group.errors import NoOffsetForTimestampError
from kafka_group.offsets import EARLIEST, LATEST, NO_MATCH_LATEST, AtTimestamp, StartingOffsets, StartSpec, TopicPartition
from kafka_group.plan.durable_starts import StartStore

__all__ = [
    "Positioned", "added_since", "describe_positions", "follow_table", "is_resumed", "known_positions",
    "log_group_overrides", "partition_counts", "position_new", "resolve_positions", "settle_times", "stale_pauses",
    "starting_spec", "topics_read", "unseen_by_spec", "unseen_by_time",
]

logger = logging.getLogger(__name__)


def is_resumed(checkpoint: Mapping[TopicPartition, int]) -> bool:
    """Whether the query resumes rather than starts new: Spark's checkpoint has positions
    (``start`` is a previous batch's end).

    Decide it before the table's partitions are taken out of the checkpoint's: a restart whose
    checkpointed partitions are all in the table is still a restart, and a partition none of them
    knows was created since (CreatePartitions, a new topic of the pattern). What the offsets table
    or the group knows of other partitions does not count (finding 3 of the review of issue 26):
    a partition without a position of its own starts as ``startingOffsets`` says whichever
    partitions are positioned with it.
    """
    return bool(checkpoint)


def topics_read(table: Mapping[TopicPartition, int], starts: Mapping[TopicPartition, int]) -> FrozenSet[str]:
    """The topics the offsets table reads: those of which it holds a position that is not a start recorded
    by positioning (``starts``; a table written before starts were recorded has none, so every position
    counts). A partition of such a topic with no position anywhere starts at the earliest offset: the
    table resumes its topic (see the module docstring)."""
    return frozenset(tp.topic for tp, pos in table.items() if starts.get(tp) != pos)


def partition_counts(partitions: Sequence[TopicPartition]) -> Dict[str, int]:
    """How many partitions each topic of ``partitions`` (all of a topic's, as the cluster lists them) has."""
    counts: Dict[str, int] = {}
    for tp in partitions:
        counts[tp.topic] = counts.get(tp.topic, 0) + 1
    return counts


def added_since(tp: TopicPartition, recorded_counts: Mapping[str, int], read: AbstractSet[str]) -> bool:
    """Whether ``tp``, a partition with no position anywhere, was added since the offsets table began holding its
    topic, so it starts at the earliest offset whatever ``startingOffsets`` says.

    Where the table recorded the topic's partition count with its first starts (``recorded_counts``), a
    partition numbered from that count on was added since; one below it existed then and is a partition of a new
    query (``startingOffsets``), whatever has landed or been reset since. A table with no count for the topic
    (written before counts were recorded, or whose first batch landed the topic before any start was
    recorded) falls back to ``read`` (:func:`topics_read`).
    """
    if tp.topic in recorded_counts:
        return tp.partition >= recorded_counts[tp.topic]
    return tp.topic in read


def starting_spec(
    tp: TopicPartition,
    resumed: bool,
    *,
    known_at_start: Optional[AbstractSet[TopicPartition]],
    starting_offsets: StartingOffsets,
) -> StartSpec:
    """Where a partition the query never read starts: an offset, :data:`EARLIEST`, :data:`LATEST`
    or a time (:class:`~kafka_group.offsets.AtTimestamp`).

    ``startingOffsets`` for the partitions of a new query; :data:`EARLIEST` for
    partitions that appeared later (not in ``known_at_start``, the partitions that
    existed when the query started; None for ``assign``, whose partitions are
    fixed) and for every partition of a resumed query.
    """
    if resumed or (known_at_start is not None and tp not in known_at_start):
        return EARLIEST
    return starting_offsets.for_partition(tp)


def known_positions(
    new: Sequence[TopicPartition],
    checkpoint: Mapping[TopicPartition, int],
    *,
    table: Optional[Mapping[TopicPartition, int]] = None,
    group: Optional[Mapping[TopicPartition, int]] = None,
) -> Dict[TopicPartition, int]:
    """Positions of the ``new`` partitions that some record of this query or group knows.

    Parameters
    ----------
    new : sequence of TopicPartition
        The partitions entering ownership.
    checkpoint : mapping
        The positions of Spark's checkpoint (the previous batch's end).
    table : mapping, optional
        The offsets table's positions (with ``offsets.table``): they win over the
        checkpoint for every partition the table has seen.
    group : mapping, optional
        The group's committed offsets: where the table (if any) has no position, the
        furthest of these and the checkpoint wins.
    """
    known: Dict[TopicPartition, int] = {}
    for tp in new:
        if table is not None and tp in table:
            known[tp] = table[tp]
            continue
        candidates = [p for p in (checkpoint.get(tp), (group or {}).get(tp)) if p is not None]
        if candidates:
            known[tp] = max(candidates)
    return known


def unseen_by_spec(
    new: Sequence[TopicPartition], known: Mapping[TopicPartition, int], specs: Mapping[TopicPartition, StartSpec]
) -> Tuple[List[TopicPartition], List[TopicPartition]]:
    """The partitions without a known position that start at the earliest, and at the latest offset:
    the broker offsets the caller must ask for."""
    unseen = [tp for tp in new if tp not in known]
    return [tp for tp in unseen if specs[tp] == EARLIEST], [tp for tp in unseen if specs[tp] == LATEST]


def unseen_by_time(
    new: Sequence[TopicPartition], known: Mapping[TopicPartition, int], specs: Mapping[TopicPartition, StartSpec]
) -> Dict[TopicPartition, int]:
    """The partitions without a known position that start at a time, with that time (ms)."""
    return {tp: spec.timestamp_ms for tp in new if tp not in known
            for spec in (specs[tp],) if isinstance(spec, AtTimestamp)}


def settle_times(
    specs: Mapping[TopicPartition, StartSpec],
    found: Mapping[TopicPartition, Optional[int]],
    on_no_match: str,
) -> Tuple[Dict[TopicPartition, StartSpec], List[TopicPartition]]:
    """Turn the timestamp starts the broker answered into offsets.

    Parameters
    ----------
    specs : mapping
        Each partition's start spec.
    found : mapping
        The broker's answer per asked partition: the first offset at or after its time,
        or None where no record is that recent (unanswered partitions are absent).
    on_no_match : str
        ``startingOffsetsByTimestampStrategy``.

    Returns
    -------
    (dict, list)
        The specs with each answered time replaced by its offset (or :data:`LATEST` with
        strategy ``latest`` where no record matched), and the partitions still at a time
        (unanswered: positioned at a later plan).

    Raises
    ------
    NoOffsetForTimestampError
        A partition has no record as recent as its time and the strategy is ``error``.
    """
    settled: Dict[TopicPartition, StartSpec] = dict(specs)
    unmatched: List[TopicPartition] = []
    for tp, spec in specs.items():
        if not isinstance(spec, AtTimestamp) or tp not in found:
            continue
        offset = found[tp]
        if offset is not None:
            settled[tp] = offset
        elif on_no_match == NO_MATCH_LATEST:
            settled[tp] = LATEST
        else:
            unmatched.append(tp)
    if unmatched:
        first = specs[unmatched[0]]
        assert isinstance(first, AtTimestamp)
        raise NoOffsetForTimestampError(
            f"option '{first.option}': no record of {', '.join(map(str, sorted(unmatched)))} has a timestamp at or "
            f"after {first.timestamp_ms} ms, so there is no offset to start at "
            "(startingOffsetsByTimestampStrategy=error, the default, as in Spark). Give an earlier time, or set "
            "startingOffsetsByTimestampStrategy=latest to start such partitions at their latest offset"
        )
    return settled, [tp for tp, spec in settled.items() if isinstance(spec, AtTimestamp)]


def resolve_positions(
    new: Sequence[TopicPartition],
    known: Mapping[TopicPartition, int],
    specs: Mapping[TopicPartition, StartSpec],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
) -> Dict[TopicPartition, int]:
    """The start of each ``new`` partition: its known position, else its ``specs`` entry resolved
    against the broker's ``earliest`` and ``latest`` offsets. A partition whose broker offset is
    not known (no answer) is left out: it is positioned at a later plan."""
    resolved: Dict[TopicPartition, int] = {}
    for tp in new:
        if tp in known:
            resolved[tp] = known[tp]
            continue
        spec = specs[tp]
        if isinstance(spec, AtTimestamp):
            continue  # the broker has not answered for its time: positioned at a later plan
        source = earliest if spec == EARLIEST else latest if spec == LATEST else None
        if source is None:
            resolved[tp] = spec
        elif tp in source:
            resolved[tp] = source[tp]
    return resolved


def stale_pauses(resolved: Mapping[TopicPartition, int],
                 checkpoint: Mapping[TopicPartition, int]) -> List[TopicPartition]:
    """Partitions whose pause is stale: another member read them meanwhile.

    A pause kept in the checkpoint (or from before a revoke) is stale for a
    partition that starts past its checkpointed position: its owner meanwhile
    knew nothing of the pause.
    """
    return sorted(tp for tp, pos in resolved.items() if tp in checkpoint and pos > checkpoint[tp])


def follow_table(plannable: Mapping[TopicPartition, int],
                 in_table: Mapping[TopicPartition, int]) -> Dict[TopicPartition, int]:
    """The positions to plan from with ``offsets.table``: the table's, wherever it has one.

    The table is the source of truth at every batch, so a reset made with the
    offsets tool is picked up at the next batch, and a batch the sink refused is
    read again. Each difference is logged.
    """
    followed = dict(plannable)
    for tp, pos in in_table.items():
        if tp in followed and pos != followed[tp]:
            logger.warning("offsets.table has %s at %d, the query's offsets at %d (a reset, or a batch that was not "
                           "committed): continuing from the table", tp, pos, followed[tp])
            followed[tp] = pos
    return followed


class Positioned(NamedTuple):
    """What :func:`position_new` decided."""

    #: The start of each newly owned partition (those the broker did not answer for are left out).
    resolved: Dict[TopicPartition, int]
    #: The partitions whose position the offsets table or the group's committed offsets already hold.
    durable: FrozenSet[TopicPartition]
    #: Partitions of a new query started at the group's committed offset where ``startingOffsets`` would
    #: have applied (the table had no position), with that offset.
    overridden: Dict[TopicPartition, int]
    #: The partitions the offsets table holds a position for (their start is the table's).
    in_table: FrozenSet[TopicPartition] = frozenset()
    #: The partition count of each topic of the partitions the table had no position for, where it held nothing
    #: of the topic (recorded with their starts, :mod:`~kafka_group.plan.durable_starts`).
    counts: Mapping[str, int] = {}


def position_new(
    new: Sequence[TopicPartition],
    checkpoint: Mapping[TopicPartition, int],
    *,
    cluster: Cluster,
    store: Optional[StartStore],
    member: Optional[Member],
    timeout_s: float,
    spec: Callable[[TopicPartition, bool], StartSpec],
    on_no_match: str,
) -> Positioned:
    """Read what the decisions above need and position the ``new`` partitions.

    Reads the offsets table (with one): the positions of ``new`` and, for the topics of those it has
    none for, of their topics' other partitions and the recorded starts (:func:`topics_read`); the
    group's committed offsets (with a member), then the broker's offsets at the start times of the
    partitions that start at a time, then its earliest and latest offsets of the partitions that
    start there. ``spec`` is :func:`starting_spec` bound to the query's options; ``on_no_match`` is
    ``startingOffsetsByTimestampStrategy``.

    Caller: Spark's planning thread.
    """
    table = store.positions(new) if store is not None else None
    # Only where the table has no position (it wins there): a coordinator that does not answer
    # then stops only the positioning of partitions that need the group's offsets.
    unknown = [tp for tp in new if table is None or tp not in table]
    read: FrozenSet[str] = frozenset()
    counts: Dict[str, int] = {}
    recorded_counts: Dict[str, int] = {}
    if store is not None and unknown:
        every = cluster.partitions_of(sorted({tp.topic for tp in unknown}))
        siblings = [tp for tp in every if tp not in new]
        held = {**(table or {}), **(store.positions(siblings) if siblings else {})}
        read = topics_read(held, store.starts(held))
        # Recorded with the starts only where the table holds nothing of the topic: a count taken later could
        # take in a partition added since the table began holding it.
        counts = {topic: n for topic, n in partition_counts(every).items() if all(tp.topic != topic for tp in held)}
        recorded_counts = store.partition_counts(sorted({tp.topic for tp in unknown}))
    since = frozenset(tp for tp in unknown if store is not None and added_since(tp, recorded_counts, read))
    group = member.committed(unknown, timeout_s) if member is not None and unknown else {}
    resumed = is_resumed(checkpoint)
    known = known_positions(new, checkpoint, table=table, group=group)
    overridden = {} if resumed else {tp: pos for tp, pos in known.items()
                                     if tp in group and tp not in (table or {}) and tp not in since}
    specs = {tp: spec(tp, resumed or tp in since) for tp in new}
    added = sorted(tp for tp in new if tp not in known and tp in since and spec(tp, resumed) != EARLIEST)
    if added:
        logger.warning("offsets.table holds topic(s) %s but neither it, the group nor the checkpoint has a position "
                       "for %s: taken as partitions added since, they start at their earliest offset, not where "
                       "option 'startingOffsets' says (which applies only to partitions that existed when the table "
                       "recorded the topic's first starts)",
                       ", ".join(sorted({tp.topic for tp in added})), ", ".join(map(str, added)))
    times = unseen_by_time(new, known, specs)
    if times:
        specs, _ = settle_times(specs, cluster.offsets_at_times(times), on_no_match)
    wants_earliest, wants_latest = unseen_by_spec(new, known, specs)
    resolved = resolve_positions(new, known, specs, cluster.earliest_offsets(wants_earliest),
                                 cluster.latest_offsets(wants_latest))
    return Positioned(resolved, frozenset(table or {}) | frozenset(group), overridden, frozenset(table or {}), counts)


def log_group_overrides(group_id: str, overridden: Mapping[TopicPartition, int], *, first: bool) -> None:
    """Say that the group's committed offsets won over ``startingOffsets`` for ``overridden``: a warning
    the ``first`` time (Spark's Kafka source, which has no group, would start there), else at INFO."""
    if overridden:
        logger.log(
            logging.WARNING if first else logging.INFO,
            "group '%s' has committed offsets for %s: the query starts there, not where option 'startingOffsets' "
            "(or 'startingOffsetsByTimestamp', 'startingTimestamp') says, which applies only to partitions "
            "neither the group nor offsets.table has a position for. To start where the option says, use a "
            "new kafka.group.id or reset the group's offsets", group_id, describe_positions(overridden))


def describe_positions(positions: Mapping[TopicPartition, int]) -> str:
    """``t-0@5, t-1@7`` (``nothing`` when empty), for logs."""
    return ", ".join(f"{tp}@{pos}" for tp, pos in sorted(positions.items())) or "nothing"
