"""[kueue] default_queue_name and default_namespace: taken at execute when a task sets none; explicit
parameters win; the queue policy applies to the defaulted values; neither set: a clear error first."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_kueue_provider.airflow_compat import AirflowFailException
from airflow_kueue_provider.hooks import kueue_config
from airflow_kueue_provider.hooks.kueue_config import ConfigSource
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.operators.jobset import KueueJobSetOperator, KueueReplicatedJob
from airflow_kueue_provider.operators.settings import KueueSettingsError, configured_pod_policy

KEY = "k" * 40


class ReachedTheCluster(Exception):
    """Raised where the task would first talk to the cluster: every check before it passed."""


def _source(monkeypatch: pytest.MonkeyPatch, **options: str) -> None:
    env = {"AIRFLOW__KUEUE__IDENTITY_KEY": KEY, "AIRFLOW__KUEUE__ALLOWED_LOCAL_QUEUES": "team-a:q1 spill"}
    env.update({f"AIRFLOW__KUEUE__{key.upper()}": value for key, value in options.items()})
    monkeypatch.setattr(kueue_config, "current_source", lambda: ConfigSource(env))


def _run(monkeypatch: pytest.MonkeyPatch, **kwargs: Any) -> KueueIndexedJobOperator:
    op = KueueIndexedJobOperator(task_id="t", image="img:1", completions=2, **kwargs)

    def no_cluster(*_: Any, **__: Any) -> Any:
        raise ReachedTheCluster

    monkeypatch.setattr(op, "_entry", no_cluster)
    monkeypatch.setattr(op, "_client", no_cluster)
    with pytest.raises(ReachedTheCluster):
        op.execute({})
    return op


def test_a_task_without_queue_name_or_namespace_takes_the_configured_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _source(monkeypatch, default_queue_name="q1", default_namespace="team-a")
    op = _run(monkeypatch)
    assert (op.queue_name, op.namespace) == ("q1", "team-a")


def test_explicit_parameters_win(monkeypatch: pytest.MonkeyPatch) -> None:
    _source(monkeypatch, default_queue_name="q1", default_namespace="elsewhere")
    op = _run(monkeypatch, queue_name="spill", namespace="team-a")
    assert (op.queue_name, op.namespace) == ("spill", "team-a")


def test_the_queue_policy_applies_to_the_defaulted_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    _source(monkeypatch, default_queue_name="q2", default_namespace="team-a")
    op = KueueIndexedJobOperator(task_id="t", image="img:1", completions=2)
    with pytest.raises(AirflowFailException, match=r"queue_name \(LocalQueue\) 'q2' is not allowed"):
        op.execute({})


def test_neither_set_is_a_clear_error_before_anything_is_created(monkeypatch: pytest.MonkeyPatch) -> None:
    _source(monkeypatch, default_namespace="team-a")
    op = KueueIndexedJobOperator(task_id="t", image="img:1", completions=2)
    with pytest.raises(
        KueueSettingsError, match=r"t: queue_name is not set and \[kueue\] default_queue_name"
    ):
        op.execute({})


def test_a_malformed_flag_fails_the_pod_policy_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    _source(monkeypatch, allow_privileged_pods="ture")
    with pytest.raises(KueueSettingsError, match=r"\[kueue\] allow_privileged_pods must be true or false"):
        configured_pod_policy()


def test_a_jobset_without_queue_name_takes_the_default_too(monkeypatch: pytest.MonkeyPatch) -> None:
    _source(monkeypatch, default_queue_name="q1", default_namespace="team-a")
    workers = KueueReplicatedJob("workers", image="w:1")
    op = KueueJobSetOperator(task_id="t", replicated_jobs=[workers])

    def no_cluster(*_: Any, **__: Any) -> Any:
        raise ReachedTheCluster

    monkeypatch.setattr(op, "_entry", no_cluster)
    with pytest.raises(ReachedTheCluster):
        op.execute({})
    assert (op.queue_name, op.namespace) == ("q1", "team-a")
