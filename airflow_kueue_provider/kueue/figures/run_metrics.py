"""What a finished task reports to Airflow's metrics (StatsD or OpenTelemetry, through ``Stats``): its result
as metric points, named and tagged here, sent by the operator (``operators.metrics``).

Every name starts with ``kueue.`` (Airflow adds its ``statsd_prefix``, ``airflow.`` by default). Tags: the
DAG and task, the LocalQueue and ClusterQueue, the namespace, the kind (Job, JobSet) and the outcome. Plain
StatsD drops tags unless ``[metrics] statsd_influxdb_enabled`` (or Datadog, or OpenTelemetry) carries them.
The table of names is in docs/metrics.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

PREFIX = "kueue."


@dataclass(frozen=True)
class MetricPoint:
    kind: Literal["incr", "gauge", "timing"]
    name: str
    value: float
    """incr: the count; gauge: the value; timing: milliseconds."""
    tags: Mapping[str, str] = field(default_factory=dict)


def run_metrics(result: Mapping[str, Any], status: str, tags: Mapping[str, str]) -> list[MetricPoint]:
    """The points of one finished task instance (``status``: success, failed, ...) from its result."""
    tags = {**tags, "status": status}
    for key in ("cluster_queue", "namespace"):
        if result.get(key):
            tags.setdefault(key, str(result[key]))
    points = [MetricPoint("incr", PREFIX + "task.finished", 1, tags)]

    def timing(name: str, seconds: Any) -> None:
        if isinstance(seconds, (int, float)) and seconds >= 0:
            points.append(MetricPoint("timing", PREFIX + name, float(seconds) * 1000, tags))

    def count(name: str, value: Any, extra: Mapping[str, str] | None = None) -> None:
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            points.append(MetricPoint("incr", PREFIX + name, value, {**tags, **(extra or {})}))

    timing("queue_wait", result.get("queued_seconds"))
    timing("run_time", result.get("running_seconds"))
    for cause, n in eviction_causes(result.get("eviction_causes")).items():
        count("evictions", n, {"cause": cause})
        if cause.startswith("Preempted"):
            count("preemptions", n, {"cause": cause})
    count("shards.failed", result.get("failed"))
    count("shards.retried", result.get("retried_shards"))
    cost = result.get("estimated_cost_usd")
    if isinstance(cost, (int, float)):
        points.append(MetricPoint("gauge", PREFIX + "cost_usd", float(cost), tags))
    if (slack := deadline_slack(result)) is not None:
        points.append(MetricPoint("gauge", PREFIX + "deadline.slack_seconds", slack, tags))
    return points


def eviction_causes(causes: Any) -> dict[str, int]:
    """``{"Preempted/InCohortFairSharing": 1}`` from the result's ``eviction_causes`` (a mapping, or the text
    ``"Preempted/InCohortFairSharing: 1, PodsReadyTimeout: 2"``)."""
    if isinstance(causes, Mapping):
        return {str(k): int(v) for k, v in causes.items() if isinstance(v, int)}
    out: dict[str, int] = {}
    if isinstance(causes, str):
        for part in causes.split(","):
            name, _, n = part.strip().rpartition(":")
            if name and n.strip().isdigit():
                out[name.strip()] = out.get(name.strip(), 0) + int(n)
    return out


def deadline_slack(result: Mapping[str, Any]) -> float | None:
    """Seconds from the last ETA the trigger saw to the deadline (negative: late), when both are known."""
    deadline, history = result.get("deadline"), result.get("eta_history") or []
    etas = [s.get("eta") for s in history if isinstance(s, Mapping) and s.get("eta")]
    if not deadline or not etas:
        return None
    try:
        return (datetime.fromisoformat(str(deadline)) - datetime.fromisoformat(str(etas[-1]))).total_seconds()
    except ValueError:
        return None
