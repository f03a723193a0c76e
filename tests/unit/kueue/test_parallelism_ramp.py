"""The parallelism ramp: its checks and its steps."""

from __future__ import annotations

from airflow_kueue_provider.kueue.parallelism_ramp import (
    ELASTIC_JOB_SCHEDULING_GATE,
    ParallelismRamp,
    RampPlan,
    with_slice_gate,
)


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


def test_the_slice_gate_is_added_once_next_to_the_templates_own_gates() -> None:
    """Kueue's webhook adds the gate only at create; a Job created without it would start every raised pod
    at once, outside the quota, so the provider puts it in the template itself."""
    job = {"spec": {"template": {"spec": {"schedulingGates": [{"name": "example.com/own"}]}}}}
    gated = with_slice_gate(job)
    gates = gated["spec"]["template"]["spec"]["schedulingGates"]
    assert gates == [{"name": "example.com/own"}, {"name": ELASTIC_JOB_SCHEDULING_GATE}]
    assert with_slice_gate(gated) == gated, "never twice (Kueue's webhook adds it only when absent too)"
    assert job["spec"]["template"]["spec"]["schedulingGates"] == [{"name": "example.com/own"}], "a copy"
    assert with_slice_gate({})["spec"]["template"]["spec"]["schedulingGates"] == [
        {"name": "kueue.x-k8s.io/elastic-job"}
    ]
