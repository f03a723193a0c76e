from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.kueue.progress.result import JobResult, job_result_from_status
from airflow_kueue_provider.kueue.progress.workload_state import WorkloadPhase, WorkloadState

CONTRACT_KEYS = {
    "job_name",
    "namespace",
    "workload_name",
    "cluster_queue",
    "completions",
    "completed_indexes",
    "failed_indexes",
    "succeeded",
    "failed",
    "queued_seconds",
    "running_seconds",
    "evictions",
    "admitted_parallelism",  # added later: keys are only ever added (docs/design.md)
    "topology_placement",
    "eviction_causes",
    "worker_cluster",
    "quota_released_pod_seconds",
    "quota_released_cpu_seconds",
    "finished_at",
}


def job(status: dict[str, Any], completions: int = 12) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "align-shards-1a2b3c4d5e", "namespace": "analytics", "uid": "u-1"},
        "spec": {"completionMode": "Indexed", "completions": completions, "parallelism": 4},
        "status": status,
    }


STATE = WorkloadState(
    workload_name="job-align-shards-1a2b3c4d5e-3c9f1",
    phase=WorkloadPhase.Failed,
    cluster_queue="batch-cluster-queue",
    eviction_count=2,
    requeue_count=1,
)


def test_from_status_counts_indexes_not_pods() -> None:
    result = job_result_from_status(
        # status.failed counts pods (retries included); the result counts indexes.
        job({"completedIndexes": "0-3,7,9-11", "failedIndexes": "4,5", "succeeded": 8, "failed": 9}),
        STATE,
        queued_seconds=41.5,
        running_seconds=300.0,
    )
    assert result == JobResult(
        job_name="align-shards-1a2b3c4d5e",
        namespace="analytics",
        workload_name="job-align-shards-1a2b3c4d5e-3c9f1",
        cluster_queue="batch-cluster-queue",
        completions=12,
        completed_indexes="0-3,7,9-11",
        failed_indexes="4,5",
        succeeded=8,
        failed=2,
        queued_seconds=41.5,
        running_seconds=300.0,
        evictions=2,
    )
    assert result.pending == IndexSet.parse("6,8")
    assert not result.all_succeeded


def test_from_status_normalises_index_strings() -> None:
    result = job_result_from_status(job({"completedIndexes": "3,0-2,4-5"}, completions=6), None, None, None)
    assert result.completed_indexes == "0-5"
    assert result.all_succeeded
    assert result.completed == IndexSet.range(0, 6)


def test_from_status_without_status_or_workload() -> None:
    result = job_result_from_status(job({}), None, None, None)
    assert (result.succeeded, result.failed, result.completed_indexes, result.failed_indexes) == (
        0,
        0,
        "",
        "",
    )
    assert (result.workload_name, result.cluster_queue, result.evictions) == (None, None, 0)
    assert result.pending == IndexSet.range(0, 12)


def test_from_status_rejects_corrupt_index_strings() -> None:
    with pytest.raises(ValueError, match="index string"):
        job_result_from_status(job({"completedIndexes": "0-x"}), None, None, None)


def test_an_older_result_without_the_admitted_parallelism_still_reads() -> None:
    data = job_result_from_status(job({"completedIndexes": "0-11"}), STATE, 1.0, 2.0).to_dict()
    del data["admitted_parallelism"]
    assert JobResult.from_dict(data).admitted_parallelism is None


def test_to_dict_has_the_contract_keys_and_is_json() -> None:
    result = job_result_from_status(job({"completedIndexes": "0-11"}), STATE, 1.0, 2.0)
    data = result.to_dict()
    assert set(data) == CONTRACT_KEYS
    assert json.loads(json.dumps(data)) == data


def test_from_dict_round_trip_and_ignores_extra_keys() -> None:
    result = job_result_from_status(job({"completedIndexes": "0-10", "failedIndexes": "11"}), STATE, 3.0, 4.0)
    event = {"status": "failed", "message": "1 index failed", **result.to_dict()}
    assert JobResult.from_dict(event) == result
    assert JobResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result


def test_from_dict_names_missing_keys() -> None:
    data = job_result_from_status(job({}), None, None, None).to_dict()
    del data["evictions"]
    with pytest.raises(ValueError, match="evictions"):
        JobResult.from_dict(data)
