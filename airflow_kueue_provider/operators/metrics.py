"""Send a finished task's metric points (``kueue.figures.run_metrics``) through Airflow's ``Stats``; a metrics
backend that fails never fails the task."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ..airflow_compat import stats
from ..kueue.figures.run_metrics import run_metrics
from ..kueue.identity.airflow_identity import AirflowIdentity

log = logging.getLogger(__name__)


def send_run_metrics(
    result: Mapping[str, Any], status: str, identity: AirflowIdentity, queue_name: str, kind: str
) -> None:
    tags = {"dag_id": identity.dag_id, "task_id": identity.task_id, "queue": queue_name, "kind": kind}
    try:
        sink = stats()
        for point in run_metrics(result, status, tags):
            if point.kind == "incr":
                sink.incr(point.name, int(point.value), tags=dict(point.tags))
            elif point.kind == "gauge":
                sink.gauge(point.name, point.value, tags=dict(point.tags))
            else:
                sink.timing(point.name, point.value, tags=dict(point.tags))
    except Exception as exc:  # metrics are best effort: the task's outcome stands
        log.warning("could not send the run's metrics: %s", exc)
