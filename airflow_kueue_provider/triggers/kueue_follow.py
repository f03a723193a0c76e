"""The trigger every job kind shares: one loop from the queue to the outcome (docs/design.md, "Job kinds").

A kind (``KueueJobTrigger``, ``KueueJobSetTrigger``) supplies only its part: how to follow its object, how to
read a snapshot into a ``FollowedView``, its outcome and unmanaged rules, its stuck-pod look, its delete and
its result keys; optional capabilities (a ledger, a parallelism ramp, released quota) hook in through
no-op methods it may override. Everything else is here once: the gone/namesake re-read, the unmanaged
grace, the queue position and ETA, the deadline, the queue timeout, the start checks, the resume guard.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from ..hooks.cluster_target import ClusterTarget
from ..hooks.kueue_async_hook import AsyncKueueHook, is_connection_error
from ..hooks.retry import describe, is_transient
from ..kueue.deadline import DeadlinePlan
from ..kueue.followed_view import FollowedView
from ..kueue.job_ownership import is_same_object
from ..kueue.job_progress import Outcome, observe_released, released_line
from ..kueue.quota_guard import DEFAULT_WORKLOAD_TIMEOUT, Unmanaged
from ..kueue.released_quota import ReleasedQuota
from ..kueue.start_guard import DEFAULT_START_TIMEOUT
from ..kueue.trigger_event import KueueEvent
from ..kueue.workload_state import WorkloadPhase
from ..watch.following import Following
from ..watch.namespace_watch import NamespaceWatch
from ..watch.snapshots import KindSnapshot
from .credential_renewal import renewing
from .deadline_watch import DeadlineWatch
from .eta_tracking import QueueAndFinishEta
from .followed_kind import FollowedKind, V
from .progress_log import ProgressLog, human_duration
from .resume_guard import ResumeGuard
from .start_check import START_RECHECK_SECONDS, StartCheckPacing
from .unmanaged_grace import UnmanagedGrace

log = logging.getLogger(__name__)

CONFIRM_RETRY_SECONDS = 2.0  # after a re-read the apiserver could not answer

_KILL_OUTCOMES = {
    "deleted": "deleted",
    "finished": "kept: it had already finished",
    "gone": "was already gone",
}


class KueueFollowTrigger(FollowedKind[V], BaseTrigger):
    """Follow one queued object through Kueue's queue, admission, eviction/requeue to one final event.

    Events come from the triggerer's shared namespace watch (no polling). ``queue_timeout`` (seconds from
    ``submitted_at``) is the only thing that turns a long wait into a failure; the object is then deleted.
    So is one Kueue does not manage (never outside quota) and one admitted ``start_timeout`` ago whose pods
    cannot start. A ``deadline`` (``DeadlinePlan.to_dict()``) hands the task back once the ETA is at risk.
    """

    def __init__(
        self,
        *,
        name: str,
        uid: str | None,
        namespace: str,
        queue_name: str,
        kubernetes_conn_id: str = "kubernetes_default",
        cluster_context: str | None = None,
        config_file: str | None = None,
        in_cluster: bool | None = None,
        queue_timeout: float | None = None,
        submitted_at: float | None = None,
        workload_timeout: float = DEFAULT_WORKLOAD_TIMEOUT,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        deadline: dict[str, Any] | None = None,
        deferred_at: float | None = None,
        released_before: dict[str, Any] | None = None,
        credential: dict[str, Any] | None = None,
    ) -> None:
        """The kind's ``__init__`` maps its own name and uid kwargs (``job_name``, ``jobset_name``, ...) to
        ``name`` and ``uid`` and passes the others on as they are (``**shared``): the serialized kwargs of an
        earlier version keep loading."""
        super().__init__()  # type: ignore[no-untyped-call]
        self.name, self.uid, self.namespace, self.queue_name = name, uid, namespace, queue_name
        self.kubernetes_conn_id = kubernetes_conn_id
        self.target = ClusterTarget(kubernetes_conn_id, cluster_context, config_file, in_cluster)
        self.queue_timeout = queue_timeout
        self.submitted_at = submitted_at if submitted_at is not None else time.time()
        self.workload_timeout = workload_timeout
        self.start_timeout = start_timeout
        self.deadline = DeadlinePlan.from_dict(deadline) if deadline else None
        self.deferred_at = deferred_at
        self.released_before = released_before
        self.credential = credential  # CredentialRenewal.to_dict(): keep the pods' SAS valid while followed
        # what Kueue gave back while it ran: as this trigger sees it, after what earlier deferrals saw
        self._released = ReleasedQuota.carried(released_before)
        self._deadline = DeadlineWatch(self.deadline)
        self._start_checks = StartCheckPacing(start_timeout)
        self._grace = UnmanagedGrace(self.submitted_at, workload_timeout)
        self._resume_guard = ResumeGuard(deferred_at)

    # --- what every kind does the same way, through its description ---------------------------------------
    def _follow(self) -> AbstractAsyncContextManager[Following]:
        """Follow the object on the triggerer's shared watch of its namespace."""
        return NamespaceWatch.follow(self.target, self.namespace, self.name, self.description)

    async def _delete_unless_finished(self, hook: AsyncKueueHook, uid: str | None) -> str:
        return await hook.delete_unless_finished(self.description, self.namespace, self.name, uid=uid)

    # --- released quota, for every kind (a kind extends these two for its own capabilities) ---------------
    def _observe(self, view: V, outcome: Outcome | None) -> None:
        """Each new look at the object: count the quota Kueue released (a kind adds: ledger progress)."""
        self._released = observe_released(self._released, view, time.time())

    async def _closing(self, view: V) -> None:
        """Before the final event: the released-quota line (a kind adds: the last ledger write)."""
        if released := released_line(self._released, view, datetime.now(UTC)):
            self.log.info("%s/%s: %s", self.namespace, self.name, released)

    # --- the shared trigger ---------------------------------------------------------------------------------
    @property
    def where(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """Keys a kind gained later (a JobSet's ``deadline`` and ``released_before``; ``credential``; the
        connection's overrides) are left out while unset, so that a triggerer of the previous version still
        loads the trigger during a rolling upgrade."""
        later = {"deadline": self.deadline.to_dict() if self.deadline else None}
        later["released_before"] = self.released_before
        later["credential"] = self.credential
        later.update(self.target.overrides())
        kwargs = {
            "namespace": self.namespace,
            "queue_name": self.queue_name,
            "kubernetes_conn_id": self.kubernetes_conn_id,
            "queue_timeout": self.queue_timeout,
            "submitted_at": self.submitted_at,
            "workload_timeout": self.workload_timeout,
            "start_timeout": self.start_timeout,
            "deferred_at": self.deferred_at,
            **{key: value for key, value in later.items() if value is not None},
            **self._kind_kwargs(),
        }
        return f"{type(self).__module__}.{type(self).__qualname__}", kwargs

    async def run(self) -> AsyncIterator[TriggerEvent]:
        event = await self.first_event()
        await self._resume_guard.wait_open(self.log, f"{self.namespace}/{self.name}: {event['status']}")
        yield TriggerEvent(event)  # type: ignore[no-untyped-call]

    async def first_event(self) -> dict[str, Any]:
        """The one event this trigger ends with (``run`` adds the resume guard a triggerer needs)."""
        try:
            async with (
                self._capabilities(),
                renewing(self.credential, self.where, target=self.target),
                self._follow() as following,
            ):
                return await self._until_outcome(following)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a broken connection or RBAC: end the task with the reason, not silence
            log.exception("following %s failed", self.where)
            return self._event(Outcome("error", f"{type(exc).__name__}: {exc}"))

    async def _until_outcome(self, following: Following) -> dict[str, Any]:
        progress = ProgressLog(self.log, f"{self.namespace}/{self.name}")
        eta = QueueAndFinishEta()
        snapshot = await following.next()
        while True:
            # 1. The object is gone (asked the apiserver, not only the cache), or a namesake replaced it.
            if not is_same_object(snapshot.obj, self.uid):
                reread = await self._fresh(following)
                if reread is None:
                    continue  # the apiserver cannot answer now: decide later, never on a guess
                snapshot = reread
                if not is_same_object(snapshot.obj, self.uid):
                    return self._event(Outcome("error", f"{self.where} was deleted before it finished"))
            obj = snapshot.obj
            assert obj is not None
            view = self._view(snapshot)
            # 2. Never outside Kueue's quota: an object Kueue does not manage is deleted and the task fails,
            #    once the verdict has held for a grace period and on a fresh read (unmanaged_grace).
            unmanaged = self._unmanaged(view, time.time() - self.submitted_at) is not None
            unmanaged_in = self._grace.wait(view, unmanaged)
            if unmanaged_in is not None and unmanaged_in <= 0:
                fresh = await self._fresh(following)
                if (same := self._same(fresh)) is not None:
                    fresh_view, fresh_obj = same
                    if verdict := self._unmanaged(fresh_view, time.time() - self.submitted_at):
                        return await self._delete_unmanaged(verdict, fresh_view, fresh_obj)
                self._grace.reset()
                snapshot = fresh or snapshot
                continue
            # 3. Finished by the kind's outcome rules: one final event.
            outcome = self._outcome(view)
            self._observe(view, outcome)
            if outcome is not None:
                progress.offer(self._line(view, None, None), force=True)
                await self._closing(view)
                return self._event(outcome, view, obj)
            # 4. Queued: refresh the pending position now and then (growing intervals), and tell the human.
            queued = not view.admitted
            await eta.look(following, self.queue_name, view)
            line = self._line(view, eta.position, time.time() - self.submitted_at if queued else None)
            estimate, eta_text = eta.estimate(view)
            # 4b. The deadline, if the task has one: an ETA past it (less the margin) hands the task back to
            #     its worker once, which escalates and defers again; a spill that had to wait (the object
            #     held quota) once more when the object is back in the queue.
            deadline_line, deadline_in = self._deadline.check(queued, estimate, view)
            if deadline_line is not None:
                eta_text = f"{eta_text}; {deadline_line}" if eta_text else deadline_line
            progress.offer(f"{line}; {eta_text}" if eta_text else line, force=deadline_in == 0)
            if deadline_in == 0:
                risk = Outcome("deadline_risk", f"{self.namespace}/{self.name}: {deadline_line}")
                return self._event(risk, view, obj)
            # 5. The queue timeout, if the user set one, is the only way a wait becomes a failure; it acts on
            #    the objects as the apiserver has them now, never on a stale "queued".
            left = self._seconds_left_in_queue(view)
            if left is not None and left <= 0:
                fresh = await self._fresh(following)
                if (same := self._same(fresh)) is not None:
                    fresh_view, fresh_obj = same
                    left = self._seconds_left_in_queue(fresh_view)
                    if left is not None and left <= 0 and self._outcome(fresh_view) is None:
                        return await self._queue_timeout(fresh_view, fresh_obj, eta.position)
                snapshot = fresh or snapshot
                continue
            # 6. Never stuck after admission: pods that cannot start (image, config, no node) end the task.
            start_check_in = await self._check_start(following, view)
            if isinstance(start_check_in, dict):
                return start_check_in
            # 7. The kind's own change while it runs (a ramp step).
            step_in = await self._step(following, obj, view)
            # 8. Sleep until the watch has news, or the position, a step or a timeout is due.
            waits = [
                t
                for t in (
                    left,
                    eta.position_due(view),
                    step_in,
                    unmanaged_in,
                    start_check_in,
                    deadline_in,
                    progress.due_in(),
                )
                if t is not None
            ]
            try:
                snapshot = await asyncio.wait_for(
                    following.next(), timeout=max(min(waits), 0.05) if waits else None
                )
            except TimeoutError:
                snapshot = following.current()

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

    async def _delete(self, obj: dict[str, Any]) -> str:
        """Delete the object (this one, by uid) unless it finished: the one rule for every kind."""
        async with AsyncKueueHook(self.target).session() as hook:
            return await self._delete_unless_finished(hook, obj["metadata"].get("uid"))

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

    async def cleanup(self) -> None:
        """Nothing to release: the shared watch is left by the ``async with`` in ``first_event``."""

    async def on_kill(self) -> None:
        """The task was marked failed/success or cleared while deferred: delete the object (Airflow 3.3+).

        One that already finished is kept: it holds nothing, and it is the run's record. (A triggerer also
        cancels, with on_kill, a trigger whose task instance ended elsewhere, e.g. one that ``airflow dags
        test`` left in the database.)
        """
        async with AsyncKueueHook(self.target).session() as hook:
            what = await self._delete_unless_finished(hook, self.uid)
        self.log.info("task killed while deferred; %s %s", self.where, _KILL_OUTCOMES.get(what, what))
