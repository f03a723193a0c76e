"""The trigger that follows one Kueue-queued JobSet: queued, admitted (as one Workload), per replicated job,
finished -- through the triggerer's shared namespace watch, which then also watches JobSets."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from ..hooks.kueue_async_hook import AsyncKueueHook, is_connection_error
from ..hooks.retry import describe, is_transient
from ..kueue.job_ownership import is_same_object
from ..kueue.jobset import JobSetView, jobset_view
from ..kueue.jobset_result import jobset_progress_line, jobset_result_of, unmanaged_jobset_verdict
from ..kueue.quota_guard import DEFAULT_WORKLOAD_TIMEOUT
from ..kueue.start_guard import DEFAULT_START_TIMEOUT, jobset_start_overdue, stuck_reason
from ..kueue.workload_state import WorkloadPhase, WorkloadState, workload_state_from_dict
from ..watch.namespace_watch import FollowingJobSet, JobSetSnapshot, NamespaceWatch
from .kueue_job import CONFIRM_RETRY_SECONDS, UNMANAGED_GRACE_SECONDS
from .progress_log import ProgressLog, human_duration
from .resume_guard import ResumeGuard
from .start_check import START_RECHECK_SECONDS, StartCheckPacing

log = logging.getLogger(__name__)

START_CHECK_JOBS = 8  # child Jobs whose pods one stuck-start check reads, at most (one LIST each)


class KueueJobSetTrigger(BaseTrigger):
    """Wait for a JobSet through Kueue's queue and its replicated jobs; one final event.

    ``queue_timeout`` (seconds from ``submitted_at``) is the only thing that turns a long wait into a failure;
    the JobSet is then deleted. A JobSet Kueue does not manage is deleted too (never outside quota), and so is
    one admitted ``start_timeout`` ago whose pods cannot start (an image that never pulls, a pod no node
    takes): it would hold its quota for ever.
    """

    def __init__(
        self,
        *,
        jobset_name: str,
        namespace: str,
        queue_name: str,
        kubernetes_conn_id: str = "kubernetes_default",
        jobset_uid: str | None = None,
        queue_timeout: float | None = None,
        submitted_at: float | None = None,
        workload_timeout: float = DEFAULT_WORKLOAD_TIMEOUT,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        deferred_at: float | None = None,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.jobset_name = jobset_name
        self.namespace = namespace
        self.queue_name = queue_name
        self.kubernetes_conn_id = kubernetes_conn_id
        self.jobset_uid = jobset_uid
        self.queue_timeout = queue_timeout
        self.submitted_at = submitted_at if submitted_at is not None else time.time()
        self.workload_timeout = workload_timeout
        self.start_timeout = start_timeout
        self._unmanaged_since: float | None = None
        self._start_checks = StartCheckPacing(start_timeout)
        self.deferred_at = deferred_at
        self._resume_guard = ResumeGuard(deferred_at)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "jobset_name": self.jobset_name,
                "namespace": self.namespace,
                "queue_name": self.queue_name,
                "kubernetes_conn_id": self.kubernetes_conn_id,
                "jobset_uid": self.jobset_uid,
                "queue_timeout": self.queue_timeout,
                "submitted_at": self.submitted_at,
                "workload_timeout": self.workload_timeout,
                "start_timeout": self.start_timeout,
                "deferred_at": self.deferred_at,
            },
        )

    @property
    def _where(self) -> str:
        return f"JobSet {self.namespace}/{self.jobset_name}"

    async def run(self) -> AsyncIterator[TriggerEvent]:
        event = await self.first_event()
        await self._resume_guard.wait_open(self.log, f"{self._where}: {event['status']}")
        yield TriggerEvent(event)  # type: ignore[no-untyped-call]

    async def first_event(self) -> dict[str, Any]:
        """The one event this trigger ends with (``run`` adds the resume guard a triggerer needs)."""
        try:
            async with NamespaceWatch.follow_jobset(
                self.kubernetes_conn_id, self.namespace, self.jobset_name
            ) as following:
                return await self._until_outcome(following)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a broken connection or RBAC: end the task with the reason, not silence
            log.exception("following %s failed", self._where)
            return self._event("error", f"{type(exc).__name__}: {exc}")

    async def _until_outcome(self, following: FollowingJobSet) -> dict[str, Any]:
        progress = ProgressLog(self.log, f"{self.namespace}/{self.jobset_name}")
        snapshot = await following.next()
        while True:
            # 1. The JobSet is gone (asked the apiserver, not only the cache), or a namesake replaced it.
            if not is_same_object(snapshot.jobset, self.jobset_uid):
                reread = await self._fresh(following)
                if reread is None:
                    continue
                snapshot = reread
                if not is_same_object(snapshot.jobset, self.jobset_uid):
                    return self._event("error", f"{self._where} was deleted before it finished")
            assert snapshot.jobset is not None
            view = jobset_view(snapshot.jobset, snapshot.jobs)
            workload = workload_state_from_dict(snapshot.workload) if snapshot.workload else None
            # 2. Never outside Kueue's quota: a JobSet without a Workload is deleted once the verdict held for
            #    UNMANAGED_GRACE_SECONDS and on a fresh read.
            unmanaged_in = self._unmanaged_wait(view, snapshot)
            if unmanaged_in is not None and unmanaged_in <= 0:
                fresh = await self._fresh(following)
                if fresh is not None and is_same_object(fresh.jobset, self.jobset_uid):
                    assert fresh.jobset is not None
                    fresh_view = jobset_view(fresh.jobset, fresh.jobs)
                    since = time.time() - self.submitted_at
                    verdict = unmanaged_jobset_verdict(
                        fresh_view, fresh.workload is not None, since, self.workload_timeout
                    )
                    if verdict is not None:
                        await self._delete(fresh.jobset)
                        (self.log.error if verdict.running_outside_quota else self.log.warning)(
                            "%s", verdict.message
                        )
                        return self._event("failed", verdict.message, fresh.jobset, fresh_view, None)
                self._unmanaged_since = None
                snapshot = fresh or snapshot
                continue
            # 3. Finished: one final event, with every replicated job's progress.
            outcome = view.outcome()
            if outcome is not None:
                progress.offer(jobset_progress_line(view, workload), force=True)
                return self._event(outcome[0], outcome[1], snapshot.jobset, view, workload)
            progress.offer(jobset_progress_line(view, workload))
            # 4. The queue timeout, if set, acts on the objects as the apiserver has them now.
            left = self._seconds_left_in_queue(workload)
            if left is not None and left <= 0:
                fresh = await self._fresh(following)
                if fresh is not None and is_same_object(fresh.jobset, self.jobset_uid):
                    assert fresh.jobset is not None
                    fresh_workload = workload_state_from_dict(fresh.workload) if fresh.workload else None
                    fresh_view = jobset_view(fresh.jobset, fresh.jobs)
                    left = self._seconds_left_in_queue(fresh_workload)
                    if left is not None and left <= 0 and fresh_view.outcome() is None:
                        await self._delete(fresh.jobset)
                        waited = human_duration(time.time() - self.submitted_at)
                        limit = human_duration(self.queue_timeout or 0)
                        message = (
                            f"waited {waited} in queue {self.queue_name}, more than queue_timeout={limit}; "
                            f"deleted {self._where}"
                        )
                        return self._event("timeout", message, fresh.jobset, fresh_view, fresh_workload)
                snapshot = fresh or snapshot
                continue
            # 5. Never stuck after admission: pods of the JobSet that cannot start end the task.
            start_check_in = await self._check_start(following, view, workload)
            if isinstance(start_check_in, dict):
                return start_check_in
            # 6. Sleep until the watch has news, or a timeout is due.
            waits = [t for t in (left, unmanaged_in, start_check_in, progress.due_in()) if t is not None]
            try:
                snapshot = await asyncio.wait_for(
                    following.next(), timeout=max(min(waits), 0.05) if waits else None
                )
            except asyncio.TimeoutError:
                snapshot = following.current()

    async def _check_start(
        self, following: FollowingJobSet, view: JobSetView, workload: WorkloadState | None
    ) -> float | dict[str, Any] | None:
        """The final event when the JobSet's pods cannot start (start_guard); else seconds until the next look
        (None: none due). The child Jobs that have not started are read one by one, up to START_CHECK_JOBS,
        until one names why."""
        admitted_at = workload.admitted_at if workload else None
        since = time.time() - admitted_at.timestamp() if admitted_at else None
        if since is None or view.finished is not None or not view.unstarted_jobs:
            return None
        wait = self._start_checks.due_in(since, jobset_start_overdue(view, since, self.start_timeout))
        if wait is not None:
            return wait
        reason = None
        for job in view.unstarted_jobs[:START_CHECK_JOBS]:
            pods, events = await following.pods_and_events(job.name)
            if found := stuck_reason(pods, events):
                reason = f"Job {job.name}, {found}"
                break
        if reason is None:
            return START_RECHECK_SECONDS
        fresh = await self._fresh(following)
        if fresh is None or not is_same_object(fresh.jobset, self.jobset_uid):
            return START_RECHECK_SECONDS if fresh is None else None
        assert fresh.jobset is not None
        fresh_view = jobset_view(fresh.jobset, fresh.jobs)
        if fresh_view.finished is not None or not fresh_view.unstarted_jobs:
            return None
        await self._delete(fresh.jobset)
        message = (
            f"{self._where} was admitted {human_duration(since)} ago but its pods cannot start ({reason}); "
            f"it was deleted to release its quota (start_timeout={human_duration(self.start_timeout)})"
        )
        self.log.error("%s", message)
        return self._event("failed", message, fresh.jobset, fresh_view, workload)

    def _unmanaged_wait(self, view: JobSetView, snapshot: JobSetSnapshot) -> float | None:
        """Seconds until an unmanaged verdict may be acted on (<= 0: now); None while Kueue manages it."""
        since = time.time() - self.submitted_at
        if (
            unmanaged_jobset_verdict(view, snapshot.workload is not None, since, self.workload_timeout)
            is None
        ):
            self._unmanaged_since = None
            if view.finished is None and snapshot.workload is None:  # look again when Kueue's time is up
                return self.submitted_at + self.workload_timeout - time.time() + 0.05
            return None
        now = time.monotonic()
        self._unmanaged_since = self._unmanaged_since or now
        return self._unmanaged_since + UNMANAGED_GRACE_SECONDS - now

    def _seconds_left_in_queue(self, workload: WorkloadState | None) -> float | None:
        """Seconds until ``queue_timeout``; None once the JobSet was ever admitted (a requeue after eviction
        is not "never admitted")."""
        if self.queue_timeout is None:
            return None
        if workload is not None and (
            workload.admitted_at is not None
            or workload.eviction_count
            or workload.phase not in (WorkloadPhase.Queued, WorkloadPhase.QuotaReserved)
        ):
            return None
        return self.submitted_at + self.queue_timeout - time.time()

    async def _fresh(self, following: FollowingJobSet) -> JobSetSnapshot | None:
        """The objects read now, or None when the apiserver cannot answer: never a reason to end or delete."""
        try:
            return await following.confirm()
        except Exception as exc:
            if not (is_transient(exc) or is_connection_error(exc)):
                raise
            self.log.warning(
                "%s: the apiserver did not answer (%s); deciding again in %.0f s",
                self._where,
                describe(exc),
                CONFIRM_RETRY_SECONDS,
            )
            await asyncio.sleep(CONFIRM_RETRY_SECONDS)
            return None

    async def _delete(self, jobset: dict[str, Any]) -> None:
        async with AsyncKueueHook(self.kubernetes_conn_id).session() as hook:
            await hook.delete_jobset_unless_finished(
                self.namespace, self.jobset_name, uid=jobset["metadata"].get("uid")
            )

    def _event(
        self,
        status: str,
        message: str,
        jobset: dict[str, Any] | None = None,
        view: JobSetView | None = None,
        workload: WorkloadState | None = None,
    ) -> dict[str, Any]:
        event: dict[str, Any] = {
            "status": status,
            "message": message,
            "jobset_name": self.jobset_name,
            "namespace": self.namespace,
        }
        if self.jobset_uid:
            event["jobset_uid"] = self.jobset_uid
        if jobset is not None and view is not None:
            event.update(jobset_result_of(jobset, view, workload, datetime.now(timezone.utc)).to_dict())
            # For the operator's log tails (not part of the result): each child Job's failed indexes.
            event["failed_jobs"] = {
                j.name: str(j.failed) for rj in view.replicated for j in rj.jobs if j.failed
            }
        return event

    async def cleanup(self) -> None:
        """Nothing to release: the shared watch is left by the ``async with`` in ``run``."""

    async def on_kill(self) -> None:
        """The task was marked failed/success or cleared while deferred: delete the JobSet unless it
        finished (its Jobs, pods and Workload go with it)."""
        async with AsyncKueueHook(self.kubernetes_conn_id).session() as hook:
            what = await hook.delete_jobset_unless_finished(
                self.namespace, self.jobset_name, uid=self.jobset_uid
            )
        self.log.info("task killed while deferred; %s: %s", self._where, what)
