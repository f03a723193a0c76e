"""The parallelism ramp: its checks and its steps."""

from __future__ import annotations

from airflow_kueue_provider.kueue.parallelism_ramp import ParallelismRamp, RampPlan


def test_steps_up_to_the_target_and_stops() -> None:
    plan = ParallelismRamp(start=5, step=20).toward(50)
    seen = [plan.ramp.start]
    while not plan.reached(seen[-1]):
        seen.append(plan.next_parallelism(seen[-1]))
    assert seen == [5, 25, 45, 50]


def test_the_plan_reads_what_every_trigger_so_far_was_given() -> None:
    written = {"start": 2, "step": 3, "every_seconds": 30.0, "target": 8}  # the operator's dict, as before
    plan = RampPlan.from_dict(written)
    assert plan == ParallelismRamp(2, 3, 30.0).toward(8) and plan.to_dict() == written


def test_problems_name_what_to_change() -> None:
    assert ParallelismRamp(5, 5, 30).problems(50) == []
    assert "below the target" in ParallelismRamp(50, 5).problems(50)[0]
    assert len(ParallelismRamp(0, 0, 0).problems(10)) == 3
    assert ParallelismRamp.from_param({"start": 2, "step": 2, "every_seconds": 5}) == ParallelismRamp(2, 2, 5)
