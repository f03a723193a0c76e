"""Queue set-up as code on the real cluster: declared Kueue objects (the seed's v1beta1 YAML among them)
are applied once, a second apply changes nothing, a ClusterQueue changed by hand is reported as drift (and
taken back only with force), and a field removed from a declaration leaves the cluster."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from kubernetes.client.rest import ApiException

from airflow_kueue_provider.hooks.queue_setup_hook import FIELD_MANAGER
from airflow_kueue_provider.operators.queue_setup import KueueQueueSetupOperator, QueueConflict, QueueDrift

from ..cluster import Cluster, is_true, short_id, wait_for
from ..deploy.test_rbac import Identity

DECLARATIONS = """
# the seed's v1beta1 objects: converted to v1beta2 when applied
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: {flavor}
spec:
  nodeLabels:
    tier: spot
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata:
  name: {priority}
value: 500
description: nightly runs
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: {cq}
spec:
  cohort: {team}
  namespaceSelector: {{}}
  flavorFungibility:
    whenCanBorrow: Borrow
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: {flavor}
      resources:
      - name: cpu
        nominalQuota: "8"
      - name: memory
        nominalQuota: 32Gi
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: lq
  namespace: {namespace}
spec:
  clusterQueue: {cq}
"""
COHORTS = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata:
  name: {team}
spec:
  parentName: {dept}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata:
  name: {dept}
spec: {{}}
"""


@pytest.fixture
def declared(cluster: Cluster, tmp_path: Path) -> Iterator[SimpleNamespace]:
    sid = short_id()
    names = SimpleNamespace(
        flavor=f"rf-qs-{sid}",
        priority=f"nightly-{sid}",
        cq=f"cq-qs-{sid}",
        team=f"team-{sid}",
        dept=f"dept-{sid}",
        namespace=f"t-qs-{sid}",
        directory=tmp_path / "queues",
    )
    cluster.core.create_namespace(
        {"metadata": {"name": names.namespace, "labels": {"devcluster/test": "true"}}}
    )
    names.directory.mkdir()
    (names.directory / "10-queues.yaml").write_text(DECLARATIONS.format(**vars(names)))
    (names.directory / "20-cohorts.yml").write_text(COHORTS.format(**vars(names)))  # parents first anyway
    yield names
    cluster.core.delete_namespace(names.namespace, propagation_policy="Background")
    for plural, name in (
        ("clusterqueues", names.cq),
        ("cohorts", names.team),
        ("cohorts", names.dept),
        ("resourceflavors", names.flavor),
        ("workloadpriorityclasses", names.priority),
    ):
        cluster.kueue_delete(plural, name)


def _written_by_us(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in obj["metadata"].get("managedFields") or [] if m.get("manager") == FIELD_MANAGER]


def test_declared_queues_are_applied_once_and_drift_is_reported(
    cluster: Cluster, declared: SimpleNamespace, caplog: pytest.LogCaptureFixture
) -> None:
    apply = KueueQueueSetupOperator(task_id="queues", declarations=str(declared.directory))
    first = apply.execute({})  # type: ignore[arg-type]
    assert first["counts"] == {"created": 6}, first
    order = [o["object"].split()[0] for o in first["objects"]]
    assert order == [
        "ResourceFlavor",
        "WorkloadPriorityClass",
        "Cohort",
        "Cohort",
        "ClusterQueue",
        "LocalQueue",
    ]
    assert first["objects"][2]["object"] == f"Cohort {declared.dept}", "a parent Cohort before its children"
    cq = cluster.kueue_get("clusterqueues", declared.cq)
    assert cq["spec"]["cohortName"] == declared.team  # v1beta1 cohort -> v1beta2 cohortName
    assert cq["spec"]["flavorFungibility"]["whenCanBorrow"] == "MayStopSearch"
    wait_for(
        "the declared LocalQueue active",
        lambda: is_true(cluster.kueue_get("localqueues", "lq", declared.namespace), "Active"),
        30,
    )

    # The same declarations again: nothing is written. (Not the resourceVersion: Kueue writes the
    # ClusterQueue's status whenever it likes; the spec's generation and this provider's own managed-fields
    # entry, with the time of its last write, stay as they were.)
    second = apply.execute({})  # type: ignore[arg-type]
    assert second["counts"] == {"unchanged": 6}, second
    after = cluster.kueue_get("clusterqueues", declared.cq)
    assert after["metadata"]["generation"] == cq["metadata"]["generation"]
    assert _written_by_us(after) == _written_by_us(cq) != []

    # Someone raises the quota by hand: a check reports it (and fails, for an alerting DAG), an apply sets
    # it back and lists what it changed.
    # (as another field manager, "kubectl-edit"): the check reports it; an apply names the field and its
    # manager and leaves it (failing the task after the rest); only force=True takes it back, logging it.
    for attempt in range(5):  # as kubectl edit does: Kueue writes the ClusterQueue too (a 409 in make test)
        cq = cluster.kueue_get("clusterqueues", declared.cq)
        cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "64"
        try:
            cluster.custom.replace_cluster_custom_object(
                "kueue.x-k8s.io", "v1beta2", "clusterqueues", declared.cq, cq, field_manager="kubectl-edit"
            )
            break
        except ApiException as exc:
            if exc.status != 409 or attempt == 4:
                raise
    check = KueueQueueSetupOperator(
        task_id="check", declarations=str(declared.directory), check_only=True, fail_on_drift=True
    )
    quota = r"spec\.resourceGroups\[0\]\.flavors\[0\]\.resources\[0\]\.nominalQuota: declared '8', live '64'"
    with pytest.raises(QueueDrift, match=rf"ClusterQueue {declared.cq} drifted \({quota}\)"):
        check.execute({})  # type: ignore[arg-type]
    owned = rf"ClusterQueue {declared.cq}: spec\.resourceGroups\S* \(owned by kubectl-edit\).*force=True"
    with pytest.raises(QueueConflict, match=owned):
        apply.execute({})  # type: ignore[arg-type]
    live = cluster.kueue_get("clusterqueues", declared.cq)
    assert live["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == "64", (
        "not taken"
    )
    forced = KueueQueueSetupOperator(task_id="forced", declarations=str(declared.directory), force=True)
    with caplog.at_level("WARNING"):
        fixed = forced.execute({})  # type: ignore[arg-type]
    assert fixed["counts"] == {"updated": 1, "unchanged": 5}, fixed
    (updated,) = [o for o in fixed["objects"] if o["action"] == "updated"]
    assert updated["object"] == f"ClusterQueue {declared.cq}" and updated["drift"][0].endswith("live '64'"), (
        updated
    )
    assert "kubectl-edit" in updated["conflicts"][0], updated
    assert re.search(r"force=True takes spec\.resourceGroups\S* \(owned by kubectl-edit\)", caplog.text)
    live = cluster.kueue_get("clusterqueues", declared.cq)
    assert live["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == "8"

    # The command line says the same: in sync (exit 0).
    cli = subprocess.run(
        [sys.executable, "-m", "airflow_kueue_provider.queues", "check", str(declared.directory)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert f"ClusterQueue {declared.cq}: in sync" in cli.stdout


HELD = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: {cq}
spec:
  namespaceSelector: {{}}
{stop}  resourceGroups:
  - coveredResources: ["cpu"]
    flavors:
    - name: {flavor}
      resources:
      - name: cpu
        nominalQuota: "2"
"""


@pytest.fixture
def held(cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SimpleNamespace]:
    """A ResourceFlavor and a ClusterQueue declared in one file (the test writes it), applied as the
    queue-admin identity of ``deploy/rbac/queue-admin.yaml`` (get, create, patch: enough to adopt fields)."""
    sid = short_id()
    admin = Identity(cluster, "queue-admin.yaml", "default", monkeypatch, tmp_path)
    names = SimpleNamespace(
        flavor=f"rf-hold-{sid}", cq=f"cq-hold-{sid}", file=tmp_path / "queues.yaml", conn_id=admin.conn_id
    )
    cluster.kueue_create("resourceflavors", {"kind": "ResourceFlavor", "metadata": {"name": names.flavor}})
    yield names
    cluster.kueue_delete("clusterqueues", names.cq)
    cluster.kueue_delete("resourceflavors", names.flavor)
    admin.delete()


def _declare(names: SimpleNamespace, stop: str = "") -> None:
    names.file.write_text(HELD.format(cq=names.cq, flavor=names.flavor, stop=stop))


def _active(cluster: Cluster, cq: str) -> bool:
    return is_true(cluster.kueue_get("clusterqueues", cq), "Active")


def test_removing_stop_policy_from_a_declaration_reopens_the_queue(
    cluster: Cluster, held: SimpleNamespace
) -> None:
    """The acceptance line: a declared ``stopPolicy: Hold``, then dropped from the declaration. The check
    names the removed field; the apply removes it (Kueue's default, None, comes back) and the queue is active
    again."""
    _declare(held, stop="  stopPolicy: Hold\n")
    apply = KueueQueueSetupOperator(
        task_id="queues", declarations=str(held.file), kubernetes_conn_id=held.conn_id
    )
    assert apply.execute({})["counts"] == {"created": 1}  # type: ignore[arg-type]
    wait_for("the held ClusterQueue inactive", lambda: not _active(cluster, held.cq), 30)

    _declare(held)  # stopPolicy removed from the declaration
    check = KueueQueueSetupOperator(
        task_id="check",
        declarations=str(held.file),
        check_only=True,
        fail_on_drift=True,
        kubernetes_conn_id=held.conn_id,
    )
    with pytest.raises(QueueDrift, match=r"spec\.stopPolicy: removed from the declaration, live 'Hold'"):
        check.execute({})  # type: ignore[arg-type]
    reopened = apply.execute({})  # type: ignore[arg-type]
    assert reopened["counts"] == {"updated": 1}, reopened
    assert reopened["objects"][0]["drift"] == [
        "spec.stopPolicy: removed from the declaration, live 'Hold' (the apply leaves 'None')"
    ]
    assert cluster.kueue_get("clusterqueues", held.cq)["spec"].get("stopPolicy", "None") == "None"
    wait_for("the ClusterQueue active again", lambda: _active(cluster, held.cq), 30)
    assert check.execute({})["counts"] == {"in sync": 1}  # type: ignore[arg-type]


def test_a_stop_policy_written_by_client_side_calls_is_removed_by_the_first_apply(
    cluster: Cluster, held: SimpleNamespace
) -> None:
    """An object the previous way wrote (the Python client's create, then a merge patch setting
    ``stopPolicy: Hold``: an ``Update`` manager owns every field, server-side apply none). The check says it
    is not yet owned; the first apply takes the fields over (Kubernetes' upgrade from client-side apply) and
    so removes what the declaration does not set."""
    _declare(held)
    body = yaml.safe_load(held.file.read_text())
    cluster.custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", body)
    cluster.custom.patch_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "clusterqueues", held.cq, {"spec": {"stopPolicy": "Hold"}}
    )
    wait_for("the held ClusterQueue inactive", lambda: not _active(cluster, held.cq), 30)
    check = KueueQueueSetupOperator(
        task_id="check", declarations=str(held.file), check_only=True, kubernetes_conn_id=held.conn_id
    )
    (checked,) = check.execute({})["objects"]  # type: ignore[arg-type]
    assert checked["action"] == "drifted" and "not yet owned by server-side apply" in checked["drift"][-1]
    kept = KueueQueueSetupOperator(
        task_id="kept", declarations=str(held.file), adopt_managers=(), kubernetes_conn_id=held.conn_id
    )
    assert kept.execute({})["counts"] == {"unchanged": 1}  # type: ignore[arg-type]
    held_cq = cluster.kueue_get("clusterqueues", held.cq)
    assert held_cq["spec"]["stopPolicy"] == "Hold", "not adopted: another manager's undeclared field stays"

    apply = KueueQueueSetupOperator(
        task_id="queues", declarations=str(held.file), kubernetes_conn_id=held.conn_id
    )
    applied = apply.execute({})  # type: ignore[arg-type]
    assert applied["counts"] == {"updated": 1}, applied
    live = cluster.kueue_get("clusterqueues", held.cq)
    assert live["spec"].get("stopPolicy", "None") == "None"
    managers = {m["manager"] for m in live["metadata"]["managedFields"]}
    assert FIELD_MANAGER in managers and "OpenAPI-Generator" not in managers, managers
    wait_for("the ClusterQueue active again", lambda: _active(cluster, held.cq), 30)
    assert check.execute({})["counts"] == {"in sync": 1}  # type: ignore[arg-type]


def test_bad_declarations_are_refused_before_anything_is_applied(cluster: Cluster, tmp_path: Path) -> None:
    from airflow_kueue_provider.airflow_compat import AirflowFailException

    bad = tmp_path / "bad.yaml"
    flavor = f"rf-never-{short_id()}"
    bad.write_text(
        textwrap.dedent(f"""
        apiVersion: kueue.x-k8s.io/v1beta2
        kind: ResourceFlavor
        metadata: {{name: {flavor}}}
        ---
        apiVersion: kueue.x-k8s.io/v1beta2
        kind: Workload
        metadata: {{name: w, namespace: default}}
    """)
    )
    with pytest.raises(AirflowFailException, match="kind 'Workload' is not declared here"):
        KueueQueueSetupOperator(task_id="q", declarations=str(bad)).execute({})  # type: ignore[arg-type]
    from kubernetes.client.rest import ApiException

    with pytest.raises(ApiException) as missing:
        cluster.kueue_get("resourceflavors", flavor)
    assert missing.value.status == 404, "nothing applied"
