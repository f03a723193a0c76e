"""The short night's "completed twice" (issue 37's flake): what the recorder keeps of a pod that was told to
stop, how the report tells a double completion from an evicted pod that still ended Succeeded beside its
replacement, and that a finding names its Jobs and pods in full."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from tests.integration.night.recorder import ClusterRecorder
from tests.integration.night.report import shard_accounting, violations
from tests.integration.night.workload import NightShape, draw

RISK = "night-risk-pfe-d0489f2bd5"
GATHER = "night-genomics-sample-gather-1-d1e801f756"


def _night() -> Any:
    return draw(NightShape(samples=3, risk_shards=20, genomics_cpu=60, risk_cpu=8, risk_parallelism=8))


def _event(uid: str, job: str, index: int, phase: str, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "uid": uid,
        "namespace": "ns",
        "name": f"{job}-{index}-{uid}",
        "ownerReferences": [{"kind": "Job", "name": job, "uid": f"uid-{job}", "controller": True}],
        "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
    }
    conditions = [{"type": "DisruptionTarget", "status": "True"}] if extra.get("disrupted") else []
    if extra.get("deleting"):
        meta["deletionTimestamp"] = "2026-12-05T03:49:10Z"
    node = extra.get("node", "aks-nightspot-73ddab-000")
    return {
        "metadata": meta,
        "spec": {"nodeName": node},
        "status": {"phase": phase, "conditions": conditions},
    }


def _job(name: str, dag: str, task: str, map_index: int, shards: int) -> dict[str, Any]:
    return {
        "uid": f"uid-{name}", "name": name, "dag_id": dag, "task_id": task, "map_index": map_index,
        "shard_ids": list(range(shards)), "completed_indexes": f"0-{shards - 1}", "created": 1.0,
        "complete": 9.0, "failed": None,
    }  # fmt: skip


def _phase(pods: list[dict[str, Any]], jobs: list[dict[str, Any]]) -> dict[str, Any]:
    tis = [
        {"dag_id": j["dag_id"], "task_id": j["task_id"], "map_index": j["map_index"], "state": "success"}
        for j in jobs
    ]
    workloads = [{"job_uid": j["uid"], "admitted": [0.0], "evicted": []} for j in jobs]
    return {
        "pods": pods,
        "jobs": jobs,
        "task_instances": tis,
        "states": {},
        "workloads": workloads,
        "timeline": [],
    }


def _recorded(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    recorder = ClusterRecorder(None, ["ns"])
    for event in events:
        recorder._pod(event)
    return [asdict(p) for p in recorder.pods.values()]


def _jobs(night: Any) -> list[dict[str, Any]]:
    gather = night.shape.steps[-1]
    return [
        _job(RISK, "night_risk", "pfe", -1, night.shape.risk_shards),
        _job(GATHER, "night_genomics", f"sample.{gather.name}", 1, gather.shards),
    ]


def test_the_recorder_keeps_that_a_pod_was_evicted_while_running_not_deleted_after_its_end() -> None:
    pods = _recorded(
        [
            _event("a", RISK, 16, "Running"),
            _event("a", RISK, 16, "Running", disrupted=True),
            _event("a", RISK, 16, "Running", disrupted=True, deleting=True),
            _event("a", RISK, 16, "Succeeded", disrupted=True, deleting=True),  # KWOK's completion, late
            _event("b", RISK, 17, "Running"),
            _event("b", RISK, 17, "Succeeded"),
            _event("b", RISK, 17, "Succeeded", deleting=True),  # the namespace's teardown
            _event("c", RISK, 18, "Running"),
            _event("c", RISK, 18, "Running", deleting=True),  # Kueue preempted the Workload: no condition
            _event("c", RISK, 18, "Succeeded", deleting=True),
        ]
    )
    evicted, finished, preempted = pods
    assert (preempted["phase"], preempted["disrupted"], preempted["stopping"]) == ("Succeeded", False, True)
    assert (evicted["phase"], evicted["disrupted"], evicted["stopping"]) == ("Succeeded", True, True)
    assert evicted["history"] == ["Running", "DisruptionTarget", "deleting", "Succeeded"]
    assert (finished["phase"], finished["disrupted"], finished["stopping"]) == ("Succeeded", False, False)


def test_an_evicted_pod_that_succeeded_beside_its_replacement_is_one_completion_two_are_not() -> None:
    """CI's short night: risk index 18's evicted pod ended Succeeded beside its replacement. The Job counts
    the index once (``completedIndexes``) and a real shard keeps one done record: a figure, not a violation.
    Two pods that each ran the index to the end untold remain a double completion."""
    night = _night()
    events = [
        _event("old", RISK, 18, "Running"),
        _event("old", RISK, 18, "Running", disrupted=True, deleting=True),
        _event("new", RISK, 18, "Running", node="aks-nightspot-73ddab-001"),
        _event("old", RISK, 18, "Succeeded", disrupted=True, deleting=True),
        _event("new", RISK, 18, "Succeeded", node="aks-nightspot-73ddab-001"),
        _event("g", GATHER, 18, "Succeeded"),  # another Job's pod of the same index: its own shard
    ]
    phase = _phase(_recorded(events), _jobs(night))
    found = shard_accounting(night, phase)
    assert (found["completed_twice"], found["finished_by_two_pods"]) == (0, 1)
    assert found["finished_by_two_pods_in"][0].startswith(f"Job {RISK} index 18: {RISK}-18-old (node ")
    assert GATHER not in found["finished_by_two_pods_in"][0]
    assert violations(night, phase) == []

    untold = _recorded([*events[:1], _event("old", RISK, 18, "Succeeded"), *events[2:]])
    found = shard_accounting(night, _phase(untold, _jobs(night)))
    assert (found["completed_twice"], found["finished_by_two_pods"]) == (1, 0)


def test_a_finding_names_each_job_and_its_own_pods_in_full() -> None:
    """Two Jobs with a double each: the message, longer than pytest's 240-character cut of a list's repr
    (the cut joined one Job's entry to another's pods and read as "pods of two Jobs under one index"), names
    each Job by its name with only its own pods."""
    night = _night()
    events = [
        _event("r1", RISK, 16, "Succeeded"),
        _event("r2", RISK, 16, "Succeeded", node="aks-nightspot-73ddab-002"),
        _event("g1", GATHER, 6, "Succeeded"),
        _event("g2", GATHER, 6, "Succeeded", node="aks-nightspot-73ddab-001"),
    ]
    found = violations(night, _phase(_recorded(events), _jobs(night)))
    assert len(found) == 1 and isinstance(found[0], str) and len(found[0]) > 240
    head, entries = found[0].split(": ", 1)
    assert head == "2 shards completed twice"
    risk, gather = entries.split("; ")
    assert risk.startswith(f"Job {RISK} index 16: {RISK}-16-r1") and f"{RISK}-16-r2" in risk
    assert gather.startswith(f"Job {GATHER} index 6: {GATHER}-6-g1") and f"{GATHER}-6-g2" in gather
    assert GATHER not in risk and RISK not in gather


def _job_event(uid: str, suspend: bool) -> dict[str, Any]:
    ann = {"airflow-kueue.io/dag-id": "night_risk", "airflow-kueue.io/task-id": "pfe"}
    return {
        "metadata": {"uid": uid, "namespace": "ns", "name": RISK, "annotations": ann},
        "spec": {"suspend": suspend},
    }


def test_the_recorder_keeps_each_time_a_running_job_is_suspended_again() -> None:
    recorder = ClusterRecorder(None, ["ns"])
    for suspend in (True, False, False, True, True, False, True):  # created, admitted, preempted twice
        recorder._job({**_job_event("j", suspend)})
    (job,) = recorder.jobs.values()
    assert job.unsuspended is not None and len(job.suspended) == 2


def test_a_pod_that_succeeded_as_its_job_was_suspended_is_the_job_controllers_race_not_a_double() -> None:
    """The local short night of 2026-12-05: risk's Workload was preempted (seen at t), index 16's pod went
    Succeeded 0.3 s later and was then deleted by the Job controller, which had not seen the Succeeded and
    took the finalizer off first; the Job ran index 16 again on readmission. The Job counts it once and a
    real shard's second pod finds the done record: a figure. A pod deleted long after a suspension (the
    namespace's teardown) beside a second completion stays a double."""
    night = _night()
    pods = _recorded(
        [
            _event("old", RISK, 16, "Running"),
            _event("old", RISK, 16, "Succeeded"),
            _event("old", RISK, 16, "Succeeded", deleting=True),
            _event("new", RISK, 16, "Succeeded", node="aks-nightspot-73ddab-003"),
        ]
    )
    old = next(p for p in pods if p["name"].endswith("-old"))
    assert old["history"] == ["Running", "Succeeded", "deleting"] and old["deleting"] is not None
    old["ended"], old["deleting"] = 100.3, 100.4
    jobs = _jobs(night)
    jobs[0]["suspended"] = [100.0]
    found = shard_accounting(night, _phase(pods, jobs))
    assert (found["completed_twice"], found["finished_by_two_pods"]) == (0, 1)
    assert "uncounted as its Job was suspended" in found["finished_by_two_pods_in"][0]

    jobs[0]["suspended"] = [60.0]  # suspended and readmitted long before: nothing stopped this pod
    found = shard_accounting(night, _phase(pods, jobs))
    assert (found["completed_twice"], found["finished_by_two_pods"]) == (1, 0)
