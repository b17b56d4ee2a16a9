"""Pure positioning, data-loss and AvailableNow-end decisions (no collaborators)."""

from __future__ import annotations

from typing import Dict, Optional

import pytest

from kafka_group.errors import DataLossError
from kafka_group.offsets import EARLIEST, LATEST, StartingOffsets, TopicPartition
from kafka_group.plan.available_now import short_of_end, unfinished
from kafka_group.plan.data_loss import LossCheck, check_positions, past_end, table_moves
from kafka_group.plan.positioning import (
    follow_table,
    is_resumed,
    known_positions,
    resolve_positions,
    stale_pauses,
    starting_spec,
    unseen_by_spec,
)
from tests.unit.driver_fakes import T0, T1, T2

NEW_QUERY_LATEST = StartingOffsets(LATEST)


# -- positioning ----------------------------------------------------------------------------------


def test_new_query_starts_known_partitions_at_starting_offsets() -> None:
    assert starting_spec(T0, False, known_at_start={T0}, starting_offsets=NEW_QUERY_LATEST) == LATEST


def test_partition_created_since_start_starts_at_earliest() -> None:
    assert starting_spec(T1, False, known_at_start={T0}, starting_offsets=NEW_QUERY_LATEST) == EARLIEST


def test_resumed_query_starts_unseen_partitions_at_earliest() -> None:
    assert starting_spec(T0, True, known_at_start={T0}, starting_offsets=NEW_QUERY_LATEST) == EARLIEST


def test_assign_has_no_start_set_and_uses_starting_offsets() -> None:
    assert starting_spec(T0, False, known_at_start=None, starting_offsets=StartingOffsets(LATEST, {T0: 7})) == 7


def test_resumed_when_the_checkpoint_has_positions_not_when_the_table_knows_other_partitions() -> None:
    assert not is_resumed({})
    assert is_resumed({T0: 1})


def test_table_wins_over_checkpoint_for_partitions_it_has_seen() -> None:
    assert known_positions([T0, T1], {T0: 9, T1: 4}, table={T0: 2}) == {T0: 2, T1: 4}


def test_without_table_the_furthest_of_checkpoint_and_group_wins() -> None:
    assert known_positions([T0, T1, T2], {T0: 4, T1: 8}, group={T0: 6, T1: 5}) == {T0: 6, T1: 8}


def test_unseen_partitions_are_resolved_against_the_broker() -> None:
    specs = {T0: EARLIEST, T1: LATEST, T2: 3}
    known = {T2: 5}
    assert unseen_by_spec([T0, T1, T2], known, specs) == ([T0], [T1])
    assert resolve_positions([T0, T1, T2], known, specs, {T0: 1}, {T1: 9}) == {T0: 1, T1: 9, T2: 5}


def test_explicit_starting_offset_needs_no_broker_answer_and_unanswered_ones_wait() -> None:
    assert resolve_positions([T0, T1], {}, {T0: 3, T1: EARLIEST}, {}, {}) == {T0: 3}


def test_pause_is_stale_only_where_someone_read_past_the_checkpoint() -> None:
    assert stale_pauses({T0: 6, T1: 4, T2: 1}, {T0: 4, T1: 4}) == [T0]


def test_follow_table_takes_the_tables_positions() -> None:
    assert follow_table({T0: 10, T1: 5}, {T0: 3}) == {T0: 3, T1: 5}


# -- data loss ------------------------------------------------------------------------------------


Offsets = Dict[TopicPartition, int]


def check(positions: Offsets, *, earliest: Offsets, latest: Offsets, high: Optional[Offsets] = None,
          available_now: bool = False, fail: bool = False) -> LossCheck:
    return check_positions(positions, earliest=earliest, latest=latest, high_watermarks=high or {},
                           available_now=available_now, fail_on_data_loss=fail)


def test_position_below_earliest_moves_to_earliest() -> None:
    result = check({T0: 2}, earliest={T0: 5}, latest={T0: 9})
    assert result.checked == {T0: 5}
    assert "offsets [2, 5) were removed" in result.losses[0]


def test_loss_raises_when_fail_on_data_loss() -> None:
    with pytest.raises(DataLossError, match="Set option 'failOnDataLoss' to 'false'"):
        check({T0: 2}, earliest={T0: 5}, latest={T0: 9}, fail=True)


def test_position_past_the_end_restarts_at_earliest() -> None:
    assert check({T0: 50}, earliest={T0: 0}, latest={T0: 3}).checked == {T0: 0}


def test_position_past_the_target_of_an_available_now_run_is_not_loss() -> None:
    assert check({T0: 50}, earliest={T0: 0}, latest={T0: 3}, available_now=True, fail=True).checked == {T0: 50}


def test_position_past_last_stable_offset_within_high_watermark_waits() -> None:
    assert past_end({T0: 7, T1: 1}, {T0: 5, T1: 5}) == [T0]
    result = check({T0: 7}, earliest={T0: 0}, latest={T0: 5}, high={T0: 8}, fail=True)
    assert result.checked == {T0: 7} and result.waiting == [T0]


def test_table_moves_only_partitions_the_table_has_seen() -> None:
    moves = table_moves({T0: 2, T1: 2, T2: 4}, {T0: 5, T1: 5, T2: 4}, {T0: 2})
    assert list(moves) == [T0]
    assert (moves[T0].old, moves[T0].new) == (2, 5)
    assert "offsets [2, 5) of t-0 are no longer on the broker" in moves[T0].reason


def test_table_move_backwards_says_the_partition_restarts() -> None:
    assert "ends before position 50; restarting at 0" in table_moves({T0: 50}, {T0: 0}, {T0: 50})[T0].reason


# -- AvailableNow's end ---------------------------------------------------------------------------


def test_owned_partitions_are_judged_by_own_positions_and_paused_ones_are_done() -> None:
    short = short_of_end({T0: 5, T1: 5, T2: 0}, owned={T0, T1, T2}, paused={T1}, own_positions={T0: 3},
                         judged_elsewhere=set(), kept={})
    assert short == {T0: (3, 5)}


def test_partition_just_assigned_and_not_positioned_is_short() -> None:
    assert short_of_end({T0: 5}, owned={T0}, paused=set(), own_positions={}, judged_elsewhere=set(),
                        kept={}) == {T0: (None, 5)}


def test_partitions_elsewhere_are_judged_only_when_told_to() -> None:
    target = {T0: 5, T1: 5}
    assert short_of_end(target, owned=set(), paused=set(), own_positions={}, judged_elsewhere=set(), kept={}) == {}
    assert short_of_end(target, owned=set(), paused=set(), own_positions={}, judged_elsewhere={T0, T1},
                        kept={T0: 5, T1: 2}) == {T1: (2, 5)}


def test_removed_records_and_latest_starting_partitions_elsewhere_are_done() -> None:
    short = {T0: (2, 5), T1: (None, 5), T2: (None, 5)}
    left = unfinished(short, earliest={T0: 5}, owned={T2}, starts_at_latest=lambda tp: True)
    assert left == {T2: (None, 5)}
