"""The end of a ``Trigger.AvailableNow`` run: which target partitions are unfinished, and the wait.

An AvailableNow run fixes its target (the latest offsets when it starts) and,
once it has nothing to plan, ends only when every partition of that target has
reached its end offset or can never be read. :func:`short_of_end` and
:func:`unfinished` are pure; :func:`find_unfinished` reads what they judge from
the cluster, the offsets table or the group, and :func:`await_end` is the
waiting loop.
"""

from __future__ import annotations

import logging
import time
from typing import AbstractSet, Any, Callable, Dict, FrozenSet, List, Mapping, Optional, Tuple, TypeVar

from kafka_group.collaborators import Cluster, Member, OffsetStore
from kafka_group.config.source_options import SourceOptions, SubscriptionKind
from kafka_group.errors import AvailableNowIncompleteError, BrokerUnavailableError, GroupMembershipError
from kafka_group.offsets import LATEST, StartSpec, TopicPartition
from kafka_group.plan.positioning import topics_read

__all__ = ["Unfinished", "await_end", "find_unfinished", "short_of_end", "target_offsets", "target_partitions",
           "unfinished"]

logger = logging.getLogger(__name__)

#: A partition short of the run's end: its position (None: never read) and that end.
Unfinished = Dict[TopicPartition, Tuple[Optional[int], int]]

T = TypeVar("T")


def short_of_end(
    target: Mapping[TopicPartition, int],
    *,
    owned: AbstractSet[TopicPartition],
    paused: AbstractSet[TopicPartition],
    own_positions: Mapping[TopicPartition, int],
    judged_elsewhere: AbstractSet[TopicPartition],
    kept: Mapping[TopicPartition, int],
) -> Unfinished:
    """Partitions of ``target`` short of their end offset.

    Owned partitions are judged by this query's own positions from its last plan
    (``own_positions``; a partition just assigned and not positioned yet is short);
    paused ones count as done, as they do in every trigger. Partitions owned
    elsewhere are judged by ``kept``, and only those in ``judged_elsewhere``: with
    ``offsets.table`` every one, by the table's positions (else the group's committed
    start); without one, by the group's
    committed offsets and only while this member owns nothing (the run after a
    crash): a live member's last batch reaches the group only when it plans the
    next one, so its committed offsets may trail for ever. An empty partition (end
    0) is done.
    """
    short: Unfinished = {}
    for tp, end in target.items():
        if end <= 0 or tp in paused or (tp not in owned and tp not in judged_elsewhere):
            continue
        pos = own_positions.get(tp) if tp in owned else kept.get(tp)
        if pos is None or pos < end:
            short[tp] = (pos, end)
    return short


def unfinished(
    short: Unfinished,
    *,
    earliest: Mapping[TopicPartition, int],
    owned: AbstractSet[TopicPartition],
    starts_at_latest: Callable[[TopicPartition], bool],
) -> Unfinished:
    """The partitions of ``short`` the run must still wait for.

    Partitions whose records below the end are all gone from the broker are done,
    and so are never-read ones owned elsewhere whose owner starts them at the
    latest offset (the same resume rule as positioning decides that).
    """
    return {
        tp: (pos, end) for tp, (pos, end) in short.items()
        if earliest.get(tp, -1) < end  # records below the end are still on the broker
        and not (pos is None and tp not in owned and starts_at_latest(tp))
    }


def target_partitions(options: SourceOptions, cluster: Cluster) -> List[TopicPartition]:
    """Every partition the query reads now (``assign``'s, the pattern's or the topics'): the run's target."""
    if options.subscription_kind == SubscriptionKind.ASSIGN:
        return list(options.assigned)
    if options.subscription_kind == SubscriptionKind.PATTERN:
        assert options.pattern is not None
        return cluster.matching_partitions(options.pattern)
    return cluster.partitions_of(options.topics)


def target_offsets(cluster: Cluster, partitions: List[TopicPartition], *, timeout_ms: int, pause_s: float,
                   clock: Callable[[], float] = time.monotonic) -> Dict[TopicPartition, int]:
    """The run's end: the latest offset of every partition of ``partitions``, each answered.

    The cluster view leaves out a partition it got no answer for (its leader down or
    moving); a target without it would end the run as a success with that partition
    unread. So the partitions left out are asked again every ``pause_s`` until each is
    answered, and the run fails after ``timeout_ms`` (``kafkaConsumer.connectTimeoutMs``).

    Caller: Spark's planning thread (``prepareForTriggerAvailableNow``).

    Raises
    ------
    BrokerUnavailableError
        Some partitions got no answer within ``timeout_ms``; names them and the option.
    """
    deadline = clock() + timeout_ms / 1000
    target = dict(cluster.latest_offsets(partitions))
    missing = [tp for tp in partitions if tp not in target]
    while missing:
        if clock() > deadline:
            raise BrokerUnavailableError(
                "the AvailableNow run cannot fix its end: the cluster did not answer the latest offsets of "
                f"{', '.join(str(tp) for tp in sorted(missing))} within {timeout_ms} ms (option "
                "'kafkaConsumer.connectTimeoutMs'); run again once their leaders are back, or raise the option"
            )
        logger.info("AvailableNow run: no latest offsets for %s yet; asking again",
                    ", ".join(str(tp) for tp in sorted(missing)))
        time.sleep(pause_s)
        target.update(cluster.latest_offsets(missing))
        missing = [tp for tp in missing if tp not in target]
    return target


def find_unfinished(
    target: Mapping[TopicPartition, int],
    *,
    resumed: bool,
    owned: FrozenSet[TopicPartition],
    paused: AbstractSet[TopicPartition],
    own_positions: Mapping[TopicPartition, int],
    cluster: Cluster,
    store: Optional[OffsetStore],
    member: Optional[Member],
    timeout_s: float,
    spec: Callable[[TopicPartition, bool], StartSpec],
) -> Unfinished:
    """The partitions of ``target`` the run must still wait for (:func:`short_of_end`, :func:`unfinished`).

    ``resumed`` says whether the query resumes from its checkpoint. ``spec`` is the
    positioning rule (:func:`kafka_group.plan.positioning.starting_spec`) for a
    partition and ``resumed`` (per topic: a topic the table reads resumes, see
    :func:`~kafka_group.plan.positioning.topics_read`). With ``offsets.table``, a partition owned elsewhere is
    judged by the table's position, else by the group's committed offset: the start its
    owner committed when it positioned it, where it reads from (finding 7 of the review of
    issue 26: a run whose other partitions had no new record waited for a table position
    that never came, and failed).

    Caller: Spark's planning thread.
    """
    others = [tp for tp in target if tp not in owned]
    kept: Dict[TopicPartition, int] = {}
    read: FrozenSet[str] = frozenset()  # topics the table reads: their unpositioned partitions start at earliest
    if store is not None:
        in_table = store.positions(target)  # one table read for both uses
        read = topics_read(in_table, store.starts(in_table))
        kept = {tp: pos for tp, pos in in_table.items() if tp not in owned}
        started = [tp for tp in others if tp not in in_table]
        if member is not None and started:
            kept.update(_group_offsets(member, started, timeout_s))
    elif member is not None and not owned:
        kept = _group_offsets(member, others, timeout_s)
    else:
        others = []
    short = short_of_end(target, owned=owned, paused=paused, own_positions=own_positions,
                         judged_elsewhere=set(others), kept=kept)
    return unfinished(short, earliest=cluster.earliest_offsets(short), owned=owned,
                      starts_at_latest=lambda tp: spec(tp, resumed or tp.topic in read) == LATEST)


def _group_offsets(member: Member, partitions: List[TopicPartition], timeout_s: float) -> Dict[TopicPartition, int]:
    """The group's committed offsets of ``partitions``; none when the coordinator does not answer (the run
    then waits for them as for unread partitions, and asks again at its next check)."""
    try:
        return member.committed(partitions, timeout_s)
    except GroupMembershipError as exc:
        logger.info("AvailableNow run: the group's committed offsets are unknown for now: %s", exc)
        return {}


def await_end(
    *,
    group_id: Optional[str],
    timeout_ms: int,
    find_unfinished: Callable[[], Unfinished],
    owned: Callable[[], FrozenSet[TopicPartition]],
    plan_again: Callable[[], Optional[T]],
    closed: Callable[[], bool],
    pause_s: float = 1.0,
) -> Optional[T]:
    """Wait until the run can end (None) or a plan has something to read (that plan).

    Plans again every ``pause_s`` (the group may hand the query partitions), and
    fails after ``timeout_ms`` (``availableNowTimeoutMs``) during which neither
    ownership nor the unfinished partitions changed. A close (SIGTERM) ends the wait.

    Caller: Spark's planning thread (the runner's main thread); the group's poll
    thread keeps serving rebalances meanwhile.

    Raises
    ------
    AvailableNowIncompleteError
        Nothing moved for ``timeout_ms``.
    """
    last_state: Any = None
    changed_at = time.monotonic()
    logged = False
    while True:
        waiting = find_unfinished()
        if not waiting:
            return None
        mine = owned()
        state = (mine, tuple(sorted(waiting.items())))
        if state != last_state:
            last_state, changed_at = state, time.monotonic()
        elif time.monotonic() - changed_at > timeout_ms / 1000:
            raise _incomplete(group_id, timeout_ms, waiting, mine)
        if not logged:
            logger.info("AvailableNow run waits for partitions to reach the run's end: %s", describe(waiting))
            logged = True
        if closed():
            return None
        time.sleep(pause_s)
        end = plan_again()
        if end is not None:
            return end


def _incomplete(group_id: Optional[str], timeout_ms: int, waiting: Unfinished,
                owned: FrozenSet[TopicPartition]) -> AvailableNowIncompleteError:
    elsewhere = {tp: v for tp, v in waiting.items() if tp not in owned}
    here = {tp: v for tp, v in waiting.items() if tp in owned}
    return AvailableNowIncompleteError(
        f"the AvailableNow run of group '{group_id}' cannot reach its end offsets: "
        + "; ".join(part for part in (
            f"{describe(elsewhere)} owned elsewhere (another query of the group still "
            "running, or a crashed one until its session times out)" if elsewhere else "",
            f"{describe(here)} owned here but held back by a flow rule" if here else "",
        ) if part)
        + f", and nothing moved for {timeout_ms} ms (option "
        "'availableNowTimeoutMs'). Run again later (it continues from what landed), or raise "
        "'availableNowTimeoutMs'"
    )


def describe(waiting: Mapping[TopicPartition, Tuple[Optional[int], int]]) -> str:
    """``t-0 at 5 of 10, t-1 at nothing read of 3``."""
    return ", ".join(f"{tp} at {'nothing read' if pos is None else pos} of {end}"
                     for tp, (pos, end) in sorted(waiting.items()))
