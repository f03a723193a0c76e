"""Bad input fails early with an error that says what to change, and nothing is created in the cluster."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from airflow_kueue_provider.airflow_compat import AirflowFailException
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

from ..cluster import KueueEnv

INVALID: list[tuple[str, dict[str, Any], str]] = [
    ("service account not a DNS name", {"service_account_name": "Bad_SA"}, "service_account_name"),
    ("namespace not a DNS label", {"namespace": "Bad_NS"}, "namespace"),
    ("empty queue name", {"queue_name": ""}, "queue_name"),
    ("queue name not a label value", {"queue_name": "a queue"}, "queue_name"),
    ("unknown LocalQueue", {"queue_name": "no-such-queue"}, "LocalQueue 'no-such-queue' does not exist"),
    ("completions 0", {"completions": 0}, "completions"),
    ("completions 100,001", {"completions": 100_001}, "completions"),
    ("parallelism 10,001", {"completions": 20_000, "parallelism": 10_001}, "parallelism"),
    ("parallelism above completions", {"completions": 2, "parallelism": 5}, "parallelism"),
    ("negative parallelism", {"parallelism": -1}, "parallelism"),
    ("cpu quantity 'two'", {"resources": {"requests": {"cpu": "two"}}}, "resources"),
    ("negative memory", {"resources": {"requests": {"memory": "-1Gi"}}}, "resources"),
    (
        "limit below request",
        {"resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}},
        "resources",
    ),
    ("resources typo", {"resources": {"request": {"cpu": "1"}}}, "resources"),
    (
        "max_failed_indexes with Kubernetes' whole-Job backoff",
        {"max_failed_indexes": 1, "backoff_limit_per_index": None},
        "max_failed_indexes",
    ),
    (
        "non-retriable exit codes with Kubernetes' whole-Job backoff",
        {"non_retriable_exit_codes": [3], "backoff_limit_per_index": None},
        "non_retriable_exit_codes",
    ),
    (
        "max_failed_indexes above completions",
        {"backoff_limit_per_index": 0, "max_failed_indexes": 50},
        "max_failed_indexes",
    ),
    ("negative per-index backoff", {"backoff_limit_per_index": -1}, "backoff_limit_per_index"),
    ("negative TTL", {"ttl_seconds_after_finished": -1}, "ttl_seconds_after_finished"),
    ("empty image", {"image": ""}, "image"),
    ("bad env name", {"env": {"1BAD": "x"}}, "env"),
    ("template is a Pod", {"job_template": {"apiVersion": "v1", "kind": "Pod"}}, "job_template"),
    ("template is not YAML", {"job_template": "spec: [unclosed"}, "job_template"),
    (
        "template is NonIndexed",
        {"job_template": {"apiVersion": "batch/v1", "kind": "Job", "spec": {"completionMode": "NonIndexed"}}},
        "completionMode",
    ),
    ("queue_timeout 0", {"queue_timeout": 0}, "queue_timeout"),
    ("priority class not a label value", {"priority_class": "high priority"}, "priority_class"),
    ("reserved label", {"labels": {"kueue.x-k8s.io/queue-name": "other"}}, "labels"),
    (
        "template sets the provider's identity",
        {
            "job_template": {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"annotations": {"airflow-kueue.io/run-id": "another-run"}},
            }
        },
        "metadata.annotations sets airflow-kueue.io/run-id",
    ),
    ("workload_timeout 0", {"workload_timeout": 0}, "workload_timeout"),
    ("start_timeout negative", {"start_timeout": -5}, "start_timeout"),
    ("bad node selector key", {"node_selector": {"bad key!": "x"}}, "node_selector"),
    ("ramp starting at the target", {"parallelism_ramp": {"start": 4, "step": 1}}, "parallelism_ramp"),
]


def _context(task_id: str) -> dict[str, Any]:
    ti = SimpleNamespace(
        dag_id="validation", task_id=task_id, run_id="manual__2026-11-30", try_number=1, map_index=-1
    )
    return {"ti": ti}


@pytest.mark.parametrize(("case", "overrides", "expected"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid_input_fails_before_anything_is_created(
    kueue_env: KueueEnv, case: str, overrides: dict[str, Any], expected: str
) -> None:
    params: dict[str, Any] = {
        "namespace": kueue_env.namespace,
        "queue_name": kueue_env.local_queue,
        "image": "example.invalid/shard:1",
        "completions": 4,
        **overrides,
    }
    with pytest.raises(AirflowFailException) as err:  # at parse time, or at run time after rendering
        op = KueueIndexedJobOperator(task_id="bad", **params)
        op.execute(_context("bad"))  # type: ignore[arg-type]

    assert expected in str(err.value), f"{case}: {err.value}"
    if expected == "LocalQueue 'no-such-queue' does not exist":
        assert "LocalQueues in" in str(err.value) and kueue_env.local_queue in str(err.value)
    assert kueue_env.cluster.batch.list_namespaced_job(kueue_env.namespace).items == []
