"""Several shards per pod: the index -> shards mapping and the operator's choice of how many."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.kueue.shard_blob_names import done_name, done_shard_ids
from airflow_kueue_provider.kueue.shard_packing import (
    InvalidPacking,
    PackingChoice,
    ShardPacks,
    choose_per_pod,
)


def test_index_i_runs_the_ith_group_of_the_shards_in_ascending_order() -> None:
    packs = ShardPacks(IndexSet.parse("2,5,8,20-24"), 3)
    assert packs.index_count == 3
    assert [list(packs.shards_of_index(i)) for i in range(3)] == [[2, 5, 8], [20, 21, 22], [23, 24]]
    assert str(packs.shards_of(IndexSet.parse("0,2"))) == "2,5,8,23,24"
    assert packs.describe() == "8 shards as 3 pods of up to 3"
    with pytest.raises(IndexError, match="out of range for 3 packs"):
        packs.shards_of_index(3)


def test_one_per_pod_is_the_unpacked_mapping() -> None:
    shards = IndexSet.parse("3,7,900-999")
    packs = ShardPacks(shards)
    assert packs.index_count == len(shards)
    assert packs.shards_of(IndexSet.parse("0-1,5")) == shards.select(IndexSet.parse("0-1,5"))


@given(
    st.lists(st.integers(0, 300), min_size=1, max_size=60, unique=True),
    st.integers(1, 70),
)
def test_the_packs_cover_every_shard_once(ids: list[int], per_pod: int) -> None:
    packs = ShardPacks(IndexSet.from_indexes(ids), per_pod)
    seen: list[int] = []
    for i in range(packs.index_count):
        pack = list(packs.shards_of_index(i))
        assert 1 <= len(pack) <= per_pod
        seen += pack
    assert seen == sorted(ids)
    assert packs.shards_of(IndexSet.range(0, packs.index_count)) == packs.shards


@pytest.mark.parametrize(
    ("count", "parallelism", "seconds", "expected"),
    [
        (1000, 50, 3.0, 10),  # 60 s per slot: two waves (the least) of 10
        (10_000, 50, 1.0, 67),  # 200 s per slot: three waves of about a minute, 150 pods
        (300, 30, 45.0, 2),  # two 45 s shards reach the minute
        (300, 30, 600.0, 1),  # long shards: one per pod
        (40, 50, 1.0, 1),  # fewer shards than slots: nothing to pack
        (1000, None, 3.0, 1),  # parallelism = completions: every shard has its slot
        (1000, 50, None, 1),  # no duration: the program may be a single-shard one
    ],
)
def test_the_operator_packs_whole_waves_of_about_a_minute_keeping_the_tail_balanced(
    count: int, parallelism: int | None, seconds: float | None, expected: int
) -> None:
    assert choose_per_pod(count, parallelism, seconds) == expected


@pytest.mark.parametrize(
    ("explicit", "seconds", "message"),
    [
        (0, None, "shards_per_pod=0: give a whole number >= 1"),
        (True, None, "shards_per_pod=True"),
        (2.5, None, "shards_per_pod=2.5"),
        (11, None, "more than the 10 shards"),
        (None, 0.0, "give a positive duration"),
        (None, float("nan"), "give a positive duration"),
    ],
)
def test_bad_settings_name_the_parameter_and_the_fix(
    explicit: object, seconds: float | None, message: str
) -> None:
    with pytest.raises(InvalidPacking, match=message):
        choose_per_pod(10, 5, seconds, explicit)  # type: ignore[arg-type]


def test_a_retry_is_packed_again_for_what_is_left() -> None:
    explicit = PackingChoice(explicit=20, parallelism=50)
    assert explicit.packs(IndexSet.range(0, 1000)) == ShardPacks(IndexSet.range(0, 1000), 20)
    assert explicit.packs(IndexSet.parse("7,123")).per_pod == 2  # no more than are left
    chosen = PackingChoice(expected_shard_seconds=3.0, parallelism=50)
    assert chosen.per_pod(1000) == 10 and chosen.per_pod(30) == 1  # a small retry: one per pod
    assert PackingChoice().packs(IndexSet()) == ShardPacks(IndexSet(), 1)


def test_done_markers_are_read_from_a_listing() -> None:
    prefix = "dag/run/task"
    names = [done_name(prefix, 3), f"{prefix}/shards/3/checkpoint-00000001.json", done_name(prefix, 12)]
    names += [f"{prefix}/shards/x/done.json", "other/shards/4/done.json", f"{prefix}/shards/5/done.json.tmp"]
    assert str(done_shard_ids(names, prefix)) == "3,12"
