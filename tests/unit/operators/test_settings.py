"""The queue policy at parse time: literal LocalQueues and priority classes against [kueue] allowlists."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_kueue_provider.airflow_compat import AirflowFailException
from airflow_kueue_provider.hooks import kueue_config
from airflow_kueue_provider.hooks.kueue_config import ConfigSource
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.operators.settings import configured_pod_policy

POLICY = {
    "AIRFLOW__KUEUE__ALLOWED_LOCAL_QUEUES": "team-a:q1 spill",
    "AIRFLOW__KUEUE__ALLOWED_PRIORITY_CLASSES": "team-a:low",
}


@pytest.fixture(autouse=True)
def policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kueue_config, "current_source", lambda: ConfigSource(POLICY))


def task(**kwargs: Any) -> KueueIndexedJobOperator:
    kwargs.setdefault("namespace", "team-a")
    kwargs.setdefault("queue_name", "q1")
    return KueueIndexedJobOperator(task_id="t", image="img:1", completions=2, **kwargs)


def test_literal_values_outside_the_allowlists_fail_when_the_dag_is_parsed() -> None:
    task(priority_class="low")
    with pytest.raises(AirflowFailException, match=r"queue_name \(LocalQueue\) 'q2' is not allowed"):
        task(queue_name="q2")
    with pytest.raises(AirflowFailException, match=r"priority_class \(WorkloadPriorityClass\) 'top'"):
        task(priority_class="top")
    escalation = {"raise_priority": "top"}
    with pytest.raises(AirflowFailException, match="'top' is not allowed in namespace 'team-a'"):
        task(deadline="07:00", on_deadline_risk=escalation)


def test_templated_values_and_an_unset_namespace_wait_for_the_run() -> None:
    task(queue_name="{{ params.queue }}")
    task(namespace=None, queue_name="q2")
    task(namespace="{{ params.ns }}", queue_name="q2")


def test_a_malformed_option_fails_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    bad = ConfigSource({"AIRFLOW__KUEUE__ALLOWED_LOCAL_QUEUES": "q1"})
    monkeypatch.setattr(kueue_config, "current_source", lambda: bad)
    with pytest.raises(AirflowFailException, match=r"\[kueue\] allowed_local_queues: entry 'q1'"):
        configured_pod_policy()
