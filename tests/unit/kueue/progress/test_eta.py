"""Estimated admission and finish times from the trigger's readings."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from airflow_kueue_provider.kueue.progress.eta import AdmissionClock, Estimate, FinishClock, eta_line

T0 = datetime(2026, 12, 1, 1, 0, tzinfo=UTC).timestamp()


def test_admission_from_how_fast_the_position_fell() -> None:
    clock = AdmissionClock()
    clock.record(T0, 10)
    assert clock.estimate() is None  # one reading: no rate yet
    clock.record(T0 + 50, 5)  # 5 positions in 50 s
    estimate = clock.estimate()
    assert estimate is not None
    assert estimate.at.timestamp() == pytest.approx(T0 + 50 + 60)  # 6 ahead (itself included) at 0.1/s
    assert estimate.margin.total_seconds() == pytest.approx(6**0.5 / 0.1)


def test_a_position_that_does_not_move_gives_no_admission_time() -> None:
    clock = AdmissionClock()
    clock.record(T0, 3)
    clock.record(T0 + 600, 3)
    assert clock.estimate() is None


def test_pushed_back_by_a_higher_priority_the_admission_clock_starts_over() -> None:
    clock = AdmissionClock()
    clock.record(T0, 4)
    clock.record(T0 + 10, 2)
    clock.record(T0 + 20, 6)  # pushed back
    assert clock.estimate() is None
    clock.record(T0 + 40, 5)
    estimate = clock.estimate()
    assert estimate is not None and estimate.at.timestamp() == pytest.approx(T0 + 40 + 6 * 20)


def steady_run(clock: FinishClock, seconds: float, per_second: float, start: float = T0) -> int:
    finished = 0
    t = start
    while t < start + seconds:
        t += 1
        finished = min(clock.completions, int((t - start) * per_second))
        clock.record(t, finished)
    return finished


def test_a_steady_run_is_estimated_to_the_second() -> None:
    clock = FinishClock(1000)
    steady_run(clock, 20, 50 / 3)  # 1,000 shards of 3 s at parallelism 50: 60 s in all
    estimate = clock.estimate(T0 + 20, active=50)
    assert estimate is not None
    assert estimate.at.timestamp() == pytest.approx(T0 + 60, abs=2)
    assert estimate.margin >= timedelta(seconds=0.1 * 40 - 1)


def test_no_finish_time_before_a_few_indexes_finished() -> None:
    clock = FinishClock(100)
    clock.record(T0, 0)
    clock.record(T0 + 5, 2)
    assert clock.estimate(T0 + 6, active=10) is None


def test_the_window_follows_a_change_of_pace() -> None:
    clock = FinishClock(10_000)
    steady_run(clock, 600, 10)  # 6,000 done at 10/s ...
    steady_run(clock, 300, 0, start=T0 + 600)  # (a stall is no reading)
    now = T0 + 900
    for t in range(1, 301):  # ... then 300 s at 2/s
        clock.record(now + t, 6000 + 2 * t)
    estimate = clock.estimate(now + 300, active=20)
    assert estimate is not None
    left = 10_000 - 6600
    assert estimate.at.timestamp() - (now + 300) == pytest.approx(left / 2, rel=0.35)


def test_the_tail_waits_for_the_running_indexes() -> None:
    clock = FinishClock(100)
    for t in range(1, 91):
        clock.record(T0 + t, t)  # 1/s, 90 done
    estimate = clock.estimate(T0 + 90, active=10)  # the last 10 all run: about 5 s mean left each
    assert estimate is not None
    assert estimate.at.timestamp() - (T0 + 90) == pytest.approx(10, abs=0.5)


def test_a_finished_job_is_due_now_and_a_retry_starts_over() -> None:
    clock = FinishClock(10)
    for t in range(1, 11):
        clock.record(T0 + t, t)
    done = clock.estimate(T0 + 10, active=0)
    assert done is not None and done.at.timestamp() == pytest.approx(T0 + 10) and done.margin == timedelta(0)
    clock.record(T0 + 20, 0)  # a retry Job's count starts again
    assert clock.estimate(T0 + 21, active=3) is None


def test_uneven_shards_stay_within_20_percent_over_the_last_75_percent() -> None:
    """1,000 shards of 1-20 s at parallelism 50, simulated: pods start as others finish."""
    rng = random.Random(7)
    durations = [rng.uniform(1, 20) for _ in range(1000)]
    free, finish_times = [0.0] * 50, []
    for duration in durations:
        slot = min(range(50), key=free.__getitem__)
        free[slot] += duration
        finish_times.append(free[slot])
    finish_times.sort()
    end = finish_times[-1]
    clock, errors = FinishClock(1000), []
    done = 0
    for second in range(1, int(end) + 1):
        while done < 1000 and finish_times[done] <= second:
            done += 1
        clock.record(T0 + second, done)
        estimate = clock.estimate(T0 + second, active=min(50, 1000 - done))
        if second >= 0.25 * end and estimate is not None:
            errors.append(abs(estimate.at.timestamp() - (T0 + end)) / end)
    assert errors and max(errors) <= 0.2, max(errors)


def test_eta_line() -> None:
    at = datetime(2026, 12, 1, 1, 42, tzinfo=UTC)
    assert eta_line(None, Estimate(at, timedelta(minutes=10))) == "ETA 01:42 UTC, ±10 min"
    assert eta_line(Estimate(at, timedelta(seconds=30)), None) == "admission 01:42:00 UTC, ±30 s"
    assert Estimate(at, timedelta(seconds=0.2)).describe() == "01:42:00 UTC, ±1 s"
    assert eta_line(None, None) == ""


RECORDED = sorted((Path(__file__).parents[1] / "recorded_runs").glob("*.json"))


@pytest.mark.parametrize("path", RECORDED, ids=[p.stem for p in RECORDED])
def test_recorded_runs_stay_within_20_percent_over_the_last_75_percent(path: Path) -> None:
    """Runs of the local cluster, sampled every second by tests/integration/airflow_deployment/
    test_full_scale.py (RECORD_RUN_DIR): (epoch s, completed, failed, active), replayed as the trigger sees
    them. Runs of ten waves or more: a run of two waves (100 shards at parallelism 50, 15 s) finishes in
    bursts no throughput can foresee (58 % off at its 25 % mark)."""
    data = json.loads(path.read_text())
    completions, samples = data["completions"], data["samples"]
    begun = [s for s in samples if s[3] > 0 or s[1] + s[2] > 0]
    start = begun[0][0]
    end = next(t for t, done, failed, _ in samples if done + failed >= completions)
    clock, errors = FinishClock(completions), []
    for t, done, failed, active in samples:
        if t > end:
            break
        clock.record(t, done + failed)
        estimate = clock.estimate(t, active)
        if t >= start + 0.25 * (end - start) and estimate is not None:
            errors.append(abs(estimate.at.timestamp() - end) / (end - start))
    assert errors and max(errors) <= 0.2, f"{path.stem}: worst error {max(errors):.0%} of the run"


def test_average_finish_uses_the_mean_rate_since_the_job_started() -> None:
    from airflow_kueue_provider.kueue.progress.eta import average_finish

    # 100 of 1,000 done in 100 s: 900 more at 1 a second.
    estimate = average_finish(1000, 100, 50, running_since=1000.0, now=1100.0)
    assert estimate is not None and estimate.at.timestamp() == 2000.0
    assert estimate.margin.total_seconds() == 90.0  # max(10 %, 1/sqrt(100)) of 900 s
    assert average_finish(1000, 2, 50, running_since=1000.0, now=1100.0) is None, "too few finished"
    done = average_finish(10, 10, 0, running_since=1000.0, now=1100.0)
    assert done is not None and done.margin.total_seconds() == 0
