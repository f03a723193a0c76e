"""deploy/policy/ on the real apiserver: what a second tenant with kubectl rights in a team namespace can no
longer do around the operator, while Kueue, the Job and JobSet controllers and the provider still work.

Each test applies the ValidatingAdmissionPolicies of ``deploy/policy`` (renamed per test) with their
bindings narrowed to its own namespace (the shipped label selector plus the namespace's name), with the bed's
controller identity in the policies' site variables (every controller of the bed talks as
``devcluster-admin``), and removes the policies at teardown. The tenant is a ServiceAccount of
that namespace with an ordinary Role (create Jobs, JobSets, pods and Secrets, patch Jobs and JobSets, no
Secret reads), talking through a kubeconfig that carries only its token.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from copy import deepcopy
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from azure.storage.blob import BlobServiceClient
from kubernetes import client
from kubernetes.client.rest import ApiException

from airflow_kueue_provider.kueue.jobset import JOBSET_GROUP, JOBSET_PLURAL, JOBSET_VERSION
from airflow_kueue_provider.operators.checkpointing import Checkpointing
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.operators.jobset import KueueJobSetOperator, KueueReplicatedJob

from ..cluster import HOLD, Cluster, KueueEnv, indexed_job, is_true, short_id, wait_for
from ..tenant import Tenant
from .test_rbac import identity  # noqa: F401 - the fixture

POLICY = Path(__file__).resolve().parents[3] / "deploy" / "policy"
POLICIES = (
    "only-kueue-unsuspends.yaml",
    "checkpoint-secret-binding.yaml",
    "tenant-pod-guard.yaml",
    "jobset-children.yaml",
)
BED_SITE = {
    name: "['devcluster-admin']"
    for name in ("kueueUsers", "jobControllerUsers", "jobsetControllerUsers", "checkpointSecretWriters")
}
"""The bed's Kueue, job controller, JobSet controller and test code share the admin client certificate."""
GUARD_LABEL = "airflow-kueue.io/tenant-guard"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
TENANT_RULES = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list", "delete"]},
    {"apiGroups": [""], "resources": ["pods/ephemeralcontainers"], "verbs": ["update", "patch"]},
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "get", "list", "patch", "update"]},
    {"apiGroups": [JOBSET_GROUP], "resources": ["jobsets"], "verbs": ["create", "get", "list", "patch"]},
]


class PolicyTenant(Tenant):
    """A second team's ServiceAccount in ``namespace`` with an ordinary Role (``TENANT_RULES``)."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        super().__init__(cluster, namespace, TENANT_RULES)

    def create_pod(self, body: dict[str, Any], dry_run: bool = False) -> Any:
        return self.core.create_namespaced_pod(self.namespace, body, dry_run="All" if dry_run else None)

    def create_job(self, body: dict[str, Any], dry_run: bool = False) -> Any:
        return self.batch.create_namespaced_job(self.namespace, body, dry_run="All" if dry_run else None)

    def create_jobset(self, body: dict[str, Any], dry_run: bool = False) -> Any:
        return self.custom.create_namespaced_custom_object(
            JOBSET_GROUP,
            JOBSET_VERSION,
            self.namespace,
            JOBSET_PLURAL,
            body,
            dry_run="All" if dry_run else None,
        )


class Guard:
    """The policies of deploy/policy in force for one namespace (and nowhere else), with the bed's
    identities in their site variables."""

    def __init__(self, cluster: Cluster, namespace: str, site: dict[str, str] | None = None) -> None:
        self.admission = client.AdmissionregistrationV1Api(cluster.api)
        site = {**BED_SITE, **(site or {})}
        suffix = short_id()
        cluster.core.patch_namespace(namespace, {"metadata": {"labels": {GUARD_LABEL: "enforced"}}})
        self.made: list[tuple[str, str]] = []
        for file in POLICIES:
            policy, binding = yaml.safe_load_all((POLICY / file).read_text())
            policy["metadata"]["name"] += f"-{suffix}"
            for variable in policy["spec"]["variables"]:
                variable["expression"] = site.get(variable["name"], variable["expression"])
            binding["metadata"]["name"] += f"-{suffix}"
            spec = binding["spec"]
            spec["policyName"] = policy["metadata"]["name"]
            labels = spec["matchResources"]["namespaceSelector"]["matchLabels"]
            assert labels == {GUARD_LABEL: "enforced"}, labels
            labels["kubernetes.io/metadata.name"] = namespace  # this test's namespace only
            self.admission.create_validating_admission_policy(policy)
            self.made.append(("policy", policy["metadata"]["name"]))
            self.admission.create_validating_admission_policy_binding(binding)
            self.made.append(("binding", binding["metadata"]["name"]))

    def delete(self) -> None:
        for kind, name in reversed(self.made):
            delete = (
                self.admission.delete_validating_admission_policy_binding
                if kind == "binding"
                else self.admission.delete_validating_admission_policy
            )
            try:
                delete(name)
            except ApiException as exc:
                if exc.status != 404:
                    raise


@pytest.fixture
def guard(cluster: Cluster) -> Iterator[Callable[[str], Guard]]:
    made: list[Guard] = []

    def make(namespace: str, site: dict[str, str] | None = None) -> Guard:
        made.append(Guard(cluster, namespace, site))
        return made[-1]

    yield make
    for item in made:
        item.delete()


@pytest.fixture
def blob_conn(devcluster_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    conn = {
        "conn_type": "wasb",
        "extra": {"connection_string": devcluster_env["AZURE_STORAGE_CONNECTION_STRING"]},
    }
    monkeypatch.setenv("AIRFLOW_CONN_POLICY_BLOB", json.dumps(conn))
    base = f"policy-{short_id()}"
    yield base
    service = BlobServiceClient.from_connection_string(devcluster_env["AZURE_STORAGE_CONNECTION_STRING"])
    for container in service.list_containers(name_starts_with=base):
        service.delete_container(container.name)


def _ti(run_id: str) -> SimpleNamespace:
    return SimpleNamespace(dag_id="policy", task_id="shards", run_id=run_id, try_number=1, map_index=-1)


def pod(name: str, **spec: Any) -> dict[str, Any]:
    container = {"name": "c", "image": "example.invalid/x:1", **spec.pop("container", {})}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, **spec.pop("metadata", {})},
        "spec": {"restartPolicy": "Never", "containers": [container], **spec},
    }


def _without_name(meta: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in meta.items() if k != "name"}


def job_of(name: str, pod_body: dict[str, Any], labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"template": {"metadata": _without_name(pod_body["metadata"]), "spec": pod_body["spec"]}},
    }


def jobset_of(name: str, pod_body: dict[str, Any], labels: dict[str, str] | None = None) -> dict[str, Any]:
    template = job_of("x", pod_body)["spec"]
    return {
        "apiVersion": f"{JOBSET_GROUP}/{JOBSET_VERSION}",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": template}}]},
    }


def bind(env: KueueEnv, name: str) -> None:
    """Bind pod ``name`` to a fake node as the scheduler would, unless the scheduler got there first."""
    core = env.cluster.core
    if core.read_namespaced_pod(name, env.namespace).spec.node_name:
        return
    (node, *_) = core.list_node(label_selector="type=kwok").items
    target = {"metadata": {"name": name}, "target": {"kind": "Node", "name": node.metadata.name}}
    try:  # the client cannot read the Status the binding subresource answers with: take the raw reply
        core.create_namespaced_pod_binding(name, env.namespace, target, _preload_content=False)
    except ApiException as e:
        if e.status != 409:  # 409: the scheduler bound it meanwhile
            raise
    assert core.read_namespaced_pod(name, env.namespace).spec.node_name


def refused(call: Callable[[], Any], *fields: str) -> str:
    """``call`` is refused by one of the policies (403), with a message that names one of ``fields`` (where
    two policies refuse the object, the apiserver reports one of them)."""
    with pytest.raises(ApiException) as denied:
        call()
    message = str(json.loads(denied.value.body).get("message"))
    assert denied.value.status == 403, message
    assert "ValidatingAdmissionPolicy" in message and any(f in message for f in fields), message
    return message


def in_force(call: Callable[[], Any]) -> bool:
    """True once ``call`` (a dry run the policies refuse) is refused: the apiserver has loaded them."""
    try:
        call()
    except ApiException as exc:
        return exc.status == 403 and "ValidatingAdmissionPolicy" in str(exc.body)
    return False


def test_a_pod_of_another_job_cannot_read_the_victims_checkpoint_secret(
    kueue_env: KueueEnv, guard: Any, blob_conn: str, tmp_path: Path
) -> None:
    env = kueue_env
    tenant = PolicyTenant(env.cluster, env.namespace)
    thief = pod("thief", volumes=[{"name": "sas", "secret": {"secretName": "victim-checkpoint"}}])
    tenant.create_pod(thief, dry_run=True)  # without the policy, any pod may mount any Job's Secret

    guard(env.namespace)
    wait_for("the policies in force", lambda: in_force(lambda: tenant.create_pod(thief, dry_run=True)), 60)

    # The victim: a provider Job with checkpointing runs under the policies (the worker writes the Secret,
    # the job controller's pods read their own Job's Secret).
    victim = KueueIndexedJobOperator(
        task_id="shards",
        namespace=env.namespace,
        queue_name=env.local_queue,
        image="example.invalid/shard:1",
        completions=4,
        backoff_limit_per_index=0,
        deferrable=False,
        kubernetes_conn_id="kubernetes_default",
        checkpointing=Checkpointing("policy_blob", blob_conn),
    )
    result = victim.execute({"ti": _ti("victim")})  # type: ignore[arg-type]
    assert result["completed_indexes"] == "0-3", result
    job = env.cluster.batch.read_namespaced_job(result["job_name"], env.namespace)
    (sas,) = [
        e for e in job.spec.template.spec.containers[0].env if e.value_from and e.value_from.secret_key_ref
    ]
    secret = sas.value_from.secret_key_ref.name
    assert env.cluster.core.read_namespaced_secret(secret, env.namespace).metadata.owner_references
    assert env.pods(job.metadata.name), "the job controller created the victim's pods"

    mounts = [{"name": "sas", "mountPath": "/sas"}]
    by_volume = pod(
        "thief-1",
        volumes=[{"name": "sas", "secret": {"secretName": secret}}],
        container={"volumeMounts": mounts},
    )
    refused(lambda: tenant.create_pod(by_volume), "spec.volumes[].secret.secretName")
    key_ref = {"name": "SAS", "valueFrom": {"secretKeyRef": {"name": secret, "key": "sas-token"}}}
    by_env = pod("thief-2", container={"env": [key_ref]})
    refused(lambda: tenant.create_pod(by_env), "env[].valueFrom.secretKeyRef.name")
    # A pod that claims to be the victim Job's (its controller ownerReference, its labels) is the tenant's.
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": job.metadata.name,
        "uid": job.metadata.uid,
        "controller": True,
    }
    forged = deepcopy(by_env)
    forged["metadata"].update(
        ownerReferences=[owner], labels={"batch.kubernetes.io/job-name": job.metadata.name}
    )
    forged["metadata"]["name"] = "thief-3"
    # (tenant-pod-guard refuses it too: only the job controller makes a pod with a Job's identity)
    refused(lambda: tenant.create_pod(forged), "env[].valueFrom.secretKeyRef.name", "Job's identity")
    # Through a Job of its own: envFrom, a projected volume, a forged JobSet label.
    from_env = pod("x", container={"envFrom": [{"secretRef": {"name": secret}}]})
    refused(lambda: tenant.create_job(job_of("thief-4", from_env)), "envFrom[].secretRef.name")
    projected = pod("x", volumes=[{"name": "p", "projected": {"sources": [{"secret": {"name": secret}}]}}])
    labels = {"jobset.sigs.k8s.io/jobset-name": job.metadata.name}
    refused(  # jobset-children refuses the forged label too
        lambda: tenant.create_job(job_of("thief-5", projected, labels)),
        "projected.sources[].secret.name",
        "only the JobSet controller",
    )
    refused(lambda: tenant.create_jobset(jobset_of("thief-6", by_env)), "env[].valueFrom.secretKeyRef.name")
    # A Job named so that the victim's Secret starts with its own name plus the marker is still not the owner.
    namesake = job_of(f"{job.metadata.name}-checkpoint", by_env)
    refused(lambda: tenant.create_job(namesake, dry_run=True), "env[].valueFrom.secretKeyRef.name")
    # Nor a JobSet named like the victim's Job: a name binds only within its kind (issue 38, item 1).
    other_kind = jobset_of(job.metadata.name, by_env)
    refused(lambda: tenant.create_jobset(other_kind, dry_run=True), "env[].valueFrom.secretKeyRef.name")
    # Nor can it plant the Secret of a Job before (or after) the operator makes it.
    planted = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"{job.metadata.name}-checkpoint-2", "ownerReferences": [owner]},
        "stringData": {"sas-token": "sv=attacker"},
    }
    refused(lambda: tenant.core.create_namespaced_secret(env.namespace, planted), "metadata.name")

    # Nor through an ephemeral container added to a pod of its own (kubectl debug).
    # The pod is bound first, as a running pod is: its nodeName (the scheduler's) does not refuse the debug
    # container, the Secret reference does; a debug container without one is added.
    debug = {"name": "debug", "image": "example.invalid/x:1", "env": [key_ref]}
    tenant.create_pod(pod("plain"))
    bind(env, "plain")
    refused(
        lambda: tenant.core.patch_namespaced_pod_ephemeralcontainers(
            "plain", env.namespace, {"spec": {"ephemeralContainers": [debug]}}
        ),
        "env[].valueFrom.secretKeyRef.name",
    )
    harmless = {"name": "debug", "image": "example.invalid/x:1"}
    tenant.core.patch_namespaced_pod_ephemeralcontainers(
        "plain", env.namespace, {"spec": {"ephemeralContainers": [harmless]}}
    )

    # Its own Secrets and its own checkpoint-named Secret reference stay open to it.
    mine = pod("mine", volumes=[{"name": "s", "secret": {"secretName": "mine-config"}}])
    tenant.create_pod(mine, dry_run=True)
    own = pod(
        "x",
        container={
            "env": [{**key_ref, "valueFrom": {"secretKeyRef": {"name": "own-checkpoint", "key": "k"}}}]
        },
    )
    tenant.create_job(job_of("own", own), dry_run=True)


def _jobset(name: str, queue: str, cpu: str) -> dict[str, Any]:
    body = pod("x", container={"resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}})
    return jobset_of(name, body, labels={QUEUE_LABEL: queue})


def test_only_kueue_unsuspends_a_queued_job_or_jobset_and_kueue_still_runs_them(
    kueue_env_factory: Any, guard: Any, blob_conn: str, tmp_path: Path
) -> None:
    env = kueue_env_factory(cpu="8")
    tenant = PolicyTenant(env.cluster, env.namespace)
    # Queued for good: each asks for more CPU than the ClusterQueue has.
    queued = env.create_job(indexed_job("queued", env.local_queue, completions=1, cpu="16"))
    env.cluster.custom.create_namespaced_custom_object(
        JOBSET_GROUP,
        JOBSET_VERSION,
        env.namespace,
        JOBSET_PLURAL,
        _jobset("queued-set", env.local_queue, "16"),
    )
    wait_for("the Job's Workload", lambda: env.workload(queued), 60)
    assert env.job("queued")["spec"]["suspend"] is True
    start = {"spec": {"suspend": False}}
    unqueue = {"metadata": {"labels": {QUEUE_LABEL: None}}}

    def unsuspend_job(dry_run: bool = False) -> Any:
        return tenant.batch.patch_namespaced_job(
            "queued", env.namespace, start, dry_run="All" if dry_run else None
        )

    def unsuspend_jobset(dry_run: bool = False) -> Any:
        return tenant.custom.patch_namespaced_custom_object(
            JOBSET_GROUP,
            JOBSET_VERSION,
            env.namespace,
            JOBSET_PLURAL,
            "queued-set",
            start,
            dry_run="All" if dry_run else None,
        )

    unsuspend_job(dry_run=True)  # without the policy, the tenant starts a queued Job outside quota
    unsuspend_jobset(dry_run=True)

    guard(env.namespace)
    wait_for("the policies in force", lambda: in_force(lambda: unsuspend_job(dry_run=True)), 60)
    wait_for("the policies in force (JobSet)", lambda: in_force(lambda: unsuspend_jobset(dry_run=True)), 60)
    message = refused(unsuspend_job, "spec.suspend")
    assert "system:serviceaccount:" in message and "tenant-b" in message, message
    refused(unsuspend_jobset, "spec.suspend")
    refused(
        lambda: tenant.batch.patch_namespaced_job("queued", env.namespace, unqueue),
        "metadata.labels[kueue.x-k8s.io/queue-name]",
    )
    refused(
        lambda: tenant.custom.patch_namespaced_custom_object(
            JOBSET_GROUP, JOBSET_VERSION, env.namespace, JOBSET_PLURAL, "queued-set", unqueue
        ),
        "metadata.labels[kueue.x-k8s.io/queue-name]",
    )
    # Other changes, and suspending, stay open to it.
    tenant.batch.patch_namespaced_job("queued", env.namespace, {"metadata": {"labels": {"team": "b"}}})
    tenant.batch.patch_namespaced_job("queued", env.namespace, {"spec": {"suspend": True}}, dry_run="All")
    assert env.job("queued")["spec"]["suspend"] is True
    # A tenant's own queued Job is created suspended (Kueue's webhook) and Kueue admits it, under the policy.
    own = indexed_job("own", env.local_queue, completions=2)
    tenant.create_job(own)
    wait_for("the tenant's Job admitted and finished", lambda: is_true(env.job("own"), "Complete"), 180)

    # Kueue still admits and runs the provider's Job and JobSet (with checkpointing: the JobSet
    # controller's child Jobs and the job controller's pods read the JobSet's Secret).
    job_result = KueueIndexedJobOperator(
        task_id="shards",
        namespace=env.namespace,
        queue_name=env.local_queue,
        image="example.invalid/shard:1",
        completions=3,
        backoff_limit_per_index=0,
        deferrable=False,
        kubernetes_conn_id="kubernetes_default",
    ).execute({"ti": _ti("job")})  # type: ignore[arg-type]
    assert job_result["completed_indexes"] == "0-2", job_result
    requests = {"requests": {"cpu": "1", "memory": "1Gi"}}
    jobset_result = KueueJobSetOperator(
        task_id="shards",
        namespace=env.namespace,
        queue_name=env.local_queue,
        deferrable=False,
        kubernetes_conn_id="kubernetes_default",
        checkpointing=Checkpointing("policy_blob", blob_conn),
        replicated_jobs=[
            KueueReplicatedJob("coordinator", image="example.invalid/c:1", resources=requests),
            KueueReplicatedJob(
                "workers", image="example.invalid/w:1", completions=3, resources=requests, checkpoint=True
            ),
        ],
    ).execute({"ti": _ti("jobset")})  # type: ignore[arg-type]
    assert [(rj["name"], rj["succeeded"]) for rj in jobset_result["replicated_jobs"]] == [
        ("coordinator", 1),
        ("workers", 3),
    ], jobset_result
    # A Job named like that JobSet reads none of its Secret (issue 38, item 1): the name a child Job's pod
    # template shows is the JobSet's kind's form, which no Job owns.
    jobset_name = jobset_result["jobset_name"]
    (child,) = env.cluster.batch.list_namespaced_job(
        env.namespace,
        label_selector=f"jobset.sigs.k8s.io/jobset-name={jobset_name},"
        + "jobset.sigs.k8s.io/replicatedjob-name=workers",
    ).items
    (sas,) = [
        e for e in child.spec.template.spec.containers[0].env if e.value_from and e.value_from.secret_key_ref
    ]
    key_ref = {
        "name": "SAS",
        "valueFrom": {"secretKeyRef": {"name": sas.value_from.secret_key_ref.name, "key": "k"}},
    }
    namesake = job_of(jobset_name, pod("x", container={"env": [key_ref]}))
    refused(lambda: tenant.create_job(namesake, dry_run=True), "env[].valueFrom.secretKeyRef.name")
    assert env.job("queued")["spec"]["suspend"] is True, "the tenant's patch never took"


APPARMOR = "container.apparmor.security.beta.kubernetes.io/c"
TOKEN = {"serviceAccountToken": {"path": "t", "audience": "vault"}}
GUARDED_FIELDS: list[tuple[str, dict[str, Any]]] = [
    ("spec.nodeName", {"nodeName": "kwok-node-0"}),
    ("spec.priorityClassName", {"priorityClassName": "system-node-critical"}),
    ("appArmorProfile.type", {"securityContext": {"appArmorProfile": {"type": "Unconfined"}}}),
    ("appArmorProfile.type", {"container": {"securityContext": {"appArmorProfile": {"type": "Unconfined"}}}}),
    ("appArmorProfile.type", {"metadata": {"annotations": {APPARMOR: "unconfined"}}}),
    ("seLinuxOptions.type", {"securityContext": {"seLinuxOptions": {"type": "spc_t"}}}),
    ("seLinuxOptions.type", {"container": {"securityContext": {"seLinuxOptions": {"type": "spc_t"}}}}),
    (
        "spec.securityContext.sysctls",
        {"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}},
    ),
    ("serviceAccountToken", {"volumes": [{"name": "tok", "projected": {"sources": [TOKEN]}}]}),
    ("serviceAccountToken", {"volumes": [{"name": "kube-api-access-x", "projected": {"sources": [TOKEN]}}]}),
]


def test_the_tenant_pod_guard_refuses_each_field_naming_it(
    kueue_env: KueueEnv, guard: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    env = kueue_env
    tenant = PolicyTenant(env.cluster, env.namespace)
    node = client.NodeV1Api(env.cluster.api)
    runtime = node.create_runtime_class(
        {"metadata": {"name": f"kata-{short_id()}"}, "handler": "kata"}
    ).metadata.name
    request.addfinalizer(lambda: node.delete_runtime_class(runtime))
    fields = [*GUARDED_FIELDS, ("spec.runtimeClassName", {"runtimeClassName": runtime})]
    bodies = [(field, pod(f"p{n}", **deepcopy(spec))) for n, (field, spec) in enumerate(fields)]
    for _, body in bodies:  # without the policy, the apiserver takes every one of them
        tenant.create_pod(body, dry_run=True)

    guard(env.namespace)
    wait_for(
        "the policies in force", lambda: in_force(lambda: tenant.create_pod(bodies[0][1], dry_run=True)), 60
    )
    for field, body in bodies:
        refused(lambda body=body: tenant.create_pod(body), field)
        refused(
            lambda body=body: tenant.create_job(job_of(f"j-{body['metadata']['name']}", body), dry_run=True),
            field,
        )
        refused(
            lambda body=body: tenant.create_jobset(
                jobset_of(f"s-{body['metadata']['name']}", body), dry_run=True
            ),
            field,
        )

    # An ordinary pod passes: the default token volume (kube-api-access-*), safe sysctls, RuntimeDefault.
    ordinary = pod(
        "ordinary",
        priorityClassName="",
        securityContext={
            "sysctls": [{"name": "net.ipv4.ip_local_port_range", "value": "1024 65000"}],
            "appArmorProfile": {"type": "RuntimeDefault"},
        },
    )
    del ordinary["spec"]["priorityClassName"]
    created = tenant.create_pod(ordinary, dry_run=True)
    assert any(v.name.startswith("kube-api-access-") for v in created.spec.volumes), "the token is injected"
    tenant.create_job(job_of("ordinary", ordinary), dry_run=True)


def test_only_the_jobset_controller_makes_a_jobsets_jobs(kueue_env: KueueEnv, guard: Any) -> None:
    """Issue 38, item 2: a second team's Job that copies a real child Job's labels, annotations and controller
    ownerReference (uid and all) is refused, and so is adding them to a Job of its own; the JobSet
    controller still makes the children of a JobSet created under the policy."""
    env = kueue_env
    tenant = PolicyTenant(env.cluster, env.namespace)
    custom = env.cluster.custom

    def create_jobset(name: str) -> None:
        body = _jobset(name, env.local_queue, "1")
        body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["annotations"] = HOLD
        custom.create_namespaced_custom_object(
            JOBSET_GROUP, JOBSET_VERSION, env.namespace, JOBSET_PLURAL, body
        )

    def child_of(name: str) -> Any:
        return wait_for(f"{name}'s Job", lambda: env.job(f"{name}-w-0"), 120)

    create_jobset("victim")
    child = child_of("victim")
    meta = child["metadata"]
    owner = [
        {k: r[k] for k in ("apiVersion", "kind", "name", "uid")} | {"controller": True}
        for r in meta["ownerReferences"]
        if r["kind"] == "JobSet"
    ]
    copied = {"labels": meta["labels"], "annotations": meta.get("annotations") or {}}

    def forged(name: str, **metadata: Any) -> dict[str, Any]:
        body = job_of(name, pod("x"))
        body["metadata"].update(metadata)
        body["spec"]["suspend"] = True
        return body

    impostors = [
        forged("victim-w-x", **copied, ownerReferences=owner),
        forged("labels-only", labels={"jobset.sigs.k8s.io/jobset-name": "victim"}),
        forged("owner-only", ownerReferences=owner),
    ]
    for body in impostors:  # without the policy, the apiserver takes every one of them
        tenant.create_job(body, dry_run=True)
    tenant.create_job(forged("own"))
    adopt = {"metadata": {"labels": {"jobset.sigs.k8s.io/jobset-name": "victim"}}}
    tenant.batch.patch_namespaced_job("own", env.namespace, adopt, dry_run="All")

    guard(env.namespace)
    wait_for(
        "the policies in force", lambda: in_force(lambda: tenant.create_job(impostors[0], dry_run=True)), 60
    )
    for body in impostors:
        message = refused(lambda body=body: tenant.create_job(body), "metadata")
        assert "only the JobSet controller" in message and "tenant-b" in message, message
    refused(lambda: tenant.batch.patch_namespaced_job("own", env.namespace, adopt), "metadata")
    # Its own Jobs and labels stay open to it.
    tenant.batch.patch_namespaced_job("own", env.namespace, {"metadata": {"labels": {"team": "b"}}})
    tenant.create_job(forged("plain", labels={"team": "b"}), dry_run=True)
    # The JobSet controller (the bed's admin identity) still makes a new JobSet's Jobs.
    create_jobset("after")
    assert child_of("after")["metadata"]["ownerReferences"][0]["kind"] == "JobSet"


def test_the_worker_writes_only_checkpoint_secrets_and_mints_no_serviceaccount_token(
    kueue_env: KueueEnv,
    guard: Any,
    identity: Any,  # noqa: F811 - the fixture
) -> None:
    """Issue 38, item 6: the worker's Role may create Secrets in a team namespace (its pods' SAS), and a
    Secret of type kubernetes.io/service-account-token naming any ServiceAccount there would get a token that
    never expires. With checkpoint-secret-binding the shipped worker identity writes checkpoint Secrets
    (Opaque) and nothing else."""
    env = kueue_env
    worker = identity("worker-triggerer.yaml", env.namespace)
    secrets = client.CoreV1Api(worker.api)
    token = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/service-account-token",
        "metadata": {"name": "minted", "annotations": {"kubernetes.io/service-account.name": "default"}},
    }
    config = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "config"}, "stringData": {"k": "v"}}

    def create(body: dict[str, Any], dry_run: bool = True) -> Any:
        return secrets.create_namespaced_secret(env.namespace, body, dry_run="All" if dry_run else None)

    create(token)  # without the policy, the worker's Role lets it mint a token for any account here
    user = f"system:serviceaccount:{worker.account_namespace}:{worker.account}"
    guard(env.namespace, {"checkpointSecretWriters": f"['{user}']"})
    wait_for("the policies in force", lambda: in_force(lambda: create(token)), 60)
    message = refused(lambda: create(token, dry_run=False), "type:")
    assert "kubernetes.io/service-account-token" in message and "writes only checkpoint Secrets" in message
    refused(lambda: create(config, dry_run=False), "type:")
    # Its own kind of Secret still goes through: a checkpoint Secret owned by the Job it is named after.
    job = env.create_job(indexed_job("shards", env.local_queue, completions=1))
    checkpoint = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": "shards-checkpoint-0123456789abcdef",
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": "shards", "uid": job["metadata"]["uid"]}
            ],
        },
        "stringData": {"sas-token": "sv=x"},
    }
    create(checkpoint, dry_run=False)
