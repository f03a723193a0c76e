"""A run with a deadline ends with met or missed and by how much (result, log, metrics); an absolute deadline
already past is refused before anything is created."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_kueue_provider.airflow_compat import AirflowFailException
from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.operators import kueue_operator, metrics
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

DEADLINE = "2026-12-02T07:00:00+00:00"


def _op(**kwargs: object) -> KueueIndexedJobOperator:
    return KueueIndexedJobOperator(task_id="t", queue_name="q", namespace="n", image="i", **kwargs)  # type: ignore[arg-type]


def _ended_at(at: str) -> dict[str, Any]:
    history = [{"at": at, "phase": "finished", "eta": None, "margin_seconds": None, "at_risk": False}]
    return {"deadline": DEADLINE, "eta_history": history, "escalations": []}


def test_an_absolute_deadline_already_past_is_refused_when_the_dag_is_parsed() -> None:
    for past in (
        "2026-01-01T07:00:00+00:00",
        datetime(2026, 1, 1, 7, tzinfo=UTC),
        "2020-06-01T09:30:00+02:00",
    ):
        with pytest.raises(AirflowFailException, match="has already passed") as refused:
            _op(deadline=past)
        assert repr(past) in str(refused.value) and "time of day ('07:00'" in str(refused.value)
        assert "timedelta" in str(refused.value)
    # Times of day and durations resolve per run, and a date still to come is fine: never refused so.
    for value in ("07:00", "00:00 Europe/London", timedelta(minutes=1), 30, "2999-01-01T07:00:00+00:00"):
        assert _op(deadline=value).deadline == value
    # Passed an hour ago: still loads (a run still going, its worker parsing the DAG file again to resume it,
    # must end with "MISSED by ...", not an import error); the run is AT RISK from its first line.
    hour_ago = (datetime.now(UTC) - timedelta(hours=1)).isoformat(timespec="seconds")
    assert _op(deadline=hour_ago).deadline == hour_ago


def test_a_templated_deadline_is_checked_once_rendered_before_anything_is_created() -> None:
    op = _op(deadline="{{ var.value.nightly_deadline }}")  # not readable yet: accepted at parse
    op.deadline = "2026-01-01T07:00:00+00:00"  # what rendering left
    started = SimpleNamespace(start_date=datetime(2026, 1, 1, 1, tzinfo=UTC))
    with pytest.raises(AirflowFailException, match="has already passed"):
        op._deadlines.plan({"dag_run": started}, None, op.deadline)  # type: ignore[arg-type]
    op.deadline = "07:00"  # a time of day resolves per run
    assert op._deadlines.plan({"dag_run": started}, None, op.deadline) is not None  # type: ignore[arg-type]


def test_the_result_says_met_or_missed_and_the_log_says_by_how_much(capsys: Any) -> None:
    handling = _op(deadline="07:00")._deadlines
    met = _ended_at("2026-12-02T06:55:50+00:00")
    assert handling.ended(met, "success") == "deadline 07:00 UTC met with 4 min 10 s to spare"
    assert met["deadline_outcome"] == {
        "deadline": DEADLINE,
        "finished_at": "2026-12-02T06:55:50+00:00",
        "met": True,
        "seconds": 250.0,
    }
    missed = _ended_at("2026-12-02T07:00:20+00:00")
    assert handling.ended(missed, "failed") == "deadline 07:00 UTC MISSED by 20 s"
    assert missed["deadline_outcome"]["met"] is False and missed["deadline_outcome"]["seconds"] == 20.0
    assert "deadline 07:00 UTC MISSED by 20 s" in capsys.readouterr().out  # the operator's log: the task's
    early_failure = _ended_at("2026-12-02T05:00:00+00:00")
    assert "not met yet" in str(handling.ended(early_failure, "failed"))
    assert "deadline_outcome" not in early_failure  # a retry may still make it
    assert handling.ended({"job_name": "j"}, "success") is None


def test_execute_complete_returns_the_outcome_and_sends_its_metric(monkeypatch: pytest.MonkeyPatch) -> None:
    op = _op(deadline="07:00")
    identity = AirflowIdentity("nightly", "t", "run-1")
    monkeypatch.setattr(
        op, "_entry", lambda context, check=True: SimpleNamespace(identity=identity, shards=None)
    )
    monkeypatch.setattr(op, "_result", lambda i, e, s: (_ended_at("2026-12-02T07:00:20+00:00"), "done"))
    monkeypatch.setattr(op, "_keeps_records", lambda result: True)
    sent: list[dict[str, Any]] = []
    monkeypatch.setattr(kueue_operator, "send_run_metrics", lambda result, *a: sent.append(dict(result)))
    event = {"status": "success", "message": "done", "job_name": "j", "namespace": "n", "deadline": DEADLINE}
    result = op.execute_complete({}, event)
    assert result["deadline_outcome"]["met"] is False and result["deadline_outcome"]["seconds"] == 20.0
    assert sent[0]["deadline_outcome"] == result["deadline_outcome"]


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, float]] = []

    def incr(self, name: str, count: int = 1, *, tags: dict[str, str]) -> None:
        self.calls.append(("incr", name, count))

    def gauge(self, name: str, value: float, *, tags: dict[str, str]) -> None:
        self.calls.append(("gauge", name, value))

    def timing(self, name: str, ms: float, *, tags: dict[str, str]) -> None:
        self.calls.append(("timing", name, ms))


def test_the_outcome_is_a_metric(monkeypatch: pytest.MonkeyPatch) -> None:
    sink = Recorder()
    monkeypatch.setattr(metrics, "stats", lambda: sink)
    identity = AirflowIdentity("nightly", "t", "run-1")
    missed = {"deadline_outcome": {"met": False, "seconds": 20.0}}
    metrics.send_run_metrics(missed, "success", identity, "lq", "Job")
    assert sink.calls[-2:] == [
        ("incr", "kueue.deadline.missed", 1),
        ("gauge", "kueue.deadline.missed_seconds", 20.0),
    ]
    sink.calls.clear()
    metrics.send_run_metrics(
        {"deadline_outcome": {"met": True, "seconds": 250.0}}, "success", identity, "lq", "Job"
    )
    assert sink.calls[-2:] == [
        ("incr", "kueue.deadline.met", 1),
        ("gauge", "kueue.deadline.spare_seconds", 250.0),
    ]
    sink.calls.clear()
    metrics.send_run_metrics({}, "success", identity, "lq", "Job")
    assert not [c for c in sink.calls if "deadline" in c[1]]
