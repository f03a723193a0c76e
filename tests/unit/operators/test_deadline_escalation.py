"""``deadline=`` and ``on_deadline_risk=``: refused early when they cannot work."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from airflow_kueue_provider.airflow_compat import AirflowFailException
from airflow_kueue_provider.kueue.names import PRIORITY_CLASS_LABEL
from airflow_kueue_provider.kueue.progress.deadline import DeadlinePlan, EtaHistory
from airflow_kueue_provider.kueue.progress.eta import Estimate
from airflow_kueue_provider.kueue.progress.trigger_event import KueueEvent
from airflow_kueue_provider.operators.deadline_escalation import DeadlineEscalation, InvalidEscalation
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.triggers.kueue_job import KueueJobTrigger


def _op(**kwargs: object) -> KueueIndexedJobOperator:
    return KueueIndexedJobOperator(task_id="t", queue_name="q", image="i", **kwargs)  # type: ignore[arg-type]


def test_escalations_are_read_from_a_dict_or_the_object_and_checked() -> None:
    assert DeadlineEscalation.from_param({"raise_priority": "urgent"}) == DeadlineEscalation(
        raise_priority="urgent"
    )
    assert DeadlineEscalation.from_param(None) is None
    for bad, says in (
        ({"raise_priority": "Urgent!"}, "not a WorkloadPriorityClass name"),
        ({"spill_to": "On Demand"}, "not a LocalQueue name"),
        ({"spill_to": "od", "raise_priority": "urgent"}, "give one of them"),
        ({"notify": "slack"}, "not callable"),
        ({}, "names no step"),
        ({"raise": "x"}, "unknown keys"),
        ("urgent", "DeadlineEscalation"),
    ):
        with pytest.raises(InvalidEscalation, match=says):
            DeadlineEscalation.from_param(bad)  # type: ignore[arg-type]


def test_the_operator_refuses_what_cannot_work_at_parse_time() -> None:
    with pytest.raises(AirflowFailException, match="needs a deadline"):
        _op(on_deadline_risk={"raise_priority": "urgent"})
    with pytest.raises(AirflowFailException, match="no time zone"):
        _op(deadline=datetime(2026, 12, 2, 7))
    with pytest.raises(AirflowFailException, match="spill_to needs checkpointing"):
        _op(deadline="07:00", on_deadline_risk={"spill_to": "od"})
    with pytest.raises(AirflowFailException, match="is the task's own queue_name"):
        _op(deadline="07:00", on_deadline_risk={"spill_to": "q"}, checkpointing="blob")
    assert _op(deadline="07:00", on_deadline_risk={"spill_to": "od"}, checkpointing="blob").on_deadline_risk
    op = _op(deadline="{{ var.value.nightly_deadline }}", deadline_margin=timedelta(minutes=5))
    assert "deadline" in op.template_fields and op.deadline_margin == timedelta(minutes=5)


def test_the_plan_survives_the_trigger_serialization() -> None:
    plan = DeadlinePlan(
        datetime(2026, 12, 2, 7, tzinfo=UTC),
        timedelta(minutes=10),
        escalate=True,
        escalations=({"step": "notify", "at": "x", "detail": "sent", "why": "y"},),
        eta_history=({"at": "x", "phase": "queued", "eta": None, "margin_seconds": None, "at_risk": False},),
        spill_pending=True,
    )
    trigger = KueueJobTrigger(job_name="j", namespace="n", queue_name="q", deadline=plan.to_dict())
    _, kwargs = trigger.serialize()
    assert DeadlinePlan.from_dict(kwargs["deadline"]) == plan
    assert KueueJobTrigger(**kwargs).deadline == plan


def test_the_eta_history_keeps_one_estimate_a_minute_and_every_change_of_verdict() -> None:
    history = EtaHistory()
    t0 = datetime(2026, 12, 2, 1, tzinfo=UTC)
    eta = Estimate(t0 + timedelta(hours=1), timedelta(minutes=5))
    for second in range(0, 300, 10):
        history.offer(t0 + timedelta(seconds=second), "running", eta, at_risk=second >= 250)
    assert [s["at"][11:19] for s in history.samples] == [
        "01:00:00",
        "01:01:00",
        "01:02:00",
        "01:03:00",
        "01:04:00",
        "01:04:10",
    ]
    assert history.samples[-1]["at_risk"] is True and history.samples[0]["margin_seconds"] == 300


def test_the_steps_are_taken_once_each_and_a_failing_notifier_is_listed_not_raised() -> None:
    from airflow_kueue_provider.operators.deadline_escalation import take_steps

    class Hook:
        noun = "Job"

        def __init__(self) -> None:
            self.calls: list[tuple[str, ...]] = []

        def patch_metadata(
            self, namespace: str, name: str, metadata: dict[str, Any], uid: str | None
        ) -> None:
            self.calls.append((namespace, name, metadata["labels"][PRIORITY_CLASS_LABEL], str(uid)))

    def broken(context: object, info: dict[str, object]) -> None:
        assert info["eta"] == "2026-12-02T07:20:00+00:00" and info["job_name"] == "j"
        raise RuntimeError("POST https://hooks.slack.com/services/T0/B0/s3cr3t: 500")

    event = {
        "job_name": "j",
        "message": "deadline 07:00 UTC: AT RISK",
        "deadline": "2026-12-02T07:00:00+00:00",
        "eta_history": [{"eta": "2026-12-02T07:20:00+00:00"}],
        "escalations": [{"step": "earlier"}],
    }
    queued = {"metadata": {"namespace": "ns", "name": "j", "uid": "u"}, "spec": {"suspend": True}}
    hook = Hook()
    steps = take_steps(
        DeadlineEscalation("urgent", broken), hook, queued, KueueEvent.from_dict(event), context={}
    )  # type: ignore[arg-type]
    assert hook.calls == [("ns", "j", "urgent", "u")]
    assert [s["step"] for s in steps] == ["earlier", "raise_priority", "notify"]
    assert "s3cr3t" not in json.dumps(steps), "a notifier's message stays out of the result"
    assert steps[1]["detail"] == "urgent" and steps[2]["detail"] == "failed: RuntimeError (see the task log)"

    # A Job that already holds quota keeps its priority (Kueue freezes it; its webhook refuses the label).
    running = {**queued, "spec": {"suspend": False}}
    hook = Hook()
    later = KueueEvent.from_dict({**event, "escalations": []})
    (step,) = take_steps(DeadlineEscalation("urgent"), hook, running, later, {})  # type: ignore[arg-type]
    assert hook.calls == [] and step["detail"].startswith("skipped: the Job already holds quota")


def test_a_hand_back_hands_the_released_quota_to_the_next_trigger(monkeypatch: pytest.MonkeyPatch) -> None:
    """The deadline hand-back re-defers: the quota Kueue released so far goes on in the next trigger's
    count, so the result's figure is not restarted by the escalation."""
    from types import SimpleNamespace

    try:
        from airflow.sdk.exceptions import TaskDeferred
    except ImportError:  # Airflow 3.1
        from airflow.exceptions import TaskDeferred  # type: ignore[no-redef]

    from airflow_kueue_provider.operators import operator_kind

    job = {
        "metadata": {"name": "j", "namespace": "n", "uid": "u", "creationTimestamp": "2026-12-02T06:00:00Z"}
    }

    class Client:
        noun = "Job"

        def __init__(self, *args: object) -> None:
            pass

        def get(self, namespace: str, name: str) -> dict[str, object]:
            return job

    monkeypatch.setattr(operator_kind, "KindClient", Client)
    op = KueueIndexedJobOperator(
        task_id="t", namespace="n", queue_name="q", image="i:1", completions=2, deadline=timedelta(hours=1)
    )
    ti = SimpleNamespace(dag_id="d", task_id="t", run_id="r", try_number=1, map_index=-1)
    event = {
        "status": "deadline_risk",
        "job_name": "j",
        "deadline": "2026-12-02T07:00:00+00:00",
        "quota_released_pod_seconds": 12.5,
        "quota_released_cpu_seconds": 25.0,
    }
    with pytest.raises(TaskDeferred) as deferred:
        context = {"ti": ti}
        op._escalate(context, KueueEvent.from_dict(event), op._entry(context, check=False))  # type: ignore[arg-type]
    trigger = deferred.value.trigger
    assert trigger.released_before == {"pod_seconds": 12.5, "cpu_seconds": 25.0}
    assert KueueJobTrigger(**trigger.serialize()[1])._released.pod_seconds == 12.5


def test_the_plan_reads_the_deadline_as_rendered() -> None:
    """``deadline`` is a template field: the plan at submit uses the operator's rendered value, never the
    template string the operator was made with."""
    from types import SimpleNamespace

    op = _op(deadline="{{ var.value.nightly_deadline }}")
    op.deadline = "07:00"  # what Airflow's rendering of the field leaves on the operator
    started = SimpleNamespace(start_date=datetime(2026, 12, 2, 1, tzinfo=UTC))
    plan = op._deadlines.plan({"dag_run": started}, None, op.deadline)  # type: ignore[arg-type]
    assert plan is not None and plan.deadline == datetime(2026, 12, 2, 7, tzinfo=UTC)
