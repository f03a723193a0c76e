"""The [kueue] pod policy: each breach is named with what to change; safe defaults are filled in."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_kueue_provider.kueue.checkpoints.checkpoint_access import sas_secret_name
from airflow_kueue_provider.kueue.pods.pod_policy import (
    PodPolicy,
    PolicyConfigError,
    violations,
    with_restricted_defaults,
)
from airflow_kueue_provider.kueue.pods.policy_allowlists import NamespacedNames


def job(
    namespace: str = "genomics",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    **pod: Any,
) -> dict[str, Any]:
    containers = pod.pop("containers", [{"name": "main", "image": "img:1"}])
    return {
        "metadata": {"name": "j", "namespace": namespace, "labels": labels or {}},
        "spec": {
            "template": {
                "metadata": {"annotations": annotations or {}},
                "spec": {"containers": containers, **pod},
            }
        },
    }


def container(**security: Any) -> list[dict[str, Any]]:
    return [{"name": "main", "image": "img:1", "securityContext": security}]


STRICT = PodPolicy(
    allowed_namespaces=frozenset({"genomics"}), allowed_service_accounts=frozenset({"genomics-sa"})
)

BREACHES = [
    (job(namespace="kube-system"), "namespace 'kube-system' is not in [kueue] allowed_namespaces"),
    (job(serviceAccountName="cluster-admin-sa"), "serviceAccountName 'cluster-admin-sa' is not in"),
    (job(hostPID=True), "hostPID is true"),
    (job(hostNetwork=True), "hostNetwork is true"),
    (job(hostIPC=True), "hostIPC is true"),
    (job(volumes=[{"name": "root", "hostPath": {"path": "/"}}]), "volume 'root' is a hostPath (/)"),
    (job(containers=container(privileged=True)), "privileged is true"),
    (job(containers=container(allowPrivilegeEscalation=True)), "allowPrivilegeEscalation is true"),
    (job(containers=container(capabilities={"add": ["SYS_ADMIN"]})), "capabilities.add ['SYS_ADMIN']"),
    (job(containers=container(procMount="Unmasked")), "procMount is 'Unmasked'"),
    (job(containers=container(seccompProfile={"type": "Unconfined"})), "seccompProfile is Unconfined"),
    (job(securityContext={"seccompProfile": {"type": "Unconfined"}}), "seccompProfile is Unconfined"),
    (
        job(containers=[{"name": "main", "image": "i", "ports": [{"containerPort": 80, "hostPort": 80}]}]),
        "sets hostPort",
    ),
    (job(initContainers=container(privileged=True)), "initContainers[main]: securityContext.privileged"),
    (job(nodeName="node-1"), "spec.template.spec.nodeName is set ('node-1')"),
    (job(priorityClassName="system-node-critical"), "priorityClassName 'system-node-critical' is a system"),
    (job(priorityClassName="high"), "priorityClassName (PriorityClass) 'high' is not allowed"),
    (job(runtimeClassName="kata"), "runtimeClassName 'kata' is not in [kueue] allowed_runtime_classes"),
    (
        job(securityContext={"appArmorProfile": {"type": "Unconfined"}}),
        "spec.template.spec.securityContext.appArmorProfile is Unconfined",
    ),
    (job(containers=container(appArmorProfile={"type": "Unconfined"})), "appArmorProfile is Unconfined"),
    (
        job(annotations={"container.apparmor.security.beta.kubernetes.io/main": "unconfined"}),
        "annotations[container.apparmor.security.beta.kubernetes.io/main] is 'unconfined'",
    ),
    (job(securityContext={"seLinuxOptions": {"type": "spc_t"}}), "seLinuxOptions.type is 'spc_t'"),
    (job(containers=container(seLinuxOptions={"type": "spc_t"})), "seLinuxOptions.type is 'spc_t'"),
    (job(securityContext={"seLinuxOptions": {"user": "system_u"}}), "seLinuxOptions.user is set"),
    (
        job(securityContext={"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}),
        "sysctls 'kernel.msgmax' is not a Pod Security baseline sysctl",
    ),
    (
        job(volumes=[{"name": "steal", "secret": {"secretName": "other-job-checkpoint"}}]),
        "volumes[steal].secret names 'other-job-checkpoint'",
    ),
    (
        job(volumes=[{"name": "p", "projected": {"sources": [{"secret": {"name": "x-checkpoint"}}]}}]),
        "volumes[p].projected.sources.secret names 'x-checkpoint'",
    ),
    (
        job(volumes=[{"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}]),
        "volumes[t].projected.sources.serviceAccountToken is set",
    ),
    (
        job(
            containers=[
                {
                    "name": "main",
                    "image": "i",
                    "env": [
                        {"name": "SAS", "valueFrom": {"secretKeyRef": {"name": "o-checkpoint", "key": "k"}}}
                    ],
                }
            ]
        ),
        "env[SAS].valueFrom.secretKeyRef names 'o-checkpoint'",
    ),
    (
        job(
            containers=[{"name": "main", "image": "i", "envFrom": [{"secretRef": {"name": "o-checkpoint"}}]}]
        ),
        "containers[main]: envFrom.secretRef names 'o-checkpoint'",
    ),
]


@pytest.mark.parametrize(("manifest", "expected"), BREACHES, ids=[e for _, e in BREACHES])
def test_each_breach_is_named(manifest: dict[str, Any], expected: str) -> None:
    found = violations(manifest, STRICT)
    assert len(found) == 1 and expected in found[0], found


def test_a_plain_job_passes_and_the_platform_can_allow_more() -> None:
    assert violations(job(serviceAccountName="genomics-sa"), STRICT) == []
    safe = job(
        securityContext={
            "seLinuxOptions": {"type": "container_t"},
            "sysctls": [{"name": "net.ipv4.tcp_keepalive_time", "value": "60"}],
            "appArmorProfile": {"type": "RuntimeDefault"},
        },
        annotations={"container.apparmor.security.beta.kubernetes.io/main": "runtime/default"},
        volumes=[{"name": "creds", "secret": {"secretName": "team-db"}}],
    )
    assert violations(safe, STRICT) == []
    lenient = PodPolicy(
        allow_privileged=True, allow_host_path=True, allowed_capabilities=frozenset({"NET_ADMIN"})
    )
    manifest = job(
        volumes=[{"name": "scratch", "hostPath": {"path": "/mnt"}}],
        containers=container(privileged=True, capabilities={"add": ["NET_ADMIN"]}),
    )
    assert violations(manifest, lenient) == []


def test_policy_from_config_strings() -> None:
    policy = PodPolicy.from_options(
        {
            "allowed_namespaces": " genomics, risk ,",
            "allow_privileged_pods": "True",
            "allowed_service_accounts": "",
        }
    )
    assert policy.allowed_namespaces == frozenset({"genomics", "risk"})
    assert policy.allowed_service_accounts == frozenset() and policy.allow_privileged
    assert PodPolicy.from_options({}) == PodPolicy()


def test_no_service_account_is_allowed_by_default_and_the_error_names_the_option() -> None:
    (problem,) = violations(job(serviceAccountName="airflow-kueue-worker"), PodPolicy())
    assert "'airflow-kueue-worker' is not in [kueue] allowed_service_accounts (empty" in problem
    assert violations(job(serviceAccountName="x"), PodPolicy(allowed_service_accounts=frozenset({"*"}))) == []


def queue_job(namespace: str, queue: str, priority: str | None = None) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": queue}
    if priority:
        labels["kueue.x-k8s.io/priority-class"] = priority
    return job(namespace=namespace, labels=labels)


def test_local_queues_and_priority_classes_are_allowed_per_namespace() -> None:
    policy = PodPolicy.from_options(
        {
            "allowed_local_queues": "team-a: q1 q2; team-b:*; *:shared",
            "allowed_priority_classes": "team-a:low",
            "allowed_pod_priority_classes": "team-a:batch-low",
        }
    )
    assert violations(queue_job("team-a", "q1", "low"), policy) == []
    assert violations(queue_job("team-b", "anything"), policy) == []
    assert violations(queue_job("team-c", "shared"), policy) == []
    (queue,) = violations(queue_job("team-a", "team-b-queue"), policy)
    assert "queue_name (LocalQueue) 'team-b-queue' is not allowed in namespace 'team-a'" in queue
    assert "[kueue] allowed_local_queues (allowed there: q1, q2, shared)" in queue
    (priority,) = violations(queue_job("team-a", "q1", "top"), policy)
    assert "priority_class (WorkloadPriorityClass) 'top' is not allowed" in priority
    assert violations(job(namespace="team-a", priorityClassName="batch-low"), policy) == []
    (system,) = violations(job(namespace="team-a", priorityClassName="system-cluster-critical"), policy)
    assert "is a system class" in system


def test_queues_and_priority_classes_default_to_any_pod_priority_classes_to_none() -> None:
    assert violations(queue_job("team-a", "q", "top"), PodPolicy()) == []
    assert violations(job(priorityClassName="high"), PodPolicy()) != []


def test_a_malformed_allowlist_names_the_option_and_its_format() -> None:
    with pytest.raises(PolicyConfigError, match=r"\[kueue\] allowed_local_queues: entry 'q1 q2' is not"):
        PodPolicy.from_options({"allowed_local_queues": "q1 q2"})
    assert NamespacedNames.parse("x", "", default_any=False).listed_for("ns") == "none"


def test_the_provider_checkpoint_secret_is_recognised() -> None:
    """The pod policy's idea of "a Secret the provider creates" follows
    kueue/checkpoints/checkpoint_access.py."""
    name = sas_secret_name("job-abc", "0123456789abcdef")
    manifest = job(volumes=[{"name": "s", "secret": {"secretName": name}}])
    assert any(name in problem for problem in violations(manifest, STRICT))


def test_restricted_defaults_fill_only_what_is_unset() -> None:
    out = with_restricted_defaults(job())
    pod = out["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["containers"][0]["securityContext"]["allowPrivilegeEscalation"] is False
    with_sa = with_restricted_defaults(
        job(serviceAccountName="genomics-sa", securityContext={"runAsUser": 0})
    )
    pod = with_sa["spec"]["template"]["spec"]
    assert "automountServiceAccountToken" not in pod, "a service account was asked for: its token is meant"
    assert pod["securityContext"]["runAsUser"] == 0
    assert violations(out, PodPolicy()) == []
