"""job_template is parsed before Jinja renders it (issue 38, item 5): a rendered value -- a dag_run.conf value
with a newline and YAML -- stays a string and never becomes structure of the Job."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import DAG

from airflow_kueue_provider.airflow_compat import AirflowFailException
from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

IDENTITY = AirflowIdentity("dag", "task", "run-1")
TEMPLATE = """apiVersion: batch/v1
kind: Job
spec:
  template:
    spec:
      containers:
      - name: main
        image: worker:1
        env:
        - name: SAMPLE
          value: "{{ dag_run.conf['sample'] }}"
"""
# What a run's conf could carry to add a hostPath volume to the pod, were the template rendered as text.
INJECTION = 'x"\n      volumes:\n      - name: root\n        hostPath: {path: /}\n      containers: []\n#'


def _context() -> dict[str, Any]:
    return {"dag_run": type("Run", (), {"conf": {"sample": INJECTION}})()}


def _rendered(op: KueueIndexedJobOperator) -> dict[str, Any]:
    op.render_template_fields(_context())
    return op.build_manifest(IDENTITY)


def _check(job: dict[str, Any]) -> None:
    pod = job["spec"]["template"]["spec"]
    assert "volumes" not in pod, pod
    (main,) = pod["containers"]
    assert {"name": "SAMPLE", "value": INJECTION} in main["env"], main["env"]


def test_a_conf_value_rendered_into_yaml_text_stays_a_string() -> None:
    op = KueueIndexedJobOperator(task_id="t", namespace="batch", queue_name="lq", job_template=TEMPLATE)
    _check(_rendered(op))


def test_a_conf_value_rendered_into_a_template_file_stays_a_string(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(TEMPLATE)
    with DAG("t", schedule=None, start_date=datetime(2026, 1, 1), template_searchpath=[str(tmp_path)]):
        op = KueueIndexedJobOperator(task_id="t", namespace="batch", queue_name="lq", job_template="job.yaml")
    _check(_rendered(op))


def test_dict_templates_render_their_values_as_before() -> None:
    template = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "spec": {"template": {"metadata": {"annotations": {"run": "{{ ds }}"}}}},
    }
    op = KueueIndexedJobOperator(
        task_id="t", namespace="batch", queue_name="lq", image="w:1", job_template=template
    )
    op.render_template_fields({"ds": "2026-12-04"})
    annotations = op.build_manifest(IDENTITY)["spec"]["template"]["metadata"]["annotations"]
    assert annotations["run"] == "2026-12-04"


def test_a_native_environment_may_not_turn_a_value_into_structure() -> None:
    with DAG("n", schedule=None, start_date=datetime(2026, 1, 1), render_template_as_native_obj=True):
        op = KueueIndexedJobOperator(task_id="t", namespace="batch", queue_name="lq", job_template=TEMPLATE)
    context = {"dag_run": type("Run", (), {"conf": {"sample": "{'hostPath': {'path': '/'}}"}})()}
    with pytest.raises(AirflowFailException, match=r"job_template values .*env\[0\]\.value rendered"):
        op.render_template_fields(context)


def test_unquoted_jinja_in_yaml_text_names_the_fix() -> None:
    op = KueueIndexedJobOperator(
        task_id="t", namespace="batch", queue_name="lq", job_template="spec:\n  x: {{ ds }}\n"
    )
    with pytest.raises(AirflowFailException, match="write Jinja inside quoted strings"):
        op.render_template_fields({"ds": "2026-12-04"})
