"""The Job kind's trigger: one Kueue-queued Indexed Job from the queue to its last index.

The loop is ``KueueFollowTrigger``'s; this is the Job's part (its view, outcome rules, stuck-pod look,
delete and result) and the capabilities only a Job has here: the shard ledger, the parallelism ramp and the
quota Kueue releases in the tail (ReclaimablePods).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

from ..kueue.checkpoints.ledger import RUNNING, attempt_status
from ..kueue.job_progress import (
    JobView,
    Outcome,
    outcome_of,
    progress_line,
    result_of,
    start_overdue,
    view_of,
)
from ..kueue.kinds.job import JOB
from ..kueue.progress.quota_guard import Unmanaged, unmanaged_verdict
from ..kueue.progress.start_guard import stuck_reason
from ..kueue.spec.parallelism_ramp import RampPlan, gate_never_lifted
from ..watch.following import Following
from ..watch.snapshots import KindSnapshot
from .kueue_follow import KueueFollowTrigger
from .ledger_writer import LedgerWriter, Progress

LEDGER_FLUSH_SECONDS = 60.0  # at the end, how long to wait for the last ledger write (Blob may be away)


class KueueJobTrigger(KueueFollowTrigger[JobView]):
    """Wait for a Kueue-queued Job through queueing, admission, eviction/requeue and its indexes.

    ``ledger`` (``CheckpointSession.trigger_ledger()``) keeps the shard ledger current while it runs; ``ramp``
    (``RampPlan.to_dict()``) raises parallelism step by step once admitted; ``released_before`` carries the
    quota released so far across a re-deferral.
    """

    description = JOB

    def __init__(
        self,
        *,
        job_name: str,
        job_uid: str | None = None,
        max_failed_indexes: int | None = None,
        ledger: dict[str, Any] | None = None,
        ramp: dict[str, Any] | None = None,
        **shared: Any,
    ) -> None:
        """``shared``: ``KueueFollowTrigger``'s kwargs (namespace, queue_name, timeouts, deadline, ...)."""
        super().__init__(name=job_name, uid=job_uid, **shared)
        self.max_failed_indexes = max_failed_indexes
        self.ledger = ledger
        self.ramp = ramp
        self._ramp_plan = RampPlan.from_dict(ramp) if ramp else None  # read once, not per status change
        self._next_ramp_at: float | None = None
        self._writer: LedgerWriter | None = None

    @property
    def job_name(self) -> str:
        return self.name

    @property
    def job_uid(self) -> str | None:
        return self.uid

    def _kind_kwargs(self) -> dict[str, Any]:
        return {
            "job_name": self.job_name,
            "job_uid": self.job_uid,
            "max_failed_indexes": self.max_failed_indexes,
            "ledger": self.ledger,
            "ramp": self.ramp,
        }

    def _view(self, snapshot: KindSnapshot) -> JobView:
        assert snapshot.obj is not None
        return view_of(snapshot.obj, snapshot.workload)

    def _outcome(self, view: JobView) -> Outcome | None:
        return outcome_of(view, self.max_failed_indexes)

    def _unmanaged(self, view: JobView, seconds_since_submit: float) -> Unmanaged | None:
        return unmanaged_verdict(view, seconds_since_submit, self.workload_timeout)

    def _line(self, view: JobView, position: tuple[int, int] | None, waited: float | None) -> str:
        return progress_line(view, position, waited)

    def _start_overdue(self, view: JobView, since_admission: float) -> bool | None:
        if view.ready or view.completed or view.failed:
            return None
        return start_overdue(view, since_admission, self.start_timeout)

    async def _stuck_reason(self, following: Following, view: JobView) -> str | None:
        pods, events = await following.pods_and_events()
        return stuck_reason(pods, events) or gate_never_lifted(pods)  # the ramp's gate, never lifted

    def _payload(self, view: JobView, obj: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
        return result_of(view, obj, datetime.now(UTC), self._released).to_dict(), {}

    # --- the Job's capabilities: the ledger, the ramp ---------------------------------------
    @asynccontextmanager
    async def _capabilities(self) -> AsyncIterator[None]:
        self._writer = LedgerWriter(self.ledger, self.job_name) if self.ledger else None
        try:
            yield
        finally:
            if self._writer is not None:
                await self._writer.close()

    def _observe(self, view: JobView, outcome: Outcome | None) -> None:
        super()._observe(view, outcome)
        if self._writer is not None:
            status = attempt_status(outcome.status) if outcome is not None else RUNNING
            evictions = view.workload.eviction_count if view.workload else 0
            self._writer.offer(Progress(view.completed, view.failed, evictions, status))

    async def _closing(self, view: JobView) -> None:
        await super()._closing(view)
        if self._writer is not None and not await self._writer.flush(LEDGER_FLUSH_SECONDS):
            self.log.warning("the ledger could not be written now; the operator writes it again")

    async def _step(self, following: Following, obj: dict[str, Any], view: JobView) -> float | None:
        """Raise parallelism when a ramp step is due; seconds until the next step (None: no ramp, or done)."""
        plan = self._ramp_plan
        if plan is None or not view.admitted:
            return None
        current = int(obj["spec"].get("parallelism") or 0)
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
