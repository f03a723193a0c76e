"""tenant-pod-guard's allow-lists on the real apiserver (issue 38, items 4 and 5): a second team's
ServiceAccount (``TENANT_RULES``) can no longer mount a volume type outside the restricted profile's, turn a
ServiceAccount token on, or create a pod that carries a Job's identity; a Kueue-admitted Indexed Job still
runs (its pods come from the job controller, ``jobControllerUsers``: on the bed ``devcluster-admin``).

The policies are applied with test_policy's ``Guard`` (bound to the test's namespace only, the bed's
identities in their site variables).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from copy import deepcopy
from functools import partial
from typing import Any

import pytest
import yaml

from ..cluster import Cluster, KueueEnv, indexed_job, is_true, wait_for
from .test_policy import POLICY, Guard, PolicyTenant, in_force, job_of, jobset_of, pod, refused

ALLOWED_VOLUMES = [
    {"name": "scratch", "emptyDir": {}},
    {"name": "conf", "configMap": {"name": "team-conf"}},
    {"name": "creds", "secret": {"secretName": "team-creds"}},
    {"name": "data", "persistentVolumeClaim": {"claimName": "team-data"}},
    {
        "name": "meta",
        "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]},
    },
]
REFUSED_VOLUMES = [
    {"name": "src", "gitRepo": {"repository": "https://example.invalid/x.git"}},
    {"name": "share", "nfs": {"server": "10.0.0.1", "path": "/"}},
    {"name": "drv", "flexVolume": {"driver": "example/driver"}},
    {"name": "root", "hostPath": {"path": "/"}},
    {
        "name": "disk",
        "iscsi": {"targetPortal": "10.0.0.1:3260", "iqn": "iqn.2001-04.com.example:x", "lun": 0},
    },
]
JOB_UID = "0b7cf4a2-5bd1-4a8e-9d6e-1d3c0f1e2a3b"
FORGED: list[tuple[str, Any]] = [
    ("labels", {"batch.kubernetes.io/controller-uid": JOB_UID}),
    ("labels", {"controller-uid": JOB_UID}),
    ("labels", {"batch.kubernetes.io/job-name": "victim"}),
    ("labels", {"job-name": "victim"}),
    ("labels", {"jobset.sigs.k8s.io/jobset-name": "victim"}),
    ("annotations", {"batch.kubernetes.io/job-completion-index": "3"}),
    (
        "ownerReferences",
        [{"apiVersion": "batch/v1", "kind": "Job", "name": "victim", "uid": JOB_UID, "controller": True}],
    ),
]


@pytest.fixture
def guarded(kueue_env: KueueEnv, cluster: Cluster) -> Iterator[Callable[[], Guard]]:
    made: list[Guard] = []

    def make() -> Guard:
        made.append(Guard(cluster, kueue_env.namespace))
        return made[-1]

    yield make
    for item in made:
        item.delete()


def _volume_pod(name: str, volume: dict[str, Any]) -> dict[str, Any]:
    mount = {"name": volume["name"], "mountPath": "/v"}
    return pod(name, volumes=[volume], container={"volumeMounts": [mount]})


def test_the_guard_allows_only_restricted_volume_types_no_explicit_token_and_no_forged_job_pods(
    kueue_env: KueueEnv, guarded: Callable[[], Guard]
) -> None:
    env = kueue_env
    tenant = PolicyTenant(env.cluster, env.namespace)
    volume_pods = [_volume_pod(f"v{n}", deepcopy(v)) for n, v in enumerate(REFUSED_VOLUMES)]
    token = pod("token", automountServiceAccountToken=True)
    forged = [pod(f"f{n}", metadata={key: deepcopy(value)}) for n, (key, value) in enumerate(FORGED)]
    for body in [*volume_pods, token, *forged]:  # without the policy, the apiserver takes every one
        tenant.create_pod(body, dry_run=True)

    guarded()
    wait_for(
        "the policies in force", lambda: in_force(lambda: tenant.create_pod(volume_pods[0], dry_run=True)), 60
    )

    for volume, body in zip(REFUSED_VOLUMES, volume_pods, strict=True):
        kind = next(k for k in volume if k != "name")
        message = refused(partial(tenant.create_pod, body), f"volume {volume['name']} ({kind})")
        assert (
            "only configMap, csi, downwardAPI, emptyDir, ephemeral, persistentVolumeClaim, projected"
            in message
        )
        name = body["metadata"]["name"]
        refused(partial(tenant.create_job, job_of(f"j{name}", body)), kind)
        refused(partial(tenant.create_jobset, jobset_of(f"s{name}", body)), kind)
    for volume in ALLOWED_VOLUMES:
        tenant.create_pod(_volume_pod(f"ok-{volume['name']}", deepcopy(volume)), dry_run=True)

    refused(lambda: tenant.create_pod(token), "spec.automountServiceAccountToken")
    refused(
        lambda: tenant.create_job(job_of("token", token), dry_run=True), "spec.automountServiceAccountToken"
    )
    tenant.create_pod(pod("no-token", automountServiceAccountToken=False), dry_run=True)

    for body in forged:
        message = refused(partial(tenant.create_pod, body), "a pod with a Job's identity")
        assert tenant.name in message, message
    plain = pod("x")
    # A Job may not hand its pods another Job's identity: a manualSelector Job naming the victim's uid, a
    # completion index in its template, JobSet labels of its own.
    manual = job_of("manual", pod("x", metadata={"labels": {"controller-uid": JOB_UID}}))
    manual["spec"].update(manualSelector=True, selector={"matchLabels": {"controller-uid": JOB_UID}})
    refused(lambda: tenant.create_job(manual, dry_run=True), "controller-uid and job-name")
    indexed = job_of(
        "indexed", pod("x", metadata={"annotations": {"batch.kubernetes.io/job-completion-index": "0"}})
    )
    refused(lambda: tenant.create_job(indexed, dry_run=True), "job-completion-index")
    in_set = job_of("in-set", pod("x", metadata={"labels": {"jobset.sigs.k8s.io/jobset-name": "victim"}}))
    refused(
        lambda: tenant.create_job(in_set, dry_run=True),
        "jobset.sigs.k8s.io/* labels only",
        "may not carry a jobset.sigs.k8s.io/ label",  # jobset-children, when a parallel test has it bound
    )
    refused(
        lambda: tenant.create_jobset(
            jobset_of("set", pod("x", metadata={"labels": {"job-name": "victim"}})), True
        ),
        "are set by the Job and JobSet",
    )
    tenant.create_job(job_of("plain", plain), dry_run=True)  # its own labels, set by the apiserver, pass


def test_a_kueue_admitted_indexed_job_still_runs_under_the_guard(
    kueue_env: KueueEnv, guarded: Callable[[], Guard]
) -> None:
    env = kueue_env
    tenant = PolicyTenant(env.cluster, env.namespace)
    guarded()
    wait_for(
        "the policies in force",
        lambda: in_force(
            lambda: tenant.create_pod(pod("t", automountServiceAccountToken=True), dry_run=True)
        ),
        60,
    )
    tenant.create_job(indexed_job("own", env.local_queue, completions=3))
    wait_for(
        "the tenant's Job admitted by Kueue and complete", lambda: is_true(env.job("own"), "Complete"), 180
    )
    assert env.workload(env.job("own") or {}), "admitted through Kueue"
    pods = env.pods("own")
    indexes = {p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] for p in pods}
    assert indexes == {"0", "1", "2"}, indexes  # the job controller's pods carry the Job's identity


def test_the_guards_volume_types_are_volume_fields_of_this_apiserver(cluster: Cluster) -> None:
    """Each type the policy allows is a field of core/v1 Volume here (a typo would allow nothing), and the
    policy refuses by iterating a volume's keys, so a type the schema grows later is refused unlisted."""
    policy, _ = yaml.safe_load_all((POLICY / "tenant-pod-guard.yaml").read_text())
    (expression,) = [v["expression"] for v in policy["spec"]["variables"] if v["name"] == "volumeTypes"]
    allowed = set(yaml.safe_load(expression.split("+")[0]))
    schema = cluster.get_raw("/openapi/v3/api/v1")["components"]["schemas"]["io.k8s.api.core.v1.Volume"]
    fields = set(schema["properties"]) - {"name"}
    assert allowed and allowed <= fields, sorted(allowed - fields)
    assert {"gitRepo", "nfs", "flexVolume", "hostPath"} <= fields - allowed
    badvolumes = [v["expression"] for v in policy["spec"]["variables"] if v["name"] == "badVolumes"]
    assert badvolumes and "dyn(v).all(k, k == 'name' || k in variables.volumeTypes)" in badvolumes[0]
