"""The soak's checker on hand-made histories: each violation is found, with its evidence; a clean history
has none; what a recorder gap hides is unverified, never a violation."""

from __future__ import annotations

from typing import Any

from tests.integration.soak.checker import (
    check_all,
    condition_timeline,
    duplicate_jobs,
    false_successes,
    items_lost,
    ran_past_quota,
    shards_finished_twice,
    started_outside_admission,
    unexpected_states,
    usage_over_limit,
)
from tests.integration.soak.history import Gap, History, Observation, TaskOutcome

T0 = 1_000_000.0
NS = "soak"
TASK = {"dag_id": "genome", "task_id": "align", "run_id": "r1", "map_index": "-1", "try_number": "1"}
KEY = "genome/align/r1/-1"


def workload(
    uid: str,
    t: float,
    job_uid: str,
    *,
    admitted: float | None = None,
    released: float | None = None,
    finished: float | None = None,
    cq: str = "cq",
    cpu: float = 1.0,
    event: str = "MODIFIED",
    batch: int = 0,
) -> Observation:
    """A Workload state at ``t``: admitted at ``admitted``, its quota released at ``released``."""
    conditions: dict[str, list[Any]] = {}
    if admitted is not None:
        holds = released is None
        conditions["QuotaReserved"] = [holds, admitted if holds else released]
        conditions["Admitted"] = [holds, admitted if holds else released]
    if finished is not None:
        conditions["Finished"] = [True, finished]
    view = {
        "job_uid": job_uid,
        "job_name": f"job-{job_uid}",
        "created": T0,
        "cluster_queue": cq if admitted is not None else None,
        "conditions": conditions,
        "usage": {"cpu": cpu} if admitted is not None else {},
    }
    return Observation(t, "Workload", event, NS, f"wl-{uid}", uid, view, batch)


def job(uid: str, t: float, try_number: str = "1", sealed: bool = True) -> Observation:
    view = {
        "identity": {**TASK, "try_number": try_number},
        "sealed": sealed,
        "created": T0,
        "completions": 1,
        "checkpoint_url": "http://127.0.0.1:10000/acct/c",
        "checkpoint_prefix": "genome/r1/align",
        "conditions": {},
    }
    return Observation(t, "Job", "ADDED", NS, f"job-{uid}", uid, view)


def pod(uid: str, t: float, job_uid: str, grace: int = 30) -> Observation:
    view = {
        "job_uid": job_uid,
        "job_name": f"job-{job_uid}",
        "index": "0",
        "node": "proc-spot-0",
        "phase": "Running",
        "started": None,
        "finished": None,
        "deleting": False,
        "grace": grace,
    }
    return Observation(t, "Pod", "ADDED", NS, f"pod-{uid}", uid, view)


def journal(event: str, t: float, pod_uid: str, job_uid: str, **extra: Any) -> dict[str, Any]:
    return {
        "t": t,
        "event": event,
        "pod": f"{NS}/pod-{pod_uid}",
        "uid": pod_uid,
        "job": f"job-{job_uid}",
        "index": 0,
        "cpu": 0.25,
        **extra,
    }


def items(pod_uid: str, shard: int, numbers: range, t: float) -> list[dict[str, Any]]:
    return [{"shard": shard, "item": i, "pod": f"pod-{pod_uid}", "t": t + i} for i in numbers]


def clean() -> History:
    """One task, one Job, admitted at +1, its process from +3 to +20, every item logged, done, success."""
    return History(
        start=T0,
        end=T0 + 100,
        observations=[
            job("j1", T0 + 0.1),
            workload("w1", T0 + 0.2, "j1", event="ADDED"),
            workload("w1", T0 + 1.1, "j1", admitted=T0 + 1),
            pod("p1", T0 + 2, "j1"),
            workload("w1", T0 + 21, "j1", admitted=T0 + 1, finished=T0 + 21),
        ],
        journal=[journal("start", T0 + 3, "p1", "j1"), journal("exit", T0 + 20, "p1", "j1", exit_code=0)],
        items=items("p1", 0, range(3), T0 + 4),
        tasks=[
            TaskOutcome(
                "genome",
                "align",
                "r1",
                -1,
                "success",
                1,
                {"completions": 1, "succeeded": 1, "failed_indexes": ""},
            )
        ],
        done={"genome/r1/align/0": {"program": "aligner", "items": 3, "total": 6.0}},
        items_per_shard={"genome/align": 3},
        expected_output={"genome/align/0": {"items": 3, "total": 6.0}},
        limits={"cq": {"cpu": 1.0}},
        expected_states={"genome/align": "success"},
    )


def test_a_clean_history_has_no_violation() -> None:
    found = check_all(clean())
    assert found.violations == [] and found.unverified == []
    assert found.figures["items_logged"] == 3 and found.figures["sealed_jobs"] == 1


def test_a_process_started_before_its_workload_was_admitted() -> None:
    history = clean()
    history.journal[0] = journal("start", T0 - 5, "p1", "j1")
    (violation,) = started_outside_admission(history).violations
    assert violation.check == "started-outside-admission" and "journal" in violation.subject


def test_a_fake_pod_started_after_its_deletion_was_asked_is_counted_not_checked() -> None:
    history = clean()
    created = {**history.observations[3].view, "created": T0 + 2}
    running = {**created, "started": T0 + 40}
    deleting = {**created, "deleting": True, "delete_asked": T0 + 10}
    history.observations[3:4] = [
        Observation(T0 + 2, "Pod", "ADDED", NS, "pod-p1", "p1", created),
        Observation(T0 + 11, "Pod", "MODIFIED", NS, "pod-p1", "p1", deleting),
        Observation(T0 + 40, "Pod", "MODIFIED", NS, "pod-p1", "p1", {**running, "deleting": True}),
    ]
    history.observations[-1] = workload("w1", T0 + 9, "j1", admitted=T0 + 1, released=T0 + 9)  # evicted
    found = started_outside_admission(history)
    assert found.violations == [] and found.figures["pod_status_starts_after_delete"] == 1
    # Created while its Workload was not admitted: a violation, whatever else the pod did.
    history.observations[3] = Observation(
        T0 + 30, "Pod", "ADDED", NS, "pod-p1", "p1", {**created, "created": T0 + 30}
    )
    (violation,) = started_outside_admission(history).violations
    assert "(pod creation)" in violation.subject


def test_an_admission_seen_only_after_a_recorder_gap_is_unverified_not_a_violation() -> None:
    history = clean()
    history.observations[2] = workload("w1", T0 + 30, "j1", admitted=T0 + 25, event="RELISTED", batch=1)
    history.gaps = [Gap("Workload", T0 + 0.5, T0 + 30.5)]
    history.journal[0] = journal("start", T0 + 3, "p1", "j1")
    found = started_outside_admission(history)
    assert found.violations == [] and len(found.unverified) == 1
    # The same history without the gap: the process started 22 s before the admission.
    history.gaps = []
    assert len(started_outside_admission(history).violations) == 1


def test_a_flip_and_a_flip_back_unseen_make_the_span_unknown() -> None:
    seen = [workload("w1", T0 + 1.1, "j1", admitted=T0 + 1), workload("w1", T0 + 40, "j1", admitted=T0 + 35)]
    segments = condition_timeline(seen, "Admitted", [], T0 + 100)
    assert [s.state for s in segments] == [False, None, True]


def test_a_process_that_outlives_its_quota_by_more_than_its_grace() -> None:
    history = clean()
    history.observations[4] = workload("w1", T0 + 10.2, "j1", admitted=T0 + 1, released=T0 + 10)
    history.journal[1] = journal("exit", T0 + 50, "p1", "j1", exit_code=143)
    found = ran_past_quota(history)
    (violation,) = found.violations
    assert "40.0s after its quota was released" in violation.evidence
    # Within its grace period it is Kueue's design (terminating pods are not active): a figure only.
    history.journal[1] = journal("exit", T0 + 25, "p1", "j1", exit_code=143)
    found = ran_past_quota(history)
    assert found.violations == [] and found.figures["quota_tail_max_s"] == 15


def test_two_workloads_holding_more_than_the_queue_has() -> None:
    history = clean()
    history.observations[3:3] = [  # in the order the watch delivered them: before w1 finished
        job("j2", T0 + 5, try_number="2"),
        workload("w2", T0 + 6, "j2", admitted=T0 + 6),
    ]
    (violation,) = usage_over_limit(history).violations
    assert "cpu 2 > limit 1" in violation.evidence and "w1" in violation.evidence


def test_a_relist_that_shows_a_release_and_an_admission_is_applied_as_one_step() -> None:
    history = clean()
    history.observations = [
        workload("w1", T0 + 1, "j1", admitted=T0 + 1),
        workload("w2", T0 + 30, "j2", admitted=T0 + 29, event="RELISTED", batch=7),
        workload("w1", T0 + 30, "j1", admitted=T0 + 1, released=T0 + 28, event="RELISTED", batch=7),
    ]
    found = usage_over_limit(history)
    assert found.violations == [] and found.figures["peak_usage"] == {"cq/cpu": 1.0}


def test_two_sealed_jobs_for_one_try() -> None:
    history = clean()
    history.observations.append(job("j9", T0 + 9))
    (violation,) = duplicate_jobs(history).violations
    assert violation.subject == "genome/align/r1/-1/1" and "job-j1" in violation.evidence
    # A second try's Job, or an unsealed copy, is no duplicate.
    history.observations[-1] = job("j9", T0 + 9, try_number="2")
    history.observations.append(job("j8", T0 + 9, sealed=False))
    assert duplicate_jobs(history).violations == []


def test_a_shard_run_to_its_end_by_two_pods() -> None:
    history = clean()
    history.observations.append(pod("p2", T0 + 30, "j1"))
    history.journal += [
        journal("start", T0 + 31, "p2", "j1"),
        journal("exit", T0 + 40, "p2", "j1", exit_code=0),
    ]
    history.items += items("p2", 0, range(3), T0 + 32)
    (violation,) = shards_finished_twice(history).violations
    assert violation.subject == f"{KEY} shard 0" and "pod-p1" in violation.evidence
    # Redone items after a SIGKILL (the second pod ended without finishing) are a figure, not a violation.
    history.journal[-1] = journal("exit", T0 + 40, "p2", "j1", exit_code=137)
    found = shards_finished_twice(history)
    assert found.violations == [] and found.figures["items_redone"] == 3


def test_an_item_missing_from_the_log_and_a_wrong_or_missing_output() -> None:
    history = clean()
    history.items = history.items[:2]
    (violation,) = items_lost(history).violations
    assert "items not in the log: [2]" in violation.evidence
    history = clean()
    history.done["genome/r1/align/0"] = {"items": 3, "total": 5.0}
    assert "output" in items_lost(history).violations[0].evidence
    history.done = {}
    assert items_lost(history).violations[0].evidence == "no done marker"


def test_a_task_in_another_state_than_expected_and_a_false_success() -> None:
    history = clean()
    history.tasks = [TaskOutcome("genome", "align", "r1", -1, "failed", 3, None)]
    (violation,) = unexpected_states(history).violations
    assert "failed after 3 tries" in violation.evidence
    history.tasks = [
        TaskOutcome("genome", "align", "r1", -1, "success", 1, {"completions": 4, "succeeded": 3})
    ]
    (violation,) = false_successes(history).violations
    assert "succeeded 3/4" in violation.evidence
