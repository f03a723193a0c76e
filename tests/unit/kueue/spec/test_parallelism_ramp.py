"""The parallelism ramp: its checks and its steps."""

from __future__ import annotations

from typing import Any

from airflow_kueue_provider.kueue.spec.parallelism_ramp import (
    ELASTIC_JOB_SCHEDULING_GATE,
    ParallelismRamp,
    RampPlan,
    gate_never_lifted,
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


def _pod(name: str, phase: str, gated: bool) -> dict[str, Any]:
    gates = [{"name": ELASTIC_JOB_SCHEDULING_GATE}] if gated else []
    return {"metadata": {"name": name}, "spec": {"schedulingGates": gates}, "status": {"phase": phase}}


def test_a_gate_never_lifted_is_named_only_when_no_unfinished_pod_got_past_it() -> None:
    """Kueue's feature gate off (or a Job not elastic): every pod stays gated, the start check names why. A
    raise past the quota keeps only its own pods gated while the admitted ones run: not stuck."""
    stuck = gate_never_lifted([_pod("j-0", "Pending", True), _pod("j-1", "Pending", True)])
    assert stuck is not None and stuck.startswith("pod j-0 and the Job's 1 other pod(s)")
    assert "ElasticJobsViaWorkloadSlices" in stuck and "drop parallelism_ramp" in stuck
    assert gate_never_lifted([_pod("j-0", "Succeeded", False), _pod("j-1", "Pending", True)]) is not None
    assert gate_never_lifted([_pod("j-0", "Pending", False), _pod("j-1", "Pending", True)]) is None
    assert gate_never_lifted([_pod("j-0", "Running", False)]) is None
    assert gate_never_lifted([]) is None
