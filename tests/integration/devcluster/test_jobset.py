"""The JobSet controller in the bed, with Kueue's JobSet integration, and the provider's JobSet model
(``kueue.jobset``) on real objects: a coordinator and 8 indexed workers wait as one Workload, are admitted
together and run on the fake nodes; a failing worker index is named by its Job."""

from __future__ import annotations

from typing import Any

from airflow_kueue_provider.kueue.jobset import ReplicatedJob, build_jobset, jobset_view
from airflow_kueue_provider.kueue.names import JOBSET_NAME_LABEL
from airflow_kueue_provider.kueue.spec.job_manifest import build_indexed_job
from airflow_kueue_provider.kueue.spec.job_spec import IndexedJobSpec

from ..cluster import KueueEnv, indexed_job, is_true, wait_for

GROUP, VERSION, PLURAL = "jobset.x-k8s.io", "v1alpha2", "jobsets"
RUN_1S = {"kwok.airflow-kueue.io/run-duration": "1s"}


def _submit(env: KueueEnv, name: str, worker_annotations: dict[str, str] | None = None) -> None:
    def job(completions: int, annotations: dict[str, str]) -> dict[str, Any]:
        return build_indexed_job(
            IndexedJobSpec(
                name=name,
                namespace=env.namespace,
                queue_name=env.local_queue,
                image="example.invalid/shard:1",
                completions=completions,
                resources={"requests": {"cpu": "1", "memory": "1Gi"}},
                backoff_limit_per_index=0,
                annotations=annotations,
                spot=True,
            )
        )

    manifest = build_jobset(
        name,
        env.local_queue,
        [
            ReplicatedJob("coordinator", job(1, RUN_1S)),
            ReplicatedJob("workers", job(8, {**RUN_1S, **(worker_annotations or {})})),
        ],
        labels={},
    )
    env.cluster.custom.create_namespaced_custom_object(GROUP, VERSION, env.namespace, PLURAL, manifest)


def _get(env: KueueEnv, name: str) -> dict[str, Any]:
    return dict(env.cluster.custom.get_namespaced_custom_object(GROUP, VERSION, env.namespace, PLURAL, name))


def _view(env: KueueEnv, name: str) -> Any:
    children = env.cluster.batch.list_namespaced_job(
        env.namespace, label_selector=f"{JOBSET_NAME_LABEL}={name}"
    )
    return jobset_view(
        _get(env, name), [env.cluster.api.sanitize_for_serialization(j) for j in children.items]
    )


def test_a_queued_jobset_is_admitted_as_one_workload_and_completes(kueue_env_factory: Any) -> None:
    env = kueue_env_factory(cpu="9", memory="64Gi")
    blocker = env.create_job(indexed_job("blocker", env.local_queue, completions=1, cpu="1", hold=True))
    wait_for("the blocker admitted", lambda: is_true(env.workload(blocker), "Admitted"))
    _submit(env, "genomics")
    workloads = wait_for(
        "the JobSet's Workload",
        lambda: env.cluster.custom.list_namespaced_custom_object(
            "kueue.x-k8s.io", "v1beta2", env.namespace, "workloads"
        )["items"][1:],
    )
    (workload,) = [w for w in workloads if w["metadata"]["ownerReferences"][0]["kind"] == "JobSet"]
    # One Workload, one pod set per replicated job: 9 CPUs, which wait for the blocker's one.
    assert [(p["name"], p["count"]) for p in workload["spec"]["podSets"]] == [
        ("coordinator", 1),
        ("workers", 8),
    ]
    assert _get(env, "genomics")["spec"]["suspend"] is True and not env.pods("genomics-workers-0")
    env.release("blocker")
    wait_for("the JobSet completed", lambda: is_true(_get(env, "genomics"), "Completed"), timeout=180)
    view = _view(env, "genomics")
    assert view.outcome() == ("success", f"JobSet {env.namespace}/genomics completed: {view.progress_line()}")
    assert view.progress_line() == "coordinator 1/1 done, 0 active; workers 8/8 done, 0 active"


def test_a_failing_worker_index_fails_the_jobset_and_is_named(kueue_env_factory: Any) -> None:
    env = kueue_env_factory(cpu="9", memory="64Gi")
    _submit(env, "genomics", {"kwok.airflow-kueue.io/fail-indexes": "3"})
    wait_for("the JobSet failed", lambda: is_true(_get(env, "genomics"), "Failed"), timeout=180)
    status, message = _view(env, "genomics").outcome()
    assert status == "failed" and message.endswith("failed indexes: genomics-workers-0: 3"), message
