"""``KueueUiPlugin``: the queue dashboard in the navigation, and a Kueue tab on each task instance."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from .dashboard_app import create_app
from .dashboard_data import KUEUE_OPERATORS

# The app is built here, at import, on purpose. Every Airflow process that loads plugins imports this module,
# the scheduler among them before it forks LocalExecutor's workers, whose task processes are forked from them:
# what the app imports (both Kubernetes clients, the cncf hook) each Kueue task inherits instead of importing
# it in its DAG parse. Built on the first request instead, the small night's align tasks parsed their DAG in
# 5-8 s against 1.4-2.6 s (docs/benchmarks.md).

URL_PREFIX = "/kueue"
"""Where Airflow's API server mounts the app, under its ``[api] base_url`` path."""
HREF_PREFIX = URL_PREFIX.lstrip("/")
"""The views' hrefs are relative: the UI's ``<base href>`` is Airflow's base URL, so they resolve to
``<base_url>/kueue/…`` also when Airflow is served under a path (``/kueue/…`` would miss it, and the
login cookie, which is scoped to that path)."""
TASK_INSTANCE_HREF = (
    f"{HREF_PREFIX}/task?dag_id={{DAG_ID}}&run_id={{RUN_ID}}&task_id={{TASK_ID}}&map_index={{MAP_INDEX}}"
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
            "href": f"{HREF_PREFIX}/queues",
            "destination": "nav",
            "category": "browse",
            "url_route": "kueue-queues",
        },
        {
            "name": "Kueue",
            "href": TASK_INSTANCE_HREF,
            "destination": "task_instance",
            "url_route": "kueue-task",
            # A hint for a UI that can limit a tab to some operators. Airflow 3.3's UI cannot (it picks
            # task_instance views by destination alone), so the tab shows on every task instance and the
            # page of another operator's task says that it has no Kueue Job.
            "applies_to": {"operators": sorted(KUEUE_OPERATORS)},
        },
    ]
