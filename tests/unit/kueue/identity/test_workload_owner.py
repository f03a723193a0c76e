"""A Workload is an object's only when its controller owner has the uid its job-uid label names."""

from __future__ import annotations

from typing import Any

from airflow_kueue_provider.kueue.identity.workload_owner import workload_job_uid, workloads_of
from airflow_kueue_provider.kueue.names import JOB_UID_LABEL


def _workload(name: str, label: str | None, owner: str | None, controller: bool = True) -> dict[str, Any]:
    created = f"2026-12-05T00:00:0{name[-1]}Z"
    meta: dict[str, Any] = {"name": name, "uid": f"w-{name}", "creationTimestamp": created}
    if label is not None:
        meta["labels"] = {JOB_UID_LABEL: label}
    if owner is not None:
        meta["ownerReferences"] = [{"kind": "Job", "name": "j", "uid": owner, "controller": controller}]
    return {"metadata": meta}


def test_the_label_counts_only_with_a_controller_owner_of_the_same_uid() -> None:
    assert workload_job_uid(_workload("w1", "job-a", "job-a")) == "job-a"
    assert workload_job_uid(_workload("w2", "job-a", None)) is None, "a copied label, no owner"
    assert workload_job_uid(_workload("w3", "job-a", "job-b")) is None, "the label names another object"
    assert workload_job_uid(_workload("w4", "job-a", "job-a", controller=False)) is None
    assert workload_job_uid(_workload("w5", None, "job-a")) is None
    mixed = [_workload("w1", "job-a", "job-a"), _workload("w2", "job-a", None)]
    assert [w["metadata"]["name"] for w in workloads_of(mixed, "job-a")] == ["w1"]
