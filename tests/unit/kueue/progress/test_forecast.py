"""The forecast at submit: the Job's own run (list scheduling of its packs), the room, the wait."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from airflow_kueue_provider.kueue.checkpoints.learned_lengths import LearnedLengths
from airflow_kueue_provider.kueue.checkpoints.shard_packing import ShardPacks
from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.kueue.progress.forecast import (
    ADMISSION_SECONDS,
    LEARNED_SPREAD,
    FlavorRoom,
    HeldQuota,
    JobWork,
    QueueRoom,
    Resources,
    WaitingQuota,
    forecast,
    job_work,
    makespan,
    slot_ends,
)

NOW = datetime(2026, 12, 1, 1, 0, tzinfo=UTC)
POD = Resources(cpu=1, memory=2**30, pods=1)


def room(cpu: float, used: float = 0, ahead: int = 0, borrowable: float = 0) -> QueueRoom:
    flavor = FlavorRoom(
        "on-demand",
        nominal=Resources(cpu=cpu, memory=2**40, pods=1000),
        borrowable=Resources(cpu=borrowable),
        used=Resources(cpu=used),
    )
    return QueueRoom((flavor,), ahead)


def stated(seconds: float, count: int = 8, parallelism: int = 4, per_pod: int = 1) -> JobWork:
    packs = ShardPacks(IndexSet.range(0, count), per_pod)
    work = job_work(packs, parallelism, POD, None, (seconds, seconds))
    assert work is not None
    return work


def seconds_after(moment: datetime) -> float:
    return (moment - NOW).total_seconds()


def test_makespan_is_list_scheduling_in_index_order_with_a_start_cost_per_pod() -> None:
    # Two slots: 10 and 1 start; 1 frees at 2 and takes 1 (ends 4), then 1 (ends 6); 10 ends at 11.
    assert makespan([10, 1, 1, 1], 2, 1.0) == pytest.approx(11)
    # The lowest index first: a long pack last runs alone at the end.
    assert makespan([1, 1, 1, 10], 2, 0.0) == pytest.approx(11)  # 1+10 on one slot, 1+1 on the other
    assert makespan([], 3, 5.0) == 0.0
    assert makespan([3, 3], 10, 0.0) == pytest.approx(3)  # more slots than packs


def test_parallelism_bound_the_quota_has_room_for_more() -> None:
    work = stated(60, count=8, parallelism=4)
    f = forecast(work, room(cpu=100), NOW)
    assert f is not None
    assert seconds_after(f.start.at) == pytest.approx(ADMISSION_SECONDS)
    assert seconds_after(f.finish.at) == pytest.approx(ADMISSION_SECONDS + 2 * (5 + 60))  # two waves of 4
    assert "4 pods at once (parallelism-bound)" in f.basis
    assert "0 workloads ahead" in f.basis


def test_quota_bound_two_cpus_run_two_pods_at_once() -> None:
    work = stated(60, count=8, parallelism=4)
    f = forecast(work, room(cpu=2), NOW)
    assert f is not None
    assert seconds_after(f.finish.at) == pytest.approx(ADMISSION_SECONDS + 4 * 65)  # four waves of 2
    assert "2 CPU quota, 2 pods at once (quota-bound)" in f.basis


def test_the_cohort_lends_what_the_borrowing_limit_allows() -> None:
    work = stated(60, count=8, parallelism=4)
    f = forecast(work, room(cpu=2, borrowable=2), NOW)
    assert f is not None
    assert seconds_after(f.finish.at) == pytest.approx(ADMISSION_SECONDS + 2 * 65)


def test_workloads_ahead_and_quota_in_use_delay_the_start_like_jobs_of_this_size() -> None:
    work = stated(60, count=8, parallelism=4)
    run = 2 * 65
    f = forecast(work, room(cpu=4, used=4, ahead=2), NOW)
    assert f is not None
    wait = ADMISSION_SECONDS + (0.5 * 1 + 2) * run  # the admitted one half done, two like it ahead
    assert seconds_after(f.start.at) == pytest.approx(wait)
    assert seconds_after(f.finish.at) == pytest.approx(wait + run)
    assert seconds_after(f.finish_late) == pytest.approx(2 * wait + run)  # the wait's range: x0.5 .. x2
    assert seconds_after(f.finish_early) == pytest.approx(0.5 * wait + run)
    assert "2 workloads ahead" in f.basis
    # Twice the quota, twice the use: two such Jobs run at once, two more queue ahead.
    wider = forecast(work, room(cpu=8, used=8, ahead=2), NOW)
    assert wider is not None
    assert seconds_after(wider.start.at) == pytest.approx(ADMISSION_SECONDS + (0.5 * 2 + 2) * run / 2)


def test_learned_lengths_per_shard_with_the_stated_mean_for_shards_never_seen() -> None:
    packs = ShardPacks(IndexSet.range(0, 4), 2)  # packs {0,1} and {2,3}
    learned = LearnedLengths(4, {0: 10.0, 1: 20.0, 2: 100.0}, ("run-a", "run-b", "run-c"))
    work = job_work(packs, 2, POD, learned, (30.0, 30.0))
    assert work is not None
    assert work.seconds == (30.0, 130.0)
    f = forecast(work, room(cpu=10), NOW)
    assert f is not None
    assert seconds_after(f.finish.at) == pytest.approx(ADMISSION_SECONDS + 5 + 130)
    late = ADMISSION_SECONDS + 5 + 130 * (1 + LEARNED_SPREAD)
    assert seconds_after(f.finish_late) == pytest.approx(late)
    assert f.nights == 3
    assert f.basis.startswith("from 3 nights of shard history, 10 CPU quota")


def test_no_history_and_no_stated_duration_gives_no_forecast() -> None:
    packs = ShardPacks(IndexSet.range(0, 4))
    assert job_work(packs, 2, POD, None, None) is None
    assert job_work(packs, 2, POD, LearnedLengths(4), None) is None  # a history that learned nothing


def test_a_stated_range_gives_the_range_of_the_finish() -> None:
    packs = ShardPacks(IndexSet.range(0, 4))
    work = job_work(packs, 4, POD, None, (10.0, 30.0))
    assert work is not None
    f = forecast(work, room(cpu=4), NOW)
    assert f is not None
    assert seconds_after(f.finish_early) == pytest.approx(ADMISSION_SECONDS + 15)
    assert seconds_after(f.finish.at) == pytest.approx(ADMISSION_SECONDS + 25)
    assert seconds_after(f.finish_late) == pytest.approx(ADMISSION_SECONDS + 35)
    assert f.finish.margin == timedelta(seconds=10)  # the deadline verdict reads at + margin: the late end


def test_a_pod_no_flavor_can_hold_gives_no_forecast() -> None:
    work = stated(60)
    big = QueueRoom((FlavorRoom("tiny", Resources(cpu=0.5), Resources(), Resources()),))
    assert forecast(work, big, NOW) is None


def test_a_pod_that_asks_for_nothing_the_flavor_counts_is_parallelism_bound() -> None:
    """No request (or none the ClusterQueue covers): Kueue admits such pods without limit."""
    packs = ShardPacks(IndexSet.range(0, 8))
    work = job_work(packs, 4, Resources(pods=1), None, (60, 60))
    assert work is not None
    cpu_only = FlavorRoom("default", Resources(cpu=2), Resources(), Resources(), frozenset({"cpu", "memory"}))
    f = forecast(work, QueueRoom((cpu_only,)), NOW)
    assert f is not None and "4 pods at once (parallelism-bound)" in f.basis


def test_the_first_flavor_with_room_now_is_taken() -> None:
    work = stated(60, count=4, parallelism=4)
    full = FlavorRoom("spot", Resources(cpu=4, memory=2**40, pods=100), Resources(), Resources(cpu=4, pods=4))
    free = FlavorRoom("on-demand", Resources(cpu=4, memory=2**40, pods=100), Resources(), Resources())
    f = forecast(work, QueueRoom((full, free)), NOW)
    assert f is not None
    assert seconds_after(f.start.at) == pytest.approx(ADMISSION_SECONDS)


def test_the_log_line() -> None:
    work = stated(60, count=8, parallelism=4)
    f = forecast(work, room(cpu=2), NOW)
    assert f is not None
    assert f.line().startswith("forecast: start ~01:00:02 UTC, finish 01:04:22 UTC (01:04:")
    assert f.line().endswith(
        "from the stated shard duration, 2 CPU quota, 2 pods at once (quota-bound), 0 workloads ahead"
    )


def test_admitted_workloads_seen_free_their_quota_as_long_after_admission_as_this_job_runs() -> None:
    """At the start of a night every admitted Job has just started: none is half done, so the wait is a
    whole run, not half of one (the older rule)."""
    work = stated(60, count=8, parallelism=4)
    run = 2 * 65
    just = HeldQuota("on-demand", Resources(cpu=4), held_for=0.0)
    busy = room(cpu=4, used=4)
    f = forecast(work, QueueRoom(busy.flavors, 0, (just,)), NOW)
    assert f is not None and seconds_after(f.start.at) == pytest.approx(ADMISSION_SECONDS + run)
    nearly = HeldQuota("on-demand", Resources(cpu=4), held_for=run - 10)
    f = forecast(work, QueueRoom(busy.flavors, 0, (nearly,)), NOW)
    assert f is not None and seconds_after(f.start.at) == pytest.approx(ADMISSION_SECONDS + 10)
    elsewhere = HeldQuota("spot", Resources(cpu=4), held_for=0.0)  # another flavor's: not this one's quota
    f = forecast(work, QueueRoom(busy.flavors, 0, (elsewhere,)), NOW)
    assert f is not None and seconds_after(f.start.at) == pytest.approx(ADMISSION_SECONDS + run / 2)


def _full(name: str, cpu: float) -> FlavorRoom:
    return FlavorRoom(name, Resources(cpu=cpu, memory=2**40, pods=1000), Resources(), Resources(cpu=cpu))


def test_the_job_waits_for_whichever_flavor_frees_first_not_the_largest() -> None:
    """Found on the night: with both flavors full, the forecast took the larger (borrowed on-demand) one and
    waited for it, while Kueue admitted the Job as soon as the Spot flavor freed."""
    work = stated(60, count=8, parallelism=4)
    run = 2 * 65
    spot, ondemand = _full("spot", 4), _full("on-demand", 8)
    held = (
        HeldQuota("spot", Resources(cpu=4), held_for=run - 10),  # ends in 10 s
        HeldQuota("on-demand", Resources(cpu=8), held_for=0.0),  # ends in a whole run
    )
    f = forecast(work, QueueRoom((spot, ondemand), 0, held), NOW)
    assert f is not None and seconds_after(f.start.at) == pytest.approx(ADMISSION_SECONDS + 10)
    assert "4 pods at once" in f.basis
    # One like it ahead takes the Spot flavor when it frees; this one the on-demand one, a run from now.
    f = forecast(work, QueueRoom((spot, ondemand), 1, held), NOW)
    assert f is not None and seconds_after(f.start.at) == pytest.approx(ADMISSION_SECONDS + run)
    assert "8 CPU quota" in f.basis


def test_admissions_seen_count_even_before_the_cluster_queue_status_has_them() -> None:
    """The ClusterQueue's usage trails its admissions: quota seen held is not free."""
    work = stated(60, count=8, parallelism=4)
    run = 2 * 65
    stale = room(cpu=4, used=0)  # the status says free
    just = HeldQuota("on-demand", Resources(cpu=4), held_for=0.0)
    f = forecast(work, QueueRoom(stale.flavors, 0, (just,)), NOW)
    assert f is not None and seconds_after(f.start.at) == pytest.approx(ADMISSION_SECONDS + run)


def test_a_holder_that_said_how_long_it_runs_frees_its_quota_then() -> None:
    """Found on the night: align Jobs (40 s) still running when a call step (73 s) was forecast were taken
    to run 73 s; their own sealed forecasts say 40 s."""
    work = stated(60, count=8, parallelism=4)
    run = 2 * 65
    busy = room(cpu=4, used=4)
    short = HeldQuota("on-demand", Resources(cpu=4), held_for=30.0, runs_for=40.0)
    f = forecast(work, QueueRoom(busy.flavors, 0, (short,)), NOW)
    assert f is not None and seconds_after(f.start.at) == pytest.approx(ADMISSION_SECONDS + 10)
    unknown = HeldQuota("on-demand", Resources(cpu=4), held_for=30.0)
    f = forecast(work, QueueRoom(busy.flavors, 0, (unknown,)), NOW)
    assert f is not None and seconds_after(f.start.at) == pytest.approx(ADMISSION_SECONDS + run - 30)


def test_a_job_already_admitted_starts_at_its_admission_in_its_flavor_with_no_wait() -> None:
    from airflow_kueue_provider.kueue.progress.forecast import OwnAdmission

    work = stated(60, count=8, parallelism=4)
    spot = FlavorRoom("spot", Resources(cpu=2, memory=2**40, pods=100), Resources(), Resources(cpu=2))
    on_demand = room(cpu=100).flavors[0]
    queued = QueueRoom((on_demand, spot), ahead=5, admitted=OwnAdmission("spot", 30.0))
    f = forecast(work, queued, NOW)
    assert f is not None
    assert seconds_after(f.start.at) == pytest.approx(-30)  # admitted 30 s ago; the queue ahead is moot
    assert seconds_after(f.finish.at) == pytest.approx(-30 + 4 * 65)  # spot's 2 CPUs: four waves of 2
    assert f.basis.endswith("2 CPU quota, 2 pods at once (quota-bound), admitted")
    unknown = forecast(work, QueueRoom((on_demand,), admitted=OwnAdmission("", 0.0)), NOW)
    assert unknown is not None and seconds_after(unknown.finish.at) == pytest.approx(2 * 65)


def test_a_flavor_that_cannot_hold_the_whole_job_is_passed_over_as_kueue_passes_it_over() -> None:
    """The night's risk queue: Spot first with no quota of its own and 16 CPU the cohort lends now, then 32
    CPU on-demand. A Job of 32 pods (no partial admission) goes on-demand, 32 at once; with
    ``min_parallelism`` 16 Spot holds it, 16 at once."""

    spot = FlavorRoom("spot", Resources(memory=2**40, pods=1000), Resources(cpu=16), Resources())
    on_demand = FlavorRoom("on-demand", Resources(cpu=32, memory=2**40, pods=1000), Resources(), Resources())
    work = stated(10, count=64, parallelism=32)
    whole = forecast(work, QueueRoom((spot, on_demand)), NOW)
    assert whole is not None and "32 CPU quota, 32 pods at once" in whole.basis
    assert seconds_after(whole.finish.at) == pytest.approx(ADMISSION_SECONDS + 2 * 15)
    partial = forecast(dataclasses.replace(work, least_pods=16), QueueRoom((spot, on_demand)), NOW)
    assert partial is not None and "16 CPU quota, 16 pods at once (quota-bound)" in partial.basis
    small = forecast(stated(10, count=64, parallelism=64), QueueRoom((spot,)), NOW)
    assert small is not None and "16 pods at once" in small.basis, "none holds it whole now: as before"


def _learned_bias(bias: float | None) -> JobWork:
    packs = ShardPacks(IndexSet.range(0, 8))
    learned = LearnedLengths(8, dict.fromkeys(range(8), 60.0), ("run-a", "run-b"), 5.0, True, bias)
    work = job_work(packs, 4, POD, learned, None)
    assert work is not None
    return work


def test_a_learned_wait_bias_moves_a_queued_jobs_start_and_finish() -> None:
    run = 2 * 65
    plain = forecast(_learned_bias(None), room(cpu=4, used=4, ahead=2), NOW)
    later = forecast(_learned_bias(160.0), room(cpu=4, used=4, ahead=2), NOW)
    assert plain is not None and later is not None
    modelled = ADMISSION_SECONDS + 2.5 * run
    assert (plain.model_wait, plain.wait_bias) == (pytest.approx(modelled), 0.0)
    assert seconds_after(later.start.at) == pytest.approx(modelled + 160)
    assert seconds_after(later.finish.at) == pytest.approx(modelled + 160 + run)
    assert later.model_wait == pytest.approx(modelled) and later.wait_bias == pytest.approx(160)
    assert later.basis.endswith("2 workloads ahead, waits +160 s as learned"), later.basis
    assert "as learned" not in plain.basis


def test_a_learned_bias_never_makes_a_wait_negative_nor_delays_a_job_that_fits_now() -> None:
    sooner = forecast(_learned_bias(-10_000.0), room(cpu=4, used=4, ahead=2), NOW)
    assert sooner is not None and seconds_after(sooner.start.at) == pytest.approx(ADMISSION_SECONDS)
    assert sooner.wait_bias == pytest.approx(-(sooner.model_wait or 0) + ADMISSION_SECONDS)
    fits = forecast(_learned_bias(160.0), room(cpu=100), NOW)
    assert fits is not None and seconds_after(fits.start.at) == pytest.approx(ADMISSION_SECONDS)
    assert fits.wait_bias == 0.0 and "as learned" not in fits.basis


def test_an_admitted_job_has_no_model_wait_and_no_bias() -> None:
    from airflow_kueue_provider.kueue.progress.forecast import OwnAdmission

    f = forecast(_learned_bias(160.0), QueueRoom(room(cpu=4).flavors, admitted=OwnAdmission("", 3.0)), NOW)
    assert f is not None and f.model_wait is None and f.wait_bias == 0.0
    assert seconds_after(f.start.at) == pytest.approx(-3)


def test_workloads_seen_waiting_ahead_count_with_the_quota_they_ask_for() -> None:
    """16 CPU, a Job of 8 pods of 60 s: four of 4 CPU ahead, seen, fill the quota together once; four like it
    would take two rounds."""
    work = stated(60, count=8, parallelism=8)
    full = room(16, used=16, ahead=4)
    seen = (WaitingQuota(Resources(cpu=4, memory=4 * 2**30, pods=4), 30.0),) * 4
    sized = forecast(work, dataclasses.replace(full, waiting=seen), NOW)
    like = forecast(work, full, NOW)
    assert sized is not None and like is not None
    assert sized.model_wait is not None and like.model_wait is not None
    assert sized.model_wait < like.model_wait
    two_seen = forecast(work, dataclasses.replace(full, waiting=seen[:2]), NOW)
    assert two_seen is not None and two_seen.model_wait is not None
    assert sized.model_wait <= two_seen.model_wait <= like.model_wait, "the unseen rest like the Job"


def test_each_slot_ends_with_its_last_pack() -> None:
    assert slot_ends([10, 1, 1, 1], 2, 1.0) == [6.0, 11.0]
    assert slot_ends([], 3, 1.0) == [] and makespan([], 3, 1.0) == 0.0
