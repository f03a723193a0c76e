"""The ETA one trigger run keeps: while queued, the pending position (read from Kueue's visibility API at
growing intervals, only while queued) and the queue's pace; while running, the pace of finished indexes."""

from __future__ import annotations

import time
from typing import Any

from ..kueue.progress.eta import AdmissionClock, Estimate, FinishClock, eta_line
from ..kueue.progress.followed_view import FollowedView

POSITION_FIRST_AFTER = 10.0  # seconds of queueing before the first position read: most are admitted sooner
POSITION_FIRST_REFRESH = 30.0  # then every 30 s, doubling up to POSITION_MAX_REFRESH while still queued
POSITION_MAX_REFRESH = 600.0


class QueueAndFinishEta:
    """One trigger run's position and clocks (a restarted trigger starts them again)."""

    def __init__(self) -> None:
        self.admission_clock, self.finish_clock = AdmissionClock(), FinishClock(0)
        self.position: tuple[int, int] | None = None
        self._next_at = time.monotonic() + POSITION_FIRST_AFTER
        self._interval = POSITION_FIRST_REFRESH

    async def look(self, following: Any, queue_name: str, view: FollowedView) -> None:
        """Read the position when due (queued, with a Workload); forget it once admitted."""
        now = time.monotonic()
        if not view.admitted and view.workload and now >= self._next_at:
            self.position = await following.pending_position(queue_name, view.workload.workload_name)
            if self.position is not None:  # its place in the ClusterQueue when the (shared) list was read
                self.admission_clock.record(following.position_read_at(queue_name), self.position[1])
            self._next_at = now + self._interval
            self._interval = min(self._interval * 2, POSITION_MAX_REFRESH)
        elif view.admitted:
            self.position, self._interval = None, POSITION_FIRST_REFRESH
            self._next_at = now + POSITION_FIRST_AFTER

    def position_due(self, view: FollowedView) -> float | None:
        """Seconds until the next position read (None: not queued, or no Workload yet)."""
        return self._next_at - time.monotonic() if not view.admitted and view.workload else None

    def estimate(self, view: FollowedView) -> tuple[Estimate | None, str | None]:
        """(the estimate, its part of the progress line): the admission while queued, else the finish."""
        if not view.admitted:
            estimate = self.admission_clock.estimate()
            return estimate, eta_line(estimate, None)
        if self.finish_clock.completions != view.completions:
            self.finish_clock = FinishClock(view.completions)
        self.finish_clock.record(time.time(), view.done)
        estimate = self.finish_clock.estimate(time.time(), view.active)
        return estimate, eta_line(None, estimate)
