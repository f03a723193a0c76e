"""The trigger that follows one Kueue-queued IndexedJob from queue to last index."""

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
from ..kueue.deadline import DeadlinePlan, EtaHistory, at_risk
from ..kueue.eta import AdmissionClock, Estimate, FinishClock, eta_line
from ..kueue.job_ownership import is_same_object
from ..kueue.job_progress import (
    JobView,
    Outcome,
    outcome_of,
    progress_line,
    released_line,
    result_of,
    view_of,
)
from ..kueue.ledger import RUNNING, attempt_status
from ..kueue.parallelism_ramp import RampPlan
from ..kueue.quota_guard import DEFAULT_WORKLOAD_TIMEOUT, Unmanaged, unmanaged_verdict
from ..kueue.released_quota import ReleasedQuota
from ..kueue.start_guard import DEFAULT_START_TIMEOUT, start_overdue, stuck_reason
from ..kueue.workload_state import WorkloadPhase
from ..watch.namespace_watch import Following, JobSnapshot, NamespaceWatch
from .ledger_writer import LedgerWriter, Progress
from .progress_log import ProgressLog, human_duration
from .resume_guard import ResumeGuard
from .start_check import START_RECHECK_SECONDS, StartCheckPacing

log = logging.getLogger(__name__)

POSITION_FIRST_AFTER = (
    10.0  # seconds of queueing before the first position read: most Jobs are admitted sooner
)
POSITION_FIRST_REFRESH = 30.0  # then every 30 s, doubling up to POSITION_MAX_REFRESH while still queued
POSITION_MAX_REFRESH = 600.0
LEDGER_FLUSH_SECONDS = 60.0  # at the end, how long to wait for the last ledger write (Blob may be away)
CONFIRM_RETRY_SECONDS = 2.0  # after a re-read the apiserver could not answer
UNMANAGED_GRACE_SECONDS = 10.0  # how long "no Workload" must hold, then on a fresh read, before a delete


class KueueJobTrigger(BaseTrigger):
    """Wait for a Kueue-queued Job through queueing, admission, eviction/requeue and its indexes.

    Events come from the shared namespace watch (no polling). The pending position is read from Kueue's
    visibility API only while queued, at growing intervals. ``queue_timeout`` (seconds from ``submitted_at``)
    is the only thing that turns a long wait into a failure; the Job is then deleted.
    """

    def __init__(
        self,
        *,
        job_name: str,
        namespace: str,
        queue_name: str,
        kubernetes_conn_id: str = "kubernetes_default",
        max_failed_indexes: int | None = None,
        queue_timeout: float | None = None,
        submitted_at: float | None = None,
        ledger: dict[str, Any] | None = None,
        ramp: dict[str, Any] | None = None,
        job_uid: str | None = None,
        workload_timeout: float = DEFAULT_WORKLOAD_TIMEOUT,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        deadline: dict[str, Any] | None = None,
        deferred_at: float | None = None,
        released_before: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.job_name = job_name
        self.namespace = namespace
        self.queue_name = queue_name
        self.kubernetes_conn_id = kubernetes_conn_id
        self.max_failed_indexes = max_failed_indexes
        self.queue_timeout = queue_timeout
        self.submitted_at = submitted_at if submitted_at is not None else time.time()
        self.ledger = ledger
        self.ramp = ramp
        self._ramp_plan = RampPlan.from_dict(ramp) if ramp else None  # read once, not per status change
        self.job_uid = job_uid
        self.workload_timeout = workload_timeout
        self.start_timeout = start_timeout
        self.deadline = DeadlinePlan.from_dict(deadline) if deadline else None
        self._eta_history = EtaHistory(self.deadline.eta_history if self.deadline else ())
        self.released_before = released_before
        # what Kueue gave back in the tail: as this trigger sees it, after what earlier deferrals saw
        self._released = ReleasedQuota.carried(released_before)
        self._next_ramp_at: float | None = None
        self._start_checks = StartCheckPacing(start_timeout)
        self._unmanaged_since: float | None = None
        self.deferred_at = deferred_at
        self._resume_guard = ResumeGuard(deferred_at)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "job_name": self.job_name,
                "namespace": self.namespace,
                "queue_name": self.queue_name,
                "kubernetes_conn_id": self.kubernetes_conn_id,
                "max_failed_indexes": self.max_failed_indexes,
                "queue_timeout": self.queue_timeout,
                "submitted_at": self.submitted_at,
                "ledger": self.ledger,
                "ramp": self.ramp,
                "job_uid": self.job_uid,
                "workload_timeout": self.workload_timeout,
                "start_timeout": self.start_timeout,
                "deferred_at": self.deferred_at,
                "released_before": self.released_before,
                "deadline": self.deadline.to_dict() if self.deadline else None,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        event = await self.first_event()
        where = f"{self.namespace}/{self.job_name}: {event['status']}"
        await self._resume_guard.wait_open(self.log, where)
        yield TriggerEvent(event)  # type: ignore[no-untyped-call]

    async def first_event(self) -> dict[str, Any]:
        """The one event this trigger ends with (``run`` adds the resume guard a triggerer needs)."""
        try:
            return await self._follow()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a broken connection or RBAC: end the task with the reason, not silence
            log.exception("following Job %s/%s failed", self.namespace, self.job_name)
            return self._event(Outcome("error", f"{type(exc).__name__}: {exc}"), None, None)

    async def _follow(self) -> dict[str, Any]:
        writer = LedgerWriter(self.ledger, self.job_name) if self.ledger else None
        try:
            async with NamespaceWatch.follow(
                self.kubernetes_conn_id, self.namespace, self.job_name
            ) as following:
                return await self._until_outcome(following, writer)
        finally:
            if writer is not None:
                await writer.close()

    async def _until_outcome(self, following: Following, writer: LedgerWriter | None) -> dict[str, Any]:
        progress = ProgressLog(self.log, f"{self.namespace}/{self.job_name}")
        admission_clock, finish_clock = AdmissionClock(), FinishClock(0)
        position: tuple[int, int] | None = None
        next_position_at, position_interval = time.monotonic() + POSITION_FIRST_AFTER, POSITION_FIRST_REFRESH
        snapshot = await following.next()
        while True:
            # 1. The Job is gone (asked the apiserver, not only the cache), or a namesake replaced it.
            if not is_same_object(snapshot.job, self.job_uid):
                reread = await self._fresh(following)
                if reread is None:
                    continue  # the apiserver cannot answer now: decide later, never on a guess
                snapshot = reread
                if not is_same_object(snapshot.job, self.job_uid):
                    gone = Outcome(
                        "error", f"Job {self.namespace}/{self.job_name} was deleted before it finished"
                    )
                    return self._event(gone, None, None)
            job = snapshot.job
            assert job is not None
            view = view_of(job, snapshot.workload)
            self._released = _observe_released(self._released, view)
            # 2. Never outside Kueue's quota: a Job Kueue does not manage is deleted, the task fails -- once
            #    the verdict has held for UNMANAGED_GRACE_SECONDS and on a fresh read (an apiserver that just
            #    restarted can list no Workload for a moment).
            unmanaged_in = None
            if unmanaged_verdict(view, time.time() - self.submitted_at, self.workload_timeout) is None:
                self._unmanaged_since = None
            else:
                now = time.monotonic()
                self._unmanaged_since = self._unmanaged_since or now
                unmanaged_in = self._unmanaged_since + UNMANAGED_GRACE_SECONDS - now
                if unmanaged_in <= 0:
                    snapshot = await self._fresh(following) or snapshot
                    if snapshot.job is not None and is_same_object(snapshot.job, self.job_uid):
                        fresh_view = view_of(snapshot.job, snapshot.workload)
                        since = time.time() - self.submitted_at
                        if verdict := unmanaged_verdict(fresh_view, since, self.workload_timeout):
                            return await self._delete_unmanaged(verdict, fresh_view, snapshot.job)
                    self._unmanaged_since = None
                    continue
            # 3. Finished by the outcome rules: one final event.
            outcome = outcome_of(view, self.max_failed_indexes)
            if writer is not None:
                status = attempt_status(outcome.status) if outcome is not None else RUNNING
                writer.offer(_ledger_progress(view, status))
            if outcome is not None:
                progress.offer(progress_line(view), force=True)
                if released := released_line(self._released, view, datetime.now(timezone.utc)):
                    self.log.info("%s/%s: %s", self.namespace, self.job_name, released)
                if writer is not None and not await writer.flush(LEDGER_FLUSH_SECONDS):
                    self.log.warning("the ledger could not be written now; the operator writes it again")
                return self._event(outcome, view, job)
            # 4. Queued: refresh the pending position now and then (growing intervals), and tell the human.
            queued = not view.admitted
            now = time.monotonic()
            if queued and view.workload and now >= next_position_at:
                position = await following.pending_position(self.queue_name, view.workload.workload_name)
                if position is not None:
                    admission_clock.record(time.time(), position[1])  # its place in the ClusterQueue
                next_position_at = now + position_interval
                position_interval = min(position_interval * 2, POSITION_MAX_REFRESH)
            elif not queued:
                position, position_interval = None, POSITION_FIRST_REFRESH
                next_position_at = now + POSITION_FIRST_AFTER
            line = progress_line(view, position, time.time() - self.submitted_at if queued else None)
            if queued:
                estimate = admission_clock.estimate()
                eta = eta_line(estimate, None)
            else:
                if finish_clock.completions != view.completions:
                    finish_clock = FinishClock(view.completions)
                finish_clock.record(time.time(), len(view.completed) + len(view.failed))
                estimate = finish_clock.estimate(time.time(), view.active)
                eta = eta_line(None, estimate)
            # 4b. The deadline, if the task has one: an ETA past it (less the margin) hands the task back to
            #     its worker once, which escalates (raise_priority, spill_to, notify) and defers again; a
            #     spill that had to wait (the Job held quota) once more when the Job is back in the queue.
            deadline_line, deadline_in = self._deadline_check(queued, estimate, view)
            if deadline_line is not None:
                eta = f"{eta}; {deadline_line}" if eta else deadline_line
            progress.offer(f"{line}; {eta}" if eta else line, force=deadline_in == 0)
            if deadline_in == 0:
                risk = Outcome("deadline_risk", f"{self.namespace}/{self.job_name}: {deadline_line}")
                return self._event(risk, view, job)
            # 5. The queue timeout, if the user set one, is the only way a wait becomes a failure; it acts on
            #    the objects as the apiserver has them now, never on a stale "queued".
            left = self._seconds_left_in_queue(view)
            if left is not None and left <= 0:
                snapshot = await self._fresh(following) or snapshot
                if snapshot.job is not None and is_same_object(snapshot.job, self.job_uid):
                    fresh = view_of(snapshot.job, snapshot.workload)
                    left = self._seconds_left_in_queue(fresh)
                    if left is not None and left <= 0 and outcome_of(fresh, self.max_failed_indexes) is None:
                        return await self._queue_timeout(fresh, snapshot.job, position)
                continue
            # 6. Never stuck after admission: pods that cannot start (image, config, no node) end the task.
            start_check_in = await self._check_start(following, view)
            if isinstance(start_check_in, dict):
                return start_check_in
            # 7. Ramp parallelism up while the Job runs, one step per interval.
            ramp_in = await self._ramp(following, job, view)
            # 8. Sleep until the watch has news, the position or a ramp step is due, or a timeout.
            position_due = next_position_at - now if queued and view.workload else None
            workload_due = (
                self.submitted_at + self.workload_timeout - time.time() if view.workload is None else None
            )
            waits = [
                t
                for t in (
                    left,
                    position_due,
                    ramp_in,
                    workload_due,
                    start_check_in,
                    unmanaged_in,
                    deadline_in,
                    progress.due_in(),
                )
                if t is not None
            ]
            try:
                snapshot = await asyncio.wait_for(
                    following.next(), timeout=max(min(waits), 0.05) if waits else None
                )
            except asyncio.TimeoutError:
                snapshot = following.current()

    def _deadline_check(
        self, queued: bool, estimate: Estimate | None, view: JobView
    ) -> tuple[str | None, float | None]:
        """(the progress line's deadline part, 0 to escalate now / seconds until the deadline less the margin,
        when the check is due even without news / None); (None, None) without a deadline."""
        plan = self.deadline
        if plan is None:
            return None, None
        now = datetime.now(timezone.utc)
        risk = at_risk(estimate, now, plan.deadline, plan.margin)
        self._eta_history.offer(now, "queued" if queued else "running", estimate, risk)
        line = f"deadline {plan.deadline:%H:%M} UTC: {'AT RISK' if risk else 'on track'}"
        # A pending spill is due only for a Job back in the queue with no pod left (the worker checks again).
        due = plan.escalate or (plan.spill_pending and queued and view.suspended and view.active == 0)
        if risk and due:
            return line, 0.0
        if due:  # no news may come (a queue that stands still, a long shard): look again by then
            return line, max((plan.deadline - plan.margin - now).total_seconds(), 0.05)
        return line, None

    async def _ramp(self, following: Following, job: dict[str, Any], view: JobView) -> float | None:
        """Raise parallelism when a step is due; seconds until the next step (None: no ramp, or done)."""
        plan = self._ramp_plan
        if plan is None or not view.admitted:
            return None
        current = int(job["spec"].get("parallelism") or 0)
        if plan.reached(current):
            return None
        now = time.monotonic()
        if self._next_ramp_at is None:
            self._next_ramp_at = now + plan.every_seconds
        if now < self._next_ramp_at:
            return self._next_ramp_at - now
        raised = plan.next_parallelism(current)
        await following.set_parallelism(raised)
        self.log.info(
            "%s/%s: parallelism %d -> %d (ramping up to %d)",
            self.namespace,
            self.job_name,
            current,
            raised,
            plan.target,
        )
        self._next_ramp_at = now + plan.every_seconds
        return None if plan.reached(raised) else plan.every_seconds

    async def _fresh(self, following: Following) -> JobSnapshot | None:
        """The Job and Workload read from the apiserver now, or None when it cannot answer (restarting,
        unreachable): a control-plane outage is never a reason to end a task or delete its Job."""
        try:
            return await following.confirm()
        except Exception as exc:
            if not (is_transient(exc) or is_connection_error(exc)):
                raise
            self.log.warning(
                "%s/%s: the apiserver did not answer (%s); deciding again in %.0f s",
                self.namespace,
                self.job_name,
                describe(exc),
                CONFIRM_RETRY_SECONDS,
            )
            await asyncio.sleep(CONFIRM_RETRY_SECONDS)
            return None

    async def _check_start(self, following: Following, view: JobView) -> float | dict[str, Any] | None:
        """The final event when the pods cannot start; else seconds until the next look (None: none due)."""
        admitted_at = view.workload.admitted_at if view.workload else None
        since = time.time() - admitted_at.timestamp() if admitted_at else None
        if since is None or not view.admitted or view.ready or view.completed or view.failed:
            return None
        wait = self._start_checks.due_in(since, start_overdue(view, since, self.start_timeout))
        if wait is not None:
            return wait
        pods, events = await following.pods_and_events()
        reason = stuck_reason(pods, events)
        if reason is None:
            return START_RECHECK_SECONDS
        snapshot = await self._fresh(following)
        if snapshot is None:
            return START_RECHECK_SECONDS
        if snapshot.job is None or not is_same_object(snapshot.job, self.job_uid):
            return None
        async with AsyncKueueHook(self.kubernetes_conn_id).session() as hook:
            await hook.delete_job(self.namespace, self.job_name, uid=snapshot.job["metadata"]["uid"])
        message = (
            f"Job {self.namespace}/{self.job_name} was admitted {human_duration(since)} ago but its pods "
            f"cannot start ({reason}); it was deleted to release its quota "
            f"(start_timeout={human_duration(self.start_timeout)})"
        )
        self.log.error("%s", message)
        return self._event(Outcome("failed", message), view, snapshot.job)

    def _seconds_left_in_queue(self, view: JobView) -> float | None:
        """Seconds until ``queue_timeout``; None once the Job was ever admitted (a requeue after eviction,
        or a ramp's next slice waiting for quota, is not "never admitted"), as the objects show it."""
        if self.queue_timeout is None or view.started:
            return None
        return self.submitted_at + self.queue_timeout - time.time()

    async def _queue_timeout(
        self, view: JobView, job: dict[str, Any], position: tuple[int, int] | None
    ) -> dict[str, Any]:
        where = f" at position {position[0] + 1}" if position else ""
        why = ""
        if view.workload and view.workload.phase is WorkloadPhase.Queued and view.workload.message:
            why = f" ({view.workload.reason}: {view.workload.message})"
        async with AsyncKueueHook(self.kubernetes_conn_id).session() as hook:
            await hook.delete_job(self.namespace, self.job_name, uid=job["metadata"]["uid"])
        message = (
            f"waited {human_duration(time.time() - self.submitted_at)} in queue "
            f"{self.queue_name}{where}{why}, "
            f"more than queue_timeout={human_duration(self.queue_timeout or 0)}; deleted Job "
            f"{self.namespace}/{self.job_name}"
        )
        return self._event(Outcome("timeout", message), view, job)

    async def _delete_unmanaged(
        self, verdict: Unmanaged, view: JobView, job: dict[str, Any]
    ) -> dict[str, Any]:
        async with AsyncKueueHook(self.kubernetes_conn_id).session() as hook:
            await hook.delete_job(self.namespace, self.job_name, uid=job["metadata"]["uid"])
        log_fn = self.log.error if verdict.running_outside_quota else self.log.warning
        log_fn("%s", verdict.message)
        return self._event(Outcome("failed", verdict.message), view, job)

    def _event(self, outcome: Outcome, view: JobView | None, job: dict[str, Any] | None) -> dict[str, Any]:
        event: dict[str, Any] = {
            "status": outcome.status,
            "message": outcome.message,
            "job_name": self.job_name,
            "namespace": self.namespace,
        }
        if self.job_uid:
            event["job_uid"] = self.job_uid
        if view is not None and job is not None:
            event.update(result_of(view, job, datetime.now(timezone.utc), self._released).to_dict())
        if self.deadline is not None:
            event["deadline"] = self.deadline.deadline.isoformat()
            event["eta_history"] = list(self._eta_history.samples)
            event["escalations"] = [dict(e) for e in self.deadline.escalations]
            if outcome.status == "deadline_risk":
                event["deadline_margin_seconds"] = self.deadline.margin.total_seconds()
            if outcome.status == "deadline_risk" and not self.deadline.escalate:
                event["spill_pending"] = True  # this hand-back is for the waiting spill alone
        return event

    async def cleanup(self) -> None:
        """Nothing to release: the shared watch is left by the ``async with`` in ``run``."""

    async def on_kill(self) -> None:
        """The task was marked failed/success or cleared while deferred: delete the Job (Airflow 3.3+).

        A Job that already finished is kept: it holds nothing, and it is the run's record. (A triggerer
        also cancels, with on_kill, a trigger whose task instance ended elsewhere, e.g. one that
        ``airflow dags test`` left in the database.)
        """
        async with AsyncKueueHook(self.kubernetes_conn_id).session() as hook:
            what = await hook.delete_job_unless_finished(self.namespace, self.job_name, uid=self.job_uid)
        self.log.info(
            "task killed while deferred; Job %s/%s %s",
            self.namespace,
            self.job_name,
            _KILL_OUTCOMES[what],
        )


_KILL_OUTCOMES = {
    "deleted": "deleted",
    "finished": "kept: it had already finished",
    "gone": "was already gone",
}


def _observe_released(released: ReleasedQuota, view: JobView) -> ReleasedQuota:
    """Count Kueue's reclaimable pods while the Job runs; a finished Job's count is closed in result_of."""
    wl = view.workload
    if view.finished_condition is not None:
        return released
    if wl is None or not view.admitted:
        return released.observe(time.time(), 0, None)
    return released.observe(time.time(), wl.reclaimable_pods, wl.cpu_per_pod)


def _ledger_progress(view: JobView, status: str) -> Progress:
    evictions = view.workload.eviction_count if view.workload else 0
    return Progress(view.completed, view.failed, evictions, status)
