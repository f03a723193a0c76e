"""The operator's inputs as a KubernetesPodOperator user writes them: models, pod-spec fields, templating."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.providers.cncf.kubernetes.secret import Secret
from airflow.sdk import DAG
from kubernetes.client import models as k8s

from airflow_kueue_provider.airflow_compat import AirflowFailException
from airflow_kueue_provider.hooks import kueue_config
from airflow_kueue_provider.hooks.kueue_config import ConfigSource
from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

IDENTITY = AirflowIdentity("dag", "task", "run-1")


def _pod(job: dict[str, Any]) -> dict[str, Any]:
    return dict(job["spec"]["template"]["spec"])


def _main(job: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in _pod(job)["containers"] if c["name"] == "main")


def test_a_job_written_the_kubernetes_pod_operator_way_carries_every_setting() -> None:
    op = KueueIndexedJobOperator(
        task_id="task",
        namespace="batch",
        queue_name="lq",
        image="worker:1",
        completions=3,
        env_vars=[k8s.V1EnvVar(name="MODE", value="fast")],
        container_resources=k8s.V1ResourceRequirements(requests={"cpu": "1", "memory": "1Gi"}),
        tolerations=[k8s.V1Toleration(key="gpu", operator="Exists", effect="NoSchedule")],
        affinity=k8s.V1Affinity(
            node_affinity=k8s.V1NodeAffinity(
                required_during_scheduling_ignored_during_execution=k8s.V1NodeSelector(
                    node_selector_terms=[
                        k8s.V1NodeSelectorTerm(
                            match_expressions=[
                                k8s.V1NodeSelectorRequirement(key="pool", operator="In", values=["batch"])
                            ]
                        )
                    ]
                )
            )
        ),
        volumes=[k8s.V1Volume(name="scratch", empty_dir=k8s.V1EmptyDirVolumeSource())],
        volume_mounts=[k8s.V1VolumeMount(name="scratch", mount_path="/scratch")],
        env_from=[k8s.V1EnvFromSource(config_map_ref=k8s.V1ConfigMapEnvSource(name="settings"))],
        secrets=[
            Secret("env", "DB_PASSWORD", "db", "password"),
            Secret("env", None, "all-keys"),
            Secret("volume", "/etc/creds", "creds"),
        ],
        image_pull_secrets="registry-a, registry-b",
        image_pull_policy="IfNotPresent",
        security_context=k8s.V1PodSecurityContext(run_as_user=1000, fs_group=2000),
        container_security_context=k8s.V1SecurityContext(read_only_root_filesystem=True),
        spot=True,
    )

    job = op.build_manifest(IDENTITY)

    pod, main = _pod(job), _main(job)
    assert {"name": "MODE", "value": "fast"} in main["env"]
    assert {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}} in main[
        "env"
    ]
    assert main["resources"] == {"requests": {"cpu": "1", "memory": "1Gi"}}
    assert main["envFrom"] == [{"configMapRef": {"name": "settings"}}, {"secretRef": {"name": "all-keys"}}]
    assert {"name": "scratch", "mountPath": "/scratch"} in main["volumeMounts"]
    assert any(m["mountPath"] == "/etc/creds" and m["readOnly"] for m in main["volumeMounts"])
    assert main["imagePullPolicy"] == "IfNotPresent"
    assert main["securityContext"]["readOnlyRootFilesystem"] is True
    assert {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert any(t.get("key") == "kubernetes.azure.com/scalesetpriority" for t in pod["tolerations"]), "spot"
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert terms == [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["batch"]}]}]
    assert {"name": "scratch", "emptyDir": {}} in pod["volumes"]
    assert [v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v] == ["creds"]
    assert pod["imagePullSecrets"] == [{"name": "registry-a"}, {"name": "registry-b"}]
    assert pod["securityContext"]["runAsUser"] == 1000 and pod["securityContext"]["fsGroup"] == 2000


def test_a_v1_job_template_and_v1_env_are_accepted_where_dicts_are() -> None:
    template = k8s.V1Job(
        api_version="batch/v1",
        kind="Job",
        spec=k8s.V1JobSpec(
            template=k8s.V1PodTemplateSpec(
                spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="main", image="from-template:2")])
            )
        ),
    )
    op = KueueIndexedJobOperator(
        task_id="task",
        namespace="batch",
        queue_name="lq",
        job_template=template,
        env=[k8s.V1EnvVar("A", "1")],
    )
    job = op.build_manifest(IDENTITY)
    assert _main(job)["image"] == "from-template:2" and {"name": "A", "value": "1"} in _main(job)["env"]


def test_a_sidecar_first_template_keeps_the_shard_containers_image_and_resources() -> None:
    template = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "proxy", "image": "proxy:1", "resources": {"requests": {"cpu": "100m"}}},
                        {"name": "main", "image": "worker:3", "resources": {"requests": {"cpu": "4"}}},
                    ]
                }
            }
        },
    }
    op = KueueIndexedJobOperator(task_id="t", namespace="batch", queue_name="lq", job_template=template)
    job = op.build_manifest(IDENTITY)
    containers = {c["name"]: c for c in _pod(job)["containers"]}
    assert containers["main"]["image"] == "worker:3" and containers["proxy"]["image"] == "proxy:1"
    event = {
        "status": "success",
        "message": "ok",
        "job_name": "j",
        "namespace": "batch",
        "running_seconds": 3600,
    }
    context = {"ti": SimpleNamespace(dag_id="d", task_id="t", run_id="r", try_number=1, map_index=-1)}
    result = op.execute_complete(context, event)  # type: ignore[arg-type]
    on_demand = KueueIndexedJobOperator(
        task_id="t", namespace="batch", queue_name="lq", image="w", resources={"requests": {"cpu": "4"}}
    ).execute_complete(context, event)  # type: ignore[arg-type]
    assert result["estimated_cost_usd"] == on_demand["estimated_cost_usd"], "the cost uses main's 4 CPUs"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"env": {"A": "1"}, "env_vars": {"B": "2"}}, "set env or env_vars"),
        ({"resources": {}, "container_resources": {}}, "set resources or container_resources"),
        (
            {"tolerations": [{"key": "a", "operator": "Sometimes"}]},
            "operator 'Sometimes' must be Equal or Exists",
        ),
        ({"volume_mounts": [{"name": "data", "mountPath": "/data"}]}, "mount of 'data' names no volume"),
        ({"volumes": [{"name": "Data_1", "emptyDir": {}}]}, "is not a DNS-1123 label"),
        ({"image_pull_policy": "Sometimes"}, "use one of Always, IfNotPresent, Never"),
        ({"affinity": {"nodeAfinity": {}}}, "unknown keys ['nodeAfinity']"),
        ({"env_from": [{"prefix": "X_"}]}, "needs a configMapRef or a secretRef"),
        ({"init_containers": [{"name": "main", "image": "x"}]}, "other than 'main'"),
        ({"init_containers": [{"name": "fetch"}]}, "needs an image"),
        ({"termination_grace_period": -1}, "flush its checkpoint"),
        ({"active_deadline_seconds": 0}, "set a positive number of seconds"),
        ({"priority_class_name": "Batch_Low"}, "a Kueue WorkloadPriorityClass is workload_priority_class="),
        ({"workload_priority_class": "a", "priority_class": "b"}, "not both"),
    ],
)
def test_malformed_pod_spec_inputs_fail_early_saying_what_to_change(
    kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(AirflowFailException, match=message.replace("[", r"\[").replace("]", r"\]")):
        KueueIndexedJobOperator(
            task_id="t", namespace="batch", queue_name="lq", image="w", **kwargs
        ).build_manifest(IDENTITY)


def test_only_job_template_is_read_as_a_file(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(
        "apiVersion: batch/v1\nkind: Job\nspec:\n  template:\n    spec:\n      containers:\n"
        "      - name: main\n        image: 'worker:{{ params.tag }}'\n"
    )
    searchpath = [str(tmp_path)]
    with DAG("templating", schedule=None, start_date=datetime(2026, 1, 1), template_searchpath=searchpath):
        op = KueueIndexedJobOperator(
            task_id="t",
            namespace="batch",
            queue_name="lq",
            arguments=["--config", "/etc/p/config.yaml", "{{ params.tag }}.yml"],
            job_template="job.yaml",
        )
    op.render_template_fields({"params": {"tag": "7"}})  # type: ignore[arg-type]
    assert op.arguments == ["--config", "/etc/p/config.yaml", "7.yml"], "strings, not files"
    job = op.build_manifest(IDENTITY)
    assert _main(job)["image"] == "worker:7", "the file was found and rendered"


def test_the_namespace_comes_from_the_connection_when_not_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_K8S_WITH_NS",
        json.dumps({"conn_type": "kubernetes", "extra": {"namespace": "genomics", "in_cluster": False}}),
    )
    op = KueueIndexedJobOperator(task_id="t", queue_name="lq", image="w", kubernetes_conn_id="k8s_with_ns")
    assert op.build_manifest(IDENTITY)["metadata"]["namespace"] == "genomics"
    plain = KueueIndexedJobOperator(task_id="t", queue_name="lq", image="w", kubernetes_conn_id="k8s_no_ns")
    monkeypatch.setenv("AIRFLOW_CONN_K8S_NO_NS", json.dumps({"conn_type": "kubernetes"}))
    assert plain.build_manifest(IDENTITY)["metadata"]["namespace"] == "default"


def test_retries_default_to_one_per_index_unless_the_user_or_the_template_chose() -> None:
    def built(**kwargs: Any) -> dict[str, Any]:
        op = KueueIndexedJobOperator(task_id="t", namespace="batch", queue_name="lq", image="w:1", **kwargs)
        return dict(op.build_manifest(IDENTITY)["spec"])

    assert built()["backoffLimitPerIndex"] == 1 and "backoffLimit" not in built()
    assert "backoffLimitPerIndex" not in built(backoff_limit_per_index=None)  # Kubernetes' whole-Job limit
    whole_job = {"apiVersion": "batch/v1", "kind": "Job", "spec": {"backoffLimit": 10}}
    assert "backoffLimitPerIndex" not in built(job_template=whole_job)  # the template's choice is kept
    assert built(job_template=whole_job)["backoffLimit"] == 10
    assert built(non_retriable_exit_codes=[2])["podFailurePolicy"]["rules"][0]["action"] == "FailIndex"
    with pytest.raises(AirflowFailException, match="non_retriable_exit_codes"):
        built(backoff_limit_per_index=None, non_retriable_exit_codes=[2])


KPO_PARAMETERS: dict[str, Any] = {
    "namespace": "batch",
    "image": "worker:1",
    "cmds": ["python", "-m", "shard"],
    "arguments": ["--fast"],
    "env_vars": {"MODE": "fast"},
    "container_resources": k8s.V1ResourceRequirements(requests={"cpu": "1", "memory": "1Gi"}),
    "labels": {"team": "risk"},
    "annotations": {"note": "nightly"},
    "node_selector": {"pool": "batch"},
    "service_account_name": "shards",
    "tolerations": [k8s.V1Toleration(key="gpu", operator="Exists", effect="NoSchedule")],
    "volumes": [k8s.V1Volume(name="scratch", empty_dir=k8s.V1EmptyDirVolumeSource())],
    "volume_mounts": [k8s.V1VolumeMount(name="scratch", mount_path="/scratch")],
    "image_pull_secrets": "registry-a",
    "image_pull_policy": "IfNotPresent",
    "init_containers": [k8s.V1Container(name="fetch", image="busybox:1", command=["sh", "-c", "true"])],
    "termination_grace_period": 120,
    "active_deadline_seconds": 3600,
    "priority_class_name": "batch-low",
    "kubernetes_conn_id": "kubernetes_default",
    "cluster_context": "aks-westeurope",
    "in_cluster": False,
}
"""A KubernetesPodOperator user's pod parameters, by KubernetesPodOperator's names."""


def test_a_kubernetes_pod_operator_dag_needs_only_the_class_renamed_and_a_queue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator

    platform = {  # what the platform team allows this namespace (docs/tenancy.md)
        "AIRFLOW__KUEUE__ALLOWED_SERVICE_ACCOUNTS": "shards",
        "AIRFLOW__KUEUE__ALLOWED_POD_PRIORITY_CLASSES": "batch:batch-low",
    }
    monkeypatch.setattr(kueue_config, "current_source", lambda: ConfigSource(platform))
    KubernetesPodOperator(task_id="kpo", **KPO_PARAMETERS)  # the same arguments are KPO's
    op = KueueIndexedJobOperator(task_id="task", queue_name="lq", **KPO_PARAMETERS)

    job = op.build_manifest(IDENTITY)
    pod, main = _pod(job), _main(job)
    assert (main["image"], main["command"], main["args"]) == (
        "worker:1",
        ["python", "-m", "shard"],
        ["--fast"],
    )
    assert {"name": "MODE", "value": "fast"} in main["env"]
    assert main["resources"] == {"requests": {"cpu": "1", "memory": "1Gi"}}
    assert main["imagePullPolicy"] == "IfNotPresent"
    assert {"name": "scratch", "mountPath": "/scratch"} in main["volumeMounts"]
    (init,) = pod["initContainers"]
    assert (init["name"], init["image"], init["command"]) == ("fetch", "busybox:1", ["sh", "-c", "true"])
    assert init["securityContext"] == {"allowPrivilegeEscalation": False}, (
        "the restricted defaults, as main's"
    )
    assert pod["terminationGracePeriodSeconds"] == 120, "the time a SIGTERM'd shard has to flush"
    assert pod["activeDeadlineSeconds"] == 3600, "the pod's deadline, as in KubernetesPodOperator"
    assert pod["priorityClassName"] == "batch-low", "the pods' PriorityClass, as in KubernetesPodOperator"
    assert "kueue.x-k8s.io/priority-class" not in job["metadata"]["labels"], "no WorkloadPriorityClass"
    assert (pod["nodeSelector"], pod["serviceAccountName"]) == ({"pool": "batch"}, "shards")
    assert pod["imagePullSecrets"] == [{"name": "registry-a"}]
    assert job["spec"]["template"]["metadata"]["labels"]["team"] == "risk"
    assert job["spec"]["template"]["metadata"]["annotations"]["note"] == "nightly"
    assert (op.cluster_target().cluster_context, op.cluster_target().in_cluster) == ("aks-westeurope", False)


def test_the_kueue_priority_is_workload_priority_class_and_its_earlier_name_still_works() -> None:
    for name in ("workload_priority_class", "priority_class"):
        op = KueueIndexedJobOperator(
            task_id="t", namespace="b", queue_name="lq", image="w", **{name: "nightly"}
        )
        job = op.build_manifest(IDENTITY)
        assert job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "nightly", name
        assert "priorityClassName" not in _pod(job), "not the pods' PriorityClass"


def test_bad_pod_fields_fail_when_the_dag_is_parsed() -> None:
    with pytest.raises(AirflowFailException, match="termination_grace_period"):
        KueueIndexedJobOperator(task_id="t", queue_name="lq", image="w", termination_grace_period="30")


def _rendered(op: KueueIndexedJobOperator, **params: Any) -> KueueIndexedJobOperator:
    op.render_template_fields({"params": params})  # type: ignore[arg-type]
    return op


def _templated_counts(**extra: Any) -> KueueIndexedJobOperator:
    """An operator whose counts are Jinja: it parses (the checks of templated values wait for the run)."""
    with DAG("templated_counts", schedule=None, start_date=datetime(2026, 1, 1)):
        return KueueIndexedJobOperator(
            task_id="t",
            namespace="batch",
            queue_name="lq",
            image="w",
            completions="{{ params.shards }}",
            parallelism="{{ params.pods }}",
            **extra,
        )


def test_counts_resources_and_the_connection_are_templated_and_checked_once_rendered() -> None:
    op = _templated_counts(
        container_resources={"requests": {"cpu": "{{ params.cpu }}", "memory": "1Gi"}},
        kubernetes_conn_id="{{ params.conn }}",
    )
    _rendered(op, shards="100", pods="10", cpu="2", conn="aks_westeurope")
    assert (op.completions, op.parallelism, op.kubernetes_conn_id) == (100, 10, "aks_westeurope")
    job = op.build_manifest(IDENTITY)
    assert (job["spec"]["completions"], job["spec"]["parallelism"]) == (100, 10)
    assert _main(job)["resources"]["requests"] == {"cpu": "2", "memory": "1Gi"}


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"shards": "many", "pods": "1"}, "completions: got 'many'"),
        ({"shards": "4", "pods": "8"}, "8 is greater than completions=4"),
        ({"shards": "2", "pods": "1"}, "shards_per_pod"),
    ],
)
def test_templated_counts_that_render_wrong_fail_before_anything_is_created(
    params: dict[str, str], message: str
) -> None:
    op = _templated_counts(shards_per_pod=4, checkpointing="kueue_blob_default")
    with pytest.raises(AirflowFailException, match=message):
        _rendered(op, **params).build_manifest(IDENTITY)
