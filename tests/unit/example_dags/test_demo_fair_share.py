"""``make demo-fair-share`` (tools/demo_fair_share.py): the example's queues as the demo applies them, and the
summary it prints, without a cluster."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from tests.tool_modules import load_tool


@pytest.fixture(scope="module")
def demo() -> ModuleType:
    return load_tool("demo_fair_share")


def test_queues_are_the_examples_renamed_and_scaled(demo: ModuleType) -> None:
    example = [d for d in yaml.safe_load_all(demo.EXAMPLE_QUEUES.read_text()) if d]
    docs = demo.demo_queues(example)
    assert [d["kind"] for d in docs] == [d["kind"] for d in example]
    by = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    assert {n for k, n in by if k == "Namespace"} == {demo.RESEARCH_NS, demo.RISK_NS}
    assert by[("Cohort", "demo-research-team")]["spec"]["parentName"] == "demo-quant-dept"
    for cq, ns, cohort in (
        (demo.RESEARCH_CQ, demo.RESEARCH_NS, "demo-research-team"),
        (demo.RISK_CQ, demo.RISK_NS, "demo-risk-team"),
    ):
        spec = by[("ClusterQueue", cq)]["spec"]
        assert spec["cohortName"] == cohort
        assert spec["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"] == ns
        flavor = spec["resourceGroups"][0]["flavors"][0]
        assert flavor["name"] == "demo-spot-d16ds-v5"
        assert {r["name"]: (r["nominalQuota"], r["borrowingLimit"]) for r in flavor["resources"]} == {
            "cpu": ("4", "4"),
            "memory": ("16Gi", "16Gi"),
        }
        assert spec["preemption"]["reclaimWithinCohort"] == "Any"  # the example's policy, unchanged
    risk_lq = by[("LocalQueue", demo.RISK_QUEUE)]
    assert risk_lq["metadata"]["namespace"] == demo.RISK_NS and risk_lq["spec"]["stopPolicy"] == "Hold"
    research_lq = by[("LocalQueue", demo.RESEARCH_QUEUE)]
    assert research_lq["spec"] == {"clusterQueue": demo.RESEARCH_CQ}
    assert {n for k, n in by if k == "WorkloadPriorityClass"} == {
        demo.dag_settings()["MC_RISK_PRIORITY"],
        demo.dag_settings()["MC_RESEARCH_PRIORITY"],
    }
    assert example[0]["metadata"]["name"] == "risk", "the example's documents are left as they were"


def test_the_dag_settings_make_research_borrow_and_risk_fit_its_own_quota(demo: ModuleType) -> None:
    s = demo.dag_settings()
    cpu = int(s["MC_SHARD_CPU"])
    assert int(s["MC_RESEARCH_PARALLELISM"]) * cpu > int(demo.TEAM_CPU)  # research must borrow
    assert int(s["MC_RISK_PARALLELISM"]) * cpu == int(demo.TEAM_CPU)  # risk: exactly its own quota
    assert (s["MC_RESEARCH_NAMESPACE"], s["MC_RISK_NAMESPACE"]) == (demo.RESEARCH_NS, demo.RISK_NS)


def _run(demo: ModuleType, research_evictions: int = 1, causes: str | None = None) -> object:
    research = {
        "succeeded": 4,
        "completions": 4,
        "completed_indexes": "0-3",
        "cluster_queue": demo.RESEARCH_CQ,
        "evictions": research_evictions,
        "eviction_causes": causes
        if causes is not None
        else ("Preempted/InCohortReclamation: 1" if research_evictions else None),
        "queued_seconds": 14.2,
        "running_seconds": 52.0,
    }
    risk = {
        "succeeded": 2,
        "completions": 2,
        "completed_indexes": "0,1",
        "cluster_queue": demo.RISK_CQ,
        "evictions": 0,
        "eviction_causes": None,
        "queued_seconds": 9.0,
        "running_seconds": 11.0,
    }
    return demo.DemoRun(
        run_id="scheduled__2026-12-02T04:00:00+00:00",
        state="success",
        seconds=81.4,
        tasks={
            "research_batch": demo.TaskOutcome("research_batch", "success", 70.0, research),
            "risk_var_run": demo.TaskOutcome("risk_var_run", "success", 30.0, risk),
            "report": demo.TaskOutcome("report", "success", 2.0),
        },
        timeline=[
            (4.0, "research batch admitted to demo-research-cq with 8 CPU"),
            (12.5, "risk-queue released"),
            (13.1, "research batch evicted: Preempted, InCohortReclamation"),
        ],
        workload_evictions=[{"reason": "Preempted", "underlyingCause": "", "count": 1}],
        research_log=["evicted (Preempted: ...)", "requeued in research-queue after eviction (...)"],
        home=Path("/nowhere/airflow"),
    )


def test_summary_of_a_preempted_and_resumed_research_batch(demo: ModuleType) -> None:
    run = _run(demo)
    assert demo.problems(run) == []
    text = demo.summary(run)
    assert "monte_carlo_fair_share / scheduled__2026-12-02T04:00:00+00:00: success in 81 s" in text
    assert (
        "research_batch    success: 4/4 shards (0-3) in demo-research-cq; evictions 1 "
        "(Preempted/InCohortReclamation: 1); queued 14 s, running 52 s; task 70 s"
    ) in text
    assert "risk_var_run      success: 2/2 shards (0,1) in demo-risk-cq; evictions 0 (none)" in text
    assert "report            success, 2 s" in text
    assert "research Workload schedulingStats.evictions: Preempted x1" in text
    assert "    13.1  research batch evicted: Preempted, InCohortReclamation" in text
    assert "research log      evicted (Preempted: ...)\n                  requeued in research-queue" in text
    assert (
        "verdict           the risk run preempted the borrowing research batch (Kueue: InCohortReclamation); "
        "the research batch was requeued, resumed, and both succeeded"
    ) in text


def test_summary_says_when_the_scenario_did_not_happen(demo: ModuleType) -> None:
    never = _run(demo, research_evictions=0)
    assert demo.problems(never) == ["the research batch was never evicted: the risk run did not preempt it"]
    assert "verdict           NOT AS EXPECTED: the research batch was never evicted" in demo.summary(never)

    fair_share = _run(demo, causes="Preempted/InCohortFairSharing: 1")
    assert demo.problems(fair_share) == [
        "the research batch's evictions were 'Preempted/InCohortFairSharing: 1', not a reclaim"
    ]

    failed = _run(demo)
    failed.tasks["risk_var_run"].state = "failed"  # type: ignore[attr-defined]
    failed.state = "failed"  # type: ignore[attr-defined]
    assert demo.problems(failed) == ["risk_var_run ended failed, not success", "the DAG run ended failed"]


def test_the_research_tasks_eviction_lines_come_from_its_trigger_log(
    demo: ModuleType, tmp_path: Path
) -> None:
    job = "demo-research/monte-carlo-fair-share-research-batch-a4a0a2cf2e"
    events = [
        "trigger starting",
        f"{job}: running 0/4 done, 0 failed, 4 active",
        f"{job}: evicted (Preempted: Preempted to accommodate a workload (UID: 1, JobUID: 2) due to "
        "reclamation within the cohort), preemption: InCohortReclamation, 1 eviction(s) so far",
        f"{job}: requeued in research-queue after eviction (Preempted: InCohortReclamation, 1 so far) (8 s)",
        f"{job}: requeued in research-queue after eviction (Preempted: InCohortReclamation, 1 so far) (12 s)",
    ]
    log = tmp_path / "attempt=1.log.trigger.3.log"
    log.write_text("not json\n" + "\n".join(json.dumps({"event": e}) for e in events) + "\n")
    assert demo.eviction_log_lines([log]) == [
        "evicted (Preempted: Preempted to accommodate a workload due to reclamation within the cohort), "
        "preemption: InCohortReclamation, 1 eviction(s) so far",
        "requeued in research-queue after eviction (Preempted: InCohortReclamation, 1 so far) (8 s)",
    ]
