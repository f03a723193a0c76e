"""What the UI's app is made with (``DashboardSettings``): where it reads the cluster and Airflow, who may
see what, and its caps. One frozen value rather than a dozen parameters: tests swap a few fields, the
plugin takes the defaults, which read Airflow's configuration and ask Airflow's auth manager."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from ..hooks.kueue_hook import KueueHook
from ..hooks.kueue_options import option_text
from .dashboard_data import QUEUE_SAMPLES, TaskInstanceFacts
from .fanout import StreamCaps, configured_caps
from .read_caps import ReadCaps, configured_read_caps
from .run_history_source import (
    airflow_dag_night_records,
    airflow_dag_run_records,
    airflow_run_records,
    airflow_task_run_records,
)
from .task_instance_source import airflow_task_instance
from .views.run_history import RunRecord
from .views.run_trends import QueueSampleRing


def configured_hook() -> KueueHook:
    """The hook of ``[kueue] kubernetes_conn_id`` (default ``kubernetes_default``), read through the typed
    reader: the plugin's first read, so a bad ``[kueue]`` value fails here naming the option."""
    return KueueHook(option_text("kubernetes_conn_id") or "kubernetes_default")


def configured_namespaces() -> list[str]:
    """``[kueue] ui_namespaces`` (comma-separated); empty means every namespace."""
    return [ns.strip() for ns in option_text("ui_namespaces").split(",") if ns.strip()]


@dataclass(frozen=True)
class DashboardSettings:
    """The app's sources, checks and caps; tests pass their own hook factory and namespaces, and may swap:

    - the login and access checks (``dependencies``: every route; ``task_access``: the task routes;
      ``log_access``: the log tail of an index, which needs the DAG's task logs; ``queues_access``: the
      queue routes); None means Airflow's;
    - the lookup of a task instance's operator in Airflow's database (``task_instances``);
    - the read of the operator's results for the run history (``run_records``) and the DAGs whose results
      the user may see (``readable_dags``, a dependency; by default Airflow's auth manager decides for the
      logged-in user, and without Airflow's login, in tests, every DAG);
    - the read of one task's results for the task view's plot (``task_runs``: its DAG is the one the task
      route authorized) and where the ClusterQueues' samples are kept (``queue_samples``);
    - the reads of a DAG's newest DAG runs' results (``dag_nights``: dag_id, how many runs) and of one DAG
      run's (``dag_run_records``: dag_id, run_id), for the nights and DAG run pages;
    - the caps on live streams (``stream_caps``, read on the first stream) and whose streams and reads a
      request counts as (``stream_user``, a dependency; the login's name by default);
    - the caps on the other reads, with the threads they run in (``read_caps``, made on the first read);
    - whether the task view may plot the task's results (``results_access``, a dependency: the DAG's XCom
      read permission by default; without Airflow's login, in tests, yes).

    The fields are ``create_app``'s old parameters, in their old order.
    """

    hook_factory: Callable[[], KueueHook] = configured_hook
    namespaces: Callable[[], Sequence[str]] = configured_namespaces
    dependencies: Sequence[Any] | None = None
    task_access: Sequence[Any] | None = None
    log_access: Sequence[Any] | None = None
    queues_access: Sequence[Any] | None = None
    task_instances: Callable[[str, str, str, int], TaskInstanceFacts | None] = airflow_task_instance
    run_records: Callable[[Collection[str] | None], list[RunRecord]] = airflow_run_records
    readable_dags: Callable[..., Collection[str] | None] | None = None
    task_runs: Callable[[str, str, int], list[RunRecord]] = airflow_task_run_records
    queue_samples: QueueSampleRing = QUEUE_SAMPLES
    stream_caps: Callable[[], StreamCaps] = configured_caps
    stream_user: Callable[..., str] | None = None
    read_caps: Callable[[], ReadCaps] = configured_read_caps
    results_access: Callable[..., bool] | None = None
    dag_nights: Callable[[str, int], list[RunRecord]] = airflow_dag_night_records
    dag_run_records: Callable[[str, str], list[RunRecord]] = airflow_dag_run_records
