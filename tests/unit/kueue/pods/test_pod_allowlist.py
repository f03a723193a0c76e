"""The pod policy's allow-lists (issue 38, item 4): volume types as the restricted profile's, the Secrets,
ConfigMaps and PVCs a pod names per namespace, and an explicit service account token."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_kueue_provider.kueue.pods.pod_policy import PodPolicy, PolicyConfigError, violations
from airflow_kueue_provider.kueue.pods.pod_references import RESTRICTED_VOLUME_TYPES, pod_references


def job(namespace: str = "genomics", **pod: Any) -> dict[str, Any]:
    containers = pod.pop("containers", [{"name": "main", "image": "img:1"}])
    return {
        "metadata": {"name": "j", "namespace": namespace},
        "spec": {"template": {"spec": {"containers": containers, **pod}}},
    }


REFUSED_VOLUMES = [
    (
        {"name": "src", "gitRepo": {"repository": "https://example.invalid/x.git"}},
        "gitRepo",
        "CVE-2024-10220",
    ),
    ({"name": "share", "nfs": {"server": "10.0.0.1", "path": "/"}}, "nfs", "any server"),
    ({"name": "drv", "flexVolume": {"driver": "example/driver"}}, "flexVolume", "driver binary"),
    ({"name": "disk", "iscsi": {"targetPortal": "t", "iqn": "i", "lun": 0}}, "iscsi", ""),
    ({"name": "new", "someFutureType": {}}, "someFutureType", ""),
]


@pytest.mark.parametrize(("volume", "kind", "why"), REFUSED_VOLUMES)
def test_a_volume_type_outside_the_restricted_list_is_refused_naming_volume_type_and_list(
    volume: dict[str, Any], kind: str, why: str
) -> None:
    (problem,) = violations(job(volumes=[volume]), PodPolicy())
    assert f"volumes[{volume['name']}] is a {kind} volume" in problem, problem
    assert (
        "only configMap, csi, downwardAPI, emptyDir, ephemeral, persistentVolumeClaim, projected, secret"
        in (problem)
    )
    assert "[kueue] allowed_volume_types" in problem and why in problem, problem


def test_the_restricted_types_pass_and_the_platform_may_add_types() -> None:
    volumes = [{"name": kind.lower(), kind: {}} for kind in sorted(RESTRICTED_VOLUME_TYPES)]
    assert violations(job(volumes=[*volumes, {"name": "untyped"}]), PodPolicy()) == []
    nfs = job(volumes=[{"name": "share", "nfs": {"server": "s", "path": "/"}}])
    policy = PodPolicy.from_options({"allowed_volume_types": "nfs"})
    assert violations(nfs, policy) == []
    assert violations(job(volumes=[REFUSED_VOLUMES[0][0]]), policy), "only the listed type is added"


def test_host_path_keeps_its_own_switch() -> None:
    host = job(volumes=[{"name": "root", "hostPath": {"path": "/"}}])
    (problem,) = violations(host, PodPolicy())
    assert "volume 'root' is a hostPath (/)" in problem and "allow_host_path_volumes" in problem
    assert violations(host, PodPolicy.from_options({"allow_host_path_volumes": "true"})) == []
    with pytest.raises(PolicyConfigError, match="allow_host_path_volumes"):
        PodPolicy.from_options({"allowed_volume_types": "nfs, hostPath"})


def _referencing(secret: str, config_map: str, claim: str) -> dict[str, Any]:
    main = {
        "name": "main",
        "image": "img:1",
        "envFrom": [{"secretRef": {"name": secret}}, {"configMapRef": {"name": config_map}}],
        "env": [{"name": "K", "valueFrom": {"secretKeyRef": {"name": secret, "key": "k"}}}],
    }
    volumes = [
        {"name": "data", "persistentVolumeClaim": {"claimName": claim}},
        {"name": "conf", "configMap": {"name": config_map}},
        {"name": "p", "projected": {"sources": [{"secret": {"name": secret}}]}},
    ]
    return job(containers=[main], volumes=volumes, imagePullSecrets=[{"name": secret}])


def test_every_secret_config_map_and_claim_reference_is_named() -> None:
    found = {
        (r.kind, r.name, r.where)
        for r in pod_references(_referencing("s", "c", "v")["spec"]["template"]["spec"])
    }
    assert {(kind, where) for kind, _, where in found} == {
        ("Secret", "containers[main]: envFrom.secretRef"),
        ("Secret", "containers[main]: env[K].valueFrom.secretKeyRef"),
        ("Secret", "spec.template.spec.volumes[p].projected.sources.secret"),
        ("Secret", "spec.template.spec.imagePullSecrets"),
        ("ConfigMap", "containers[main]: envFrom.configMapRef"),
        ("ConfigMap", "spec.template.spec.volumes[conf].configMap"),
        ("PersistentVolumeClaim", "spec.template.spec.volumes[data].persistentVolumeClaim"),
    }


def test_references_pass_by_default_and_only_the_listed_names_once_a_list_is_set() -> None:
    other_team = _referencing("risk-db", "risk-conf", "risk-data")
    assert violations(other_team, PodPolicy()) == [], "no list: any name (a namespace per team)"
    policy = PodPolicy.from_options(
        {
            "allowed_secrets": "genomics:genomics-*",
            "allowed_config_maps": "genomics:genomics-*",
            "allowed_persistent_volume_claims": "genomics:genomics-scratch",
        }
    )
    assert violations(_referencing("genomics-db", "genomics-conf", "genomics-scratch"), policy) == []
    problems = violations(other_team, policy)
    assert len(problems) == 7, problems
    assert any(
        "envFrom.secretRef: Secret 'risk-db' is not allowed in namespace 'genomics' by [kueue] "
        "allowed_secrets (allowed there: genomics-*)" in p
        for p in problems
    ), problems
    assert any("ConfigMap 'risk-conf'" in p and "allowed_config_maps" in p for p in problems), problems
    assert any(
        "PersistentVolumeClaim 'risk-data'" in p and "allowed_persistent_volume_claims" in p for p in problems
    ), problems


@pytest.mark.parametrize("account", [None, "default", "team-b-sa"])
def test_an_explicit_token_needs_an_allowed_service_account(account: str | None) -> None:
    pod: dict[str, Any] = {"automountServiceAccountToken": True}
    if account:
        pod["serviceAccountName"] = account
    problems = violations(job(**pod), PodPolicy(allowed_service_accounts=frozenset({"genomics-sa"})))
    assert any(
        f"automountServiceAccountToken is true for ServiceAccount {account or 'default'!r}, which is not in "
        "[kueue] allowed_service_accounts (genomics-sa)" in p
        for p in problems
    ), problems


def test_an_explicit_token_of_an_allowed_service_account_or_none_passes() -> None:
    policy = PodPolicy(allowed_service_accounts=frozenset({"genomics-sa"}))
    allowed = job(automountServiceAccountToken=True, serviceAccountName="genomics-sa")
    assert violations(allowed, policy) == []
    assert violations(job(automountServiceAccountToken=False), policy) == []
