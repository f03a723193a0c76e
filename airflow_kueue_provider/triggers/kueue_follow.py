"""The trigger every job kind shares: one loop from the queue to the outcome (docs/design.md, "Job kinds").

A kind (``KueueJobTrigger``, ``KueueJobSetTrigger``) supplies only its part: how to follow its object, how to
read a snapshot into a ``FollowedView``, its outcome and unmanaged rules, its stuck-pod look, its delete and
its result keys; optional capabilities (a ledger, a parallelism ramp, released quota) hook in through
no-op methods it may override. Everything else is here once: the gone/namesake re-read, the unmanaged
grace, the queue position and ETA, the deadline, the queue timeout, the start checks, the resume guard.
This module is the loop, the serialized kwargs and the deletes; the steps that judge the object on a fresh
read, and the final event, are ``follow_steps``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Any

from airflow.triggers.base import TriggerEvent

from ..hooks.cluster_target import ClusterTarget
from ..hooks.kueue_async_hook import AsyncKueueHook
from ..kueue.identity.job_ownership import is_same_object
from ..kueue.job_progress import Outcome, observe_released, released_line
from ..kueue.progress.deadline import DeadlinePlan
from ..kueue.progress.quota_guard import DEFAULT_WORKLOAD_TIMEOUT
from ..kueue.progress.released_quota import ReleasedQuota
from ..kueue.progress.start_guard import DEFAULT_START_TIMEOUT
from ..watch.following import Following
from ..watch.namespace_watch import NamespaceWatch
from .cancel_cleanup import user_cancelled
from .credential_renewal import renewing
from .deadline_watch import DeadlineWatch
from .eta_tracking import QueueAndFinishEta
from .follow_steps import FollowSteps
from .followed_kind import V
from .log_stream import streaming_logs
from .progress_log import ProgressLog
from .resume_guard import ResumeGuard
from .start_check import StartCheckPacing
from .unmanaged_grace import UnmanagedGrace

log = logging.getLogger(__name__)

_KILL_OUTCOMES = {
    "deleted": "deleted",
    "finished": "kept: it had already finished",
    "gone": "was already gone",
}


class KueueFollowTrigger(FollowSteps[V]):
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
        logs: dict[str, Any] | None = None,
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
        self.logs = logs  # LogStreamPlan.to_dict(): stream chosen pods' logs into the task log (get_logs)
        # what Kueue gave back while it ran: as this trigger sees it, after what earlier deferrals saw
        self._released = ReleasedQuota.carried(released_before)
        self._deadline = DeadlineWatch(self.deadline)
        self._start_checks = StartCheckPacing(start_timeout)
        self._grace = UnmanagedGrace(self.submitted_at, workload_timeout)
        self._resume_guard = ResumeGuard(deferred_at)
        self.admitted_at: datetime | None = None
        """When Kueue admitted the object as last seen (None: queued, or not seen yet): an inline wait reads
        it to tell a Job about to end from one that has just started."""

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
        self.admitted_at = view.workload.admitted_at if view.admitted and view.workload else None

    async def _closing(self, view: V) -> None:
        """Before the final event: the released-quota line (a kind adds: the last ledger write)."""
        if released := released_line(self._released, view, datetime.now(UTC)):
            self.log.info("%s/%s: %s", self.namespace, self.name, released)

    # --- the shared trigger ---------------------------------------------------------------------------------
    def serialize(self) -> tuple[str, dict[str, Any]]:
        """Keys a kind gained later (a JobSet's ``deadline`` and ``released_before``; ``credential``;
        ``logs``; the connection's overrides) are left out while unset, so that a triggerer of the previous
        version still loads the trigger during a rolling upgrade."""
        later = {"deadline": self.deadline.to_dict() if self.deadline else None}
        later["released_before"] = self.released_before
        later["credential"] = self.credential
        later["logs"] = self.logs
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
        try:
            event = await self.first_event()
        except asyncio.CancelledError:
            self._cancelled = True  # cleanup() tells a user action from a triggerer stop (Airflow < 3.3)
            raise
        await self._resume_guard.wait_open(self.log, f"{self.namespace}/{self.name}: {event['status']}")
        yield TriggerEvent(event)  # type: ignore[no-untyped-call]

    async def first_event(self) -> dict[str, Any]:
        """The one event this trigger ends with (``run`` adds the resume guard a triggerer needs)."""
        try:
            async with (
                self._capabilities(),
                renewing(self.credential, self.where, target=self.target),
                streaming_logs(self.logs, self.target, self.namespace, (self.name, self.uid), self.log),
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
                decided = await self._unmanaged_on_fresh(following)
                if isinstance(decided, dict):
                    return decided
                snapshot = decided or snapshot
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
                decided = await self._queue_timeout_on_fresh(following, eta.position)
                if isinstance(decided, dict):
                    return decided
                snapshot = decided or snapshot
                continue
            # 6. Never stuck after admission: pods that cannot start (image, config, no node) end the task.
            start_check_in = await self._check_start(following, view)
            if isinstance(start_check_in, dict):
                return start_check_in
            # 7. The kind's own change while it runs (a ramp step).
            step_in = await self._step(following, obj, view)
            # 8. Sleep until the watch has news, or the position, a step or a timeout is due.
            due = (left, eta.position_due(view), step_in, unmanaged_in, start_check_in, deadline_in)
            try:
                snapshot = await asyncio.wait_for(following.next(), timeout=_sleep(*due, progress.due_in()))
            except TimeoutError:
                snapshot = following.current()

    async def _delete(self, obj: dict[str, Any]) -> str:
        """Delete the object (this one, by uid) unless it finished: the one rule for every kind."""
        async with AsyncKueueHook(self.target).session() as hook:
            return await self._delete_unless_finished(hook, obj["metadata"].get("uid"))

    _cancelled = False

    async def cleanup(self) -> None:
        """The shared watch is left by the ``async with`` in ``first_event``. After a cancel on Airflow 3.1
        and 3.2, which have no ``on_kill``: what ``on_kill`` does, if the user acted (``cancel_cleanup``)."""
        if self._cancelled and await user_cancelled(self, self.log):
            await self.on_kill()

    async def on_kill(self) -> None:
        """The task was marked failed/success or cleared while deferred: delete the object (Airflow 3.3+;
        on 3.1 and 3.2 through ``cleanup``).

        One that already finished is kept: it holds nothing, and it is the run's record. (A triggerer also
        cancels, with on_kill, a trigger whose task instance ended elsewhere, e.g. one that ``airflow dags
        test`` left in the database.)
        """
        async with AsyncKueueHook(self.target).session() as hook:
            what = await self._delete_unless_finished(hook, self.uid)
        self.log.info("task killed while deferred; %s %s", self.where, _KILL_OUTCOMES.get(what, what))


def _sleep(*due_in: float | None) -> float | None:
    """How long the loop may wait for news: until the soonest thing due (at least 50 ms); None: nothing is."""
    waits = [t for t in due_in if t is not None]
    return max(min(waits), 0.05) if waits else None
