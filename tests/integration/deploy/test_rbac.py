"""deploy/rbac/ on the real apiserver: each component works as its own ServiceAccount, with nothing more.

Each test applies a manifest into its own namespace (cluster-scoped objects renamed per test), asks the
TokenRequest API for the ServiceAccount's token, and runs the component through an Airflow connection whose
kubeconfig carries only that token.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from azure.storage.blob import BlobServiceClient
from fastapi.testclient import TestClient
from kubernetes import client, config, utils
from kubernetes.client.rest import ApiException

from airflow_kueue_provider.airflow_compat import AirflowException
from airflow_kueue_provider.hooks.kueue_hook import KueueHook
from airflow_kueue_provider.kueue.checkpoints.checkpoint_access import secret_name_of
from airflow_kueue_provider.kueue.jobset import JOBSET_GROUP, JOBSET_PLURAL, JOBSET_VERSION
from airflow_kueue_provider.operators.checkpointing import Checkpointing
from airflow_kueue_provider.operators.finished_job_sweep import KueueFinishedJobSweepOperator
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.operators.jobset import KueueJobSetOperator, KueueReplicatedJob
from airflow_kueue_provider.plugins.dashboard_app import create_app

from ..cluster import Cluster, KueueEnv, indexed_job, is_true, short_id, wait_for
from ..tenant import token_kubeconfig

RBAC = Path(__file__).resolve().parents[3] / "deploy" / "rbac"
MANIFEST_NAMESPACES = ("batch-jobs", "airflow")
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"


class Identity:
    """A ServiceAccount from one manifest, as an Airflow connection id: the ServiceAccount in a namespace of
    its own (the manifest's ``airflow``, Airflow's namespace) and its Role bindings in ``namespace`` (the
    manifest's ``batch-jobs``, the team's), as deployed: the worker's account is not in the Jobs' namespace.
    ``home`` names Airflow's namespace (default: a fresh one per identity, deleted with it)."""

    def __init__(
        self,
        cluster: Cluster,
        manifest: str,
        namespace: str,
        monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path,
        home: str | None = None,
    ) -> None:
        self.cluster, self.namespace = cluster, namespace
        suffix = short_id()
        self.home = home or f"airflow-{suffix}"
        self.owns_home = home is None
        if self.owns_home:
            cluster.core.create_namespace({"metadata": {"name": self.home}})
        where = {"batch-jobs": namespace, "airflow": self.home}
        self.cluster_scoped: list[tuple[str, str]] = []
        account, bound = "", ""
        for doc in yaml.safe_load_all((RBAC / manifest).read_text()):
            kind, meta = doc["kind"], doc["metadata"]
            if meta.get("namespace") in MANIFEST_NAMESPACES:
                meta["namespace"] = where[meta["namespace"]]
            for subject in doc.get("subjects", []):
                subject["namespace"] = where.get(subject["namespace"], subject["namespace"])
                if subject.get("kind") == "ServiceAccount" and subject["namespace"] == self.home:
                    bound = subject["name"]
            if kind.startswith("Cluster"):
                meta["name"] = f"{meta['name']}-{suffix}"
                self.cluster_scoped.append((kind, meta["name"]))
            if (
                doc.get("roleRef", {}).get("kind") == "ClusterRole"
            ):  # a ClusterRoleBinding's, or a RoleBinding's
                doc["roleRef"]["name"] = f"{doc['roleRef']['name']}-{suffix}"
            if kind == "ServiceAccount":
                account, self.account_namespace = meta["name"], meta["namespace"]
            _create(cluster, doc)
        if not account:  # the manifest only binds it: Airflow's chart (or service-accounts.yaml) makes it
            account, self.account_namespace = bound, self.home
            _create(cluster, _declared_account(bound, self.home))
        self.account = account
        token = cluster.core.create_namespaced_service_account_token(
            account, self.account_namespace, {"spec": {"expirationSeconds": 3600}}
        ).status.token
        kubeconfig = token_kubeconfig(cluster, token)
        path = tmp_path / f"kubeconfig-{account}-{suffix}"
        path.write_text(yaml.safe_dump(kubeconfig))
        self.conn_id = f"kueue_rbac_{account.replace('-', '_')}_{suffix}"
        conn = {"conn_type": "kubernetes", "extra": {"kube_config_path": str(path), "namespace": namespace}}
        monkeypatch.setenv(f"AIRFLOW_CONN_{self.conn_id.upper()}", json.dumps(conn))
        self.api = config.new_client_from_config(config_file=str(path))

    def delete(self) -> None:
        rbac = client.RbacAuthorizationV1Api(self.cluster.api)
        for kind, name in self.cluster_scoped:
            delete = rbac.delete_cluster_role if kind == "ClusterRole" else rbac.delete_cluster_role_binding
            delete(name)
        if self.owns_home:
            self.cluster.core.delete_namespace(self.home, propagation_policy="Background")


def _declared_account(name: str, namespace: str) -> dict[str, Any]:
    """``name`` as deploy/rbac/service-accounts.yaml declares it (no chart made it), in ``namespace``."""
    docs = yaml.safe_load_all((RBAC / "service-accounts.yaml").read_text())
    (doc,) = [d for d in docs if d["kind"] == "ServiceAccount" and d["metadata"]["name"] == name]
    doc["metadata"]["namespace"] = namespace
    return dict(doc)


def _create(cluster: Cluster, doc: dict[str, Any]) -> None:
    utils.create_from_dict(cluster.api, doc)


@pytest.fixture
def identity(cluster: Cluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    made: list[Identity] = []

    def make(manifest: str, namespace: str, home: str | None = None) -> Identity:
        made.append(Identity(cluster, manifest, namespace, monkeypatch, tmp_path, home))
        return made[-1]

    yield make
    for item in made:
        item.delete()


def _ti(run_id: str) -> SimpleNamespace:
    return SimpleNamespace(dag_id="rbac", task_id="shards", run_id=run_id, try_number=1, map_index=-1)


def _operator(env: KueueEnv, conn_id: str, **kwargs: Any) -> KueueIndexedJobOperator:
    return KueueIndexedJobOperator(
        task_id="shards",
        namespace=env.namespace,
        queue_name=env.local_queue,
        image="example.invalid/shard:1",
        completions=4,
        backoff_limit_per_index=0,
        deferrable=False,
        kubernetes_conn_id=conn_id,
        **kwargs,
    )


def test_the_worker_identity_runs_a_task_end_to_end_and_reaches_nothing_else(
    kueue_env_factory: Any, identity: Any, devcluster_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    env, other = kueue_env_factory(), kueue_env_factory()
    worker = identity("worker-triggerer.yaml", env.namespace)
    blob = {
        "conn_type": "wasb",
        "extra": {"connection_string": devcluster_env["AZURE_STORAGE_CONNECTION_STRING"]},
    }
    monkeypatch.setenv("AIRFLOW_CONN_RBAC_BLOB", json.dumps(blob))
    base = f"rbac-{env.namespace[-6:]}"

    # With checkpointing: it creates the pods' SAS Secret (create only: it can read no Secret back).
    checkpointing = Checkpointing("rbac_blob", base)
    result = _operator(env, worker.conn_id, checkpointing=checkpointing).execute({"ti": _ti("ok")})
    assert result["completed_indexes"] == "0-3" and result["cluster_queue"] == env.cluster_queue
    (job,) = env.jobs()
    secret_name = secret_name_of(env.job(job.metadata.name) or {})
    assert secret_name, "the pods read a SAS Secret"
    secret = env.cluster.core.read_namespaced_secret(secret_name, env.namespace)
    assert secret.metadata.owner_references[0].uid == job.metadata.uid
    with pytest.raises(ApiException) as denied:
        client.CoreV1Api(worker.api).read_namespaced_secret(secret.metadata.name, env.namespace)
    assert denied.value.status == 403, "the worker writes the pods' Secret but cannot read Secrets"
    service = BlobServiceClient.from_connection_string(devcluster_env["AZURE_STORAGE_CONNECTION_STRING"])
    for container in service.list_containers(name_starts_with=base):
        service.delete_container(container.name)

    # A failing index: the failure message reads the pod's log (pods/log) and the Job is cleaned up.
    failing = _operator(
        env, worker.conn_id, max_failed_indexes=0, annotations={"kwok.airflow-kueue.io/fail-indexes": "1"}
    )
    with pytest.raises(AirflowException) as err:
        failing.execute({"ti": _ti("fails")})
    assert "--- index 1, last log lines ---" in str(err.value), str(err.value)

    # A deadline already at risk while the Job waits behind a blocker: the worker raises the Job's
    # WorkloadPriorityClass (a label patch) and records the step on the Job; it cannot read the cluster-scoped
    # class (403), and uses the name as given.
    urgent = env.priority_class("urgent", 1000)
    blocker = env.create_job(indexed_job("blocker", env.local_queue, completions=1, cpu="64", hold=True))
    wait_for("the blocker admitted (all the quota)", lambda: is_true(env.workload(blocker), "Admitted"), 120)

    def release_once_raised() -> None:
        def raised() -> bool:
            return any(j.metadata.labels.get(PRIORITY_LABEL) == urgent for j in env.jobs())

        wait_for("the escalation", raised, timeout=120)
        env.cluster.batch.delete_namespaced_job("blocker", env.namespace, propagation_policy="Background")

    releaser = threading.Thread(target=release_once_raised, daemon=True)
    releaser.start()
    at_risk = _operator(
        env,
        worker.conn_id,
        resources={"requests": {"cpu": "1", "memory": "1Gi"}},  # no room beside the blocker
        deadline=timedelta(seconds=1),
        on_deadline_risk={"raise_priority": urgent},
    )
    result = at_risk.execute({"ti": _ti("deadline"), "dag_run": SimpleNamespace(start_date=None)})
    releaser.join(timeout=10)
    assert [(s["step"], s["detail"]) for s in result["escalations"]] == [("raise_priority", urgent)], result
    raised = [j for j in env.jobs() if j.metadata.labels.get(PRIORITY_LABEL) == urgent]
    assert len(raised) == 1 and "airflow-kueue.io/escalations" in raised[0].metadata.annotations

    # A spill at risk: the worker lists its waiting Job's pods, deletes the Job (only as read), and creates
    # the spill Job in another LocalQueue with its own SAS Secret.
    kueue_env_factory(namespace=env.namespace, local_queue="on-demand", spot=False)
    blocker = env.create_job(indexed_job("blocker-2", env.local_queue, completions=1, cpu="64", hold=True))
    wait_for("the second blocker admitted", lambda: is_true(env.workload(blocker), "Admitted"), 120)
    spilled = _operator(
        env,
        worker.conn_id,
        resources={"requests": {"cpu": "1", "memory": "1Gi"}},
        checkpointing=checkpointing,
        deadline=timedelta(seconds=1),
        on_deadline_risk={"spill_to": "on-demand"},
    ).execute({"ti": _ti("spill"), "dag_run": SimpleNamespace(start_date=None)})
    (step,) = spilled["escalations"]
    assert step["detail"].startswith("moved 4 unfinished shard(s) (0-3)"), step
    assert spilled["completed_indexes"] == "0-3" and spilled["attempts"] == 2, spilled

    batch = client.BatchV1Api(worker.api)
    with pytest.raises(ApiException) as denied:
        batch.list_namespaced_job(other.namespace)
    assert denied.value.status == 403, "no access outside its namespace"
    with pytest.raises(ApiException) as denied:
        client.CustomObjectsApi(worker.api).list_cluster_custom_object(
            "kueue.x-k8s.io", "v1beta2", "clusterqueues"
        )
    assert denied.value.status == 403


def test_the_ui_identity_reads_the_pages_and_cannot_change_anything(
    kueue_env: KueueEnv, identity: Any
) -> None:
    result = _operator(kueue_env, "kubernetes_default").execute({"ti": _ti("ui")})
    ui = identity("ui.yaml", kueue_env.namespace)
    app = TestClient(
        create_app(
            lambda: KueueHook(ui.conn_id),
            lambda: [kueue_env.namespace],
            dependencies=[],
            task_access=[],
            log_access=[],
            queues_access=[],
        )
    )

    jobs = app.get("/api/task", params={"dag_id": "rbac", "task_id": "shards", "run_id": "ui"}).json()["jobs"]
    assert [j["name"] for j in jobs] == [result["job_name"]]
    assert jobs[0]["grid"]["counts"]["done"] == 4
    queues = app.get("/api/queues").json()
    assert any(q["cluster_queue"] == kueue_env.cluster_queue for q in queues["queues"]), queues

    batch = client.BatchV1Api(ui.api)
    for attempt in (
        lambda: batch.create_namespaced_job(kueue_env.namespace, {"metadata": {"name": "x"}, "spec": {}}),
        lambda: batch.delete_namespaced_job(result["job_name"], kueue_env.namespace),
        lambda: batch.patch_namespaced_job(
            result["job_name"], kueue_env.namespace, {"spec": {"parallelism": 1}}
        ),
    ):
        with pytest.raises(ApiException) as denied:
            attempt()
        assert denied.value.status == 403
    assert kueue_env.job(result["job_name"]) is not None
    # The log tail of an index reads its pod's log through the RoleBinding in the team namespace (a KWOK pod
    # has no log: the note says so, not a 403); no pod of any other namespace.
    params = {"dag_id": "rbac", "task_id": "shards", "run_id": "ui", "job": result["job_name"], "index": 2}
    tail = app.get("/api/task/log", params=params).json()
    assert tail["pod"] and "fake pod (KWOK" in tail["log"] and "403" not in tail["log"], tail
    with pytest.raises(ApiException) as denied:
        client.CoreV1Api(ui.api).list_namespaced_pod("kube-system")
    assert denied.value.status == 403
    with pytest.raises(ApiException) as denied:
        client.CoreV1Api(ui.api).list_namespaced_secret(kueue_env.namespace)
    assert denied.value.status == 403
    # Reads are bound per team namespace (issue 38, item 6): nothing in a namespace it is not bound in, and
    # no list across the cluster; the cluster-scoped queue objects stay readable.
    for read in (
        lambda: client.BatchV1Api(ui.api).list_namespaced_job("kube-system"),
        lambda: client.BatchV1Api(ui.api).list_job_for_all_namespaces(),
        lambda: client.CoreV1Api(ui.api).list_namespaced_event("kube-system"),
        lambda: client.CustomObjectsApi(ui.api).list_cluster_custom_object(
            "kueue.x-k8s.io", "v1beta2", "workloads"
        ),
    ):
        with pytest.raises(ApiException) as denied:
            read()
        assert denied.value.status == 403
    client.CustomObjectsApi(ui.api).list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues")


def test_the_sweeper_identity_deletes_finished_jobs_of_its_namespace(
    kueue_env: KueueEnv, identity: Any
) -> None:
    result = _operator(kueue_env, "kubernetes_default").execute({"ti": _ti("sweep")})
    sweeper = identity("job-sweeper.yaml", kueue_env.namespace)

    swept = KueueFinishedJobSweepOperator(
        task_id="sweep",
        kubernetes_conn_id=sweeper.conn_id,
        namespace=kueue_env.namespace,
        older_than=timedelta(0),
    ).execute({})

    assert result["job_name"] in json.dumps(swept)
    assert kueue_env.job(result["job_name"]) is None or kueue_env.job(result["job_name"])["metadata"].get(
        "deletionTimestamp"
    )
    with pytest.raises(ApiException) as denied:
        client.BatchV1Api(sweeper.api).create_namespaced_job(kueue_env.namespace, {"metadata": {"name": "x"}})
    assert denied.value.status == 403


def test_the_queue_admin_identity_applies_declared_queues_and_reaches_no_job(
    kueue_env: KueueEnv, identity: Any, tmp_path: Path
) -> None:
    from airflow_kueue_provider.operators.queue_setup import KueueQueueSetupOperator

    admin = identity("queue-admin.yaml", kueue_env.namespace)
    sid = short_id()
    flavor, cq = f"rf-admin-{sid}", f"cq-admin-{sid}"
    declarations = tmp_path / "queues.yaml"
    quota = {"name": flavor, "resources": [{"name": "cpu", "nominalQuota": "2"}]}
    docs = [
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": flavor}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": cq},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [quota]}],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": f"lq-{sid}", "namespace": kueue_env.namespace},
            "spec": {"clusterQueue": cq},
        },
    ]
    declarations.write_text(yaml.safe_dump_all(docs))
    try:
        apply = KueueQueueSetupOperator(
            task_id="q", declarations=str(declarations), kubernetes_conn_id=admin.conn_id
        )
        assert apply.execute({})["counts"] == {"created": 3}  # type: ignore[arg-type]
        assert apply.execute({})["counts"] == {"unchanged": 3}  # type: ignore[arg-type]
        with pytest.raises(ApiException) as denied:
            client.BatchV1Api(admin.api).list_namespaced_job(kueue_env.namespace)
        assert denied.value.status == 403, "the queue admin reads no Job"
        with pytest.raises(ApiException) as denied:
            client.CustomObjectsApi(admin.api).delete_cluster_custom_object(
                "kueue.x-k8s.io", "v1beta2", "clusterqueues", cq
            )
        assert denied.value.status == 403, "and deletes no queue"
    finally:
        kueue_env.cluster.kueue_delete("localqueues", f"lq-{sid}", kueue_env.namespace)
        kueue_env.cluster.kueue_delete("clusterqueues", cq)
        kueue_env.cluster.kueue_delete("resourceflavors", flavor)


def test_the_multikueue_worker_identity_handles_jobs_and_workloads_and_reads_nothing_else(
    multikueue_workers: list[Cluster], tmp_path: Path
) -> None:
    """deploy/rbac/multikueue-worker.yaml as the bed applies it on worker-1: what the manager's Kueue may do
    there, asked of the apiserver with the identity's own token (the one the manager's kubeconfig holds)."""
    from devcluster.layout import Layout
    from devcluster.multikueue import WORKER_IDENTITY_TOKEN, worker_kubeconfig

    worker = multikueue_workers[0]
    secret = worker.core.read_namespaced_secret(WORKER_IDENTITY_TOKEN, "kueue-system")
    token = base64.b64decode(secret.data["token"]).decode()
    kubeconfig = tmp_path / "multikueue-manager"
    kubeconfig.write_text(worker_kubeconfig(Layout.default().worker(1), token))
    auth = client.AuthorizationV1Api(config.new_client_from_config(config_file=str(kubeconfig)))

    def allowed(verb: str, resource: str, group: str = "", subresource: str = "") -> bool:
        attributes = {"verb": verb, "resource": resource, "group": group, "subresource": subresource}
        review = {"spec": {"resourceAttributes": attributes}}
        return bool(auth.create_self_subject_access_review(review).status.allowed)

    assert allowed("create", "jobs", "batch") and allowed("delete", "jobs", "batch")
    assert allowed("watch", "jobsets", "jobset.x-k8s.io") and allowed("create", "workloads", "kueue.x-k8s.io")
    assert allowed("patch", "workloads", "kueue.x-k8s.io", "status")
    for verb, resource, group in [
        ("list", "pods", ""),
        ("get", "secrets", ""),
        ("update", "jobs", "batch"),
        ("create", "clusterqueues", "kueue.x-k8s.io"),
        ("delete", "namespaces", ""),
    ]:
        assert not allowed(verb, resource, group), f"the MultiKueue identity may {verb} {resource}"


def test_the_worker_identity_runs_a_jobset_task_with_checkpointing_and_reaches_nothing_else(
    kueue_env_factory: Any, identity: Any, devcluster_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    env, other = kueue_env_factory(cpu="8"), kueue_env_factory()
    worker = identity("worker-triggerer.yaml", env.namespace)
    blob = {
        "conn_type": "wasb",
        "extra": {"connection_string": devcluster_env["AZURE_STORAGE_CONNECTION_STRING"]},
    }
    monkeypatch.setenv("AIRFLOW_CONN_RBAC_BLOB", json.dumps(blob))
    base = f"rbac-js-{env.namespace[-6:]}"
    requests = {"requests": {"cpu": "1", "memory": "1Gi"}}
    operator = KueueJobSetOperator(
        task_id="shards",
        namespace=env.namespace,
        queue_name=env.local_queue,
        deferrable=False,
        kubernetes_conn_id=worker.conn_id,
        checkpointing=Checkpointing("rbac_blob", base),
        replicated_jobs=[
            KueueReplicatedJob("coordinator", image="example.invalid/c:1", resources=requests),
            KueueReplicatedJob(
                "workers", image="example.invalid/w:1", completions=4, resources=requests, checkpoint=True
            ),
        ],
    )
    result = operator.execute({"ti": _ti("jobset")})  # type: ignore[arg-type]
    assert [(rj["name"], rj["succeeded"]) for rj in result["replicated_jobs"]] == [
        ("coordinator", 1),
        ("workers", 4),
    ], result
    # The workers' pods were told where to checkpoint, with a SAS Secret the JobSet owns.
    name = result["jobset_name"]
    jobset = env.cluster.custom.get_namespaced_custom_object(
        JOBSET_GROUP, JOBSET_VERSION, env.namespace, JOBSET_PLURAL, name
    )
    secret = env.cluster.core.read_namespaced_secret(secret_name_of(jobset) or "", env.namespace)
    assert secret.metadata.owner_references[0].uid == jobset["metadata"]["uid"]
    (workers_job,) = [j for j in env.jobs() if j.metadata.name == f"{name}-workers-0"]
    env_names = {e.name for e in workers_job.spec.template.spec.containers[0].env}
    assert {
        "AIRFLOW_KUEUE_CHECKPOINT_URL",
        "AIRFLOW_KUEUE_CHECKPOINT_SAS",
        "AIRFLOW_KUEUE_SHARDS",
    } <= env_names
    service = BlobServiceClient.from_connection_string(devcluster_env["AZURE_STORAGE_CONNECTION_STRING"])
    for container in service.list_containers(name_starts_with=base):
        service.delete_container(container.name)

    custom = client.CustomObjectsApi(worker.api)
    with pytest.raises(ApiException) as denied:
        custom.list_namespaced_custom_object(JOBSET_GROUP, JOBSET_VERSION, other.namespace, JOBSET_PLURAL)
    assert denied.value.status == 403, "no JobSet access outside its namespace"
    with pytest.raises(ApiException) as denied:
        custom.patch_namespaced_custom_object(
            JOBSET_GROUP, JOBSET_VERSION, env.namespace, JOBSET_PLURAL, name, {"spec": {"suspend": False}}
        )
    assert denied.value.status == 403, "it cannot unsuspend a JobSet (only Kueue may)"

    # An identity without the jobsets rule (the UI's, read-only): the task fails at once, naming the rule.
    ui = identity("ui.yaml", env.namespace)
    operator.kubernetes_conn_id = ui.conn_id
    with pytest.raises(AirflowException, match=r"apply the jobsets rule of deploy/rbac/worker-trigger"):
        operator.execute({"ti": _ti("jobset-ui")})  # type: ignore[arg-type]


def test_the_optional_forecast_role_lets_the_worker_read_clusterqueues_and_forecast(
    kueue_env_factory: Any,
    identity: Any,
    cluster: Cluster,
    capfd: pytest.CaptureFixture[str],
    devcluster_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """deploy/rbac/worker-forecast.yaml: without it the worker's task runs with one warning and no forecast;
    with it (bound to the same ServiceAccount) the task's result carries the forecast; nothing else is
    granted (no write to a ClusterQueue)."""
    env = kueue_env_factory()
    worker = identity("worker-triggerer.yaml", env.namespace)
    blob = {
        "conn_type": "wasb",
        "extra": {"connection_string": devcluster_env["AZURE_STORAGE_CONNECTION_STRING"]},
    }
    monkeypatch.setenv("AIRFLOW_CONN_RBAC_BLOB", json.dumps(blob))
    base = f"rbac-fc-{env.namespace[-6:]}"
    stated = {"expected_shard_duration": 1.0, "checkpointing": Checkpointing("rbac_blob", base)}
    plain = _operator(env, worker.conn_id, **stated).execute({"ti": _ti("no-forecast")})
    logged = "".join(capfd.readouterr())
    assert "forecast" not in plain and "forecast: left out (reading the queues: 403" in logged, logged[-3000:]

    suffix = short_id()
    rbac = client.RbacAuthorizationV1Api(cluster.api)
    docs = list(yaml.safe_load_all((RBAC / "worker-forecast.yaml").read_text()))
    role, binding = (
        (d for d in docs if d["kind"] == "ClusterRole"),
        (d for d in docs if d["kind"] != "ClusterRole"),
    )
    (role_doc,), (binding_doc,) = list(role), list(binding)
    role_doc["metadata"]["name"] = binding_doc["roleRef"]["name"] = f"airflow-kueue-worker-forecast-{suffix}"
    binding_doc["metadata"]["name"] = f"airflow-kueue-worker-forecast-{suffix}"
    binding_doc["subjects"][0].update(name=worker.account, namespace=worker.account_namespace)
    rbac.create_cluster_role(role_doc)
    rbac.create_cluster_role_binding(binding_doc)
    try:
        wait_for(
            "the ClusterQueue read allowed",
            lambda: (
                _allowed(worker, "list", "clusterqueues") and not _allowed(worker, "update", "clusterqueues")
            ),
            30,
        )
        forecast = _operator(env, worker.conn_id, **stated).execute({"ti": _ti("forecast")})
        # The first run's fake pods (no SDK) taught the shard history from their pod times: one night.
        assert forecast["forecast"]["finish"] and forecast["forecast"]["nights"] == 1, forecast["forecast"]
    finally:
        rbac.delete_cluster_role_binding(binding_doc["metadata"]["name"])
        rbac.delete_cluster_role(role_doc["metadata"]["name"])
        service = BlobServiceClient.from_connection_string(devcluster_env["AZURE_STORAGE_CONNECTION_STRING"])
        for container in service.list_containers(name_starts_with=base):
            service.delete_container(container.name)


def _allowed(who: Identity, verb: str, resource: str) -> bool:
    review = {"spec": {"resourceAttributes": {"group": "kueue.x-k8s.io", "resource": resource, "verb": verb}}}
    auth = client.AuthorizationV1Api(who.api)
    return bool(auth.create_self_subject_access_review(review).status.allowed)
