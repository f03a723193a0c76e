"""Never outside Kueue's quota, without a false alarm: how long "Kueue does not manage this object" must hold
(then it is checked again on a fresh read) before the trigger deletes the object. An apiserver that just
restarted can list no Workload for a moment."""

from __future__ import annotations

import time

from ..kueue.progress.followed_view import FollowedView

UNMANAGED_GRACE_SECONDS = 10.0  # how long "no Workload" must hold, then on a fresh read, before a delete


class UnmanagedGrace:
    def __init__(self, submitted_at: float, workload_timeout: float) -> None:
        self.submitted_at, self.workload_timeout = submitted_at, workload_timeout
        self.since: float | None = None

    def wait(self, view: FollowedView, unmanaged: bool) -> float | None:
        """Seconds until the verdict may be acted on (<= 0: now); while there is no Workload yet, until
        Kueue's ``workload_timeout`` is up (a verdict may come then); None while Kueue manages it."""
        if not unmanaged:
            self.since = None
            if view.workload is None and view.finished_condition is None:
                left = self.submitted_at + self.workload_timeout - time.time() + 0.05
                # Past workload_timeout the kind's own verdict decides: it said "managed", so nothing is due
                # (a wait of 0 here would re-read the object in a loop).
                return left if left > 0 else None
            return None
        now = time.monotonic()
        self.since = self.since or now
        return self.since + UNMANAGED_GRACE_SECONDS - now

    def reset(self) -> None:
        self.since = None
