"""Only a Job with this task instance's full identity is ours: labels alone never decide."""

from __future__ import annotations

from typing import Any

from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.kueue.identity.job_ownership import (
    belongs_to_task_instance,
    belongs_to_try,
    is_managed,
    is_same_object,
)
from airflow_kueue_provider.kueue.names import MANAGED_BY_LABEL, MANAGED_BY_VALUE

COLON_RUN = "manual__2026-05-01T10:00:00+00:00"
UNDERSCORE_RUN = "manual__2026-05-01T10_00_00_00_00"


def job_of(identity: AirflowIdentity, managed: bool = True, uid: str = "u1") -> dict[str, Any]:
    labels = {**identity.labels(), **({MANAGED_BY_LABEL: MANAGED_BY_VALUE} if managed else {})}
    return {"metadata": {"uid": uid, "labels": labels, "annotations": identity.annotations()}}


def test_a_run_id_whose_labels_collide_is_not_the_same_task_instance() -> None:
    ours = AirflowIdentity("d", "t", COLON_RUN)
    other = AirflowIdentity("d", "t", UNDERSCORE_RUN + "-" + ours.labels()["airflow-kueue.io/run-id"][-10:])
    assert other.labels() == ours.labels(), "the labels are the same"
    job = job_of(other)
    assert not belongs_to_task_instance(job, ours)
    assert belongs_to_task_instance(job_of(ours), ours)


def test_try_and_map_index_must_match_exactly() -> None:
    first = AirflowIdentity("d", "t", "r", try_number=1, map_index=3)
    assert belongs_to_try(job_of(first), first)
    assert belongs_to_task_instance(job_of(first), AirflowIdentity("d", "t", "r", try_number=2, map_index=3))
    assert not belongs_to_try(job_of(first), AirflowIdentity("d", "t", "r", try_number=2, map_index=3))
    assert not belongs_to_task_instance(job_of(first), AirflowIdentity("d", "t", "r", map_index=-1))


def test_a_job_without_the_managed_by_label_or_annotations_is_never_ours() -> None:
    identity = AirflowIdentity("d", "t", "r")
    assert not belongs_to_task_instance(job_of(identity, managed=False), identity)
    labels_only = {"metadata": {"labels": {**identity.labels(), MANAGED_BY_LABEL: MANAGED_BY_VALUE}}}
    assert is_managed(labels_only) and not belongs_to_task_instance(labels_only, identity)
    assert not belongs_to_task_instance({}, identity)


def test_same_object_compares_the_uid_recorded_at_create() -> None:
    job = job_of(AirflowIdentity("d", "t", "r"), uid="abc")
    assert is_same_object(job, "abc") and is_same_object(job, None)
    assert not is_same_object(job, "other") and not is_same_object(None, "abc")


def test_delete_unless_finished_decides_each_step_on_a_fresh_read() -> None:
    from airflow_kueue_provider.kueue.identity.job_ownership import delete_unless_finished_step

    running = {"metadata": {"uid": "u1", "resourceVersion": "42"}, "status": {}}
    done = {"metadata": {"uid": "u1"}, "status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    assert delete_unless_finished_step(None, "u1", False) == "gone"
    assert delete_unless_finished_step(running, "another-uid", False) == "gone", "a namesake is not ours"
    assert delete_unless_finished_step(done, "u1", False) == "finished"
    assert delete_unless_finished_step(running, "u1", False) == {
        "propagationPolicy": "Background",
        "preconditions": {"uid": "u1", "resourceVersion": "42"},
    }
    last = delete_unless_finished_step(running, None, True)
    assert last == {"propagationPolicy": "Background", "preconditions": {"uid": "u1"}}
