"""The "Kueue" extra link: where it points, and that the operator carries it."""

from __future__ import annotations

from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.operators.kueue_link import KueueJobLink, task_view_path, task_view_url


def test_the_link_opens_the_task_instances_kueue_tab_in_airflows_ui() -> None:
    run = "scheduled__2026-12-01T02:00:00+00:00"
    assert task_view_path("nightly", run, "shards") == (
        "dags/nightly/runs/scheduled__2026-12-01T02%3A00%3A00%2B00%3A00/tasks/shards/plugin/kueue-task"
    )
    assert (
        task_view_path("d", "r", "group.shards", 3)
        == "dags/d/runs/r/tasks/group.shards/mapped/3/plugin/kueue-task"
    )
    assert task_view_path("d", "r/../x", "t").startswith("dags/d/runs/r%2F..%2Fx/"), "no path escape"
    assert task_view_url("https://airflow.example.com/", "d", "r", "t") == (
        "https://airflow.example.com/dags/d/runs/r/tasks/t/plugin/kueue-task"
    )
    assert task_view_url(None, "d", "r", "t") == "dags/d/runs/r/tasks/t/plugin/kueue-task"


def test_every_kueue_task_has_the_link() -> None:
    op = KueueIndexedJobOperator(task_id="t", queue_name="q", image="i")
    assert [link.name for link in op.operator_extra_links] == ["Kueue"]
    assert isinstance(op.operator_extra_links[0], KueueJobLink)
    assert op.operator_extra_links[0].xcom_key == "_link_KueueJobLink"
