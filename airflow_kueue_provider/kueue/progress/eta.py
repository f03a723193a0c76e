"""When a Job will be admitted and when it will finish, from what the trigger already sees (pure).

Nothing here asks the cluster for more: the inputs are the readings the trigger makes anyway.

**Admission.** The Workload's position in its ClusterQueue, read now and then from Kueue's visibility API.
The queue drains at ``rate`` = positions gained / seconds between the first and the latest reading; the wait
is ``(position + 1) / rate``, give or take one Poisson standard deviation, ``sqrt(position + 1) / rate``
(admissions as independent arrivals). A position that has not moved yet gives no estimate: the queue may be
blocked, and a guess would mislead.

**Finish.** The Job's finished indexes (completed + failed) over time. The throughput ``rate`` is measured
over the recent part of the run (the last ``WINDOW_FRACTION`` of the time since the first index finished, at
least ``MIN_WINDOW`` seconds), so a parallelism change or a slower stretch shows within minutes. The
remaining indexes take ``remaining / rate``; once no more indexes wait than are in flight, the run is in its
tail and the last ones still need about half a mean index duration (Little's law: ``active / rate``), which
sets a floor. The margin is the larger of ``MIN_MARGIN`` and ``1 / sqrt(indexes finished in the window)``
of the remaining time: few observations, wide margin.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

WINDOW_FRACTION = 0.5
MIN_WINDOW = 30.0  # seconds
MIN_FINISHED = 3  # indexes finished before a finish time is estimated
MIN_MARGIN = 0.1
MAX_READINGS = 4096


@dataclass(frozen=True)
class Estimate:
    """A moment and how far off it may be."""

    at: datetime
    margin: timedelta

    def describe(self) -> str:
        """``01:42 UTC, ±10 min``; with a margin under two minutes, to the second: ``01:42:07 UTC, ±4 s``."""
        seconds = self.margin.total_seconds()
        if seconds < 120:
            return f"{self.at.astimezone(UTC):%H:%M:%S} UTC, ±{max(1, round(seconds))} s"
        return f"{self.at.astimezone(UTC):%H:%M} UTC, ±{seconds / 60:.0f} min"

    def to_dict(self) -> dict[str, str | float]:
        return {"at": self.at.isoformat(), "margin_seconds": round(self.margin.total_seconds(), 1)}


class AdmissionClock:
    """Readings of the Workload's ClusterQueue position; the estimated admission."""

    def __init__(self) -> None:
        self._first: tuple[float, int] | None = None
        self._latest: tuple[float, int] | None = None

    def record(self, now: float, position: int) -> None:
        """``now`` in epoch seconds; ``position`` 0-based in the ClusterQueue."""
        if self._first is None or position > self._first[1]:  # pushed back (a higher priority came): restart
            self._first = (now, position)
        self._latest = (now, position)

    def estimate(self) -> Estimate | None:
        if self._first is None or self._latest is None:
            return None
        (t0, p0), (t1, p1) = self._first, self._latest
        if p1 >= p0 or t1 <= t0:
            return None
        rate = (p0 - p1) / (t1 - t0)
        ahead = p1 + 1
        return Estimate(_at(t1 + ahead / rate), timedelta(seconds=math.sqrt(ahead) / rate))


class FinishClock:
    """Readings of a running Job's finished indexes; the estimated finish."""

    def __init__(self, completions: int) -> None:
        self.completions = completions
        self._readings: deque[tuple[float, int]] = deque(maxlen=MAX_READINGS)

    def record(self, now: float, finished: int) -> None:
        """``finished``: completed + failed-for-good indexes, from the Job's status at ``now``."""
        if self._readings and finished == self._readings[-1][1]:
            return  # only changes matter; the gap until the next change is what measures the rate
        if self._readings and finished < self._readings[-1][1]:
            self._readings.clear()  # a new attempt (a retry Job): start over
        self._readings.append((now, finished))

    def rate(self, now: float) -> tuple[float, int] | None:
        """(indexes per second, indexes finished) over the recent window, or None while too few finished.

        The window opens at the first finished index at the earliest: before it, pods were starting, and
        counting that time would make the rate too low for the rest of the run."""
        finishes = [(t, n) for t, n in self._readings if n > 0]
        if not finishes:
            return None
        first = finishes[0]
        since = max(first[0], now - max(MIN_WINDOW, WINDOW_FRACTION * (now - first[0])))
        at_since = max((n for t, n in self._readings if t <= since), default=first[1])
        observed = self._readings[-1][1] - at_since
        seconds = now - since
        if observed < MIN_FINISHED or seconds <= 0:
            return None
        return observed / seconds, observed

    def estimate(self, now: float, active: int) -> Estimate | None:
        """``active``: pods running now (the Job's ``status.active``)."""
        if not self._readings:
            return None
        remaining = self.completions - self._readings[-1][1]
        if remaining <= 0:
            return Estimate(_at(now), timedelta(0))
        measured = self.rate(now)
        if measured is None:
            return None
        rate, observed = measured
        return _finish(now, remaining, active, rate, observed)


def average_finish(
    completions: int, finished: int, active: int, running_since: float, now: float
) -> Estimate | None:
    """The finish from one reading of the Job's status: its mean throughput since it started running
    (``running_since``, epoch seconds; the Job's ``status.startTime``). What a page that has just opened
    knows, before it has seen the rate itself; the first index's start-up time makes it a little late."""
    remaining = completions - finished
    if remaining <= 0:
        return Estimate(_at(now), timedelta(0))
    if finished < MIN_FINISHED or now <= running_since:
        return None
    return _finish(now, remaining, active, finished / (now - running_since), finished)


def _finish(now: float, remaining: int, active: int, rate: float, observed: int) -> Estimate:
    seconds = remaining / rate
    if remaining <= active:  # the tail: the last indexes are all running
        seconds = max(seconds, 0.5 * active / rate)
    margin = max(MIN_MARGIN, 1 / math.sqrt(observed)) * seconds
    return Estimate(_at(now + seconds), timedelta(seconds=margin))


def eta_line(admission: Estimate | None, finish: Estimate | None) -> str:
    """The ETA part of a progress line: ``ETA 01:42 UTC, ±10 min`` (and admission while queued)."""
    parts = []
    if admission is not None:
        parts.append(f"admission {admission.describe()}")
    if finish is not None:
        parts.append(f"ETA {finish.describe()}")
    return "; ".join(parts)


def _at(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC)
