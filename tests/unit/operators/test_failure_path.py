"""The template's failure path on its own (``FailurePath``, with a fake kind and client): what a failure adds
to its message, and what ``on_kill`` deletes."""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import pytest

from airflow_kueue_provider.kueue.progress.trigger_event import KueueEvent
from airflow_kueue_provider.operators.failure_path import FailurePath


class _Hook:
    def failed_index_log_tails(self, namespace: str, job_name: str, indexes: list[int]) -> dict[int, str]:
        return {index: f"{namespace}/{job_name}[{index}] boom\n" for index in indexes}


class _Client:
    def __init__(self, outcome: str | Exception = "deleted") -> None:
        self.hook, self.outcome = _Hook(), outcome
        self.deleted: list[tuple[str, str, str | None]] = []

    def delete_unless_finished(self, namespace: str, name: str, uid: str | None = None) -> str:
        if isinstance(self.outcome, Exception):
            raise self.outcome
        self.deleted.append((namespace, name, uid))
        return self.outcome


class _Kind(FailurePath):
    kind = "Widget"
    log_tail_indexes: ClassVar[int] = 2
    log = logging.getLogger(__name__)

    def __init__(self, client: _Client, keep: bool = False) -> None:
        self.client, self.keep_on_failure = client, keep

    def _client(self) -> Any:
        return self.client

    def resolved_namespace(self) -> str:
        return "ns"

    def _failed_by_job(self, event: KueueEvent) -> dict[str, str]:
        return {"w-0": "1,3-5"}

    def _tail_heading(self, job_name: str, index: int) -> str:
        return f"{job_name} index {index}"


def _event(status: str = "failed") -> KueueEvent:
    return KueueEvent.from_dict({"status": status, "job_name": "w", "job_uid": "u1", "namespace": "ns"})


def test_the_log_tails_of_the_first_failed_indexes() -> None:
    tails = _Kind(_Client())._log_tails(_event())
    assert "--- w-0 index 1, last log lines ---\nns/w-0[1] boom" in tails
    assert "index 3" in tails and "index 4" not in tails  # log_tail_indexes: the first two


def test_a_failed_object_that_still_runs_is_deleted_unless_kept() -> None:
    client = _Client()
    assert (
        _Kind(client)._stop_after_failure(_event()) == "; its Widget was still running and has been deleted"
    )
    assert client.deleted == [("ns", "w", "u1")]
    kept = _Client()
    assert _Kind(kept, keep=True)._stop_after_failure(_event()) == ""
    assert _Kind(kept)._stop_after_failure(_event("timeout")) == ""  # the trigger deleted it
    assert kept.deleted == []


def test_a_failed_delete_says_to_delete_it_by_hand() -> None:
    message = _Kind(_Client(RuntimeError("403")))._stop_after_failure(_event())
    assert "could not delete Widget w: 403; delete it yourself to free its quota" in message


def test_on_kill_before_the_task_instance_is_known_deletes_the_object_it_waits_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = _Client("deleted")
    kind = _Kind(client)
    kind._name, kind._uid = "w", "u1"
    with caplog.at_level(logging.INFO):
        kind.on_kill()
    assert client.deleted == [("ns", "w", "u1")]
    assert "task killed; Widget ns/w: deleted" in caplog.text


def test_on_kill_with_nothing_submitted_deletes_nothing() -> None:
    client = _Client()
    _Kind(client).on_kill()
    assert client.deleted == []
