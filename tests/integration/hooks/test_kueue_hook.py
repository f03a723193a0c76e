"""``KueueHook.task_instance_jobs`` on the bed: what the UI's task view shows as a task's Jobs."""

from __future__ import annotations

from typing import Any

from airflow_kueue_provider.hooks.identity_key import identity_seal
from airflow_kueue_provider.hooks.kind_client import KindClient
from airflow_kueue_provider.hooks.kueue_hook import KueueHook
from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.kueue.jobset import JOBSET_GROUP, JOBSET_PLURAL, JOBSET_VERSION
from airflow_kueue_provider.kueue.kinds.jobset import JOBSET
from airflow_kueue_provider.operators.jobset import KueueJobSetOperator, KueueReplicatedJob

from ..cluster import HOLD, KueueEnv, wait_for


def test_a_jobset_tasks_jobs_are_the_ones_its_sealed_jobset_controls_not_copies_of_their_labels(
    kueue_env: KueueEnv,
) -> None:
    """Issue 38, item 2: a Job that copies a real child's labels, annotations (the JobSet's seal) and
    controller ownerReference, under another name, is not listed as the task's (it was, by label and seal)."""
    env = kueue_env
    op = KueueJobSetOperator(
        task_id="genomics",
        namespace=env.namespace,
        queue_name=env.local_queue,
        replicated_jobs=[
            KueueReplicatedJob(
                "workers",
                image="example.invalid/w:1",
                completions=1,
                resources={"requests": {"cpu": "1", "memory": "1Gi"}},
                annotations=HOLD,
            )
        ],
    )
    identity = AirflowIdentity("js", "genomics", "r1", 1)
    manifest = op.build_manifest(identity)
    seal = identity_seal().annotations("JobSet", env.namespace, manifest["metadata"]["name"], identity)
    KindClient(JOBSET, "kubernetes_default").seal_manifest(manifest, seal)
    name = env.cluster.custom.create_namespaced_custom_object(
        JOBSET_GROUP, JOBSET_VERSION, env.namespace, JOBSET_PLURAL, manifest
    )["metadata"]["name"]
    child = wait_for("the JobSet's Job", lambda: env.job(f"{name}-workers-0"), timeout=120)
    meta: dict[str, Any] = child["metadata"]
    copy = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"{name}-workers-x",
            "labels": meta["labels"],
            "annotations": meta.get("annotations") or {},
            "ownerReferences": meta["ownerReferences"],
        },
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "example.invalid/x:1"}],
                }
            },
        },
    }
    env.cluster.batch.create_namespaced_job(env.namespace, copy)

    shown = KueueHook("kubernetes_default").task_instance_jobs(env.namespace, identity)

    assert [j["metadata"]["name"] for j in shown] == [f"{name}-workers-0"]
