"""When a trigger looks at pods that seem stuck: ``start_timeout`` after admission, then every
``START_RECHECK_SECONDS`` while they still have not started (one pod read per look, never per wake)."""

from __future__ import annotations

import time

START_RECHECK_SECONDS = 30.0  # after start_timeout, how often to look at pods that are still not ready


class StartCheckPacing:
    """The Job and JobSet triggers' shared pacing of stuck-pod reads (the rules are in
    kueue.progress.start_guard)."""

    def __init__(self, start_timeout: float) -> None:
        self.start_timeout = start_timeout
        self._next_at = 0.0

    def due_in(self, since_admission: float, overdue: bool) -> float | None:
        """Seconds until the next look at the pods; None: look now (the look after is a recheck away)."""
        if not overdue:
            return self.start_timeout - since_admission
        now = time.monotonic()
        if now < self._next_at:
            return self._next_at - now
        self._next_at = now + START_RECHECK_SECONDS
        return None
