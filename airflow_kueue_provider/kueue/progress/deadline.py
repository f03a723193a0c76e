"""When a run's results are due, and whether its ETA says it will miss that (pure).

``deadline=`` takes what a person writing a nightly DAG has in mind:

- a time of day, optionally with an IANA time zone: ``"07:00"`` (UTC), ``"07:00 Europe/London"``: the first
  such moment after the run started (a run that starts at 23:30 and must finish by 07:00 has until the next
  morning);
- an ISO 8601 date and time with an offset or zone: ``"2026-12-02T07:00:00+00:00"``, or a ``datetime`` with
  a tzinfo;
- a ``timedelta`` from the run's start, or the same as a number of seconds.

A time without a zone is refused rather than guessed: the scheduler, the workers and the people reading the
log may all be in different zones.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..errors import KueueProviderError
from ..names import DEADLINE_ANNOTATION, ESCALATIONS_ANNOTATION
from .deadline_verdict import OUTCOME_KEY, Verdict
from .eta import Estimate

DEADLINE_RESULT_KEYS = ("deadline", "eta_history", "escalations", OUTCOME_KEY)
"""What a run with a deadline adds to the task's result (besides the Job's ``JobResult``)."""
DEFAULT_MARGIN = timedelta(minutes=10)
"""The largest default margin: escalate once the late end of the ETA comes within this of the deadline."""
DEFAULT_MARGIN_SHARE = 0.1
"""With no ``deadline_margin``, the margin is this share of the time from submit to the deadline, at most
``DEFAULT_MARGIN``: 10 minutes for a nightly run with hours to go, 30 s for a deadline 5 minutes away."""
PAST_DEADLINE_GRACE = timedelta(hours=24)
"""An absolute deadline is refused once it passed longer ago than this: within it, a run that is still going
(its worker parses the DAG file again to resume it) still loads and ends with "MISSED by ..."."""

_TIME_OF_DAY = re.compile(r"^(?P<h>\d{1,2}):(?P<m>\d{2})(?::(?P<s>\d{2}))?(?:\s+(?P<zone>\S+))?$")


class InvalidDeadline(ValueError, KueueProviderError):
    """``deadline=`` could not be read; the message says what form it takes."""


DeadlineValue = str | datetime | timedelta | int | float


def resolve_deadline(value: DeadlineValue, run_start: datetime) -> datetime:
    """The deadline as an aware UTC datetime, for a run that started at ``run_start`` (aware)."""
    if isinstance(value, bool):
        raise InvalidDeadline(f"deadline={value!r}: {_FORMS}")
    if isinstance(value, timedelta):
        return _positive(run_start + value, run_start, value)
    if isinstance(value, int | float):
        return _positive(run_start + timedelta(seconds=value), run_start, value)
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise InvalidDeadline(f"deadline={value!r} has no time zone: give it a tzinfo (or an offset)")
        return value.astimezone(UTC)
    if not isinstance(value, str):
        raise InvalidDeadline(f"deadline={value!r}: {_FORMS}")
    text = value.strip()
    if m := _TIME_OF_DAY.match(text):
        hour, minute, second = int(m["h"]), int(m["m"]), int(m["s"] or 0)
        if hour > 23 or minute > 59 or second > 59:
            raise InvalidDeadline(f"deadline={value!r}: not a time of day (HH:MM or HH:MM:SS, 24-hour)")
        zone = _zone(m["zone"] or "UTC", value)
        local_start = run_start.astimezone(zone)
        candidate = datetime.combine(local_start.date(), time(hour, minute, second), tzinfo=zone)
        if candidate <= local_start:
            candidate = datetime.combine(
                local_start.date() + timedelta(days=1), time(hour, minute, second), zone
            )
        return candidate.astimezone(UTC)
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidDeadline(f"deadline={value!r}: {_FORMS}") from None
    return resolve_deadline(parsed, run_start)


_FORMS = (
    "give a time of day ('07:00' or '07:00 Europe/London'), an ISO date and time with an offset "
    "('2026-12-02T07:00:00+00:00'), a timezone-aware datetime, or a timedelta (or seconds) from the run's "
    "start"
)


def past_absolute_deadline(value: DeadlineValue, now: datetime) -> str | None:
    """An absolute deadline (an ISO date and time, an aware datetime) past at ``now`` by more than
    ``PAST_DEADLINE_GRACE``: every run would miss it, so it is refused; what to give instead, or None (times
    of day and durations resolve per run)."""
    if not isinstance(value, str | datetime) or (
        isinstance(value, str) and _TIME_OF_DAY.match(value.strip())
    ):
        return None
    at = resolve_deadline(value, now)
    if at > now - PAST_DEADLINE_GRACE:
        return None
    ago = timedelta(seconds=round((now - at).total_seconds()))
    return (
        f"deadline={value!r} ({at:%Y-%m-%d %H:%M:%S} UTC) has already passed ({ago} ago): an absolute "
        "deadline is one moment, and every run would miss it. Give a time of day ('07:00', the next one "
        "after each run starts), a timedelta from the run's start, or a date and time still to come"
    )


def _zone(name: str, value: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidDeadline(
            f"deadline={value!r}: unknown time zone {name!r} (an IANA name, e.g. Europe/London)"
        ) from None


def _positive(at: datetime, run_start: datetime, value: object) -> datetime:
    if at <= run_start:
        raise InvalidDeadline(f"deadline={value!r}: a duration from the run's start must be positive")
    return at.astimezone(UTC)


ETA_SAMPLE_SECONDS = 60.0
"""The result's ``eta_history`` keeps one estimate a minute (and every change of verdict)."""
MAX_ETA_SAMPLES = 240


def at_risk(estimate: Estimate | None, now: datetime, deadline: datetime, margin: timedelta) -> bool:
    """A run is at risk once the late end of its estimate (queued: admission; running: finish) is past the
    deadline minus the margin, or, with no estimate (a queue that has not moved, no index finished yet),
    once that moment has come with the run unfinished."""
    if estimate is not None and estimate.at + estimate.margin > deadline - margin:
        return True
    return now >= deadline - margin


def default_margin(deadline: datetime, now: datetime) -> timedelta:
    """The margin when the task sets none: a tenth of the time left, at most ``DEFAULT_MARGIN``."""
    left = max(deadline - now, timedelta(0))
    return min(DEFAULT_MARGIN, left * DEFAULT_MARGIN_SHARE)


def submit_warning(deadline: datetime, margin: timedelta, now: datetime, escalates: bool) -> str | None:
    """What the task log says when the deadline less its margin has already passed at submit: the run is
    AT RISK from its first progress line (and escalates at once); None when there is time left."""
    if deadline - margin > now:
        return None
    late = "has passed" if deadline <= now else f"leaves {deadline - now} before it, inside the margin"
    then = "; on_deadline_risk is taken at once" if escalates else ""
    return (
        f"deadline {deadline:%Y-%m-%d %H:%M:%S} UTC {late} (deadline_margin {margin}): the run is AT RISK "
        f"from its first line{then}. Move the deadline later or lower deadline_margin"
    )


def margin_covers_relative_deadline(deadline: object, margin: timedelta | None) -> str | None:
    """At parse time: a relative deadline (a timedelta or seconds from the run's start) that its explicit
    margin covers whole is always at risk; what to change, or None."""
    after = deadline if isinstance(deadline, timedelta) else None
    if isinstance(deadline, (int, float)) and not isinstance(deadline, bool):
        after = timedelta(seconds=deadline)
    if after is None or margin is None or margin < after:
        return None
    return (
        f"deadline_margin {margin} is not shorter than deadline {after} from the run's start: every run is "
        "AT RISK from its first line. Lower deadline_margin (or leave it unset: a tenth of the time left, "
        "at most 10 min) or move the deadline"
    )


@dataclass(frozen=True)
class DeadlinePlan:
    """The deadline as the trigger carries it (serialized with the trigger, so a restarted triggerer keeps
    it): when, the margin, whether an escalation is still to come, and what happened so far.

    ``spill_pending``: a ``spill_to`` that could not be taken yet (the Job held quota): the trigger hands the
    task back again once the Job is back in its queue, with no pod, while the run is still at risk."""

    deadline: datetime
    margin: timedelta
    escalate: bool
    escalations: tuple[dict[str, str], ...] = ()
    eta_history: tuple[dict[str, Any], ...] = ()
    spill_pending: bool = False
    forecast: Estimate | None = None
    """The finish forecast made at submit (learned shard lengths, quota, the queue ahead): the verdict's
    estimate until the run gives one of its own, so a deadline already out of reach escalates at once."""
    verdict: Verdict | None = None
    """The verdict so far (deadline_verdict: its hysteresis), for the trigger that follows on; None: the last
    one ``eta_history`` records (a plan serialized before verdicts were kept)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "deadline": self.deadline.isoformat(),
            "margin_seconds": self.margin.total_seconds(),
            "escalate": self.escalate,
            "escalations": [dict(e) for e in self.escalations],
            "eta_history": [dict(s) for s in self.eta_history],
            "spill_pending": self.spill_pending,
            **({"forecast": self.forecast.to_dict()} if self.forecast is not None else {}),
            **({"verdict": self.verdict.to_dict()} if self.verdict is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DeadlinePlan:
        return cls(
            deadline=datetime.fromisoformat(str(data["deadline"])),
            margin=timedelta(seconds=float(data["margin_seconds"])),
            escalate=bool(data["escalate"]),
            escalations=tuple(dict(e) for e in data.get("escalations") or ()),
            eta_history=tuple(dict(s) for s in data.get("eta_history") or ()),
            spill_pending=bool(data.get("spill_pending")),
            forecast=_estimate(data.get("forecast")),
            verdict=Verdict.from_dict(data.get("verdict")),
        )


def _estimate(data: Any) -> Estimate | None:
    """An ``Estimate.to_dict`` back (None when absent: a plan serialized before forecasts existed)."""
    if not isinstance(data, dict):
        return None
    return Estimate(datetime.fromisoformat(str(data["at"])), timedelta(seconds=float(data["margin_seconds"])))


class EtaHistory:
    """The estimates a run went through: one a minute, and each change of verdict, at most MAX_ETA_SAMPLES
    (the oldest go first)."""

    def __init__(self, earlier: tuple[dict[str, Any], ...] = ()) -> None:
        self.samples: list[dict[str, Any]] = list(earlier)[-MAX_ETA_SAMPLES:]
        self._last_at: datetime | None = None
        if self.samples:  # a trigger that follows on (after an escalation) samples on from there
            try:
                self._last_at = datetime.fromisoformat(str(self.samples[-1]["at"]))
            except (KeyError, ValueError):
                self._last_at = None

    def offer(self, now: datetime, phase: str, eta: Estimate | None, at_risk: bool) -> None:
        changed = not self.samples or self.samples[-1].get("at_risk") != at_risk
        if (
            not changed
            and self._last_at is not None
            and (now - self._last_at).total_seconds() < ETA_SAMPLE_SECONDS
        ):
            return
        self._last_at = now
        self.samples.append(
            {
                "at": now.isoformat(timespec="seconds"),
                "phase": phase,
                "eta": eta.at.isoformat(timespec="seconds") if eta else None,
                "margin_seconds": round(eta.margin.total_seconds()) if eta else None,
                "at_risk": at_risk,
            }
        )
        del self.samples[:-MAX_ETA_SAMPLES]

    def finish(self, now: datetime, at_risk: bool) -> None:
        """The last sample: when the run ended (the result's ``deadline_outcome`` is measured from it)."""
        at = now.isoformat(timespec="seconds")
        self.samples.append(
            {"at": at, "phase": FINISHED, "eta": None, "margin_seconds": None, "at_risk": at_risk}
        )
        del self.samples[:-MAX_ETA_SAMPLES]


FINISHED = "finished"
"""The phase of ``eta_history``'s last sample once the run ended."""


def finished_at(eta_history: Any, fallback: datetime) -> datetime:
    """When the run ended, as its ETA history's last sample records it (``fallback``: a trigger of an
    earlier version did not record it)."""
    last = eta_history[-1] if isinstance(eta_history, list | tuple) and eta_history else None
    if isinstance(last, dict) and last.get("phase") == FINISHED:
        try:
            return datetime.fromisoformat(str(last["at"]))
        except (KeyError, ValueError):
            pass
    return fallback


def deadline_of(job: dict[str, Any]) -> tuple[datetime | None, list[dict[str, str]]]:
    """The deadline and escalations a Job's annotations record (None and [] when absent or unreadable)."""
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    try:
        at = (
            datetime.fromisoformat(annotations[DEADLINE_ANNOTATION])
            if DEADLINE_ANNOTATION in annotations
            else None
        )
    except ValueError:
        at = None
    try:
        steps = json.loads(annotations.get(ESCALATIONS_ANNOTATION) or "[]")
    except ValueError:
        steps = []
    valid = [s for s in steps if isinstance(s, dict)] if isinstance(steps, list) else []
    return at, [{str(k): str(v) for k, v in s.items()} for s in valid]


def taken_before(jobs: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The escalations earlier Jobs of the task instance record (their annotations): ``on_deadline_risk`` is
    taken once per task instance, so a retry that finds any does not escalate again."""
    steps: list[dict[str, str]] = []
    for job in jobs:
        steps.extend(s for s in deadline_of(job)[1] if s not in steps)
    return steps
