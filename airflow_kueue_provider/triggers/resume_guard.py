"""Hold a trigger's event until the deferring worker's exit has surely reached the scheduler.

When a task defers, its worker exits and the executor reports "success" for that try. Airflow 3.3's
scheduler fails the task ("state mismatch", "killed externally") when that stale report is drained after the
trigger's event has already moved the task instance on to queued or running (apache/airflow#72716; the
guard Airflow has covers only a task instance still "scheduled"). A Job that ends within seconds of the
deferral -- a 1 s shard on an empty queue, a deadline already at risk -- fires that early. Seen here in
1-4 of 50 resumed tasks on 2 busy cores, and in CI.

The triggerer gives a trigger no way to see the executor's report, so the event waits until
``RESUME_GUARD_SECONDS`` after the deferral (``deferred_at``, which the operator puts in the trigger's
kwargs; a trigger without it counts from its own start). A batch task loses at most that much on a Job that
ended at once; a Job that runs longer, or a trigger recreated by a restarted triggerer long after the
deferral, loses nothing. In-process waiting (``deferrable=False``) has no deferral and takes the event
without the guard.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

RESUME_GUARD_SECONDS = 10.0  # the stale report was seen drained 6.5 s after the deferral (#72716)


class ResumeGuard:
    """The earliest moment a trigger's event may go out: ``RESUME_GUARD_SECONDS`` after the deferral."""

    def __init__(self, deferred_at: float | None = None, seconds: float = RESUME_GUARD_SECONDS) -> None:
        self._seconds = seconds
        self._opens_at = (time.time() if deferred_at is None else deferred_at) + seconds

    def holds_for(self) -> float:
        """Seconds the event must still wait (0 once the guard is open); never more than the guard's own
        length, whatever the skew between the worker's clock (``deferred_at``) and the triggerer's."""
        return min(max(self._opens_at - time.time(), 0.0), self._seconds)

    async def wait_open(self, log: Any, what: str) -> None:
        """Sleep until the guard opens, saying so in the task's log (``what``: the event, for a human)."""
        if (wait := self.holds_for()) > 0:
            log.info(
                "%s; resuming the task in %.1f s, once its deferral has reached the scheduler", what, wait
            )
            await asyncio.sleep(wait)
