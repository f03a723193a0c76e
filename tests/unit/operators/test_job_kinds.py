"""The behaviour every job kind shares runs through one template (kueue_operator): each test runs it for
both kinds, where the two hand-copied stacks used to disagree."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_kueue_provider.airflow_compat import AirflowFailException
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.operators.jobset import KueueJobSetOperator
from airflow_kueue_provider.operators.kueue_operator import KueueOperator


def _job(**kwargs: Any) -> KueueOperator:
    return KueueIndexedJobOperator(**{"task_id": "t", "queue_name": "q", "image": "i:1", **kwargs})


def _jobset(**kwargs: Any) -> KueueOperator:
    workers = {"name": "workers", "image": "i:1", "completions": 2}
    return KueueJobSetOperator(**{"task_id": "t", "queue_name": "q", "replicated_jobs": [workers], **kwargs})


KINDS = pytest.mark.parametrize("make", [_job, _jobset], ids=["job", "jobset"])


@KINDS
@pytest.mark.parametrize("value", [0, -5])
def test_a_queue_timeout_that_is_not_positive_fails_when_the_dag_is_parsed(make: Any, value: float) -> None:
    with pytest.raises(AirflowFailException, match="queue_timeout must be positive"):
        make(queue_timeout=value)


@KINDS
def test_a_priority_class_that_is_no_object_name_fails_when_the_dag_is_parsed(make: Any) -> None:
    with pytest.raises(AirflowFailException, match="not a valid WorkloadPriorityClass name"):
        make(priority_class="Urgent!")


@KINDS
def test_a_deadline_escalation_without_a_deadline_fails_when_the_dag_is_parsed(make: Any) -> None:
    with pytest.raises(AirflowFailException, match="on_deadline_risk needs a deadline="):
        make(on_deadline_risk={"raise_priority": "urgent"})


class _Hook:
    def create_secret(self, body: dict[str, Any]) -> bool:
        raise RuntimeError("403 Forbidden")


class _Client:
    def __init__(self, noun: str) -> None:
        self.noun, self.hook = noun, _Hook()
        self.deleted: list[tuple[str, str, str | None]] = []

    def delete_unless_finished(self, namespace: str, name: str, uid: str | None = None) -> str:
        self.deleted.append((namespace, name, uid))
        return "deleted"


@pytest.mark.parametrize("noun", ["Job", "JobSet"])
def test_an_object_whose_sas_secret_cannot_be_made_is_deleted_unless_it_finished(noun: str) -> None:
    """Both kinds, one rule (the checkpoint session's): the object goes, by the kind's delete-unless-finished
    (its pods could never checkpoint), and the error is the task's."""
    from types import SimpleNamespace

    from airflow_kueue_provider.operators.checkpointing import CheckpointSession

    session = SimpleNamespace(sas_secret=lambda obj, token: {"metadata": {"name": "obj-sas"}})
    client = _Client(noun)
    obj = {"metadata": {"name": "obj", "namespace": "ns", "uid": "u-1"}}
    with pytest.raises(RuntimeError, match="403"):
        CheckpointSession.hand_pods_their_sas(session, client, obj, "token")  # type: ignore[arg-type]
    assert client.deleted == [("ns", "obj", "u-1")]


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"parallelism_ramp": {"start": 1, "step": 1, "every_seconds": 30}}, "ElasticJobsViaWorkloadSlices"),
        ({"min_parallelism": 1}, "partial admission"),
        (
            {
                "deadline": "07:00",
                "checkpointing": "kueue_blob_default",
                "on_deadline_risk": {"spill_to": "on-demand"},
            },
            "one gang",
        ),
    ],
    ids=["parallelism_ramp", "min_parallelism", "spill_to"],
)
def test_what_kueue_cannot_do_for_a_jobset_is_refused_when_the_dag_is_parsed(
    kwargs: dict[str, Any], says: str
) -> None:
    workers = {"name": "workers", "image": "i:1", "completions": 2, "checkpoint": "checkpointing" in kwargs}
    with pytest.raises(AirflowFailException, match=f"not available for a JobSet: .*{says}"):
        KueueJobSetOperator(task_id="t", queue_name="q", replicated_jobs=[workers], **kwargs)


@KINDS
def test_a_first_try_result_carries_its_cost_and_figures(make: Any) -> None:
    """Both kinds price what ran (the JobSet each replicated job at its own requests) and keep one entry per
    attempt; a first try lists nothing in the cluster."""
    from types import SimpleNamespace

    op = make(namespace="ns", spot=True)
    name_key = "job_name" if isinstance(op, KueueIndexedJobOperator) else "jobset_name"
    event = {
        "status": "success",
        "message": "done",
        name_key: "obj-1",
        "namespace": "ns",
        "completions": 2,
        "queued_seconds": 5.0,
        "running_seconds": 3600.0,
    }
    context = {"ti": SimpleNamespace(dag_id="d", task_id="t", run_id="r", try_number=1, map_index=-1)}
    result = op.execute_complete(context, event)
    assert result[name_key] == "obj-1" and result["estimated_cost_usd"] > 0
    assert [a["job_name"] for a in result["attempt_figures"]] == ["obj-1"]
    assert result["running_seconds"] == 3600.0 and "Spot" in result["cost_basis"]


def test_a_retry_reattaches_to_a_completed_jobset_even_with_checkpointing() -> None:
    """A JobSet reruns whole, so its completed JobSet is the result; the Job kind with checkpointing lets its
    ledger say what is left instead (and without checkpointing reattaches too)."""
    from airflow_kueue_provider.operators.checkpointing import Checkpointing, CheckpointSession
    from airflow_kueue_provider.operators.job_submission import reattachable
    from airflow_kueue_provider.operators.no_checkpointing import NoCheckpointing

    completed = {
        "metadata": {"name": "earlier"},
        "status": {"conditions": [{"type": "Completed", "status": "True"}]},
    }
    session = CheckpointSession.__new__(CheckpointSession)  # its keeps_ledger alone is read
    workers = {"name": "workers", "image": "i:1", "completions": 2, "checkpoint": True}
    jobset = _jobset(replicated_jobs=[workers], checkpointing=Checkpointing("blob"))
    for op, shards, reattaches in (
        (jobset, session, True),
        (_job(checkpointing="blob"), session, False),
        (_job(), NoCheckpointing(2), True),
    ):
        found = reattachable([completed], completed_counts=op._reattaches_to_completed(shards))
        assert (found is not None) == reattaches, op
