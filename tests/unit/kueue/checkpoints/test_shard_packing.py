"""Several shards per pod: the index -> shards mapping and the operator's choice of how many."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_kueue_provider.kueue.checkpoints.packing_choice import (
    PackingChoice,
    ShardDuration,
    choose_per_pod,
    decreasing_sizes,
    whole_wave_sizes,
)
from airflow_kueue_provider.kueue.checkpoints.shard_blob_names import done_name, done_shard_ids
from airflow_kueue_provider.kueue.checkpoints.shard_packing import InvalidPacking, ShardPacks, packs_of_job
from airflow_kueue_provider.kueue.index_set import IndexSet


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
    chosen = PackingChoice(expected=ShardDuration(3.0, 3.0), parallelism=50)
    assert chosen.per_pod(1000) == 10 and chosen.per_pod(30) == 1  # a small retry: one per pod
    assert PackingChoice().packs(IndexSet()) == ShardPacks(IndexSet(), 1)


def test_decreasing_packs_take_a_share_of_what_is_left_and_end_on_single_shards() -> None:
    """200 shards of 1-20 s at parallelism 20: 5 per pod while a twentieth of what is left is 5 or more,
    then smaller, the last 19 pods one shard each (the benchmark's skewed case)."""
    packs = PackingChoice(None, ShardDuration(1.0, 20.0), 20).packs(IndexSet.range(0, 200))
    assert packs.shape == "5x24,4x5,3x7,2x10,1x19"
    assert (packs.per_pod, packs.index_count) == (5, 65)
    assert packs.describe() == "200 shards as 65 pods of 5 down to 1"
    assert [list(packs.shards_of_index(i)) for i in (0, 24, 64)] == [
        [0, 1, 2, 3, 4],
        [120, 121, 122, 123],
        [199],
    ]
    assert str(packs.shards_of(IndexSet.parse("23-24,64"))) == "115-123,199"
    assert [packs.index_of_rank(r) for r in (0, 4, 5, 120, 124, 199)] == [0, 0, 1, 24, 25, 64]
    assert ShardPacks.parse(packs.shards, packs.shape) == packs


def test_a_narrow_range_or_an_explicit_size_packs_evenly() -> None:
    shards = IndexSet.range(0, 1000)
    assert PackingChoice(None, ShardDuration(2.5, 3.5), 50).packs(shards) == ShardPacks(shards, 10)
    assert PackingChoice(20, ShardDuration(1.0, 20.0), 50).packs(shards) == ShardPacks(shards, 20)
    # even sizes given as runs are written in the even form, so the pod env stays "10"
    assert ShardPacks.decreasing(shards, ((10, 60), (10, 40))).shape == "10"


def test_a_stated_duration_packs_into_whole_waves_of_the_parallelism() -> None:
    """The small night's call step: 50 shards of 2 s at parallelism 8 (two waves, at most 4 a pod) are 16
    pods, 2 of 4 shards and 14 of 3, not 12 of 4 and a 13th of 2: the second wave fills every slot."""
    packs = PackingChoice(None, ShardDuration(2.0, 2.0), 8).packs(IndexSet.range(0, 50))
    assert (packs.shape, packs.index_count, packs.per_pod) == ("4x2,3x14", 16, 4)
    assert ShardPacks.parse(packs.shards, packs.shape) == packs
    assert whole_wave_sizes(24, 8, 2) == ((2, 8), (1, 8))
    assert whole_wave_sizes(300, 30, 2) == ((2, 150),), "150 pods are five whole waves already"
    assert whole_wave_sizes(10_000, 50, 67) == ((67, 100), (66, 50)), "not a last pod of 17"
    assert whole_wave_sizes(5, 5, 2) == ((1, 5),), "no more pods than shards"


@given(st.integers(1, 5000), st.integers(1, 200), st.integers(1, 100))
def test_whole_waves_hold_every_shard_in_sizes_one_apart(count: int, slots: int, largest: int) -> None:
    runs = whole_wave_sizes(count, slots, largest)
    pods = sum(n for _, n in runs)
    assert sum(size * n for size, n in runs) == count
    assert max(size for size, _ in runs) <= largest and max(runs)[0] - min(runs)[0] <= 1
    assert pods == count or pods % slots == 0
    assert pods >= -(-count // largest) and pods - -(-count // largest) < slots


@given(
    st.lists(st.integers(0, 2000), min_size=1, max_size=400, unique=True),
    st.integers(1, 60),
    st.integers(1, 80),
)
def test_decreasing_packs_cover_every_shard_once_in_order(ids: list[int], slots: int, largest: int) -> None:
    shards = IndexSet.from_indexes(ids)
    packs = ShardPacks.decreasing(shards, decreasing_sizes(len(shards), slots, largest))
    sizes = [len(packs.shards_of_index(i)) for i in range(packs.index_count)]
    assert sizes == sorted(sizes, reverse=True) and max(sizes) <= largest and sum(sizes) == len(ids)
    seen = [s for i in range(packs.index_count) for s in packs.shards_of_index(i)]
    assert seen == sorted(ids)
    assert all(
        packs.index_of_rank(r) == i
        for i in range(packs.index_count)
        for r in packs.ranks_of(IndexSet.range(i, i + 1))
    )
    assert ShardPacks.parse(shards, packs.shape) == packs


@pytest.mark.parametrize(
    ("shape", "says"),
    [
        ("5x2,6x1", "give decreasing sizes"),
        ("5x2,0x1", "give decreasing sizes"),
        ("5x2", "hold 10 shards, not the Job's 11"),
        ("5x2,1", "size x count"),
        ("five", "size x count"),
        ("", "size x count"),
    ],
)
def test_a_bad_pack_shape_is_refused_naming_it(shape: str, says: str) -> None:
    with pytest.raises(InvalidPacking, match=says):
        ShardPacks.parse(IndexSet.range(0, 11), shape)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (3, ShardDuration(3.0, 3.0)),
        (timedelta(seconds=2), ShardDuration(2.0, 2.0)),
        ((1, timedelta(seconds=20)), ShardDuration(1.0, 20.0)),
        (None, None),
    ],
)
def test_the_shard_duration_is_one_figure_or_a_range(value: object, expected: ShardDuration | None) -> None:
    assert ShardDuration.from_param(value) == expected


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ((20, 1), "swap them"),
        ((1, 2, 3), r"a \(shortest, longest\) pair"),
        ("5s", "give a timedelta or a number of seconds"),
        ((0, 3), "give a positive duration"),
        (True, "give a timedelta"),
    ],
)
def test_a_bad_shard_duration_says_what_to_give(value: object, says: str) -> None:
    with pytest.raises(InvalidPacking, match=says):
        ShardDuration.from_param(value)


def test_a_jobs_pack_shape_is_read_from_its_pod_env() -> None:
    def job(env: list[dict[str, str]]) -> dict[str, object]:
        return {"spec": {"template": {"spec": {"containers": [{"name": "main", "env": env}]}}}}

    shards = {"name": "AIRFLOW_KUEUE_SHARDS", "value": "0-10"}
    runs = {"name": "AIRFLOW_KUEUE_SHARDS_PER_POD", "value": "3x2,2x2,1x1"}
    assert packs_of_job(job([shards, runs])) == ShardPacks(IndexSet.range(0, 11), 3, ((3, 2), (2, 2), (1, 1)))
    assert packs_of_job(job([shards, {**runs, "value": "3x9"}])) is None  # not a shape of these shards
    assert packs_of_job(job([shards])) == ShardPacks(IndexSet.range(0, 11))


def test_done_markers_are_read_from_a_listing() -> None:
    prefix = "dag/run/task"
    names = [done_name(prefix, 3), f"{prefix}/shards/3/checkpoint-00000001.json", done_name(prefix, 12)]
    names += [f"{prefix}/shards/x/done.json", "other/shards/4/done.json", f"{prefix}/shards/5/done.json.tmp"]
    assert str(done_shard_ids(names, prefix)) == "3,12"
