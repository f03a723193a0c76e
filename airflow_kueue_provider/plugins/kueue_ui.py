"""``KueueUiPlugin``: the queue dashboard in the navigation, and a Kueue tab on each task instance."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from .dashboard_app import create_app

URL_PREFIX = "/kueue"
TASK_INSTANCE_HREF = (
    f"{URL_PREFIX}/task?dag_id={{DAG_ID}}&run_id={{RUN_ID}}&task_id={{TASK_ID}}&map_index={{MAP_INDEX}}"
)


class KueueUiPlugin(AirflowPlugin):
    # Plain lists, as AirflowPlugin declares them (the plugins manager reads and filters them in place).
    name = "kueue"
    fastapi_apps = [  # noqa: RUF012
        {"app": create_app(), "url_prefix": URL_PREFIX, "name": "Kueue dashboard"},
    ]
    external_views = [  # noqa: RUF012
        {
            "name": "Kueue queues",
            "href": f"{URL_PREFIX}/queues",
            "destination": "nav",
            "category": "browse",
            "url_route": "kueue-queues",
        },
        {
            "name": "Kueue",
            "href": TASK_INSTANCE_HREF,
            "destination": "task_instance",
            "url_route": "kueue-task",
            # Airflow 3.4+ shows the tab only on this operator's task instances; older versions ignore it.
            "applies_to": {"operators": ["KueueIndexedJobOperator"]},
        },
    ]
