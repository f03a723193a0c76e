"""Bad input that no template can change fails the DAG's import, so a CI DAG-integrity check
(``airflow dags list-import-errors``, a DagBag test) catches it before any run; each message once."""

from __future__ import annotations

import json

from ..airflow_runner import AirflowHome

BAD_DAG = """
from datetime import datetime

from airflow.sdk import DAG
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

with DAG("{dag_id}", start_date=datetime(2026, 1, 1), schedule=None):
    KueueIndexedJobOperator(
        task_id="shards",
        queue_name="lq",
        image="example.invalid/shard:1",
        {params}
    )
"""


def test_list_import_errors_shows_each_bad_value_with_its_fix(airflow_home: AirflowHome) -> None:
    airflow_home.write_dag(
        "parse_bad_completions", BAD_DAG.format(dag_id="parse_bad_completions", params="completions=0,")
    )
    airflow_home.write_dag(
        "parse_bad_quantity",
        BAD_DAG.format(dag_id="parse_bad_quantity", params='resources={"requests": {"cpu": "4 cores"}},'),
    )
    try:
        run = airflow_home.airflow("dags", "list-import-errors", "--local", "-o", "json", check=False)
    finally:
        for name in ("parse_bad_completions", "parse_bad_quantity"):
            (airflow_home.home / "dags" / f"{name}.py").unlink()
    assert run.returncode == 1, "the command fails when a DAG does not import: a CI check sees it"
    errors = {row["filepath"].rsplit("/", 1)[-1]: row["error"] for row in json.loads(_json_part(run.output))}
    completions = errors["parse_bad_completions.py"]
    assert "shards: invalid KueueIndexedJob parameters" in completions
    assert "completions: got 0: set an integer from 1 to 100000" in completions
    quantity = errors["parse_bad_quantity.py"]
    assert "requests.cpu: '4 cores' is not a Kubernetes quantity" in quantity
    for error in (completions, quantity):
        assert error.count("invalid KueueIndexedJob parameters") == 1, error
        assert "direct cause" not in error and "During handling" not in error, error


def _json_part(output: str) -> str:
    """The JSON array in the command's output (log lines may come before it)."""
    start = output.index('[{"')
    return output[start : output.rindex("]") + 1]


def test_a_literal_queue_or_priority_class_outside_the_allowlists_fails_the_import(
    airflow_home: AirflowHome,
) -> None:
    """[kueue] allowed_local_queues / allowed_priority_classes, as the platform set them for the process."""
    params = 'namespace="team-a", priority_class="top", completions=2,'
    dag = BAD_DAG.format(dag_id="parse_other_queue", params=params).replace('"lq"', '"team-b-queue"')
    airflow_home.write_dag("parse_other_queue", dag)
    policy = {
        "AIRFLOW__KUEUE__ALLOWED_LOCAL_QUEUES": "team-a:q1 q2; team-b:*",
        "AIRFLOW__KUEUE__ALLOWED_PRIORITY_CLASSES": "team-a:low",
    }
    try:
        run = airflow_home.airflow(
            "dags", "list-import-errors", "--local", "-o", "json", check=False, extra_env=policy
        )
    finally:
        (airflow_home.home / "dags" / "parse_other_queue.py").unlink()
    errors = {row["filepath"].rsplit("/", 1)[-1]: row["error"] for row in json.loads(_json_part(run.output))}
    error = errors["parse_other_queue.py"]
    assert "queue_name (LocalQueue) 'team-b-queue' is not allowed in namespace 'team-a'" in error, error
    assert "[kueue] allowed_local_queues (allowed there: q1, q2)" in error, error
    assert "priority_class (WorkloadPriorityClass) 'top' is not allowed in namespace 'team-a'" in error, error
