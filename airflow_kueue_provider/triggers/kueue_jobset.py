"""The JobSet kind's trigger: one Kueue-queued JobSet, admitted as one Workload, per replicated job.

The loop is ``KueueFollowTrigger``'s (the triggerer's shared namespace watch then also watches JobSets);
this is the JobSet's part: its view over the child Jobs, its outcome, the stuck-pod look over the child Jobs
that have not started, its delete and its result.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ..kueue.job_progress import Outcome
from ..kueue.jobset import JobSetView, jobset_view
from ..kueue.jobset_result import (
    jobset_progress_line,
    jobset_result_of,
    jobset_start_overdue,
    unmanaged_jobset_verdict,
)
from ..kueue.kinds.jobset import JOBSET
from ..kueue.progress.quota_guard import Unmanaged
from ..kueue.progress.start_guard import stuck_reason
from ..watch.following import Following
from ..watch.snapshots import KindSnapshot
from .kueue_follow import KueueFollowTrigger

START_CHECK_JOBS = 8  # child Jobs whose pods one stuck-start check reads, at most (one LIST each)


class KueueJobSetTrigger(KueueFollowTrigger[JobSetView]):
    """Wait for a JobSet through Kueue's queue and its replicated jobs; one final event (see the base)."""

    description = JOBSET

    def __init__(self, *, jobset_name: str, jobset_uid: str | None = None, **shared: Any) -> None:
        """``shared``: ``KueueFollowTrigger``'s kwargs (namespace, queue_name, timeouts, deadline, ...)."""
        super().__init__(name=jobset_name, uid=jobset_uid, **shared)

    @property
    def jobset_name(self) -> str:
        return self.name

    @property
    def jobset_uid(self) -> str | None:
        return self.uid

    def _kind_kwargs(self) -> dict[str, Any]:
        return {"jobset_name": self.jobset_name, "jobset_uid": self.jobset_uid}

    def _view(self, snapshot: KindSnapshot) -> JobSetView:
        assert snapshot.obj is not None
        return jobset_view(snapshot.obj, snapshot.children, snapshot.workload)

    def _outcome(self, view: JobSetView) -> Outcome | None:
        ended = view.outcome()
        if ended is None:
            return None
        return Outcome("success" if ended[0] == "success" else "failed", ended[1])

    def _unmanaged(self, view: JobSetView, seconds_since_submit: float) -> Unmanaged | None:
        has_workload = view.workload is not None
        return unmanaged_jobset_verdict(view, has_workload, seconds_since_submit, self.workload_timeout)

    def _line(self, view: JobSetView, position: tuple[int, int] | None, waited: float | None) -> str:
        return jobset_progress_line(view, view.workload, position, waited)

    def _start_overdue(self, view: JobSetView, since_admission: float) -> bool | None:
        if not view.unstarted_jobs:
            return None
        return jobset_start_overdue(view, since_admission, self.start_timeout)

    async def _stuck_reason(self, following: Following, view: JobSetView) -> str | None:
        """Child Jobs that have not started, read one by one up to START_CHECK_JOBS until one names why."""
        for job in view.unstarted_jobs[:START_CHECK_JOBS]:
            pods, events = await following.pods_and_events(job.name)
            if found := stuck_reason(pods, events):
                return f"Job {job.name}, {found}"
        return None

    def _payload(self, view: JobSetView, obj: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
        now = datetime.now(UTC)
        result = jobset_result_of(obj, view, view.workload, now, self._released).to_dict()
        failed_jobs = {j.name: str(j.failed) for j in view.jobs if j.failed}
        return result, failed_jobs
