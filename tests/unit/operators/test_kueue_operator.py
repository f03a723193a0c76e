"""The operator template's own decisions (operators/kueue_operator.py), over fakes: which tries look for
the objects an earlier run of the task instance left."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.kueue.kinds.job import JOB
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.operators.no_checkpointing import NoCheckpointing


class Listing:
    """A kind client that counts its LISTs of the task instance's objects (and finds none)."""

    kind, noun, uid_sealed = JOB, "Job", True

    def __init__(self) -> None:
        self.lists = 0

    def task_instance_objects(self, namespace: str, identity: AirflowIdentity) -> list[dict[str, Any]]:
        self.lists += 1
        return []


class Recorded(NoCheckpointing):
    """Shards whose record knows an attempt: an execute of this try ran before (its worker died)."""

    def has_recorded_attempts(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("try_number", "shards", "lists"),
    [(1, NoCheckpointing(2), 0), (1, Recorded(2), 1), (2, NoCheckpointing(2), 1)],
    ids=["first-try", "first-try-that-ran-before", "retry"],
)
def test_only_a_retry_or_a_first_try_that_ran_before_lists_earlier_objects(
    try_number: int, shards: NoCheckpointing, lists: int
) -> None:
    task = KueueIndexedJobOperator(
        task_id="shards", namespace="team-a", queue_name="lq", image="example.invalid/x:1", completions=2
    )
    client = Listing()
    identity = AirflowIdentity("nightly", "shards", "manual__1", try_number=try_number)
    assert task._previous(client, identity, shards) == []  # type: ignore[arg-type]
    assert client.lists == lists
