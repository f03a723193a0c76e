"""A task instance's operator, read from Airflow's database: the task tab of a task with no Job says why."""

from __future__ import annotations

import logging

from .dashboard_data import TaskInstanceFacts

log = logging.getLogger(__name__)


def airflow_task_instance(dag_id: str, run_id: str, task_id: str, map_index: int) -> TaskInstanceFacts | None:
    """The task instance's operator from Airflow's database (the API server's own session); None when the
    database cannot be read, which only makes the tab's no-Job sentence less specific."""
    try:
        from airflow.models.taskinstance import TaskInstance
        from airflow.utils.session import create_session
        from sqlalchemy import func, select

        task = (TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id, TaskInstance.task_id == task_id)
        with create_session() as session:
            operator = session.scalar(
                select(TaskInstance.operator).where(*task, TaskInstance.map_index == map_index)
            )
            if operator is not None:
                return TaskInstanceFacts(str(operator))
            mapped = 0
            if map_index < 0:
                count = select(func.count()).select_from(TaskInstance)
                mapped = int(session.scalar(count.where(*task, TaskInstance.map_index >= 0)) or 0)
            return TaskInstanceFacts(None, mapped)
    except Exception:
        log.warning("Kueue tab: cannot read task instance %s/%s/%s", dag_id, run_id, task_id, exc_info=True)
        return None
