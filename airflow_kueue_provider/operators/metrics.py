"""Send a finished task's metric points (``kueue.figures.run_metrics``) through Airflow's ``Stats``; a metrics
backend that fails never fails the task."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ..airflow_compat import stats
from ..kueue.figures.run_metrics import PREFIX, MetricPoint, run_metrics
from ..kueue.identity.airflow_identity import AirflowIdentity
from ..kueue.progress.deadline_verdict import OUTCOME_KEY

log = logging.getLogger(__name__)


def send_run_metrics(
    result: Mapping[str, Any], status: str, identity: AirflowIdentity, queue_name: str, kind: str
) -> None:
    tags = {"dag_id": identity.dag_id, "task_id": identity.task_id, "queue": queue_name, "kind": kind}
    try:
        sink = stats()
        points = run_metrics(result, status, tags)
        for point in points + deadline_points(result, points[0].tags):
            if point.kind == "incr":
                sink.incr(point.name, int(point.value), tags=dict(point.tags))
            elif point.kind == "gauge":
                sink.gauge(point.name, point.value, tags=dict(point.tags))
            else:
                sink.timing(point.name, point.value, tags=dict(point.tags))
    except Exception as exc:  # metrics are best effort: the task's outcome stands
        log.warning("could not send the run's metrics: %s", exc)


def deadline_points(result: Mapping[str, Any], tags: Mapping[str, str]) -> list[MetricPoint]:
    """The result's ``deadline_outcome``: ``kueue.deadline.met`` and ``kueue.deadline.spare_seconds``, or
    ``kueue.deadline.missed`` and ``kueue.deadline.missed_seconds`` (docs/metrics.md); none without it."""
    outcome = result.get(OUTCOME_KEY)
    if not isinstance(outcome, Mapping) or not isinstance(outcome.get("seconds"), int | float):
        return []
    which, seconds = ("met", "spare") if outcome.get("met") else ("missed", "missed")
    return [
        MetricPoint("incr", f"{PREFIX}deadline.{which}", 1, tags),
        MetricPoint("gauge", f"{PREFIX}deadline.{seconds}_seconds", float(outcome["seconds"]), tags),
    ]
