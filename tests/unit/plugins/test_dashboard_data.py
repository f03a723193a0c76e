"""A task panel's reads: the Workload and the Job's Events go out together, then the Workload's Events
beside its queue position, each in the request's context; a read that fails fails the panel as before."""

from __future__ import annotations

import contextvars
import threading
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from airflow_kueue_provider.plugins import dashboard_data
from airflow_kueue_provider.plugins.pending_positions import SharedPendingLists

REQUEST = contextvars.ContextVar("request", default="none")
JOB: dict[str, Any] = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "align-1", "namespace": "ns", "uid": "u-1", "labels": {}, "annotations": {}},
    "spec": {"completions": 4, "parallelism": 4, "suspend": True, "completionMode": "Indexed"},
    "status": {},
}
WORKLOAD = "job-align-1-abcde"
QUEUED: dict[str, Any] = {
    "metadata": {
        "name": WORKLOAD,
        "namespace": "ns",
        "uid": "w-1",
        "creationTimestamp": "2026-12-05T01:00:00Z",
    },
    "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 4}]},
    "status": {"conditions": []},
}


class _Hook:
    """Each read waits at ``meet`` for the read it should run beside: run one after the other, the first
    to arrive waits out the barrier's timeout and the panel fails."""

    kubernetes_conn_id = "test"

    def __init__(self, workload: dict[str, Any] | None, fail: str = "") -> None:
        self.workload, self.fail = workload, fail
        self.first = threading.Barrier(2, timeout=5)
        self.second = threading.Barrier(2, timeout=5)
        self.contexts: list[str] = []

    def workload_for_job(self, namespace: str, job_uid: str) -> dict[str, Any] | None:
        self.first.wait()
        return self.workload

    def events_of(self, namespace: str, kind: str, name: str) -> list[dict[str, Any]]:
        self.contexts.append(REQUEST.get())
        if kind == self.fail:
            raise ApiException(status=500, reason="boom")
        (self.first if kind == "Job" else self.second).wait()
        return []

    def pending_workloads(self, namespace: str, local_queue: str) -> dict[str, Any] | None:
        self.second.wait()
        return {"items": [{"metadata": {"name": WORKLOAD}, "positionInLocalQueue": 2}]}


@pytest.fixture(autouse=True)
def _fresh_positions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dashboard_data, "SHARED", SharedPendingLists())


def test_a_queued_jobs_four_reads_go_out_in_two_rounds_in_the_requests_context() -> None:
    hook = _Hook(QUEUED)
    token = REQUEST.set("alice")
    try:
        panel = dashboard_data._panel(hook, JOB)  # type: ignore[arg-type]
    finally:
        REQUEST.reset(token)
    assert panel.workload_name == WORKLOAD and panel.live is not None
    assert hook.contexts == ["alice", "alice"]


def test_a_job_without_a_workload_reads_its_events_beside_the_workload_read() -> None:
    hook = _Hook(None)
    panel = dashboard_data._panel(hook, JOB)  # type: ignore[arg-type]
    assert panel.workload_name is None and hook.contexts == ["none"]


def test_a_failed_events_read_fails_the_panel_with_its_api_error() -> None:
    hook = _Hook(QUEUED, fail="Workload")
    hook.second = threading.Barrier(1)  # the queue position's read has no partner left to wait for
    with pytest.raises(ApiException):
        dashboard_data._panel(hook, JOB)  # type: ignore[arg-type]
