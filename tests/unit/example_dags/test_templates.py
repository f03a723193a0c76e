"""The example DAGs' templates render for a run without a logical date (a manual run from the UI or API).

Airflow 3 gives such runs no ``ds``/``logical_date``; a template that needs one fails the task before it
starts. ``airflow dags test`` always sets a logical date, so only this test sees it.
"""

from __future__ import annotations

import runpy
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from airflow.sdk import DAG

EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "example_dags").glob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_templates_render_without_a_logical_date(path: Path) -> None:
    dags = [v for v in runpy.run_path(str(path)).values() if isinstance(v, DAG)]
    assert dags, f"{path.name} defines no DAG"
    run_after = datetime(2026, 11, 30, 1, tzinfo=UTC)
    for dag in dags:
        for task in dag.tasks:
            context = {
                "dag": dag,
                "task": task,
                "run_id": "manual__2026-11-30T01:00:00+00:00",
                "dag_run": SimpleNamespace(run_after=run_after, logical_date=None, conf={}),
                "ti": SimpleNamespace(
                    try_number=1,
                    map_index=-1,
                    dag_id=dag.dag_id,
                    task_id=task.task_id,
                    xcom_pull=lambda *args, **kwargs: None,
                ),
                "params": {name: dag.params[name] for name in dag.params},  # the defaults, as a run gets
                "var": {},
                "conn": {},
                "macros": SimpleNamespace(),
            }
            task.render_template_fields(context)  # type: ignore[arg-type]


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_the_examples_take_their_counts_from_params_and_update_an_asset(path: Path) -> None:
    """As Airflow users expect: the sizes change per run (trigger with params), and a successful run
    updates an Asset a downstream DAG can be scheduled on."""
    from airflow.sdk import Asset

    from airflow_kueue_provider.operators.kueue_operator import KueueOperator

    dags = [v for v in runpy.run_path(str(path)).values() if isinstance(v, DAG)]
    kueue_tasks = [t for dag in dags for t in dag.tasks if isinstance(t, KueueOperator)]
    assert kueue_tasks, f"{path.name} has no Kueue task"
    for dag in dags:
        assert any(isinstance(o, Asset) for t in dag.tasks for o in t.outlets), (
            f"{dag.dag_id} updates no Asset"
        )
    for task in kueue_tasks:
        if hasattr(task, "completions"):
            assert "params." in str(task.completions), f"{task.task_id}: completions={task.completions!r}"
