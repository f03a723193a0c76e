"""Forged completion (issue 26, items 1 and 6b) on the local cluster: a second tenant with only Job rights in
the namespace pre-creates Jobs that carry the victim's identity; the victim's task, run as the worker's
ServiceAccount (deploy/rbac/worker-triggerer.yaml), is not fooled and runs its own Job. A task killed while
it spills leaves no Job of its task instance behind."""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.kueue.jobset import JOBSET_GROUP
from airflow_kueue_provider.kueue.names import (
    ESCALATIONS_ANNOTATION,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    QUEUE_NAME_LABEL,
    SEAL_ANNOTATION,
)
from airflow_kueue_provider.operators.deadline_handling import DeadlineHandling
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.operators.jobset import KueueJobSetOperator, KueueReplicatedJob

from ..cluster import Cluster, KueueEnv, indexed_job, is_true, short_id, wait_for
from ..deploy.test_rbac import Identity
from ..tenant import Tenant
from .conftest import CONN_ID

RUN_ID = "scheduled__2026-12-03T02:00:00+00:00"
ON_DEMAND = "on-demand"


JOB_FORGER_RULES = [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "get", "list"]}]
"""Another team in the same namespace: it may create, read and list Jobs."""


@pytest.fixture
def worker(cluster: Cluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    made: list[Identity] = []

    def make(namespace: str) -> Identity:
        made.append(Identity(cluster, "worker-triggerer.yaml", namespace, monkeypatch, tmp_path))
        return made[-1]

    yield make
    for item in made:
        item.delete()


def _ti(try_number: int, task_id: str = "shards") -> SimpleNamespace:
    return SimpleNamespace(
        dag_id="nightly", task_id=task_id, run_id=RUN_ID, try_number=try_number, map_index=-1
    )


def _operator(env: KueueEnv, conn_id: str, **more: Any) -> KueueIndexedJobOperator:
    return KueueIndexedJobOperator(
        task_id="shards",
        namespace=env.namespace,
        queue_name=env.local_queue,
        image="example.invalid/shard:1",
        completions=2,
        resources={"requests": {"cpu": "1", "memory": "1Gi"}},
        annotations={"kwok.airflow-kueue.io/run-duration": "1s"},
        deferrable=False,
        kubernetes_conn_id=conn_id,
        **more,
    )


def _forged(name: str, env: KueueEnv, identity: AirflowIdentity, seal: str) -> dict[str, Any]:
    """A no-op Job that completes at once, with the victim's labels and full-identity annotations."""
    job = indexed_job(
        name,
        env.local_queue,
        completions=1,
        cpu="100m",
        run_duration="0s",
        labels={**identity.labels(), MANAGED_BY_LABEL: MANAGED_BY_VALUE},
    )
    job["metadata"]["annotations"] = {**identity.annotations(), SEAL_ANNOTATION: seal}
    return job


def _task_jobs(env: KueueEnv, task_id: str = "shards") -> list[Any]:
    return [
        j
        for j in env.jobs()
        if (j.metadata.annotations or {}).get("airflow-kueue.io/task-id") == task_id
        and j.metadata.deletion_timestamp is None
    ]


def test_a_forged_complete_job_with_the_victims_identity_is_not_adopted(
    kueue_env: KueueEnv, cluster: Cluster, worker: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    tenant = Tenant(cluster, kueue_env.namespace, JOB_FORGER_RULES)
    victim = AirflowIdentity("nightly", "shards", RUN_ID, try_number=1)
    # The name the base would give (sha256 of the identity: computable) and one with a made-up seal.
    for name, seal in (("nightly-shards-forged", "0" * 64), ("nightly-shards-guessed", "")):
        tenant.batch.create_namespaced_job(
            tenant.namespace, _forged(f"{name}-{short_id()}", kueue_env, victim, seal)
        )
    for job in _task_jobs(kueue_env):
        wait_for(
            f"{job.metadata.name} complete", lambda n=job.metadata.name: is_true(kueue_env.job(n), "Complete")
        )
    forged = {j.metadata.name for j in _task_jobs(kueue_env)}

    # A retry: a first try lists nothing (no earlier try can have left a Job; its own comes back through the
    # create's 409), a retry lists the task instance's Jobs and says which carry its labels without its seal.
    result = _operator(kueue_env, worker(kueue_env.namespace).conn_id).execute({"ti": _ti(2)})  # type: ignore[arg-type]

    assert result["job_name"] not in forged, "the task adopted a forged Job"
    own = kueue_env.job(result["job_name"])
    assert own is not None and is_true(own, "Complete")
    assert own["metadata"]["annotations"][SEAL_ANNOTATION] not in ("0" * 64, "")
    assert result["completed_indexes"] == "0,1"
    said = capsys.readouterr().out
    assert all(f"{n} ignored: carries this task's labels but not its seal" in said for n in forged), said
    assert forged <= {j.metadata.name for j in _task_jobs(kueue_env)}, "a forged Job was deleted"


def test_a_copy_of_an_earlier_try_s_job_made_after_its_deletion_is_not_adopted(
    kueue_env: KueueEnv, cluster: Cluster, worker: Any
) -> None:
    tenant = Tenant(cluster, kueue_env.namespace, JOB_FORGER_RULES)
    conn_id = worker(kueue_env.namespace).conn_id
    first = _operator(kueue_env, conn_id).execute({"ti": _ti(1)})  # type: ignore[arg-type]
    original = kueue_env.job(first["job_name"])
    assert original is not None
    # The original goes (a sweeper, a TTL); the tenant re-creates it under its name, labels and annotations
    # (seals included), as a no-op that completes at once.
    kueue_env.cluster.batch.delete_namespaced_job(
        first["job_name"], kueue_env.namespace, propagation_policy="Foreground"
    )
    wait_for("the original gone", lambda: kueue_env.job(first["job_name"]) is None, timeout=120)
    copy_of = indexed_job(
        first["job_name"], kueue_env.local_queue, completions=2, cpu="100m", run_duration="0s"
    )
    copy_of["metadata"]["labels"] = copy.deepcopy(original["metadata"]["labels"])
    copy_of["metadata"]["annotations"] = copy.deepcopy(original["metadata"]["annotations"])
    tenant.batch.create_namespaced_job(tenant.namespace, copy_of)
    wait_for("the copy complete", lambda: is_true(kueue_env.job(first["job_name"]) or {}, "Complete"))

    second = _operator(kueue_env, conn_id).execute({"ti": _ti(2)})  # type: ignore[arg-type]

    assert second["job_name"] != first["job_name"], "try 2 adopted the copy of try 1's Job"
    own = kueue_env.job(second["job_name"])
    assert own is not None and is_true(own, "Complete")
    assert kueue_env.job(first["job_name"]) is not None, "the copy (not the task's) was deleted"


class Killed(Exception):
    """What Airflow raises in the task after on_kill (a SIGTERM while it runs)."""


def test_a_task_killed_while_it_spills_leaves_no_job(
    kueue_env_factory: Any, monkeypatch: pytest.MonkeyPatch, blob: SimpleNamespace
) -> None:
    spot = kueue_env_factory(cpu="2", memory="16Gi")
    kueue_env_factory(namespace=spot.namespace, local_queue=ON_DEMAND, spot=False, cpu="4", memory="16Gi")
    blocker = spot.create_job(indexed_job("blocker", spot.local_queue, completions=1, cpu="2", hold=True))
    wait_for("the blocker admitted", lambda: is_true(spot.workload(blocker), "Admitted"))
    deadline = datetime.now(UTC) + timedelta(seconds=45)
    op = _operator(
        spot,
        "kubernetes_default",
        checkpointing={"conn_id": CONN_ID, "container": blob.container},
        deadline=deadline.isoformat(timespec="seconds"),
        deadline_margin=35,
        on_deadline_risk={"spill_to": ON_DEMAND},
    )
    annotate = DeadlineHandling._annotate
    before_kill: list[str | None] = []

    def killed_mid_escalation(self: DeadlineHandling, kind_client: Any, obj: Any, annotations: Any) -> None:
        """The kill comes after the spill Job was created, before the escalation returned."""
        if ESCALATIONS_ANNOTATION in annotations:
            before_kill.extend((j.metadata.labels or {}).get(QUEUE_NAME_LABEL) for j in _task_jobs(spot))
            op.on_kill()
            raise Killed
        annotate(self, kind_client, obj, annotations)

    monkeypatch.setattr(DeadlineHandling, "_annotate", killed_mid_escalation)
    with pytest.raises(Killed):
        op.execute({"ti": _ti(1)})  # type: ignore[arg-type]

    assert before_kill == [ON_DEMAND], "the kill was to come right after the spill Job was created"
    assert [j.metadata.name for j in _task_jobs(spot)] == [], "a Job of the killed task still holds quota"


JOBSET_FORGER_RULES = [
    *JOB_FORGER_RULES,
    {"apiGroups": [JOBSET_GROUP], "resources": ["jobsets"], "verbs": ["get", "list"]},
]
"""Another team that may also read the namespace's JobSets (their uids, their children's labels)."""


def test_a_job_that_copies_a_jobset_childs_labels_and_owner_is_not_the_jobsets_and_cannot_fail_it(
    kueue_env: KueueEnv, cluster: Cluster
) -> None:
    """Issue 38, item 2, where deploy/policy is not bound: a second team's Job with a real child's labels,
    annotations and a controller ownerReference to the victim JobSet (uid and all), whose pod never starts.
    The victim's task counts only the Jobs the JobSet controller made for it (controller uid, replica name):
    the impostor neither shows in its progress nor fails it after start_timeout."""
    tenant = Tenant(cluster, kueue_env.namespace, JOBSET_FORGER_RULES)
    requests = {"requests": {"cpu": "1", "memory": "1Gi"}}
    op = KueueJobSetOperator(
        task_id="genomics",
        namespace=kueue_env.namespace,
        queue_name=kueue_env.local_queue,
        deferrable=False,
        start_timeout=10,
        replicated_jobs=[
            KueueReplicatedJob(
                "coordinator",
                image="example.invalid/c:1",
                resources=requests,
                annotations={"kwok.airflow-kueue.io/run-duration": "35s"},
            ),
            KueueReplicatedJob(
                "workers",
                image="example.invalid/w:1",
                completions=2,
                resources=requests,
                annotations={"kwok.airflow-kueue.io/run-duration": "1s"},
            ),
        ],
    )
    results: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(op.execute({"ti": _ti(1, "genomics")}))  # type: ignore[arg-type]
        except BaseException as exc:  # the test reads it
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def workers_job() -> Any:
        listed = tenant.batch.list_namespaced_job(
            tenant.namespace, label_selector="jobset.sigs.k8s.io/replicatedjob-name=workers"
        ).items
        return listed[0] if listed else None

    real = wait_for("the JobSet's workers Job", workers_job, timeout=120)
    meta = real.metadata
    impostor = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": meta.name[: meta.name.rindex("-")] + "-x",
            "labels": dict(meta.labels or {}),
            "annotations": dict(meta.annotations or {}),
            "ownerReferences": [
                {
                    "apiVersion": ref.api_version,
                    "kind": ref.kind,
                    "name": ref.name,
                    "uid": ref.uid,
                    "controller": True,
                }
                for ref in meta.owner_references
                if ref.kind == "JobSet"
            ],
        },
        "spec": {
            "completions": 1,
            "template": {
                "metadata": {"annotations": {"kwok.airflow-kueue.io/image-pull": "fail"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "example.invalid/never:1"}],
                },
            },
        },
    }
    assert impostor["metadata"]["ownerReferences"], meta
    tenant.batch.create_namespaced_job(tenant.namespace, impostor)  # no policy bound here: accepted
    thread.join(timeout=240)
    assert not thread.is_alive(), "the task did not finish"
    assert not errors, errors
    (result,) = results
    assert [(rj["name"], rj["succeeded"]) for rj in result["replicated_jobs"]] == [
        ("coordinator", 1),
        ("workers", 2),
    ], result
    assert impostor["metadata"]["name"] not in str(result), result
