"""Safe on a shared cluster (real cluster): only our own Job, pod policy, never stuck, none left running."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.exceptions import TaskDeferred

from airflow_kueue_provider.airflow_compat import AirflowFailException
from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.operators.checkpointing import Checkpointing
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.operators.jobset import KueueJobSetOperator, KueueReplicatedJob

from ..airflow_runner import AirflowHome
from ..cluster import HOLD, KueueEnv, is_true, wait_for
from ..deploy.test_rbac import Identity
from ..kueue_policy import set_kueue_options
from .test_indexed_job_queueing import write_operator_dag

JOB = {"apiVersion": "batch/v1", "kind": "Job"}
COLON_RUN = "manual__2026-05-01T10:00:00+00:00"


def _ti(run_id: str, try_number: int = 1) -> SimpleNamespace:
    return SimpleNamespace(
        dag_id="collide", task_id="shards", run_id=run_id, try_number=try_number, map_index=-1
    )


def _operator(env: KueueEnv, **kwargs: Any) -> KueueIndexedJobOperator:
    kwargs.setdefault("deferrable", False)
    return KueueIndexedJobOperator(
        task_id="shards",
        namespace=env.namespace,
        queue_name=env.local_queue,
        image="example.invalid/shard:1",
        completions=2,
        **kwargs,
    )


def test_a_run_id_with_the_same_labels_gets_its_own_job(kueue_env: KueueEnv) -> None:
    labels = AirflowIdentity("collide", "shards", COLON_RUN).labels()
    colliding_run = labels["airflow-kueue.io/run-id"]  # a real run id that is the other one's hashed label
    assert AirflowIdentity("collide", "shards", colliding_run).labels() == labels

    first = _operator(kueue_env).execute({"ti": _ti(COLON_RUN)})  # type: ignore[arg-type]
    second = _operator(kueue_env).execute({"ti": _ti(colliding_run)})  # type: ignore[arg-type]

    assert first["job_name"] != second["job_name"], "it did not reattach to the other run's completed Job"
    names = sorted(j.metadata.name for j in kueue_env.jobs())
    assert names == sorted([first["job_name"], second["job_name"]])


POLICY_BREACHES: list[tuple[dict[str, Any], str]] = [
    ({"hostPID": True}, "hostPID is true"),
    ({"hostNetwork": True}, "hostNetwork is true"),
    ({"hostIPC": True}, "hostIPC is true"),
    ({"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}, "is a hostPath (/)"),
    ({"containers": [{"name": "main", "securityContext": {"privileged": True}}]}, "privileged is true"),
    (
        {"containers": [{"name": "main", "securityContext": {"allowPrivilegeEscalation": True}}]},
        "allowPrivilegeEscalation is true",
    ),
    (
        {"containers": [{"name": "main", "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}]},
        "capabilities.add ['SYS_ADMIN']",
    ),
    ({"containers": [{"name": "main", "securityContext": {"procMount": "Unmasked"}}]}, "procMount"),
    ({"securityContext": {"seccompProfile": {"type": "Unconfined"}}}, "seccompProfile is Unconfined"),
    (
        {"containers": [{"name": "main", "ports": [{"containerPort": 80, "hostPort": 80}]}]},
        "sets hostPort",
    ),
    (
        {"initContainers": [{"name": "init", "image": "busybox", "securityContext": {"privileged": True}}]},
        "initContainers[init]: securityContext.privileged is true",
    ),
    ({"serviceAccountName": "cluster-admin"}, "serviceAccountName 'cluster-admin' is not in"),
    ({"nodeName": "kwok-node-0"}, "spec.template.spec.nodeName is set"),
    ({"priorityClassName": "system-node-critical"}, "priorityClassName 'system-node-critical' is a system"),
    ({"priorityClassName": "high"}, "priorityClassName (PriorityClass) 'high' is not allowed"),
    ({"runtimeClassName": "kata"}, "runtimeClassName 'kata' is not in [kueue] allowed_runtime_classes"),
    ({"securityContext": {"appArmorProfile": {"type": "Unconfined"}}}, "appArmorProfile is Unconfined"),
    ({"securityContext": {"seLinuxOptions": {"type": "spc_t"}}}, "seLinuxOptions.type is 'spc_t'"),
    (
        {"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "65536"}]}},
        "sysctls 'kernel.msgmax' is not a Pod Security baseline sysctl",
    ),
    (
        {"volumes": [{"name": "steal", "secret": {"secretName": "victim-job-checkpoint"}}]},
        "volumes[steal].secret names 'victim-job-checkpoint'",
    ),
    (
        {"containers": [{"name": "main", "envFrom": [{"secretRef": {"name": "victim-job-checkpoint"}}]}]},
        "envFrom.secretRef names 'victim-job-checkpoint'",
    ),
    (
        {
            "volumes": [
                {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}
            ]
        },
        "volumes[token].projected.sources.serviceAccountToken is set",
    ),
]


@pytest.fixture
def worker(kueue_env: KueueEnv, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Identity]:
    """The Airflow worker's identity from deploy/rbac (its ServiceAccount in Airflow's namespace)."""
    made = Identity(kueue_env.cluster, "worker-triggerer.yaml", kueue_env.namespace, monkeypatch, tmp_path)
    yield made
    made.delete()


@pytest.mark.parametrize(("pod_spec", "expected"), POLICY_BREACHES, ids=[e for _, e in POLICY_BREACHES])
def test_pod_policy_breaches_fail_before_anything_is_created(
    kueue_env: KueueEnv,
    worker: Identity,
    monkeypatch: pytest.MonkeyPatch,
    pod_spec: dict[str, Any],
    expected: str,
) -> None:
    set_kueue_options(monkeypatch, allowed_service_accounts="genomics-sa")
    template = {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"spec": pod_spec}}}
    operator = _operator(kueue_env, job_template=template, kubernetes_conn_id=worker.conn_id)
    with pytest.raises(AirflowFailException) as err:
        operator.execute({"ti": _ti("policy")})  # type: ignore[arg-type]
    assert "pod policy" in str(err.value) and expected in str(err.value), str(err.value)
    assert kueue_env.jobs() == []


def test_no_task_runs_as_the_worker_account_or_any_account_not_allowed(
    kueue_env: KueueEnv, worker: Identity
) -> None:
    """The worker's ServiceAccount is not in the Jobs' namespace, and [kueue] allowed_service_accounts is
    empty by default: service_account_name (or a template's serviceAccountName) fails before anything."""
    assert worker.account == "airflow-kueue-worker" and worker.account_namespace != kueue_env.namespace
    accounts = {
        a.metadata.name
        for a in kueue_env.cluster.core.list_namespaced_service_account(kueue_env.namespace).items
    }
    assert worker.account not in accounts, "a pod could run as the worker's account"
    template = {**JOB, "spec": {"template": {"spec": {"serviceAccountName": "airflow-kueue-worker"}}}}
    tasks = [
        _operator(kueue_env, service_account_name="airflow-kueue-worker", kubernetes_conn_id=worker.conn_id),
        _operator(kueue_env, service_account_name="default", kubernetes_conn_id=worker.conn_id),
        _operator(kueue_env, job_template=template, kubernetes_conn_id=worker.conn_id),
    ]
    for task in tasks:
        with pytest.raises(AirflowFailException) as err:
            task.execute({"ti": _ti("worker-sa")})  # type: ignore[arg-type]
        assert "is not in [kueue] allowed_service_accounts (empty: no ServiceAccount is allowed)" in str(
            err.value
        )
    assert kueue_env.jobs() == []


def test_an_apparmor_annotation_and_a_template_queue_label_are_refused(
    kueue_env: KueueEnv, kueue_env_factory: Any, worker: Identity, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = kueue_env_factory(namespace=kueue_env.namespace, local_queue="team-b-queue")
    set_kueue_options(monkeypatch, allowed_local_queues=f"{kueue_env.namespace}:{kueue_env.local_queue}")
    annotation = "container.apparmor.security.beta.kubernetes.io/main"
    template = {**JOB, "spec": {"template": {"metadata": {"annotations": {annotation: "unconfined"}}}}}
    with pytest.raises(AirflowFailException, match=rf"annotations\[{annotation}\] is 'unconfined'"):
        _operator(kueue_env, job_template=template, kubernetes_conn_id=worker.conn_id).execute(
            {"ti": _ti("apparmor")}  # type: ignore[arg-type]
        )
    # The queue as it is after rendering (a templated queue_name): checked before anything is created.
    task = _operator(kueue_env, kubernetes_conn_id=worker.conn_id)
    task.queue_name = other.local_queue
    with pytest.raises(AirflowFailException, match=r"'team-b-queue' is not allowed in namespace"):
        task.execute({"ti": _ti("queue")})  # type: ignore[arg-type]
    assert kueue_env.jobs() == []


TAMPERING_DAG = """
import os
os.environ["AIRFLOW__KUEUE__ALLOWED_SERVICE_ACCOUNTS"] = "*"
os.environ["AIRFLOW__KUEUE__ALLOWED_LOCAL_QUEUES"] = "*:*"
from airflow.configuration import conf
conf.set("kueue", "allowed_service_accounts", "*")
conf.set("kueue", "allowed_local_queues", "*:*")
from datetime import datetime
from airflow.sdk import DAG
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
         params={{"queue": {other_queue!r}}}) as dag:
    KueueIndexedJobOperator(
        task_id="as_the_worker", namespace={namespace!r}, queue_name={queue!r},
        image="example.invalid/shard:1", completions=1, service_account_name="airflow-kueue-worker",
    )
    KueueIndexedJobOperator(
        task_id="in_team_b_queue", namespace={namespace!r}, queue_name="{{{{ params.queue }}}}",
        image="example.invalid/shard:1", completions=1,
    )
"""


def test_a_dag_file_that_sets_the_policy_changes_nothing(
    kueue_env: KueueEnv,
    kueue_env_factory: Any,
    airflow_home: AirflowHome,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A real `airflow dags test`: the DAG file sets the env vars and conf.set at its top; both tasks still
    run under the policy the process was started with (empty ServiceAccount list, one LocalQueue)."""
    other = kueue_env_factory(namespace=kueue_env.namespace, local_queue="team-b-queue")
    monkeypatch.setitem(
        airflow_home.env,
        "AIRFLOW__KUEUE__ALLOWED_LOCAL_QUEUES",
        f"{kueue_env.namespace}:{kueue_env.local_queue}",
    )
    monkeypatch.delitem(airflow_home.env, "AIRFLOW__KUEUE__ALLOWED_SERVICE_ACCOUNTS", raising=False)
    dag_id = "tamper"
    airflow_home.write_dag(
        dag_id,
        TAMPERING_DAG.format(
            dag_id=dag_id,
            namespace=kueue_env.namespace,
            queue=kueue_env.local_queue,
            other_queue=other.local_queue,
        ),
    )
    run = airflow_home.test_dag(dag_id)
    assert not run.succeeded, run.output[-4000:]
    for expected in (
        "serviceAccountName 'airflow-kueue-worker' is not in [kueue] allowed_service_accounts",
        "queue_name (LocalQueue) 'team-b-queue' is not allowed in namespace",
    ):
        assert expected in run.output, run.output[-4000:]
    assert kueue_env.jobs() == []


def test_a_workload_identity_account_outside_the_allowed_ones_is_refused(
    kueue_env: KueueEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checkpointing's workload identity becomes the pods' ServiceAccount after the Job's own policy check:
    it is checked against [kueue] allowed_service_accounts too, before anything is created."""
    set_kueue_options(monkeypatch, allowed_service_accounts="genomics-sa")
    checkpointing = Checkpointing("any_blob", workload_identity_service_account="cluster-admin-sa")
    match = (
        r"workload_identity_service_account 'cluster-admin-sa' is not in \[kueue\] allowed_service_accounts"
    )
    with pytest.raises(AirflowFailException, match=match):
        _operator(kueue_env, checkpointing=checkpointing).execute({"ti": _ti("wi")})  # type: ignore[arg-type]
    jobset = KueueJobSetOperator(
        task_id="shards",
        namespace=kueue_env.namespace,
        queue_name=kueue_env.local_queue,
        checkpointing=checkpointing,
        replicated_jobs=[KueueReplicatedJob("workers", image="example.invalid/w:1", checkpoint=True)],
    )
    with pytest.raises(AirflowFailException, match=match):
        jobset.execute({"ti": _ti("wi-jobset")})  # type: ignore[arg-type]
    assert kueue_env.jobs() == []


def test_a_namespace_outside_the_allowed_ones_is_refused(
    kueue_env: KueueEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_kueue_options(monkeypatch, allowed_namespaces="genomics,risk")
    with pytest.raises(AirflowFailException, match=r"not in \[kueue\] allowed_namespaces \(genomics, risk\)"):
        _operator(kueue_env).execute({"ti": _ti("ns")})  # type: ignore[arg-type]
    assert kueue_env.jobs() == []


def test_the_created_job_carries_the_restricted_defaults(kueue_env: KueueEnv) -> None:
    result = _operator(kueue_env).execute({"ti": _ti("defaults")})  # type: ignore[arg-type]
    job = kueue_env.job(result["job_name"])
    assert job is not None
    pod = job["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["containers"][0]["securityContext"]["allowPrivilegeEscalation"] is False


def test_an_image_that_never_pulls_fails_within_start_timeout_and_the_job_is_deleted(
    kueue_env: KueueEnv, airflow_home: AirflowHome
) -> None:
    write_operator_dag(
        airflow_home,
        "never_pulls",
        kueue_env,
        completions=2,
        cpu="250m",
        annotations={"kwok.airflow-kueue.io/image-pull": "fail"},
        extra="start_timeout=15,",
    )

    run = airflow_home.test_dag("never_pulls")

    assert not run.succeeded
    match = re.search(
        r"was admitted (\d+)s ago but its pods cannot start \(pod \S+: ImagePullBackOff", run.output
    )
    assert match, run.output[-4000:]
    assert 15 <= int(match.group(1)) <= 60
    assert "deleted to release its quota" in run.output
    wait_for("the Job gone", lambda: kueue_env.jobs() == [], timeout=60)


def test_a_failed_task_leaves_no_job_holding_quota(kueue_env: KueueEnv, airflow_home: AirflowHome) -> None:
    """Two indexes fail at once with max_failed_indexes=1 while the others still run: the task fails and its
    Job does not keep the quota. Kubernetes ends the Job's other pods itself (the Job's maxFailedIndexes) and
    marks it Failed once they are gone; when the task's verdict comes first, the task deletes the Job. Which
    one wins is a race (the trigger holds an event that comes within 10 s of the deferral, resume_guard), so
    the test asks what must hold either way: no pod left, and the Job gone or Failed with its Workload
    finished."""
    write_operator_dag(
        airflow_home,
        "fails_early",
        kueue_env,
        completions=6,
        cpu="250m",
        annotations={**HOLD, "kwok.airflow-kueue.io/fail-indexes": "0,1"},
        extra="backoff_limit_per_index=0, max_failed_indexes=1,",
    )
    # Indexes 0 and 1 fail as soon as they are released; the other four stay held (running).
    background = airflow_home.start_dag("fails_early")
    try:
        wait_for("6 pods running", lambda: len(kueue_env.running_pods()) == 6, timeout=240)
        for pod in kueue_env.running_pods():
            index = pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
            if index in ("0", "1"):
                kueue_env.cluster.core.patch_namespaced_pod(
                    pod["metadata"]["name"],
                    kueue_env.namespace,
                    {"metadata": {"annotations": {"kwok.airflow-kueue.io/hold": "released"}}},
                )
        run = background.wait(timeout=300)
    finally:
        background.kill()

    assert not run.succeeded
    assert "more than max_failed_indexes=1" in run.output, run.output[-4000:]

    def nothing_holds_quota() -> bool:
        jobs = kueue_env.jobs()
        if kueue_env.running_pods() or len(jobs) > 1:
            return False
        if not jobs:
            return "its Job was still running and has been deleted" in run.output
        (job,) = jobs
        failed = any(c.type == "Failed" and c.status == "True" for c in job.status.conditions or [])
        workload = kueue_env.cluster.workload_for_job(kueue_env.namespace, job.metadata.uid)
        return failed and (workload is None or is_true(workload, "Finished"))

    wait_for("the Job gone, or Failed with no pod and its Workload finished", nothing_holds_quota, timeout=60)


def test_blocking_on_kill_keeps_a_finished_job_and_deletes_a_running_one(kueue_env: KueueEnv) -> None:
    done = _operator(kueue_env)
    result = done.execute({"ti": _ti("kill-after-finish")})  # type: ignore[arg-type]
    done.on_kill()
    assert kueue_env.job(result["job_name"]) is not None, "a finished Job is the run's record"

    running = _operator(kueue_env, annotations=HOLD, deferrable=True)
    with pytest.raises(TaskDeferred):  # the Job is created and the task would defer
        running.execute({"ti": _ti("kill-while-running")})  # type: ignore[arg-type]
    name = running._name
    assert name and kueue_env.job(name) is not None
    running.on_kill()
    wait_for("the running Job deleted", lambda: kueue_env.job(name) is None, timeout=60)


CONF_DAG = """
from datetime import datetime
from airflow.sdk import DAG
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

TEMPLATE = {{
    "apiVersion": "batch/v1",
    "kind": "Job",
    "spec": {{"template": {{"spec": {{"serviceAccountName": "{{{{ dag_run.conf.get('sa', '') }}}}"}}}}}},
}}

with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    KueueIndexedJobOperator(
        task_id="shards", namespace={namespace!r},
        queue_name="{{{{ dag_run.conf.get('queue', {queue!r}) }}}}",
        image="example.invalid/shard:1", completions=1, job_template=TEMPLATE,
    )
"""


def test_a_template_and_a_queue_rendered_from_dag_run_conf_are_checked_before_anything_is_created(
    kueue_env: KueueEnv, kueue_env_factory: Any, airflow_home: AirflowHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`airflow dags test -c`: what a run's conf renders into job_template and queue_name is checked."""
    other = kueue_env_factory(namespace=kueue_env.namespace, local_queue="team-b-queue")
    allowed = f"{kueue_env.namespace}:{kueue_env.local_queue}"
    monkeypatch.setitem(airflow_home.env, "AIRFLOW__KUEUE__ALLOWED_LOCAL_QUEUES", allowed)
    dag_id = "conf_rendered"
    airflow_home.write_dag(
        dag_id, CONF_DAG.format(dag_id=dag_id, namespace=kueue_env.namespace, queue=kueue_env.local_queue)
    )
    cases = [
        ({"sa": "airflow-kueue-worker"}, "serviceAccountName 'airflow-kueue-worker' is not in [kueue]"),
        ({"queue": other.local_queue}, "queue_name (LocalQueue) 'team-b-queue' is not allowed in namespace"),
    ]
    for conf, expected in cases:
        run = airflow_home.airflow("dags", "test", dag_id, "-c", json.dumps(conf), check=False)
        assert not run.succeeded and expected in run.output, run.output[-4000:]
    assert kueue_env.jobs() == []
