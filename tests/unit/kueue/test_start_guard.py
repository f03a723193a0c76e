"""Never stuck after admission: when a JobSet's pods are overdue to start."""

from __future__ import annotations

from airflow_kueue_provider.kueue.jobset import jobset_view
from airflow_kueue_provider.kueue.start_guard import jobset_start_overdue

from .test_jobset_result import _job, _jobset


def test_a_jobset_is_overdue_to_start_while_one_child_job_has_no_ready_pod_even_if_another_runs() -> None:
    coordinator = {**_job("coordinator", 1, active=1), "status": {"active": 1, "ready": 1}}
    workers = _job("workers", 2, active=2)  # pods exist, none ready: an image that never pulls
    view = jobset_view(_jobset(), [coordinator, workers])
    assert [job.name for job in view.unstarted_jobs] == ["genomics-workers-0"]
    assert not jobset_start_overdue(view, 599.0, 600.0)
    assert jobset_start_overdue(view, 600.0, 600.0)
    assert not jobset_start_overdue(view, None, 600.0)  # never admitted
    started = {**workers, "status": {"active": 2, "ready": 2}}
    assert not jobset_start_overdue(jobset_view(_jobset(), [coordinator, started]), 900.0, 600.0)
    some_done = _job("workers", 2, completed="0", active=1)
    assert not jobset_start_overdue(jobset_view(_jobset(), [coordinator, some_done]), 900.0, 600.0)
    finished = jobset_view(_jobset(finished="Failed"), [coordinator, workers])
    assert not jobset_start_overdue(finished, 900.0, 600.0)
