"""``KueueJobLink``: the "Kueue" extra link of a KueueIndexedJobOperator task instance.

It opens the task instance's Kueue tab inside Airflow's own UI (the plugin's ``kueue-task`` view), not a bare
page of the plugin, so the task's Airflow context stays around it.

Persisted: Airflow 3 asks each extra link for its URL when a task's run ends (deferring ends one, so a
deferred task has it too) and stores it in XCom (``_link_KueueJobLink``); the API server reads that XCom
and never imports this class. A link keeps working when the DAG changes or this provider is absent from
the API server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar
from urllib.parse import quote

from airflow.sdk import BaseOperatorLink

from ..airflow_compat import task_conf

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator
    from airflow.sdk.types import TaskInstanceKey

KUEUE_VIEW_ROUTE = "kueue-task"
"""The ``url_route`` of the plugin's task-instance view (``plugins/kueue_ui.py`` declares it)."""


def task_view_path(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
    """The Airflow UI's path of a task instance's Kueue tab, relative to Airflow's base URL. Every part is
    percent-encoded: run ids hold ``:`` and ``+``, and a task id in a task group holds ``.``."""
    parts = [quote(dag_id, safe=""), quote(run_id, safe=""), quote(task_id, safe="")]
    mapped = f"/mapped/{map_index}" if map_index >= 0 else ""
    return f"dags/{parts[0]}/runs/{parts[1]}/tasks/{parts[2]}{mapped}/plugin/{KUEUE_VIEW_ROUTE}"


def task_view_url(base_url: str | None, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
    """Absolute under ``[api] base_url`` when it is set; else relative, which Airflow's UI resolves against
    its own base URL (a same-origin link opens in the same tab)."""
    path = task_view_path(dag_id, run_id, task_id, map_index)
    return f"{base_url.rstrip('/')}/{path}" if base_url else path


class KueueJobLink(BaseOperatorLink):
    name: ClassVar[str] = "Kueue"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        base_url = task_conf().get("api", "base_url", fallback="") or None
        return task_view_url(base_url, ti_key.dag_id, ti_key.run_id, ti_key.task_id, ti_key.map_index)
