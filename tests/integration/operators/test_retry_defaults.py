"""Retry defaults for sharded work on the bed: each index retries once by itself (one bad shard never fails
the others), and an exit code the user calls final ends its index at once (podFailurePolicy FailIndex)."""

from __future__ import annotations

from types import SimpleNamespace

from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

from ..cluster import KueueEnv

INDEX = "batch.kubernetes.io/job-completion-index"


def _ti() -> SimpleNamespace:
    return SimpleNamespace(dag_id="retries", task_id="shards", run_id="r1", try_number=1, map_index=-1)


def test_a_listed_exit_code_fails_its_index_at_once_another_is_retried_once_the_rest_finish(
    kueue_env: KueueEnv,
) -> None:
    op = KueueIndexedJobOperator(
        task_id="shards",
        namespace=kueue_env.namespace,
        queue_name=kueue_env.local_queue,
        image="example.invalid/shard:1",
        completions=6,
        max_failed_indexes=2,
        non_retriable_exit_codes=[3, 4],
        deferrable=False,
        annotations={
            "kwok.airflow-kueue.io/run-duration": "1s",
            "kwok.airflow-kueue.io/fail-indexes": "2,4",
            "kwok.airflow-kueue.io/fail-exit-code-2": "3",  # final: no retry
            "kwok.airflow-kueue.io/fail-exit-code-4": "1",  # anything else: retried once
        },
    )
    result = op.execute({"ti": _ti()})  # type: ignore[arg-type]
    assert (result["completed_indexes"], result["failed_indexes"]) == ("0,1,3,5", "2,4"), result
    (job,) = kueue_env.jobs()
    assert job.spec.backoff_limit_per_index == 1, "the default: one retry per index"
    assert job.spec.backoff_limit == 2147483647, "no whole-Job limit beside the per-index one"
    rules = [
        (r.action, r.on_exit_codes.values if r.on_exit_codes else None)
        for r in job.spec.pod_failure_policy.rules
    ]
    assert rules == [("FailIndex", [3, 4])]
    failed: dict[str, list[int]] = {}
    for pod in kueue_env.pods(job.metadata.name):
        if pod["status"]["phase"] == "Failed":
            code = pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"]
            failed.setdefault(pod["metadata"]["annotations"][INDEX], []).append(code)
    assert failed == {"2": [3], "4": [1, 1]}, failed
