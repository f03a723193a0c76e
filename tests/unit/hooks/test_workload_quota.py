"""What the namespace's Workloads hold and ask for, as the forecast counts them: an admitted one's quota
(less the pods Kueue reclaimed), the run a sealed forecast gave its Job, a pod's request."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from airflow_kueue_provider.hooks.workload_quota import (
    forecast_run_of,
    held_quota,
    pod_request,
    waiting_quota,
)
from airflow_kueue_provider.kueue.progress.forecast import HeldQuota, Resources, WaitingQuota


def test_a_pod_request_sums_its_containers_requests_else_limits() -> None:
    pod = {
        "containers": [
            {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
            {"resources": {"limits": {"cpu": "1", "nvidia.com/gpu": "1"}}},
            {},
        ]
    }
    assert pod_request(pod) == Resources(cpu=1.5, memory=2**30, gpu=1, pods=1)


def workload(
    queue: str = "a",
    reserved_at: str | None = "2026-12-05T01:00:00Z",
    finished: bool = False,
    usage: dict[str, str] | None = None,
) -> dict[str, Any]:
    conditions: list[dict[str, Any]] = []
    if reserved_at:
        conditions.append({"type": "QuotaReserved", "status": "True", "lastTransitionTime": reserved_at})
    if finished:
        conditions.append({"type": "Finished", "status": "True", "lastTransitionTime": reserved_at})
    amounts = usage if usage is not None else {"cpu": "8", "memory": "8Gi"}
    admission = {
        "clusterQueue": queue,
        "podSetAssignments": [
            {"name": "main", "flavors": dict.fromkeys(amounts, "spot"), "resourceUsage": amounts}
        ],
    }
    return {"status": {"admission": admission, "conditions": conditions}}


def test_the_quota_admitted_workloads_hold_and_since_when() -> None:
    now = datetime(2026, 12, 5, 1, 0, 30, tzinfo=UTC)
    found = held_quota(
        [
            workload(),
            workload(queue="another"),  # another ClusterQueue's
            workload(finished=True),  # done: its quota is being released
            workload(reserved_at=None),  # pending
            workload(usage={"cpu": "lots"}),  # unreadable: not seen
            workload(reserved_at="2026-12-05T01:00:20Z", usage={"cpu": "500m"}),
        ],
        "a",
        now,
    )
    assert found == (
        HeldQuota("spot", Resources(cpu=8, memory=8 * 2**30), 30.0),
        HeldQuota("spot", Resources(cpu=0.5), 10.0),
    )


def test_a_workloads_finished_pods_kueue_reclaimed_are_not_held() -> None:
    """Kueue admits others into the quota of a Job's finished indexes (reclaimable pods) while the Job's
    Workload stays admitted: counting its whole admission made the queue look bigger than its quota."""
    now = datetime(2026, 12, 5, 1, 0, 30, tzinfo=UTC)

    def tail(pods: int, admitted: int | None, reclaimable: int | None) -> dict[str, Any]:
        made = workload(usage={"cpu": str(admitted or pods)})
        if admitted is not None:
            made["status"]["admission"]["podSetAssignments"][0]["count"] = admitted
        made["spec"] = {"podSets": [{"name": "main", "count": pods}]}
        if reclaimable is not None:
            made["status"]["reclaimablePods"] = [{"name": "main", "count": reclaimable}]
        return made

    def cpu(made: dict[str, Any]) -> float:
        (held,) = held_quota([made], "a", now)
        return held.usage.cpu

    assert cpu(tail(50, 50, 40)) == 10.0, "10 of its 50 pods left"
    assert cpu(tail(50, None, 40)) == 10.0, "no admitted count: the pod set's"
    assert cpu(tail(50, 50, None)) == 50.0
    assert cpu(tail(50, 50, 70)) == 0.0, "never below nothing (a count past the pod set's)"
    assert cpu(tail(50, 20, 10)) == 20.0, "partially admitted 20: 40 left still need all 20"
    assert cpu(tail(50, 20, 40)) == 10.0, "10 left of the 20 admitted"


def test_a_sealed_forecast_run_on_the_workloads_pod_template_says_how_long_it_holds_the_quota() -> None:
    from airflow_kueue_provider.kueue.identity.identity_seal import IdentitySeal

    seal = IdentitySeal(b"key")

    def owned(name: str, annotation: str | None, kind: str = "Job") -> dict[str, Any]:
        made = workload()
        annotations = {"airflow-kueue.io/forecast-run": annotation} if annotation else {}
        made["metadata"] = {
            "namespace": "team",
            "ownerReferences": [{"controller": True, "kind": kind, "name": name}],
        }
        made["spec"] = {"podSets": [{"template": {"metadata": {"annotations": annotations}}}]}
        return made

    sealed = owned("align-1", seal.forecast_run("team", "align-1", 40))
    assert forecast_run_of(sealed, seal) == 40.0
    assert forecast_run_of(sealed, None) is None, "no key: nothing is trusted"
    assert forecast_run_of(owned("align-2", seal.forecast_run("team", "align-1", 40)), seal) is None
    assert forecast_run_of(owned("align-1", "5:deadbeef"), seal) is None, "a tenant's own annotation"
    assert forecast_run_of(owned("align-1", seal.forecast_run("team", "align-1", 40), "JobSet"), seal) is None
    assert forecast_run_of(owned("align-1", None), seal) is None
    now = datetime(2026, 12, 5, 1, 0, 30, tzinfo=UTC)
    (held,) = held_quota([sealed], "a", now, seal)
    assert (held.held_for, held.runs_for) == (30.0, 40.0)


def test_a_waiting_workload_asks_for_all_its_pod_sets_pods() -> None:
    def pod_set(count: int, cpu: str) -> dict[str, Any]:
        return {
            "count": count,
            "template": {"spec": {"containers": [{"resources": {"requests": {"cpu": cpu}}}]}},
        }

    two = {"spec": {"podSets": [pod_set(2, "1"), pod_set(3, "250m")]}}
    assert waiting_quota(two) == WaitingQuota(Resources(cpu=2.75, pods=5))
    assert waiting_quota({"spec": {"podSets": [pod_set(2, "1"), pod_set(3, "x")]}}) == WaitingQuota(None)
    assert waiting_quota({}) == WaitingQuota(Resources())
