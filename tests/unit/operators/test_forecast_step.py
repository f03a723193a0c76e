"""The forecast at submit in the operator: logged, in the deadline plan, in the result with its error."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_kueue_provider.kueue.checkpoints.learned_lengths import LearnedLengths
from airflow_kueue_provider.kueue.progress.deadline import DeadlinePlan
from airflow_kueue_provider.operators.forecast_step import ForecastStep, with_outcome

QUEUE = {
    "metadata": {"name": "cq"},
    "spec": {
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [{"name": "od", "resources": [{"name": "cpu", "nominalQuota": "2"}]}],
            }
        ]
    },
    "status": {"pendingWorkloads": 0},
}


class Hook:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail

    def get_local_queue(self, namespace: str, name: str) -> dict[str, Any]:
        return {"spec": {"clusterQueue": "cq"}}

    def list_cluster_queues(self) -> list[dict[str, Any]]:
        if self.fail:
            from kubernetes.client.rest import ApiException

            raise ApiException(403, "Forbidden")
        return [QUEUE]

    def pending_workloads(self, namespace: str, local_queue: str) -> None:
        return None


class Kind:
    """The kind's part of the template: its own checks before the create."""

    checked = False

    def _before_create(self, client: Any, manifest: dict[str, Any]) -> None:
        self.checked = True


class Ti:
    map_index = -1

    def __init__(self) -> None:
        self.xcom: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[key] = value

    def xcom_pull(self, task_ids: str, key: str, map_indexes: int) -> Any:
        return self.xcom.get(key)


class Step(ForecastStep, Kind):
    task_id, queue_name = "t", "lq"
    log = logging.getLogger("test_forecast_step")

    def __init__(self, stated: float | None, learned: LearnedLengths | None = None) -> None:
        self.expected_shard_duration = SimpleNamespace(shortest=stated, longest=stated) if stated else None
        if learned is not None:
            self._learned_lengths = lambda count: learned

    def resolved_namespace(self) -> str:
        return "ns"

    def _shard_count(self) -> int:
        return 8


def job(parallelism: int = 4) -> dict[str, Any]:
    pod = {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}
    spec = {"completions": 8, "parallelism": parallelism, "template": {"spec": pod}}
    return {"kind": "Job", "spec": spec}


def submit(step: Step, hook: Hook) -> None:
    """The step as ``_submit`` runs it (``_before_create``), on the shaped Job of 8 shards, one per pod."""
    client: Any = SimpleNamespace(hook=hook)
    step._before_create(client, job())
    assert step.checked  # the kind's checks still run


def plan() -> DeadlinePlan:
    return DeadlinePlan(datetime.now(UTC) + timedelta(seconds=20), timedelta(seconds=2), escalate=True)


def test_a_forecast_is_logged_put_in_the_plan_and_kept_for_the_result(
    caplog: pytest.LogCaptureFixture,
) -> None:
    step, ti = Step(stated=60.0), Ti()
    with caplog.at_level(logging.INFO, "test_forecast_step"):
        submit(step, Hook())
    line = caplog.messages[-1]
    assert line.startswith("forecast: start ~") and "2 CPU quota, 2 pods at once (quota-bound)" in line
    planned = step._with_forecast({"ti": ti}, plan())
    assert planned is not None and planned.forecast is not None
    assert planned.forecast.at - datetime.now(UTC) > timedelta(seconds=250)  # 4 waves of 65 s on 2 CPUs
    # A new worker after the deferral: the record comes back from the XCom, with how far off it was.
    resumed = Step(stated=60.0)
    result, message = resumed._forecast_outcome({"ti": ti}, {"completed_indexes": "0-7"}, "done")
    assert message == "done"
    record = result["forecast"]
    assert set(record) >= {"made_at", "start", "finish", "finish_early", "finish_late", "nights", "basis"}
    assert record["error_seconds"] < -250  # it ended now: far earlier than forecast
    assert record["nights"] == 0 and record["basis"].startswith("from the stated shard duration")


def test_learned_lengths_come_from_the_operator_when_it_has_them(caplog: pytest.LogCaptureFixture) -> None:
    learned = LearnedLengths(8, dict.fromkeys(range(8), 10.0), ("a", "b", "c"))
    step = Step(stated=None, learned=learned)
    with caplog.at_level(logging.INFO, "test_forecast_step"):
        submit(step, Hook())
    assert "from 3 nights of shard history" in caplog.messages[-1]
    assert step._forecast is not None and step._forecast["nights"] == 3


def test_no_lengths_no_forecast_and_an_unreadable_queue_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    quiet = Step(stated=None)
    submit(quiet, Hook())
    assert quiet._forecast is None and quiet._with_forecast({"ti": Ti()}, None) is None
    step = Step(stated=60.0)
    with caplog.at_level(logging.INFO, "test_forecast_step"):
        submit(step, Hook(fail=True))
    assert caplog.messages == ["forecast: left out (reading the queues: 403 Forbidden)"]
    assert step._forecast is None
    original = plan()
    assert step._with_forecast({"ti": Ti()}, original) is original
    assert Step(stated=None)._forecast_outcome({"ti": Ti()}, {"a": 1}, "m") == ({"a": 1}, "m")


def test_the_outcome_is_measured_to_the_jobs_end_not_the_workers_resume() -> None:
    made = datetime(2026, 12, 1, 1, 0, tzinfo=UTC)
    record = {"made_at": made.isoformat(), "finish": (made + timedelta(seconds=100)).isoformat()}
    done = {"type": "Complete", "status": "True", "lastTransitionTime": "2026-12-01T01:01:50Z"}
    step = Step(stated=None)
    step._forecast = record
    client: Any = SimpleNamespace(get=lambda ns, name: {"status": {"conditions": [done]}})
    step._client = lambda: client  # type: ignore[method-assign]
    result, _ = step._forecast_outcome({}, {"job_name": "j", "namespace": "ns"}, "m")
    assert result["forecast"]["actual_finish"] == "2026-12-01T01:01:50+00:00"
    assert result["forecast"]["error_seconds"] == 10.0


def test_the_outcome_line_says_early_or_late_by_how_much() -> None:
    made = datetime(2026, 12, 1, 1, 0, tzinfo=UTC)
    record = {"made_at": made.isoformat(), "finish": (made + timedelta(seconds=600)).isoformat()}
    late_run, line = with_outcome(record, made + timedelta(seconds=612))
    assert late_run["error_seconds"] == 12.0
    assert line == "forecast was 12 s early (2% of 612 s)"
    _, line = with_outcome(record, made + timedelta(seconds=500))
    assert line == "forecast was 100 s late (20% of 500 s)"
