"""KueueJobSetOperator's inputs: checked when the DAG is parsed or before anything is created, and each
replicated job built as the Indexed Job operator's Job is."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_kueue_provider.airflow_compat import AirflowFailException
from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.operators.jobset import KueueJobSetOperator, KueueReplicatedJob

IDENTITY = AirflowIdentity("nightly", "align", "run-1")


def _op(**kwargs: Any) -> KueueJobSetOperator:
    kwargs.setdefault(
        "replicated_jobs",
        [
            KueueReplicatedJob("coordinator", image="c:1"),
            {"name": "workers", "image": "w:1", "completions": 8, "non_retriable_exit_codes": [3]},
        ],
    )
    return KueueJobSetOperator(task_id="align", namespace="batch", queue_name="lq", **kwargs)


def test_the_jobset_carries_the_task_and_each_template_is_a_checked_indexed_job() -> None:
    jobset = _op(priority_class="nightly", spot=True).build_manifest(IDENTITY)
    meta = jobset["metadata"]
    assert meta["labels"]["kueue.x-k8s.io/queue-name"] == "lq"
    assert meta["labels"]["kueue.x-k8s.io/priority-class"] == "nightly"
    assert meta["annotations"]["airflow-kueue.io/dag-id"] == "nightly" and jobset["spec"]["suspend"] is True
    coordinator, workers = (rj["template"] for rj in jobset["spec"]["replicatedJobs"])
    # The task's labels and annotations on each Job (UI, ownership), none of them queued by itself.
    assert coordinator["metadata"]["labels"]["airflow-kueue.io/task-id"] == "align"
    assert "kueue.x-k8s.io/queue-name" not in workers["metadata"]["labels"]
    # The Indexed Job operator's defaults and checks: per-index retries, restricted pod defaults, Spot.
    assert workers["spec"]["backoffLimitPerIndex"] == 1 and workers["spec"]["completions"] == 8
    assert [r["action"] for r in workers["spec"]["podFailurePolicy"]["rules"]] == ["Ignore", "FailIndex"]
    assert workers["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"replicated_jobs": []}, "replicated_jobs is empty"),
        ({"replicated_jobs": [{"name": "w", "imagee": "x"}]}, "unknown field"),
        ({"priority_class": "Not Valid"}, "not a valid WorkloadPriorityClass"),
        ({"queue_timeout": -1}, "queue_timeout must be positive"),
        ({"shards_per_pod": 4}, "shards_per_pod is not available for a JobSet: .* one shard per index"),
        ({"expected_shard_duration": 30}, "expected_shard_duration is not available for a JobSet"),
        (
            {"replicated_jobs": [KueueReplicatedJob("w", image="x:1", checkpoint=True)]},
            "checkpointing= and a replicated job with checkpoint=True go together",
        ),
        (
            {
                "replicated_jobs": [KueueReplicatedJob("w", image="x:1", checkpoint=True, replicas=2)],
                "checkpointing": "blob",
            },
            r"replicated job 'w' has checkpoint=True and replicas=2: every replica would run each of its "
            r"shards again. Set replicas=1",
        ),
    ],
)
def test_bad_input_fails_when_the_dag_is_parsed(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(AirflowFailException, match=message):
        _op(**kwargs)


def test_bad_templates_and_pod_names_too_long_fail_before_anything_is_created() -> None:
    with pytest.raises(AirflowFailException, match="replicated job 'workers'"):
        _op(replicated_jobs=[KueueReplicatedJob("workers", image="", completions=2)]).build_manifest(IDENTITY)
    long_prefix = _op(
        replicated_jobs=[KueueReplicatedJob("w" * 20, image="x:1", completions=100_000, replicas=100)]
    )
    name = long_prefix.build_manifest(IDENTITY)["metadata"]["name"]
    assert len(name) + len(f"-{'w' * 20}-99-99999-abcde") <= 63


def test_a_replicated_job_asks_for_its_own_topology_domain() -> None:
    jobset = _op(
        replicated_jobs=[
            KueueReplicatedJob("coordinator", image="c:1"),
            {"name": "workers", "image": "w:1", "completions": 4, "topology": {"preferred": "rack"}},
            KueueReplicatedJob("reducers", image="r:1", topology="topology.kubernetes.io/zone"),
        ]
    ).build_manifest(IDENTITY)
    coordinator, workers, reducers = (
        rj["template"]["spec"]["template"]["metadata"].get("annotations") or {}
        for rj in jobset["spec"]["replicatedJobs"]
    )
    assert not any(k.startswith("kueue.x-k8s.io/podset-") for k in coordinator)
    assert workers["kueue.x-k8s.io/podset-preferred-topology"] == "rack"
    assert reducers["kueue.x-k8s.io/podset-required-topology"] == "topology.kubernetes.io/zone"


@pytest.mark.parametrize(
    ("replicated", "message"),
    [
        (
            {"name": "workers", "image": "w:1", "topology": "not a label"},
            "replicated job 'workers': .*not a node label key",
        ),
        (
            {
                "name": "workers",
                "image": "w:1",
                "topology": "rack",
                "annotations": {"kueue.x-k8s.io/podset-required-topology": "rack"},
            },
            "replicated job 'workers': annotations sets a Kueue topology annotation",
        ),
    ],
)
def test_a_bad_topology_fails_when_the_dag_is_parsed(replicated: dict[str, Any], message: str) -> None:
    with pytest.raises(AirflowFailException, match=message):
        _op(replicated_jobs=[replicated])
