"""A DAG written the KubernetesPodOperator / KubernetesJobOperator way runs on the local cluster."""

from __future__ import annotations

from ..airflow_runner import AirflowHome
from ..cluster import KueueEnv
from .test_indexed_job_queueing import returned_result

DAG = """
from datetime import datetime
from kubernetes.client import models as k8s
from airflow.providers.cncf.kubernetes.secret import Secret
from airflow.sdk import DAG
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

with DAG("kpo_style", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    KueueIndexedJobOperator(
        task_id="shards",
        queue_name={queue!r},
        image="example.invalid/worker:1",
        cmds=["python", "-m", "worker"],
        arguments=["--config", "/etc/pipeline/config.yaml", "--run", "{{{{ run_id }}}}"],
        completions=3,
        env_vars=[k8s.V1EnvVar(name="STAGE", value="nightly")],
        container_resources=k8s.V1ResourceRequirements(requests={{"cpu": "500m", "memory": "512Mi"}}),
        spot=True,
        tolerations=[k8s.V1Toleration(key="dedicated", operator="Equal", value="batch", effect="NoSchedule")],
        affinity=k8s.V1Affinity(node_affinity=k8s.V1NodeAffinity(
            required_during_scheduling_ignored_during_execution=k8s.V1NodeSelector(node_selector_terms=[
                k8s.V1NodeSelectorTerm(match_expressions=[k8s.V1NodeSelectorRequirement(
                    key="kubernetes.azure.com/scalesetpriority", operator="In", values=["spot"])])]))),
        volumes=[k8s.V1Volume(name="scratch", empty_dir=k8s.V1EmptyDirVolumeSource())],
        volume_mounts=[k8s.V1VolumeMount(name="scratch", mount_path="/scratch")],
        secrets=[Secret("env", "DB_PASSWORD", "db-credentials", "password"),
                 Secret("volume", "/etc/creds", "service-creds")],
        image_pull_secrets=[k8s.V1LocalObjectReference(name="registry")],
        annotations={{"kwok.airflow-kueue.io/run-duration": "1s"}},
        kubernetes_conn_id="kpo_conn",
    )
"""


def test_a_dag_written_the_kubernetes_pod_operator_way_runs_and_its_job_carries_each_setting(
    kueue_env: KueueEnv, airflow_home: AirflowHome
) -> None:
    # No namespace in the DAG: it comes from the connection, as with KubernetesPodOperator.
    conn = airflow_home.env["AIRFLOW_CONN_KUBERNETES_DEFAULT"].replace(
        '"extra": {', f'"extra": {{"namespace": "{kueue_env.namespace}", ', 1
    )
    assert kueue_env.namespace in conn, conn
    airflow_home.env["AIRFLOW_CONN_KPO_CONN"] = conn
    airflow_home.write_dag("kpo_style", DAG.format(queue=kueue_env.local_queue))

    run = airflow_home.test_dag("kpo_style")

    assert run.succeeded, run.output[-6000:]
    assert returned_result(run)["completed_indexes"] == "0-2"
    (job,) = kueue_env.jobs()
    pod = job.spec.template.spec
    main = next(c for c in pod.containers if c.name == "main")
    assert main.args[:2] == ["--config", "/etc/pipeline/config.yaml"] and main.args[3].startswith("manual__")
    assert {e.name for e in main.env} >= {"STAGE", "DB_PASSWORD"}
    assert (
        next(e for e in main.env if e.name == "DB_PASSWORD").value_from.secret_key_ref.name
        == "db-credentials"
    )
    assert main.resources.requests == {"cpu": "500m", "memory": "512Mi"}
    assert {m.mount_path for m in main.volume_mounts} == {"/scratch", "/etc/creds"}
    assert {v.name for v in pod.volumes} >= {"scratch"} and any(v.secret for v in pod.volumes)
    assert {t.key for t in pod.tolerations} == {"dedicated", "kubernetes.azure.com/scalesetpriority"}
    terms = pod.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms
    assert terms[0].match_expressions[0].values == ["spot"]
    assert [s.name for s in pod.image_pull_secrets] == ["registry"]
