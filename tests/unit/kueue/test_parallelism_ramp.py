"""The parallelism ramp: its checks and its steps."""

from __future__ import annotations

from airflow_kueue_provider.kueue.parallelism_ramp import ParallelismRamp


def test_steps_up_to_the_target_and_stops() -> None:
    ramp = ParallelismRamp(start=5, step=20)
    seen = [ramp.start]
    while seen[-1] < 50:
        seen.append(ramp.next_parallelism(seen[-1], 50))
    assert seen == [5, 25, 45, 50]


def test_problems_name_what_to_change() -> None:
    assert ParallelismRamp(5, 5, 30).problems(50) == []
    assert "below the target" in ParallelismRamp(50, 5).problems(50)[0]
    assert len(ParallelismRamp(0, 0, 0).problems(10)) == 3
    assert ParallelismRamp.from_param({"start": 2, "step": 2, "every_seconds": 5}) == ParallelismRamp(2, 2, 5)
