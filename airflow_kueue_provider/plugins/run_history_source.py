"""The operator's results from Airflow's database (the API server's own session), for the queue page's run
history and the task view's plot: the newest ``return_value`` XComs of the Kueue operators' task instances,
of the DAGs the user may read (or of the one task the task view, authorized for its DAG, shows)."""

from __future__ import annotations

import logging
from collections.abc import Collection

from ..kueue.run_history import RunRecord
from ..kueue.run_trends import RUNS_PER_TASK
from .dashboard_data import KUEUE_OPERATORS

log = logging.getLogger(__name__)

HISTORY_ROWS = 500
"""Results read per page: the newest, over every queue."""


def airflow_run_records(dag_ids: Collection[str] | None, limit: int = HISTORY_ROWS) -> list[RunRecord]:
    """``dag_ids``: the DAGs whose results may be shown (None: every DAG). A database that cannot be read
    leaves the history empty: the queues above it do not depend on it."""
    if dag_ids is not None and not dag_ids:
        return []
    return _read(dag_ids, None, limit)


def airflow_task_run_records(
    dag_id: str, task_id: str, map_index: int, limit: int = RUNS_PER_TASK
) -> list[RunRecord]:
    """The newest results of one task (the same map index) of one DAG, over its DAG runs."""
    return _read([dag_id], (task_id, map_index), limit)


def _read(dag_ids: Collection[str] | None, task: tuple[str, int] | None, limit: int) -> list[RunRecord]:
    try:
        from airflow.models.taskinstance import TaskInstance
        from airflow.models.xcom import XComModel
        from airflow.utils.session import create_session
        from sqlalchemy import select

        query = (
            select(
                XComModel.dag_id,
                XComModel.run_id,
                XComModel.task_id,
                XComModel.map_index,
                XComModel.timestamp,
                XComModel.value,
            )
            .join(
                TaskInstance,
                (TaskInstance.dag_id == XComModel.dag_id)
                & (TaskInstance.run_id == XComModel.run_id)
                & (TaskInstance.task_id == XComModel.task_id)
                & (TaskInstance.map_index == XComModel.map_index),
            )
            .where(XComModel.key == "return_value", TaskInstance.operator.in_(sorted(KUEUE_OPERATORS)))
            .order_by(XComModel.timestamp.desc())
            .limit(limit)
        )
        if dag_ids is not None:
            query = query.where(XComModel.dag_id.in_(sorted(dag_ids)))
        if task is not None:
            query = query.where(XComModel.task_id == task[0], XComModel.map_index == task[1])
        with create_session() as session:
            rows = session.execute(query).all()
        records = []
        for row in rows:
            value = XComModel.deserialize_value(row)
            record = RunRecord.from_result(
                row.dag_id, row.run_id, row.task_id, row.map_index, row.timestamp, value
            )
            if record is not None:
                records.append(record)
        return records
    except Exception:
        log.warning("Kueue queue page: cannot read the run history from Airflow's database", exc_info=True)
        return []
