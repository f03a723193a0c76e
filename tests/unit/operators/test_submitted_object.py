"""``wait_for_completion=False``: its record, and the parameters it cannot go with (refused when the DAG is
parsed, or before anything is created)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_kueue_provider.airflow_compat import AirflowFailException
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.operators.kueue_job_sensor import trigger_class
from airflow_kueue_provider.operators.submitted_object import NotASubmittedObject, SubmittedObject
from airflow_kueue_provider.triggers.kueue_job import KueueJobTrigger

RECORD = SubmittedObject("Job", "ns", "j-1", "u-1", "lq", "kubernetes_default", {"max_failed_indexes": 2})


def test_the_record_round_trips_through_xcom() -> None:
    assert SubmittedObject.from_xcom(RECORD.to_dict(), "submit") == RECORD


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (None, "pushed nothing"),
        ({"completed_indexes": "0-2"}, "a dict without schema=1"),
        ({**RECORD.to_dict(), "uid": ""}, "lacks uid"),
    ],
)
def test_anything_else_is_refused_naming_the_task_and_the_fix(value: Any, said: str) -> None:
    with pytest.raises(NotASubmittedObject, match=rf"task 'submit'.*{said}.*wait_for_completion=False"):
        SubmittedObject.from_xcom(value, "submit")


@pytest.mark.parametrize(
    ("param", "value"),
    [("checkpointing", "blob_conn"), ("deadline", "07:00"), ("parallelism_ramp", {"start": 1, "step": 1})],
)
def test_no_wait_refuses_what_needs_the_waiting_task(param: str, value: Any) -> None:
    op = None
    with pytest.raises(
        AirflowFailException, match=rf"wait_for_completion=False cannot be combined with {param}"
    ):
        op = KueueIndexedJobOperator(
            task_id="t",
            queue_name="lq",
            image="i",
            completions=4,
            wait_for_completion=False,
            **{param: value},
        )
        op.execute({})  # the ramp is the Job kind's: refused on entry, before anything is read or created
    assert op is None or param == "parallelism_ramp"


def test_the_sensor_finds_the_kind_s_trigger() -> None:
    assert trigger_class("Job") is KueueJobTrigger
    with pytest.raises(NotASubmittedObject, match="no trigger is loaded for kind 'Nope'"):
        trigger_class("Nope")
