"""A templated YAML job_template file, spot=True and the default TTL, on the real cluster."""

from __future__ import annotations

from ..airflow_runner import AirflowHome
from ..cluster import KueueEnv
from .test_indexed_job_queueing import returned_result

JOB_YAML = """
apiVersion: batch/v1
kind: Job
metadata:
  labels:
    team: genomics
spec:
  template:
    metadata:
      annotations:
        kwok.airflow-kueue.io/run-duration: "1s"
        nightly/run-date: "{{ ds }}"
    spec:
      containers:
      - name: main
        image: example.invalid/genomics-shard:2026.11
        env:
        - name: REFERENCE_GENOME
          value: "{{ params.reference }}"
"""

DAG = """
from datetime import datetime
from airflow.sdk import DAG
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

with DAG("from_template", schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
         template_searchpath=[{searchpath!r}], params={{"reference": "GRCh38"}}) as dag:
    KueueIndexedJobOperator(
        task_id="shards", namespace={namespace!r}, queue_name="lq", job_template="shard_job.yaml",
        completions=3, resources={{"requests": {{"cpu": "500m", "memory": "1Gi"}}}}, spot=True,
    )
"""


def test_yaml_job_template_is_rendered_and_spot_defaults_apply(
    kueue_env: KueueEnv, airflow_home: AirflowHome
) -> None:
    searchpath = airflow_home.home / "templates"
    searchpath.mkdir(exist_ok=True)
    (searchpath / "shard_job.yaml").write_text(JOB_YAML)
    airflow_home.write_dag(
        "from_template", DAG.format(searchpath=str(searchpath), namespace=kueue_env.namespace)
    )

    run = airflow_home.test_dag("from_template")

    assert run.succeeded, run.output[-4000:]
    job = kueue_env.job(returned_result(run)["job_name"])
    assert job is not None
    pod = job["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert container["image"] == "example.invalid/genomics-shard:2026.11"
    assert {"name": "REFERENCE_GENOME", "value": "GRCh38"} in container["env"]
    assert pod["metadata"]["annotations"]["nightly/run-date"].startswith("20")
    assert container["resources"]["requests"] == {"cpu": "500m", "memory": "1Gi"}
    assert job["metadata"]["labels"]["team"] == "genomics"
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "lq"
    assert job["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "airflow-kueue-provider"
    assert job["spec"]["ttlSecondsAfterFinished"] == 86400
    assert job["spec"]["completionMode"] == "Indexed"
    assert any(t.get("key") == "kubernetes.azure.com/scalesetpriority" for t in pod["spec"]["tolerations"])
    rules = job["spec"]["podFailurePolicy"]["rules"]
    assert rules[0] == {
        "action": "Ignore",
        "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
    }
