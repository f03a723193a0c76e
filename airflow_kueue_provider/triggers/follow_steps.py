"""The steps of ``KueueFollowTrigger``'s loop that act on the object: each decides on the objects as the
apiserver has them now (a fresh read), never on the cache alone, and never on a control-plane outage.

Unmanaged past its grace: deleted, the task fails. Past ``queue_timeout`` while never admitted: deleted, the
task times out. Admitted ``start_timeout`` ago with pods that cannot start: deleted, the task fails. A step
that finds the fresh read does not confirm the verdict hands that read back, and the loop looks again.
"""

from __future__ import annotations

import asyncio
import time
from abc import abstractmethod
from typing import Any

from airflow.triggers.base import BaseTrigger

from ..hooks.kueue_async_hook import is_connection_error
from ..hooks.retry import describe, is_transient
from ..kueue.identity.job_ownership import is_same_object
from ..kueue.job_progress import Outcome
from ..kueue.progress.followed_view import FollowedView
from ..kueue.progress.quota_guard import Unmanaged
from ..kueue.progress.trigger_event import KueueEvent
from ..kueue.progress.workload_state import WorkloadPhase
from ..watch.following import Following
from ..watch.snapshots import KindSnapshot
from .deadline_watch import DeadlineWatch
from .followed_kind import FollowedKind, V
from .progress_log import human_duration
from .start_check import START_RECHECK_SECONDS, StartCheckPacing
from .unmanaged_grace import UnmanagedGrace

CONFIRM_RETRY_SECONDS = 2.0  # after a re-read the apiserver could not answer


class FollowSteps(FollowedKind[V], BaseTrigger):
    """The loop's verdicts on the followed object, and the final event (``KueueFollowTrigger`` sets the state
    below from its serialized kwargs)."""

    name: str
    uid: str | None
    namespace: str
    queue_name: str
    queue_timeout: float | None
    submitted_at: float
    start_timeout: float
    _deadline: DeadlineWatch
    _start_checks: StartCheckPacing
    _grace: UnmanagedGrace

    @abstractmethod
    async def _delete(self, obj: dict[str, Any]) -> str:
        """Delete the object (this one, by uid) unless it finished."""

    @property
    def where(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    async def _unmanaged_on_fresh(self, following: Following) -> dict[str, Any] | KindSnapshot | None:
        """The unmanaged grace is over: the final event when a fresh read still finds the object unmanaged
        (it is deleted); else the grace starts again, and the fresh read (None: none) is looked at next."""
        fresh = await self._fresh(following)
        if (same := self._same(fresh)) is not None:
            fresh_view, fresh_obj = same
            if verdict := self._unmanaged(fresh_view, time.time() - self.submitted_at):
                return await self._delete_unmanaged(verdict, fresh_view, fresh_obj)
        self._grace.reset()
        return fresh

    async def _queue_timeout_on_fresh(
        self, following: Following, position: tuple[int, int] | None
    ) -> dict[str, Any] | KindSnapshot | None:
        """``queue_timeout`` passed: the final event when a fresh read still finds the object waiting (it is
        deleted); else the fresh read (None: none) is looked at next."""
        fresh = await self._fresh(following)
        if (same := self._same(fresh)) is not None:
            fresh_view, fresh_obj = same
            left = self._seconds_left_in_queue(fresh_view)
            if left is not None and left <= 0 and self._outcome(fresh_view) is None:
                return await self._queue_timeout(fresh_view, fresh_obj, position)
        return fresh

    def _seconds_left_in_queue(self, view: FollowedView) -> float | None:
        """Seconds until ``queue_timeout``; None once the object was ever admitted (``view.started``)."""
        if self.queue_timeout is None or view.started:
            return None
        return self.submitted_at + self.queue_timeout - time.time()

    async def _check_start(self, following: Following, view: V) -> float | dict[str, Any] | None:
        """The final event when the pods cannot start; else seconds until the next look (None: none due)."""
        admitted_at = view.workload.admitted_at if view.workload else None
        since = time.time() - admitted_at.timestamp() if admitted_at else None
        if since is None or not view.admitted or view.finished_condition is not None:
            return None
        overdue = self._start_overdue(view, since)
        if overdue is None:
            return None
        wait = self._start_checks.due_in(since, overdue)
        if wait is not None:
            return wait
        reason = await self._stuck_reason(following, view)
        if reason is None:
            return START_RECHECK_SECONDS
        fresh = await self._fresh(following)
        if fresh is None:
            return START_RECHECK_SECONDS
        if (same := self._same(fresh)) is None:
            return None
        fresh_view, fresh_obj = same
        if self._start_overdue(fresh_view, since) is None:
            return None
        await self._delete(fresh_obj)
        message = (
            f"{self.where} was admitted {human_duration(since)} ago but its pods cannot start ({reason}); "
            f"it was deleted to release its quota (start_timeout={human_duration(self.start_timeout)})"
        )
        self.log.error("%s", message)
        return self._event(Outcome("failed", message), fresh_view, fresh_obj)

    async def _queue_timeout(
        self, view: V, obj: dict[str, Any], position: tuple[int, int] | None
    ) -> dict[str, Any]:
        where = f" at position {position[0] + 1}" if position else ""
        why = ""
        if view.workload and view.workload.phase is WorkloadPhase.Queued and view.workload.message:
            why = f" ({view.workload.reason}: {view.workload.message})"
        await self._delete(obj)
        message = (
            f"waited {human_duration(time.time() - self.submitted_at)} in queue "
            f"{self.queue_name}{where}{why}, "
            f"more than queue_timeout={human_duration(self.queue_timeout or 0)}; deleted {self.where}"
        )
        return self._event(Outcome("timeout", message), view, obj)

    async def _delete_unmanaged(self, verdict: Unmanaged, view: V, obj: dict[str, Any]) -> dict[str, Any]:
        await self._delete(obj)
        (self.log.error if verdict.running_outside_quota else self.log.warning)("%s", verdict.message)
        return self._event(Outcome("failed", verdict.message), view, obj)

    def _same(self, snapshot: KindSnapshot | None) -> tuple[V, dict[str, Any]] | None:
        """The snapshot's view and object when it is the one this trigger follows (not gone, not a
        namesake)."""
        if snapshot is None or snapshot.obj is None or not is_same_object(snapshot.obj, self.uid):
            return None
        return self._view(snapshot), snapshot.obj

    async def _fresh(self, following: Following) -> KindSnapshot | None:
        """The objects read from the apiserver now, or None when it cannot answer (restarting, unreachable):
        a control-plane outage is never a reason to end a task or delete its object."""
        try:
            return await following.confirm()
        except Exception as exc:
            if not (is_transient(exc) or is_connection_error(exc)):
                raise
            self.log.warning(
                "%s: the apiserver did not answer (%s); deciding again in %.0f s",
                self.where,
                describe(exc),
                CONFIRM_RETRY_SECONDS,
            )
            await asyncio.sleep(CONFIRM_RETRY_SECONDS)
            return None

    def _event(
        self, outcome: Outcome, view: V | None = None, obj: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        result, failed_jobs = self._payload(view, obj) if view is not None and obj is not None else ({}, {})
        return KueueEvent(
            status=outcome.status,
            message=outcome.message,
            kind=self.kind,
            name=self.name,
            namespace=self.namespace,
            uid=self.uid,
            result=result,
            deadline=self._deadline.report(outcome.status),
            failed_jobs=failed_jobs,
        ).to_dict()
