"""The wait for quota, simulated in units of the Job's pods: holders free theirs as they end, the workloads
ahead go first in order, quota not seen is Jobs like this one half done."""

from __future__ import annotations

import pytest

from airflow_kueue_provider.kueue.progress.queue_wait import (
    MAX_RELEASES,
    Ahead,
    Holder,
    Pool,
    held_releases,
    release_pattern,
    simulated_admission,
    unseen_holders,
)


def simulated_wait(free: float, need: int, holders: list[Holder], ahead: int, run: float) -> float:
    """One flavor's wait."""
    return simulated_admission([Pool(free, need, run, holders)], ahead)[0]


def test_room_now_and_nothing_ahead_is_no_wait() -> None:
    assert simulated_wait(8, 8, [Holder(8, 50)], 0, 100) == 0


def test_the_job_waits_for_the_first_holder_that_frees_enough() -> None:
    # 24 pods of quota: three Jobs of 8 admitted 0, 40 and 90 s ago; each runs 100 s.
    holders = [Holder(8, 100), Holder(8, 60), Holder(8, 10)]
    assert simulated_wait(0, 8, holders, 0, 100) == pytest.approx(10)
    # Two like it ahead: they take the first two to free (10 and 60); this one the third (100).
    assert simulated_wait(0, 8, holders, 2, 100) == pytest.approx(100)
    # Three ahead: the third goes at 100, this one when the first of them ends (10 + 100).
    assert simulated_wait(0, 8, holders, 3, 100) == pytest.approx(110)


def test_pieces_of_quota_add_up_before_a_larger_job_fits() -> None:
    assert simulated_wait(2, 8, [Holder(4, 5), Holder(2, 20), Holder(4, 30)], 0, 100) == pytest.approx(20)


def test_a_queue_that_never_frees_enough_waits_for_the_last_holder() -> None:
    assert simulated_wait(0, 8, [Holder(2, 5), Holder(2, 7)], 0, 100) == pytest.approx(7)


def test_an_overrunning_holder_is_taken_to_free_now() -> None:
    assert simulated_wait(0, 8, [Holder(8, -30)], 0, 100) == 0


def test_unseen_quota_is_jobs_like_this_one_half_done() -> None:
    assert unseen_holders(20, 8, 100) == [Holder(8, 50), Holder(8, 50), Holder(4, 50)]
    assert unseen_holders(0, 8, 100) == [] and unseen_holders(5, 0, 100) == []


def test_each_job_takes_the_first_flavor_in_order_with_room() -> None:
    spot = Pool(0, 8, 100, [Holder(8, 30)])
    ondemand = Pool(8, 8, 100)
    assert simulated_admission([spot, ondemand], 0) == (0, 1), "room now in the second"
    assert simulated_admission([spot, ondemand], 1) == (30, 0), "the one ahead took it"
    assert simulated_admission([Pool(8, 8, 100), ondemand], 0) == (0, 0), "the first in order"


def test_workloads_ahead_seen_with_their_size_go_in_together() -> None:
    """A 50-pod Job behind four of 24 pods in 96 pods of quota: the four run at once (one run of theirs),
    where four Jobs like it would go one at a time (two never fit in 96)."""
    pool = Pool(96, 50, 40)
    small = [Ahead(24.0, 30.0)] * 4
    assert simulated_admission([pool], small)[0] == pytest.approx(30)
    assert simulated_admission([pool], 4)[0] == pytest.approx(160)
    assert simulated_admission([pool], [Ahead()] * 4)[0] == pytest.approx(160), "unsized: like the Job"
    mixed = [Ahead(24.0), Ahead(50.0), Ahead(24.0)]  # runs like the Job's (40 s) when not known
    assert simulated_admission([pool], mixed)[0] == pytest.approx(40)


def test_a_workload_ahead_asking_more_than_the_pool_ever_holds_takes_all_of_it() -> None:
    pool = Pool(4, 10, 5, [Holder(6, 2)])
    assert simulated_admission([pool], [Ahead(500.0, 7.0)])[0] == pytest.approx(9), "all 10, for 7 s"


def test_a_job_ahead_frees_its_quota_pod_by_pod_as_its_indexes_finish() -> None:
    """Kueue reclaims a finished index's quota while the Job runs on: the next Job goes in once enough of
    the one before has finished, not when its last pod does."""
    whole = Pool(10, 10, 100)
    spread = Pool(10, 10, 100, releases=[10.0 * k for k in range(1, 11)])  # one pod free every 10 s
    assert simulated_admission([whole], 1)[0] == pytest.approx(100)
    assert simulated_admission([spread], 1)[0] == pytest.approx(100), "all 10 pods: the last frees at 100"
    half = Pool(15, 10, 100, releases=[10.0 * k for k in range(1, 11)])
    assert simulated_admission([half], 1)[0] == pytest.approx(50), "5 free + 5 freed by 50 s"
    # A workload ahead of its own size and run frees in the Job's pattern, stretched to its run.
    assert simulated_admission([half], [Ahead(10.0, 200.0)])[0] == pytest.approx(100)


def test_quota_held_frees_the_part_of_the_pattern_still_to_come() -> None:
    pattern = Pool(0, 4, 100, releases=[25.0, 50.0, 75.0, 100.0])
    # Held for 60 s of a 100 s run: its last two pods free at 75 and 100, 15 and 40 s from now.
    assert held_releases(2.0, 60.0, 100.0, pattern) == [Holder(1.0, 15.0), Holder(1.0, 40.0)]
    # A run twice as long stretches the pattern: 100, 150 and 200 s are still to come.
    third = 2.0 / 3
    assert held_releases(2.0, 60.0, 200.0, pattern) == [
        Holder(third, 40.0),
        Holder(third, 90.0),
        Holder(third, 140.0),
    ]
    assert held_releases(2.0, 130.0, 100.0, pattern) == [Holder(2.0, -30.0)], "past its end: frees now"
    assert held_releases(2.0, 60.0, 100.0, Pool(0, 4, 100)) == [Holder(2.0, 40.0)], "no pattern: at its end"


def test_a_release_pattern_has_one_point_per_pod_up_to_its_bound() -> None:
    assert release_pattern([30.0, 10.0], 4, 40.0) == (10.0, 30.0, 40.0, 40.0), "an empty slot: at the end"
    many = release_pattern([float(k) for k in range(1, 101)], 100, 100.0)
    assert len(many) == MAX_RELEASES and many == tuple(sorted(many))
    assert many[0] < 10 and many[-1] > 90, "equal shares across the whole schedule"
