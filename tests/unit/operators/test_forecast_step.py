"""The forecast at submit in the operator: logged, in the deadline plan, in the result with its error."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_kueue_provider.kueue.checkpoints.learned_lengths import LearnedLengths
from airflow_kueue_provider.kueue.progress.deadline import DeadlinePlan
from airflow_kueue_provider.operators.forecast_step import ForecastStep, model_error, with_outcome
from airflow_kueue_provider.operators.job_submission import Submission

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

    def workloads_page(self, namespace: str, limit: int) -> list[dict[str, Any]]:
        return []


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


class Busy(Hook):
    """Two align Jobs (priority 100) of this LocalQueue pending in the ClusterQueue; the classes' values."""

    def __init__(self, fail: bool = False, forbidden: bool = False) -> None:
        super().__init__(fail)
        self.forbidden = forbidden

    def list_cluster_queues(self) -> list[dict[str, Any]]:
        return [{**super().list_cluster_queues()[0], "status": {"pendingWorkloads": 2}}]

    def pending_workloads(self, namespace: str, local_queue: str) -> dict[str, Any]:  # type: ignore[override]
        return {"items": [{"priority": 100, "positionInClusterQueue": p} for p in (0, 1)]}

    def get_workload_priority_class(self, name: str) -> dict[str, Any] | None:
        if self.forbidden:
            from kubernetes.client.rest import ApiException

            raise ApiException(403, "Forbidden")
        return {"metadata": {"name": name}, "value": {"align": 100, "gather": 300}[name]}


def job(parallelism: int = 4, priority_class: str | None = None) -> dict[str, Any]:
    pod = {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}
    spec = {"completions": 8, "parallelism": parallelism, "template": {"spec": pod}}
    labels = {"kueue.x-k8s.io/priority-class": priority_class} if priority_class else {}
    return {"kind": "Job", "metadata": {"labels": labels}, "spec": spec}


REATTACHED = Submission({"metadata": {"uid": "u"}}, True, "a Job of this task is still running")
"""An earlier try's Job: the forecast is not made again from the queue (its own is not this try's)."""
NO_CLIENT: Any = SimpleNamespace(hook=None)


def submit(step: Step, hook: Hook, priority_class: str | None = None) -> None:
    """The step as ``_submit`` runs it (``_before_create``), on the shaped Job of 8 shards, one per pod."""
    client: Any = SimpleNamespace(hook=hook)
    step._before_create(client, job(priority_class=priority_class))
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
    planned = step._with_forecast({"ti": ti}, plan(), NO_CLIENT, REATTACHED)
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
    assert quiet._forecast is None and quiet._with_forecast({"ti": Ti()}, None, NO_CLIENT, REATTACHED) is None
    step = Step(stated=60.0)
    with caplog.at_level(logging.INFO, "test_forecast_step"):
        submit(step, Hook(fail=True))
    assert caplog.messages == ["forecast: left out (reading the queues: 403 Forbidden)"]
    assert step._forecast is None
    original = plan()
    assert step._with_forecast({"ti": Ti()}, original, NO_CLIENT, REATTACHED) is original
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


def test_the_queue_ahead_is_the_pending_workloads_at_the_tasks_priority_or_above(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # gather (300) jumps the two align Jobs (100); align counts them; no class is priority 0: counts them.
    for priority_class, ahead in (("gather", 0), ("align", 2), (None, 2)):
        step = Step(stated=60.0)
        with caplog.at_level(logging.INFO, "test_forecast_step"):
            caplog.clear()
            submit(step, Busy(), priority_class)
        assert len(caplog.messages) == 1, caplog.messages  # no warning
        assert caplog.messages[0].endswith(f", {ahead} workloads ahead"), (priority_class, caplog.messages)
        assert step._forecast is not None and step._forecast["basis"].endswith(f", {ahead} workloads ahead")
    fast, slow = Step(stated=60.0), Step(stated=60.0)
    submit(fast, Busy(), "gather")
    submit(slow, Busy(), "align")
    assert fast._forecast is not None and slow._forecast is not None
    assert fast._forecast["start"] < slow._forecast["start"]


def test_an_unread_priority_counts_every_pending_workload_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    step = Step(stated=60.0)
    with caplog.at_level(logging.INFO, "test_forecast_step"):
        submit(step, Busy(forbidden=True), "gather")
    warning, line = caplog.messages
    assert warning == (
        "forecast: priority unknown (WorkloadPriorityClass gather: 403 Forbidden); "
        "every pending workload counted ahead"
    )
    assert line.startswith("forecast: start ~") and line.endswith("2 workloads ahead")
    caplog.clear()
    with caplog.at_level(logging.INFO, "test_forecast_step"):
        submit(Step(stated=60.0), Busy(fail=True, forbidden=True), "gather")
    assert caplog.messages == ["forecast: left out (reading the queues: 403 Forbidden)"]  # one line at most


def test_the_job_carries_its_forecast_run_sealed_for_the_next_tasks_forecasts() -> None:
    from airflow_kueue_provider.hooks.identity_key import identity_seal

    step, manifest = Step(stated=60.0), job()
    manifest["metadata"].update({"name": "price-1", "namespace": "ns"})
    client: Any = SimpleNamespace(hook=Hook())
    step._before_create(client, manifest)
    value = manifest["spec"]["template"]["metadata"]["annotations"]["airflow-kueue.io/forecast-run"]
    assert identity_seal().read_forecast_run("ns", "price-1", value) == 4 * 65  # 4 waves of 65 s on 2 CPUs


class Queued(Hook):
    """The created Job's Workload as Kueue has it: waiting at ``position`` (the visibility API), or
    admitted ``admitted_for`` seconds ago; None: never tried."""

    def __init__(self, position: int | None = None, admitted_for: float | None = None) -> None:
        super().__init__()
        self.position, self.admitted_for = position, admitted_for

    def workload_changes(
        self, namespace: str, job_uid: str, quiet_seconds: float, seconds: float
    ) -> Iterator[dict[str, Any] | None]:
        yield self._workload()
        yield None

    def _workload(self) -> dict[str, Any] | None:
        if self.position is None and self.admitted_for is None:
            return None
        reserved = self.admitted_for is not None
        since = datetime.now(UTC) - timedelta(seconds=self.admitted_for or 0)
        condition = {
            "type": "QuotaReserved",
            "status": "True" if reserved else "False",
            "lastTransitionTime": since.isoformat().replace("+00:00", "Z"),
        }
        admission = {"podSetAssignments": [{"name": "main", "flavors": {"cpu": "od"}}]}
        return {
            "metadata": {"name": "wl-own", "uid": "w", "creationTimestamp": condition["lastTransitionTime"]},
            "spec": {"queueName": "lq", "priority": 0},
            "status": {"conditions": [condition], **({"admission": admission} if reserved else {})},
        }

    def pending_workloads(self, namespace: str, local_queue: str) -> dict[str, Any] | None:  # type: ignore[override]
        if self.position is None:
            return None
        return {"items": [{"metadata": {"name": "wl-own"}, "positionInClusterQueue": self.position}]}


def test_once_queued_the_forecast_is_made_again_from_its_place_and_keeps_the_first(
    caplog: pytest.LogCaptureFixture,
) -> None:
    step, ti, hook = Step(stated=60.0), Ti(), Queued()
    client: Any = SimpleNamespace(hook=hook)
    created = Submission({"metadata": {"uid": "u"}}, False, "created")
    with caplog.at_level(logging.INFO, "test_forecast_step"):
        submit(step, hook)
        first = step._forecast
        hook.position = 2  # the create, and two Jobs made in the same second stand before it
        planned = step._with_forecast({"ti": ti}, plan(), client, created)
    assert first is not None and first["basis"].endswith("0 workloads ahead")
    assert caplog.messages[-1].startswith("forecast once queued: start ~")
    assert caplog.messages[-1].endswith("2 workloads ahead"), "Kueue's own position, not the page's guess"
    record = ti.xcom["kueue_forecast"]
    assert record["at_submit"] == {k: first[k] for k in ("made_at", "start", "finish")}
    assert record["finish"] > first["finish"], "two Jobs like it ahead: later than the first said"
    assert planned is not None and planned.forecast is not None
    assert planned.forecast.at.isoformat(timespec="seconds") == record["finish"]
    # Admitted 20 s ago: it started then, the queue ahead no longer matters.
    admitted = Step(stated=60.0)
    submit(admitted, Queued(admitted_for=20.0))
    admitted._with_forecast({"ti": Ti()}, None, SimpleNamespace(hook=Queued(admitted_for=20.0)), created)
    assert admitted._forecast is not None and admitted._forecast["basis"].endswith(", admitted")


def test_no_workload_in_time_leaves_the_first_forecast(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_kueue_provider.hooks import forecast_inputs

    monkeypatch.setattr(forecast_inputs, "QUEUED_WAIT_SECONDS", 0.3)
    step, hook = Step(stated=60.0), Queued()
    submit(step, hook)
    first = step._forecast
    created = Submission({"metadata": {"uid": "u"}}, False, "created")
    with caplog.at_level(logging.INFO, "test_forecast_step"):
        step._with_forecast({"ti": Ti()}, None, SimpleNamespace(hook=hook), created)
    assert step._forecast == first and "at_submit" not in first
    assert caplog.messages[-1].startswith("forecast: not made again (no Workload in")


def test_the_outcome_says_how_far_off_both_forecasts_were() -> None:
    made = datetime(2026, 12, 1, 1, 0, tzinfo=UTC)
    first = {"made_at": made.isoformat(), "finish": (made + timedelta(seconds=60)).isoformat()}
    record = {
        "made_at": (made + timedelta(seconds=2)).isoformat(),
        "finish": (made + timedelta(seconds=118)).isoformat(),
        "at_submit": first,
    }
    outcome, line = with_outcome(record, made + timedelta(seconds=120))
    assert outcome["error_seconds"] == 2.0 and outcome["at_submit"]["error_seconds"] == 60.0
    assert line == "forecast was 2 s early (2% of 118 s); at submit it was 60 s early (50% of 120 s)"


def test_the_partial_admission_s_least_pods_reach_the_forecast() -> None:
    step, manifest = Step(stated=60.0), job()
    manifest["metadata"]["annotations"] = {"kueue.x-k8s.io/job-min-parallelism": "2"}
    step._before_create(SimpleNamespace(hook=Hook()), manifest)
    assert step._forecast_inputs is not None and step._forecast_inputs[0].least == 2
    whole = Step(stated=60.0)
    submit(whole, Hook())
    assert whole._forecast_inputs is not None and whole._forecast_inputs[0].least == 4  # its parallelism


def test_a_queued_forecast_keeps_the_models_wait_and_a_success_teaches_the_history_its_error() -> None:
    learned = LearnedLengths(8, dict.fromkeys(range(8), 60.0), ("a",), None, True, 100.0)
    step, ti = Step(stated=None, learned=learned), Ti()
    submit(step, Busy(), "align")  # two like it ahead: it waits, and the learned 100 s are added
    record = step._forecast
    assert record is not None and record["wait_bias_seconds"] == 100.0 and record["model_wait_seconds"] > 2
    assert record["basis"].endswith("2 workloads ahead, waits +100 s as learned"), record["basis"]
    step._with_forecast({"ti": ti}, None, NO_CLIENT, REATTACHED)
    taught: list[float] = []
    resumed = Step(stated=None)
    resumed._learn_wait_error = taught.append  # type: ignore[method-assign]
    result, _ = resumed._forecast_outcome({"ti": ti}, {}, "done", status="success")
    error = result["forecast"]["error_seconds"]
    assert taught == [pytest.approx(error + 100.0, abs=0.11)], "the model's own error: the bias added back"
    failed: list[float] = []
    resumed._learn_wait_error = failed.append  # type: ignore[method-assign]
    resumed._forecast_outcome({"ti": ti}, {}, "failed", status="failed")
    assert failed == [], "a failed run's end is not a finish to learn from"


def test_the_models_error_is_learned_only_from_a_forecast_made_while_the_job_waited() -> None:
    assert (
        model_error({"error_seconds": 12.0, "model_wait_seconds": 300.0, "wait_bias_seconds": 50.0}) == 62.0
    )
    assert model_error({"error_seconds": 12.0, "model_wait_seconds": 2.0}) == 12.0
    assert model_error({"error_seconds": 12.0}) is None, "admitted, or a record of an older version"
    assert model_error({"model_wait_seconds": 2.0}) is None, "no outcome"
    assert model_error({"error_seconds": True, "model_wait_seconds": 2.0}) is None
    admitted = Step(stated=60.0)
    submit(admitted, Queued(admitted_for=20.0))
    created = Submission({"metadata": {"uid": "u"}}, False, "created")
    admitted._with_forecast({"ti": Ti()}, None, SimpleNamespace(hook=Queued(admitted_for=20.0)), created)
    assert admitted._forecast is not None and "model_wait_seconds" not in admitted._forecast


class Counted(Queued):
    """A queue that counts what the forecast reads of it."""

    def __init__(self, admitted_for: float | None = None) -> None:
        super().__init__(admitted_for=admitted_for)
        self.reads: list[str] = []

    def get_local_queue(self, namespace: str, name: str) -> dict[str, Any]:
        self.reads.append(f"localqueue {name}")
        return super().get_local_queue(namespace, name)

    def pending_workloads(self, namespace: str, local_queue: str) -> Any:
        self.reads.append(f"pending {local_queue}")
        return super().pending_workloads(namespace, local_queue)


def test_the_forecast_reads_no_local_queue_the_task_read_and_no_pending_list_once_admitted() -> None:
    step, hook = Step(stated=60.0), Counted(admitted_for=5.0)
    step._local_queues = {"lq": {"spec": {"clusterQueue": "cq"}}}  # execute's check read it
    submit(step, hook)
    created = Submission({"metadata": {"uid": "u"}}, False, "created")
    step._with_forecast({"ti": Ti()}, None, SimpleNamespace(hook=hook), created)
    assert step._forecast is not None and step._forecast["basis"].endswith(", admitted")
    assert hook.reads == ["pending lq"], "the LocalQueue as the check read it; once admitted, no place"


def test_a_spill_job_is_forecast_in_its_spill_queue() -> None:
    step, hook = Step(stated=60.0), Counted()
    spilled = job()
    spilled["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "spill"
    step._before_create(SimpleNamespace(hook=hook), spilled)
    assert step._forecast is not None
    assert hook.reads == ["localqueue spill", "pending spill"], "its own queue, not the task's queue_name"


def test_the_jobs_end_comes_from_the_result_without_a_read() -> None:
    made = datetime(2026, 12, 1, 1, 0, tzinfo=UTC)
    step = Step(stated=None)
    step._forecast = {"made_at": made.isoformat(), "finish": (made + timedelta(seconds=100)).isoformat()}

    def unread() -> Any:
        raise AssertionError("the result says when the Job ended: no read")

    step._client = unread  # type: ignore[method-assign]
    ended = {"job_name": "j", "namespace": "ns", "finished_at": "2026-12-01T01:01:50+00:00"}
    result, _ = step._forecast_outcome({}, ended, "m")
    assert result["forecast"]["error_seconds"] == 10.0
