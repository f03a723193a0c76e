"""What a DAG author meets first: bad input at parse time with one message, deadlines that say what they
will do, and figures over every attempt of a task instance."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_kueue_provider.airflow_compat import AirflowFailException
from airflow_kueue_provider.kueue.checkpoints.ledger import Attempt, RunLedger
from airflow_kueue_provider.kueue.figures.attempt_figures import CostModel
from airflow_kueue_provider.kueue.figures.cost import VmPrice
from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.kueue.names import ESCALATIONS_ANNOTATION
from airflow_kueue_provider.kueue.progress.deadline import (
    DeadlinePlan,
    default_margin,
    margin_covers_relative_deadline,
    submit_warning,
    taken_before,
)
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.operators.jobset import KueueJobSetOperator, KueueReplicatedJob
from airflow_kueue_provider.operators.run_figures import event_figures, shard_summary, task_instance_totals

MODEL = CostModel({"cpu": "4"}, VmPrice())


def _op(**kwargs: Any) -> KueueIndexedJobOperator:
    return KueueIndexedJobOperator(**{"task_id": "t", "queue_name": "q", "image": "i", **kwargs})


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"completions": 0}, "completions: got 0"),
        ({"resources": {"requests": {"cpu": "4 cores"}}}, "requests.cpu"),
        ({"completions": 4, "parallelism": 8}, "greater than completions=4"),
        ({"max_failed_indexes": -1}, "max_failed_indexes"),
        ({"tolerations": [{"operator": "Sometimes"}]}, "tolerations"),
        ({"image_pull_policy": "Often"}, "image_pull_policy"),
        ({"queue_timeout": 0}, "queue_timeout must be positive"),
        ({"parallelism_ramp": {"start": 0, "step": 1, "every_seconds": 5}}, "parallelism_ramp"),
    ],
)
def test_what_no_template_changes_fails_when_the_dag_is_parsed(kwargs: dict[str, Any], says: str) -> None:
    with pytest.raises(AirflowFailException, match=says) as info:
        _op(**kwargs)
    error = info.value
    assert error.__cause__ is None, "one message, no chained copy"
    assert error.__context__ is None or error.__suppress_context__, "one message, no chained copy"


def test_templated_values_are_left_for_the_run() -> None:
    op = _op(completions=3, namespace="{{ var.value.ns }}", queue_name="{{ var.value.queue }}")
    assert op.completions == 3


def test_a_jobsets_replicated_job_is_checked_when_the_dag_is_parsed() -> None:
    with pytest.raises(AirflowFailException, match=r"(?s)replicated job 'workers'.*requests\.cpu"):
        KueueJobSetOperator(
            task_id="t",
            queue_name="q",
            replicated_jobs=[KueueReplicatedJob("workers", image="w", resources={"requests": {"cpu": "x"}})],
        )


def test_the_default_margin_scales_with_the_time_left() -> None:
    now = datetime(2026, 12, 2, 1, tzinfo=UTC)
    assert default_margin(now + timedelta(hours=6), now) == timedelta(minutes=10)
    assert default_margin(now + timedelta(minutes=5), now) == timedelta(seconds=30)
    assert default_margin(now - timedelta(minutes=1), now) == timedelta(0)


def test_a_deadline_inside_its_margin_at_submit_is_named_with_the_fix() -> None:
    now = datetime(2026, 12, 2, 1, tzinfo=UTC)
    assert submit_warning(now + timedelta(minutes=30), timedelta(minutes=10), now, escalates=True) is None
    warning = submit_warning(now + timedelta(minutes=5), timedelta(minutes=10), now, escalates=True)
    assert warning is not None and "AT RISK from its first line" in warning
    assert "taken at once" in warning and "lower deadline_margin" in warning
    past = submit_warning(now - timedelta(minutes=1), timedelta(0), now, escalates=False)
    assert past is not None and "has passed" in past and "taken at once" not in past


def test_a_relative_deadline_its_margin_covers_is_warned_at_parse_time(monkeypatch: Any) -> None:
    assert margin_covers_relative_deadline(timedelta(minutes=5), timedelta(minutes=10))
    assert margin_covers_relative_deadline(300, timedelta(minutes=5))
    assert margin_covers_relative_deadline(timedelta(minutes=5), None) is None
    assert margin_covers_relative_deadline("07:00", timedelta(hours=9)) is None
    warned: list[str] = []
    monkeypatch.setattr(
        KueueIndexedJobOperator, "log", SimpleNamespace(warning=lambda *a: warned.append(a[0] % a[1:]))
    )
    op = _op(deadline=timedelta(minutes=5), deadline_margin=timedelta(minutes=10))
    assert op.deadline_margin == timedelta(minutes=10)
    assert "not shorter than deadline" in warned[0]


def test_escalations_are_taken_once_per_task_instance() -> None:
    steps = '[{"step": "notify", "at": "x", "detail": "sent", "why": "y"}]'
    earlier = {"metadata": {"name": "try-1", "annotations": {ESCALATIONS_ANNOTATION: steps}}}
    assert taken_before([earlier, earlier]) == [{"step": "notify", "at": "x", "detail": "sent", "why": "y"}]
    assert taken_before([{"metadata": {"name": "try-1"}}]) == []
    op = _op(deadline="07:00", on_deadline_risk={"notify": lambda context, info: None})
    plan = DeadlinePlan(datetime(2026, 12, 2, 7, tzinfo=UTC), timedelta(minutes=10), escalate=True)
    again = op._deadlines.once_per_task_instance(plan, [earlier])
    assert again is not None and not again.escalate and again.escalations[0]["step"] == "notify"
    assert op._deadlines.once_per_task_instance(plan, []) == plan


class _NoJobs:
    def __init__(self) -> None:
        self.calls = 0

    def figures(self, model: CostModel) -> list[Any]:
        self.calls += 1
        return []


def test_a_retry_is_summed_with_the_first_try_from_the_ledger_without_listing_jobs() -> None:
    first = MODEL.figures("try-1", 30, 5.0, 45.0, spot=True, try_number=1)
    ledger = RunLedger(300).with_attempt(Attempt(1, "try-1", IndexSet.range(0, 300), figures=first))
    ledger = ledger.with_attempt(Attempt(2, "try-2", IndexSet.parse("7,123")))
    event = {"job_name": "try-2", "completions": 2, "queued_seconds": 1.0, "running_seconds": 4.0}
    current = event_figures(event, MODEL, target_parallelism=30, spot=True, try_number=2)
    assert current is not None and current.pods == 2, "the retry's Job ran 2 pods, not the operator's 30"
    jobs = _NoJobs()
    totals = task_instance_totals(current, ledger, MODEL, jobs)  # type: ignore[arg-type]
    assert jobs.calls == 0
    assert totals["running_seconds"] == 49.0 and totals["queued_seconds"] == 6.0
    assert [a["pods"] for a in totals["attempt_figures"]] == [30, 2]


def test_a_first_try_without_a_ledger_lists_no_jobs_and_a_retry_does() -> None:
    event = {"job_name": "j", "completions": 4, "running_seconds": 4.0, "admitted_parallelism": 3}
    first = event_figures(event, MODEL, target_parallelism=4, spot=False, try_number=1)
    assert first is not None and first.pods == 3, "a partial admission's pods"
    jobs = _NoJobs()
    task_instance_totals(first, None, MODEL, jobs)  # type: ignore[arg-type]
    assert jobs.calls == 0
    retry = event_figures(event, MODEL, target_parallelism=4, spot=False, try_number=2)
    task_instance_totals(retry, None, MODEL, jobs)  # type: ignore[arg-type]
    assert jobs.calls == 1
    assert event_figures({"job_name": "j"}, MODEL, 4, False, 1) is None, "an event with no run"


def test_the_end_of_a_checkpointed_try_speaks_in_shards() -> None:
    ledger = RunLedger(300).with_attempt(Attempt(1, "try-1", IndexSet.range(0, 300)))
    ledger = ledger.with_job_progress("try-1", IndexSet.range(0, 300) - IndexSet.parse("7,123"), IndexSet())
    ledger = ledger.with_attempt(
        Attempt(2, "try-2", IndexSet.parse("7,123"), completed=IndexSet.parse("7,123"))
    )
    result = {"succeeded": 300, "completions": 300, "failed_indexes": ""}
    line = shard_summary("ns/try-2 completed all 2 indexes", result, ledger, "try-2")
    assert line == (
        "ns/try-2 completed all 2 indexes (its 2 indexes ran shards 7,123); task: 300/300 shards done over "
        "2 attempt(s), failed shards: none"
    )
    assert shard_summary("m", result, None, "try-2") == "m"


def test_a_task_result_covers_every_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    """execute_complete of a retry without checkpointing: the first try's Job, still in the cluster, is
    priced at its own pods and time beside this try's."""
    first_job = {
        "metadata": {
            "name": "try-1",
            "creationTimestamp": "2026-12-02T01:00:00Z",
            "labels": {"airflow-kueue.io/try-number": "1", "kueue.x-k8s.io/queue-name": "q"},
        },
        "spec": {"completions": 6, "parallelism": 6},
        "status": {
            "startTime": "2026-12-02T01:00:02Z",
            "conditions": [
                {"type": "Failed", "status": "True", "lastTransitionTime": "2026-12-02T01:00:32Z"}
            ],
        },
    }

    class _Client:
        noun = "Job"

        def __init__(self, *args: Any) -> None:
            pass

        def get(self, namespace: str, name: str) -> None:
            return None

        def task_instance_objects(self, namespace: str, identity: Any, *, unsealed_too: bool) -> list[Any]:
            assert not unsealed_too, "the figures count only the task's sealed objects"
            return [first_job]

    monkeypatch.setattr("airflow_kueue_provider.operators.operator_kind.KindClient", _Client)
    op = _op(namespace="ns", completions=6, parallelism=6, resources={"requests": {"cpu": "4"}}, spot=True)
    context = {"ti": SimpleNamespace(dag_id="d", task_id="t", run_id="r", try_number=2, map_index=-1)}
    event = {
        "status": "success",
        "message": "ns/try-2 completed all 6 indexes",
        "job_name": "try-2",
        "namespace": "ns",
        "completions": 6,
        "queued_seconds": 1.0,
        "running_seconds": 10.0,
    }
    result = op.execute_complete(context, event)  # type: ignore[arg-type]
    assert result["running_seconds"] == 40.0 and result["queued_seconds"] == 3.0
    expected = 0.25 * 0.181 * 6 * 40 / 3600
    assert abs(result["estimated_cost_usd"] - expected) < 1e-6
    assert [a["job_name"] for a in result["attempt_figures"]] == ["try-1", "try-2"]


def test_earlier_jobs_that_cannot_be_listed_never_fail_a_finished_task() -> None:
    class _Broken:
        def figures(self, model: CostModel) -> list[Any]:
            raise RuntimeError("apiserver away")

    retry = event_figures(
        {"job_name": "j", "completions": 2, "running_seconds": 4.0}, MODEL, 2, False, try_number=2
    )
    totals = task_instance_totals(retry, None, MODEL, _Broken())  # type: ignore[arg-type]
    assert totals["running_seconds"] == 4.0 and len(totals["attempt_figures"]) == 1
