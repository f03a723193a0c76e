"""The [kueue] pod policy: each breach is named with what to change; safe defaults are filled in."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_kueue_provider.kueue.pod_policy import PodPolicy, violations, with_restricted_defaults


def job(namespace: str = "genomics", **pod: Any) -> dict[str, Any]:
    containers = pod.pop("containers", [{"name": "main", "image": "img:1"}])
    return {
        "metadata": {"name": "j", "namespace": namespace},
        "spec": {"template": {"spec": {"containers": containers, **pod}}},
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
]


@pytest.mark.parametrize(("manifest", "expected"), BREACHES, ids=[e for _, e in BREACHES])
def test_each_breach_is_named(manifest: dict[str, Any], expected: str) -> None:
    found = violations(manifest, STRICT)
    assert len(found) == 1 and expected in found[0], found


def test_a_plain_job_passes_and_the_platform_can_allow_more() -> None:
    assert violations(job(serviceAccountName="genomics-sa"), STRICT) == []
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
    assert policy.allowed_service_accounts is None and policy.allow_privileged
    assert PodPolicy.from_options({}) == PodPolicy()


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
