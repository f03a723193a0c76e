"""The deadline verdict a person reads in the task log, with hysteresis, and how the run ended (pure).

Without hysteresis the verdict flapped between "AT RISK" and "on track" as estimates came and went (a new
trigger after an escalation has none yet; a queue that has not moved gives none). So: a run turns AT RISK at
the first reading that says so, and turns back to "on track" only when the late end of its estimate is
``RECOVERY_GAP_SHARE`` of the margin before ``deadline - margin`` for ``RECOVERY_READINGS`` readings in a
row spanning ``RECOVERY_SECONDS``. A reading with no estimate keeps the verdict as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from .eta import Estimate

RECOVERY_GAP_SHARE = 0.5
"""Back to "on track" only with the late end of the estimate this share of the margin before
``deadline - margin`` (a clear gap, not a reading that grazes the line)."""
RECOVERY_READINGS = 3
"""... for this many readings in a row ..."""
RECOVERY_SECONDS = 60.0
"""... spanning at least this long."""

OUTCOME_KEY = "deadline_outcome"
"""The result's key: ``{"deadline", "finished_at", "met", "seconds"}`` (seconds to spare, or late)."""


@dataclass(frozen=True)
class Verdict:
    """The verdict so far: AT RISK or not, and, while AT RISK, the clear readings towards "on track"."""

    at_risk: bool = False
    clear_since: datetime | None = None
    clear_readings: int = 0

    def next(
        self, raw_risk: bool, estimate: Estimate | None, now: datetime, deadline: datetime, margin: timedelta
    ) -> Verdict:
        """The verdict after one reading; ``raw_risk`` is the reading's own (``deadline.at_risk``)."""
        if not self.at_risk:
            return Verdict(at_risk=True) if raw_risk else self
        if estimate is None:  # nothing new to judge by: keep the verdict (and the clear readings so far)
            return self
        line = deadline - margin - margin * RECOVERY_GAP_SHARE
        if raw_risk or estimate.at + estimate.margin > line:
            return Verdict(at_risk=True)
        since = self.clear_since or now
        readings = self.clear_readings + 1
        if readings >= RECOVERY_READINGS and (now - since).total_seconds() >= RECOVERY_SECONDS:
            return Verdict(at_risk=False)
        return Verdict(at_risk=True, clear_since=since, clear_readings=readings)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"at_risk": self.at_risk}
        if self.clear_since is not None:
            data["clear_since"] = self.clear_since.isoformat()
            data["clear_readings"] = self.clear_readings
        return data

    @classmethod
    def from_dict(cls, data: Any) -> Verdict | None:
        """None when absent (a plan serialized before verdicts were kept)."""
        if not isinstance(data, Mapping):
            return None
        since = data.get("clear_since")
        return cls(
            at_risk=bool(data.get("at_risk")),
            clear_since=datetime.fromisoformat(str(since)) if since else None,
            clear_readings=int(data.get("clear_readings") or 0),
        )


def last_verdict(eta_history: Sequence[Mapping[str, Any]]) -> Verdict:
    """The verdict an ETA history ended with: a trigger after an escalation (or of a plan serialized before
    verdicts were kept) resumes AT RISK rather than "on track"."""
    last = eta_history[-1] if eta_history else {}
    return Verdict(at_risk=bool(last.get("at_risk")))


def deadline_outcome(deadline: datetime, finished_at: datetime) -> dict[str, Any]:
    """The result's ``deadline_outcome``: met (``seconds`` to spare, >= 0) or missed (``seconds`` late)."""
    spare = (deadline - finished_at).total_seconds()
    met = spare >= 0
    return {
        "deadline": deadline.astimezone(UTC).isoformat(),
        "finished_at": finished_at.astimezone(UTC).isoformat(timespec="seconds"),
        "met": met,
        "seconds": round(spare if met else -spare, 1),
    }


def outcome_line(outcome: Mapping[str, Any]) -> str:
    """``deadline 07:00 UTC met with 4 min 10 s to spare`` / ``deadline 07:00 UTC MISSED by 20 s``."""
    at = datetime.fromisoformat(str(outcome["deadline"])).astimezone(UTC)
    when = f"{at:%H:%M} UTC" if at.second == 0 else f"{at:%H:%M:%S} UTC"
    amount = _duration(float(outcome["seconds"]))
    if outcome["met"]:
        return f"deadline {when} met with {amount} to spare"
    return f"deadline {when} MISSED by {amount}"


def _duration(seconds: float) -> str:
    """``20 s``, ``4 min 10 s``, ``2 h 5 min``."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"
