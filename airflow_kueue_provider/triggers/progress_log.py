"""The lines a trigger writes to the task log while it follows a Job or JobSet."""

from __future__ import annotations

import time
from typing import Any

LINE_EVERY = 30.0
"""Seconds between two "running N/M done" lines of one Job. Each line is a message from the triggerer's
runner to its supervisor, and each message runs the supervisor's loop (its trigger table queries) once
more: on the night (docs/benchmarks.md) the triggers' 3,300 lines were most of its loops beyond one a second.
The UI shows the progress live; the log keeps its story."""


def human_duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class ProgressLog:
    """Log each changed progress line, except that "running N/M done" lines come at most every LINE_EVERY
    seconds (the last one is forced out at the end): 1,000 indexes do not make 1,000 lines. Other kinds
    (queued with a new position, admitted, evicted, requeued) change rarely and are always worth a line. A
    line held back is due ``due_in()`` seconds later: the trigger wakes then and offers it again, so the
    newest state reaches the log even when nothing changes after it."""

    def __init__(self, log: Any, job: str) -> None:
        self._log = log
        self._job = job
        self._last = ""
        self._last_at = float("-inf")
        self._held = False

    def offer(self, line: str, force: bool = False) -> None:
        if line == self._last:
            return
        now = time.monotonic()
        running_again = line.startswith("running") and self._last.startswith("running")
        if running_again and not force and now - self._last_at < LINE_EVERY:
            self._held = True
            return
        self._log.info("%s: %s", self._job, line)
        self._last, self._last_at, self._held = line, now, False

    def due_in(self) -> float | None:
        """Seconds until a held-back line may be logged; None when none is held."""
        if not self._held:
            return None
        return max(self._last_at + LINE_EVERY - time.monotonic(), 0.0)
