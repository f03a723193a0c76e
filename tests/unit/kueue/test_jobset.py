"""JobSets as the provider builds and reads them: each replicated job validated as an Indexed Job, the set
suspended and queued as one; progress per replicated job and a failing index named by its Job."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_kueue_provider.kueue.jobset import ReplicatedJob, build_jobset, jobset_view
from airflow_kueue_provider.kueue.names import JOBSET_NAME_LABEL, QUEUE_NAME_LABEL, REPLICATED_JOB_LABEL
from airflow_kueue_provider.kueue.spec.job_manifest import build_indexed_job
from airflow_kueue_provider.kueue.spec.job_spec import InvalidJobSpec

from .job_specs import spec


def _jobset() -> dict[str, Any]:
    coordinator = build_indexed_job(spec(completions=1, image="example.invalid/coordinator:1"))
    workers = build_indexed_job(spec(completions=8, parallelism=8))
    return build_jobset(
        "genomics",
        "lq",
        [ReplicatedJob("coordinator", coordinator), ReplicatedJob("workers", workers)],
        labels={"airflow-kueue.io/dag-id": "nightly"},
    )


def test_the_jobset_is_queued_and_suspended_and_its_templates_are_the_validated_jobs() -> None:
    jobset = _jobset()
    assert jobset["spec"]["suspend"] is True
    assert jobset["metadata"]["labels"][QUEUE_NAME_LABEL] == "lq"
    coordinator, workers = jobset["spec"]["replicatedJobs"]
    assert (coordinator["name"], workers["name"]) == ("coordinator", "workers")
    # Kueue queues the JobSet as a whole: no template carries the queue label or its own suspend.
    for rj in (coordinator, workers):
        assert QUEUE_NAME_LABEL not in rj["template"]["metadata"]["labels"]
        assert "suspend" not in rj["template"]["spec"]
    assert workers["template"]["spec"]["completionMode"] == "Indexed"
    assert workers["template"]["spec"]["completions"] == 8


@pytest.mark.parametrize(
    ("replicated", "message"),
    [
        ([], "replicated_jobs is empty"),
        ([("a", 1), ("a", 1)], "'a' is used twice"),
        ([("Workers", 1)], "lowercase DNS label"),
        ([("w" * 21, 1)], "at most 20 characters"),
        ([("w", 0)], "replicas=0 must be at least 1"),
    ],
)
def test_bad_replicated_jobs_are_refused_before_anything_is_built(
    replicated: list[tuple[str, int]], message: str
) -> None:
    job = build_indexed_job(spec())
    with pytest.raises(InvalidJobSpec, match=message):
        build_jobset("js", "lq", [ReplicatedJob(n, job, replicas) for n, replicas in replicated], labels={})


def _child(name: str, replicated: str, completions: int, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {JOBSET_NAME_LABEL: "genomics", REPLICATED_JOB_LABEL: replicated},
            "ownerReferences": [{"kind": "JobSet", "name": "genomics", "controller": True}],
        },
        "spec": {"completions": completions},
        "status": status,
    }


def test_progress_and_outcome_per_replicated_job_name_the_failing_index() -> None:
    jobset = {**_jobset(), "status": {}}
    jobset["metadata"]["namespace"] = "ns"
    children = [
        _child("genomics-coordinator-0", "coordinator", 1, active=1),
        _child("genomics-workers-0", "workers", 8, completedIndexes="0-2,4-7", failedIndexes="3", active=0),
    ]
    view = jobset_view(jobset, children)
    assert view.outcome() is None
    assert view.progress_line() == (
        "coordinator 0/1 done, 1 active; workers 7/8 done, 0 active, failed indexes genomics-workers-0: 3"
    )
    jobset["status"] = {
        "conditions": [
            {"type": "Failed", "status": "True", "reason": "FailedJobs", "message": "jobset failed"}
        ]
    }
    status, message = jobset_view(jobset, children).outcome() or ("", "")
    assert status == "failed"
    assert message == (
        "JobSet ns/genomics failed (FailedJobs: jobset failed); failed indexes: genomics-workers-0: 3"
    )
    jobset["status"] = {"conditions": [{"type": "Completed", "status": "True"}]}
    assert (jobset_view(jobset, []).outcome() or ("",))[0] == "success"


def test_the_jobset_name_is_per_try_short_enough_for_its_pod_names_and_starts_with_a_letter() -> None:
    from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
    from airflow_kueue_provider.kueue.identity.identity_seal import IdentitySeal
    from airflow_kueue_provider.kueue.jobset import jobset_name_budget, jobset_name_for, longest_pod_name_part

    seal = IdentitySeal(b"k")

    workers = ReplicatedJob("workers", build_indexed_job(spec(completions=1000)))
    identity = AirflowIdentity("2026_nightly_" + "x" * 60, "genomics", "r1", try_number=1)
    name = jobset_name_for(identity, None, [workers], seal)
    # "<name>-workers-0-999-abcde" is at most 63 characters (the JobSet webhook's rule), and the name is
    # a DNS-1035 label although the DAG id starts with a digit.
    assert len(name) + longest_pod_name_part(workers) <= 63 and len(name) <= jobset_name_budget([workers])
    assert name[0].isalpha() and name.startswith("js-2026-nightly")
    assert name == jobset_name_for(identity, None, [workers], seal)  # deterministic: a restart finds it again
    retry = AirflowIdentity(identity.dag_id, "genomics", "r1", try_number=2)
    assert jobset_name_for(retry, None, [workers], seal) != name  # each try its own JobSet


def test_a_name_too_long_for_the_pod_names_is_refused() -> None:
    workers = ReplicatedJob("workers", build_indexed_job(spec(completions=8)))
    with pytest.raises(InvalidJobSpec, match="pod names would exceed 63"):
        build_jobset("j" * 50, "lq", [workers], labels={})


def test_a_jobsets_job_is_known_by_its_labels_and_runs_under_the_jobsets_workload() -> None:
    from airflow_kueue_provider.kueue.kinds import workload_owner_uid
    from airflow_kueue_provider.kueue.kinds.jobset import jobset_membership

    child = {
        "metadata": {
            "uid": "job-uid",
            "labels": {JOBSET_NAME_LABEL: "genomics", REPLICATED_JOB_LABEL: "workers"},
            "ownerReferences": [{"kind": "JobSet", "uid": "jobset-uid", "controller": True}],
        }
    }
    assert jobset_membership(child) == ("genomics", "workers")
    assert workload_owner_uid(child) == "jobset-uid"
    plain_job = {"metadata": {"uid": "job-uid"}}
    assert jobset_membership(plain_job) is None and workload_owner_uid(plain_job) == "job-uid"


def test_only_the_jobs_the_jobset_controller_made_for_it_count_as_its_children() -> None:
    """Labels and an ownerReference are anyone's to copy: a child is controlled by the JobSet's uid and named
    <jobset>-<replicated job>-<replica> for a replica the JobSet has."""
    from airflow_kueue_provider.kueue.kinds.jobset import is_jobset_child

    jobset = {**_jobset(), "status": {}}
    jobset["metadata"].update(namespace="ns", uid="js-uid")
    real = _child("genomics-workers-0", "workers", 8, completedIndexes="0-7")
    real["metadata"]["ownerReferences"][0]["uid"] = "js-uid"
    assert is_jobset_child(real, jobset)

    def forged(name: str, uid: str = "js-uid", replicated: str = "workers") -> dict[str, Any]:
        job = _child(name, replicated, 1, active=1)
        job["metadata"]["ownerReferences"][0]["uid"] = uid
        return job

    impostors = [
        forged("genomics-workers-x"),  # not a replica's name (the bed's attack)
        forged("genomics-workers-1"),  # a replica the JobSet does not have (replicas=1)
        forged("genomics-workers-01"),
        forged("genomics-coordinator-0", replicated="workers"),  # the label and the name disagree
        forged("genomics-workers-0", uid="another-uid"),  # another JobSet's controller reference
        forged("genomics-extra-0", replicated="extra"),  # no such replicated job
    ]
    no_owner = _child("genomics-workers-0", "workers", 8)
    no_owner["metadata"].pop("ownerReferences")
    for job in [*impostors, no_owner]:
        assert not is_jobset_child(job, jobset), job["metadata"]
    view = jobset_view(jobset, [real, *impostors])
    assert [j.name for rj in view.replicated for j in rj.jobs] == ["genomics-workers-0"]
    assert not view.unstarted_jobs, "an impostor that never starts is not the JobSet's stuck Job"
