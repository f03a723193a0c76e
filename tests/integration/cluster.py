"""Test-side access to the local cluster: clients, isolated Kueue queues per test, and small waits.

Every test gets its own namespace and its own ResourceFlavor / ClusterQueue / LocalQueue names, so tests can
run against one long-lived cluster without seeing each other's Jobs or quota.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client
from kubernetes.client.rest import ApiException

from devcluster.manifests import HOLD_ANNOTATION

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
SPOT_TOLERATION = {
    "key": "kubernetes.azure.com/scalesetpriority",
    "operator": "Equal",
    "value": "spot",
    "effect": "NoSchedule",
}
HOLD = {HOLD_ANNOTATION: "true"}  # pod-template annotation: fake pods stay Running until released
T = TypeVar("T")


def short_id() -> str:
    return uuid.uuid4().hex[:6]


def wait_for(
    what: str,
    fn: Callable[[], T | None],
    timeout: float = 60,
    interval: float = 0.25,
    explain: Callable[[], object] | None = None,
) -> T:
    """Poll ``fn`` until it returns something truthy; fail with ``what`` after ``timeout`` seconds (and with
    what ``explain`` says then, when given: the state the wait was for, not only ``fn``'s last value)."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    state = f"; state: {explain()!r}" if explain is not None else ""
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last value: {last!r}{state})")


def condition(obj: dict[str, Any] | None, ctype: str) -> dict[str, Any] | None:
    """The condition of type ``ctype`` (looked up by type, never by position)."""
    for cond in (obj or {}).get("status", {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return dict(cond)
    return None


def is_true(obj: dict[str, Any] | None, ctype: str) -> bool:
    cond = condition(obj, ctype)
    return bool(cond and cond.get("status") == "True")


@dataclass
class Cluster:
    """Thin clients over the admin kubeconfig."""

    api: client.ApiClient

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def batch(self) -> client.BatchV1Api:
        return client.BatchV1Api(self.api)

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    def namespace_settled(self, name: str) -> bool:
        """The namespace is there and not terminating, or not there at all (an earlier delete is done)."""
        try:
            return self.core.read_namespace(name).metadata.deletion_timestamp is None
        except ApiException as exc:
            if exc.status == 404:
                return True
            raise

    def get_raw(self, path: str) -> dict[str, Any]:
        resp = self.api.call_api(
            path,
            "GET",
            auth_settings=["BearerToken"],
            _preload_content=False,
            header_params={"Accept": "application/json"},
        )
        raw = resp[0] if isinstance(resp, tuple) else resp
        return dict(json.loads(raw.data))

    def get_text(self, path: str) -> str:
        """A non-JSON endpoint, e.g. ``/metrics``."""
        resp = self.api.call_api(path, "GET", auth_settings=["BearerToken"], _preload_content=False)
        raw = resp[0] if isinstance(resp, tuple) else resp
        return str(raw.data.decode())

    def kueue_create(self, plural: str, body: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        body = {"apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}", **body}
        if namespace:
            return self.custom.create_namespaced_custom_object(
                KUEUE_GROUP, KUEUE_VERSION, namespace, plural, body
            )
        return self.custom.create_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, plural, body)

    def kueue_delete(self, plural: str, name: str, namespace: str | None = None) -> None:
        try:
            if namespace:
                self.custom.delete_namespaced_custom_object(
                    KUEUE_GROUP, KUEUE_VERSION, namespace, plural, name
                )
            else:
                self.custom.delete_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, plural, name)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def kueue_get(self, plural: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        if namespace:
            return self.custom.get_namespaced_custom_object(
                KUEUE_GROUP, KUEUE_VERSION, namespace, plural, name
            )
        return self.custom.get_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, plural, name)

    def job(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self.api.sanitize_for_serialization(self.batch.read_namespaced_job(name, namespace))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def workload_for_job(self, namespace: str, job_uid: str) -> dict[str, Any] | None:
        """The Job's Workload, found by the ``kueue.x-k8s.io/job-uid`` label."""
        items = self.custom.list_namespaced_custom_object(
            KUEUE_GROUP,
            KUEUE_VERSION,
            namespace,
            "workloads",
            label_selector=f"kueue.x-k8s.io/job-uid={job_uid}",
        )["items"]
        return items[0] if items else None

    def pods_of(self, namespace: str, job_name: str) -> list[dict[str, Any]]:
        pods = self.core.list_namespaced_pod(
            namespace, label_selector=f"batch.kubernetes.io/job-name={job_name}"
        )
        return [self.api.sanitize_for_serialization(p) for p in pods.items]

    def release_pods(self, namespace: str, job_name: str | None = None) -> int:
        """Let every held pod (of one Job, or of the namespace) finish; returns how many were released.

        A pod created later from a held template is held too: call again, or ``release_until_finished``.
        """
        selector = f"batch.kubernetes.io/job-name={job_name}" if job_name else None
        released = 0
        for pod in self.core.list_namespaced_pod(namespace, label_selector=selector).items:
            if (pod.metadata.annotations or {}).get(
                HOLD_ANNOTATION
            ) != "true" or pod.metadata.deletion_timestamp:
                continue
            try:
                self.core.patch_namespaced_pod(
                    pod.metadata.name, namespace, {"metadata": {"annotations": {HOLD_ANNOTATION: "released"}}}
                )
                released += 1
            except ApiException as exc:
                if exc.status != 404:
                    raise
        return released

    def release_until_finished(self, namespace: str, job_name: str, timeout: float = 180) -> dict[str, Any]:
        """Release the Job's held pods, wave after wave, until the Job is Complete or Failed."""

        def finished() -> dict[str, Any] | None:
            self.release_pods(namespace, job_name)
            job = self.job(namespace, job_name)
            return job if job and (is_true(job, "Complete") or is_true(job, "Failed")) else None

        return wait_for(f"Job {namespace}/{job_name} finished", finished, timeout=timeout, interval=0.5)


@dataclass
class KueueEnv:
    """One test's namespace with a LocalQueue feeding a ClusterQueue over one ResourceFlavor."""

    cluster: Cluster
    namespace: str
    flavor: str
    cluster_queue: str
    local_queue: str
    priority_classes: list[str] = field(default_factory=list)
    owns_namespace: bool = True
    extra_cluster_queues: list[str] = field(default_factory=list)
    """Other ClusterQueues a test made over this flavor (deleted with it)."""

    def create_job(self, manifest: dict[str, Any]) -> dict[str, Any]:
        created = self.cluster.batch.create_namespaced_job(self.namespace, manifest)
        return self.cluster.api.sanitize_for_serialization(created)

    def job(self, name: str) -> dict[str, Any] | None:
        return self.cluster.job(self.namespace, name)

    def workload(self, job: dict[str, Any]) -> dict[str, Any] | None:
        return self.cluster.workload_for_job(self.namespace, job["metadata"]["uid"])

    def pods(self, job_name: str) -> list[dict[str, Any]]:
        return self.cluster.pods_of(self.namespace, job_name)

    def running_pods(self, job_name: str | None = None) -> list[dict[str, Any]]:
        """Running pods of one Job, or of every Job in the namespace."""
        names = [job_name] if job_name else [j.metadata.name for j in self.jobs()]
        return [p for n in names for p in self.pods(n) if p["status"].get("phase") == "Running"]

    def jobs(self) -> list[Any]:
        return list(self.cluster.batch.list_namespaced_job(self.namespace).items)

    def release(self, job_name: str | None = None) -> int:
        return self.cluster.release_pods(self.namespace, job_name)

    def release_until_finished(self, job_name: str, timeout: float = 180) -> dict[str, Any]:
        return self.cluster.release_until_finished(self.namespace, job_name, timeout)

    def priority_class(self, name: str, value: int) -> str:
        full = f"{name}-{short_id()}"
        self.cluster.kueue_create(
            "workloadpriorityclasses",
            {
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": full},
                "value": value,
                "description": f"test priority {value}",
            },
        )
        self.priority_classes.append(full)
        return full


def create_kueue_env(
    cluster: Cluster,
    test_name: str,
    *,
    cpu: str = "64",
    memory: str = "256Gi",
    node_labels: dict[str, str] | None = None,
    spot: bool = True,
    preemption: dict[str, Any] | None = None,
    namespace: str | None = None,
    local_queue: str = "lq",
    topology: str | None = None,
    admission_checks: list[str] | None = None,
    create_namespace: bool | None = None,
    tolerations: list[dict[str, Any]] | None = None,
) -> KueueEnv:
    """Queues for one test, in a namespace of its own (or in ``namespace``, which is then left in place
    unless ``create_namespace``: a MultiKueue worker gets the manager's namespace name, and owns it)."""
    sid = short_id()
    slug = "".join(c if c.isalnum() else "-" for c in test_name.lower()).strip("-")[:40].strip("-")
    owns_namespace = namespace is None if create_namespace is None else create_namespace
    namespace = namespace or f"t-{slug}-{sid}"
    flavor, cq = f"rf-{sid}", f"cq-{sid}"
    if owns_namespace:
        cluster.core.create_namespace(
            {"metadata": {"name": namespace, "labels": {"devcluster/test": "true"}}}
        )
    flavor_spec: dict[str, Any] = {
        "nodeLabels": node_labels or ({"tier": "spot"} if spot else {"tier": "on-demand"})
    }
    if spot or tolerations:
        flavor_spec["tolerations"] = ([SPOT_TOLERATION] if spot else []) + list(tolerations or [])
    if topology:
        flavor_spec["topologyName"] = topology  # Kueue's topology-aware scheduling over these nodes
    cluster.kueue_create(
        "resourceflavors", {"kind": "ResourceFlavor", "metadata": {"name": flavor}, "spec": flavor_spec}
    )
    cq_spec: dict[str, Any] = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": flavor,
                        "resources": [
                            {"name": "cpu", "nominalQuota": cpu},
                            {"name": "memory", "nominalQuota": memory},
                        ],
                    }
                ],
            }
        ],
    }
    if preemption:
        cq_spec["preemption"] = preemption
    if admission_checks:
        cq_spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": n} for n in admission_checks]}
    cluster.kueue_create("clusterqueues", {"kind": "ClusterQueue", "metadata": {"name": cq}, "spec": cq_spec})
    cluster.kueue_create(
        "localqueues",
        {
            "kind": "LocalQueue",
            "metadata": {"name": local_queue, "namespace": namespace},
            "spec": {"clusterQueue": cq},
        },
        namespace=namespace,
    )
    env = KueueEnv(cluster, namespace, flavor, cq, local_queue, owns_namespace=owns_namespace)
    wait_for(
        f"LocalQueue {local_queue} in {namespace} active",
        lambda: is_true(cluster.kueue_get("localqueues", local_queue, namespace), "Active"),
        timeout=30,
    )
    return env


def delete_kueue_env(env: KueueEnv) -> None:
    """Delete in dependency order without waiting: namespace (Jobs, Workloads), then queues and flavor."""
    c = env.cluster
    try:
        if env.owns_namespace:
            c.core.delete_namespace(env.namespace, propagation_policy="Background")
        else:
            c.kueue_delete("localqueues", env.local_queue, env.namespace)
    except ApiException as exc:
        if exc.status != 404:
            raise
    for cq in [env.cluster_queue, *env.extra_cluster_queues]:
        c.kueue_delete("clusterqueues", cq)
    c.kueue_delete("resourceflavors", env.flavor)
    for pc in env.priority_classes:
        c.kueue_delete("workloadpriorityclasses", pc)


def indexed_job(
    name: str,
    queue: str,
    *,
    completions: int = 3,
    parallelism: int | None = None,
    cpu: str = "1",
    memory: str = "1Gi",
    run_duration: str = "1s",
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    hold: bool = False,
    **spec: Any,
) -> dict[str, Any]:
    """A plain batch/v1 Indexed Job labelled for ``queue``.

    Tests build it by hand so the cluster tests do not depend on the product's manifest builder. With
    ``hold=True`` its pods stay Running until the test releases them (``KueueEnv.release``).
    """
    annotations = {**(HOLD if hold else {}), **(annotations or {})}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue, **(labels or {})}},
        "spec": {
            "completionMode": "Indexed",
            "completions": completions,
            "parallelism": parallelism or completions,
            **spec,
            "template": {
                "metadata": {
                    "annotations": {"kwok.airflow-kueue.io/run-duration": run_duration, **annotations}
                },
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "shard",
                            "image": "example.invalid/shard:1",
                            "resources": {"requests": {"cpu": cpu, "memory": memory}},
                        }
                    ],
                },
            },
        },
    }


def token_kubeconfig(path: Path, user: str, token: str) -> Path:
    """A kubeconfig (mode 600) for the bed's apiserver, as the admin kubeconfig names it, with ``token``'s
    identity: a ServiceAccount a test or a benchmark counts or restricts."""
    import yaml

    admin = yaml.safe_load(Path(os.environ["KUBECONFIG"]).read_text())
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "bed", "cluster": admin["clusters"][0]["cluster"]}],
                "users": [{"name": user, "user": {"token": token}}],
                "contexts": [{"name": "bed", "context": {"cluster": "bed", "user": user}}],
                "current-context": "bed",
            }
        )
    )
    path.chmod(0o600)
    return path
