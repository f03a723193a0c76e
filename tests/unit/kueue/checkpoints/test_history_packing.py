"""Packing from shard history: ordered packs, balanced over the slots, longest first."""

from __future__ import annotations

import heapq
import random

import pytest

from airflow_kueue_provider.kueue.checkpoints import history_packing
from airflow_kueue_provider.kueue.checkpoints.history_packing import packs_from_history
from airflow_kueue_provider.kueue.checkpoints.learned_lengths import LearnedLengths
from airflow_kueue_provider.kueue.checkpoints.packing_choice import PackingChoice, ShardDuration
from airflow_kueue_provider.kueue.checkpoints.shard_packing import InvalidPacking, ShardPacks
from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.worker.mapping import shard_ids_for_index


def _skewed(count: int = 200, seed: int = 7) -> dict[int, float]:
    rng = random.Random(seed)
    return {i: rng.uniform(1, 20) for i in range(count)}


def _makespan(packs: ShardPacks, seconds: dict[int, float], slots: int, start: float) -> float:
    """The Job controller's way: the lowest pending index starts in the first free slot."""
    free = [0.0] * slots
    end = 0.0
    for index in range(packs.index_count):
        began = heapq.heappop(free)
        done = began + start + sum(seconds[s] for s in packs.shards_of_index(index))
        end = max(end, done)
        heapq.heappush(free, done)
    return end


def test_skewed_lengths_are_balanced_over_the_slots_in_one_wave() -> None:
    seconds = _skewed()
    shards = IndexSet.range(0, 200)
    packs = packs_from_history(shards, LearnedLengths(200, seconds, ("n1",)), None, 20)
    assert packs is not None and packs.index_count == 20 and packs.order
    ideal = sum(seconds.values()) / 20
    assert _makespan(packs, seconds, 20, 0.0) <= 1.01 * ideal
    decreasing = PackingChoice(None, ShardDuration(1, 20), 20).packs(shards)
    assert _makespan(packs, seconds, 20, 5.0) < _makespan(decreasing, seconds, 20, 5.0)


def test_lengths_alike_keep_consecutive_ids_and_carry_no_order() -> None:
    packs = packs_from_history(
        IndexSet.range(0, 1000), LearnedLengths(1000, dict.fromkeys(range(1000), 3.0)), None, 50
    )
    assert packs is not None and packs.shape == "20" and not packs.order


def test_long_shards_keep_a_tail_of_small_packs_for_the_night_to_night_variance() -> None:
    rng = random.Random(3)
    seconds = {i: rng.uniform(300, 900) for i in range(50)}
    packs = packs_from_history(IndexSet.range(0, 50), LearnedLengths(50, seconds), None, 8)
    assert packs is not None and packs.index_count > 8
    loads = [sum(seconds[s] for s in packs.shards_of_index(i)) for i in range(packs.index_count)]
    assert max(loads[8:]) < min(loads[:8])  # the tail's packs are the small ones, after the slots' packs


def test_short_shards_with_a_fast_learned_start_run_one_wave_not_a_tail_of_pod_sized_packs() -> None:
    """Found by the small night: 50 shards of about 2 s, pods learned to start in 0.3 s. Their overrun
    (about 1 s) passed two learned starts, and the tail was packed by the fixed AKS start (5 s): 8 packs
    of 10 s and 4 of 5 s, a second wave of half the slots. A tail pod also waits for the Job
    controller's next sync: one wave it is."""
    rng = random.Random(11)
    seconds = {i: rng.uniform(1.5, 2.5) for i in range(50)}
    learned = LearnedLengths(50, seconds, ("n1",), pod_start_seconds=0.3)
    packs = packs_from_history(IndexSet.range(0, 50), learned, None, 8)
    assert packs is not None and packs.index_count == 8
    assert _makespan(packs, seconds, 8, 0.3) <= sum(seconds.values()) / 8 + 0.3 + 2.5


def test_a_tail_pack_carries_at_least_what_its_pod_costs_as_learned() -> None:
    rng = random.Random(5)
    seconds = {i: rng.uniform(30, 90) for i in range(400)}
    learned = LearnedLengths(400, seconds, ("n1",), pod_start_seconds=2.0)
    packs = packs_from_history(IndexSet.range(0, 400), learned, None, 8)
    assert packs is not None and packs.index_count > 8
    tail = [sum(seconds[s] for s in packs.shards_of_index(i)) for i in range(8, packs.index_count)]
    slot = sum(seconds.values()) / 8
    assert all(
        load >= 2.0 + history_packing.JOB_SYNC_SECONDS or len(packs.shards_of_index(i + 8)) == 1
        for i, load in enumerate(tail)
    )
    assert max(tail) < 0.1 * slot  # about half a slot's tail each, not a fixed AKS-sized pack


def test_a_shard_never_seen_takes_the_stated_length_else_the_median() -> None:
    learned = LearnedLengths(10, {i: 10.0 for i in range(9)})
    assert learned.length_of(9, 2.0) == 2.0 and learned.length_of(9, None) == 10.0
    packs = packs_from_history(IndexSet.range(0, 10), learned, 2.0, 9)
    assert packs is not None and packs.index_count == 9
    assert [len(packs.shards_of_index(i)) for i in range(9)].count(2) == 1  # the short one shares a pod


def test_an_order_too_long_for_a_pod_env_falls_back_to_a_range_from_the_learned_lengths(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(history_packing, "MAX_ORDER_CHARS", 10)
    learned = LearnedLengths(200, _skewed())
    assert packs_from_history(IndexSet.range(0, 200), learned, None, 20) is None
    packs = PackingChoice(None, None, 20, learned).packs(IndexSet.range(0, 200))
    assert not packs.order and packs.sizes  # decreasing packs of the learned range (1-20 s: skewed)


def test_no_history_or_a_pinned_size_packs_exactly_as_before() -> None:
    shards, learned = IndexSet.range(0, 200), LearnedLengths(200, _skewed())
    stated = PackingChoice(None, ShardDuration(1, 20), 20)
    assert stated.packs(shards) == PackingChoice(None, ShardDuration(1, 20), 20, None).packs(shards)
    assert PackingChoice(5, None, 20, learned).packs(shards) == ShardPacks(shards, 5)
    assert PackingChoice(None, None, 20).packs(shards) == ShardPacks(shards)
    assert PackingChoice(None, None, 20, learned).packs_any


def test_a_retry_packs_only_its_unfinished_shards_from_the_same_history() -> None:
    learned = LearnedLengths(200, _skewed())
    left = IndexSet.parse("3,17,40-59,150")
    packs = PackingChoice(None, None, 20, learned).packs(left)
    assert packs.shards == left and sorted(packs.order or left) == list(left)
    assert (
        IndexSet.from_indexes(s for i in range(packs.index_count) for s in packs.shards_of_index(i)) == left
    )


def test_the_ordered_shape_round_trips_through_the_pod_env_and_the_ledger_text() -> None:
    learned = LearnedLengths(200, _skewed())
    shards = IndexSet.range(0, 200)
    packs = PackingChoice(None, None, 20, learned).packs(shards)
    assert "/" in packs.shape and ShardPacks.parse(shards, packs.shape) == packs
    for index in range(packs.index_count):  # the worker reads its shards from the same text
        assert shard_ids_for_index(index, str(shards), packs.shape) == tuple(packs.shards_of_index(index))
    assert packs.ids_at(IndexSet.range(0, 3)) == IndexSet.from_indexes(packs.order[:3])


@pytest.mark.parametrize(
    "shape",
    ["2x2/0,1,2", "2x2/0-2,2", "2x2/a,1,2,3", "2x2/3-1,0", "2x2/0-999999999999"],
)
def test_a_bad_or_oversized_order_is_refused_without_building_it(shape: str) -> None:
    with pytest.raises(InvalidPacking):
        ShardPacks.parse(IndexSet.range(0, 4), shape)


def test_ordered_packs_may_grow_and_shrink_but_not_decreasing_ones() -> None:
    shards = IndexSet.range(0, 6)
    assert ShardPacks.parse(shards, "1x1,3x1,2x1/5,0-2,4,3").shards_of_index(1) == IndexSet.parse("0-2")
    with pytest.raises(InvalidPacking, match="decreasing"):
        ShardPacks.parse(shards, "1x1,3x1,2x1")
