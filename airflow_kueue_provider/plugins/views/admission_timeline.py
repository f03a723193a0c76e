"""A Job's way through Kueue as a list of timestamped steps, for the UI (pure).

Two sources, merged. Events (Kueue's and the Job controller's, on the Job and its Workload) hold the whole
history, including each eviction and requeue, but the apiserver drops them after ``--event-ttl`` (1 h by
default). Object conditions survive, but keep only the last transition of each type. So conditions fill in
what the events no longer show, and a condition that repeats an event is left out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ...kueue.api_time import parse_api_time
from ...kueue.kinds import child_kind

_SAME_MOMENT = timedelta(seconds=2)
NOISY_REASONS = frozenset({"SuccessfulCreate", "SuccessfulDelete"})
"""One per pod: thousands for a big Job, and the index grid already shows the pods."""
_WORKLOAD_CONDITIONS = (
    "QuotaReserved",
    "Admitted",
    "Evicted",
    "Preempted",
    "Requeued",
    "PodsReady",
    "Finished",
)
_JOB_CONDITIONS = ("Suspended", "Complete", "Failed")
JOB_NOUN = child_kind().kind
"""What the timeline calls the Job it is drawn for (the kind every pod runs in)."""


@dataclass(frozen=True)
class TimelineStep:
    at: datetime
    what: str
    """A short label: ``quota reserved``, ``evicted``, ``requeued``, ``complete`` …"""
    detail: str
    source: str
    """``Job`` or ``Workload``: the object the step was recorded on."""
    warning: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "at": self.at.isoformat(),
            "what": self.what,
            "detail": self.detail,
            "source": self.source,
            "warning": self.warning,
        }


def admission_timeline(
    job: Mapping[str, Any],
    workload: Mapping[str, Any] | None,
    events: Iterable[Mapping[str, Any]] = (),
) -> list[TimelineStep]:
    """The steps of ``job`` (and its ``workload``) in time order, from ``events`` and object conditions."""
    # Creation steps first: events have one-second resolution, and a stable sort keeps this order on ties.
    steps: list[TimelineStep] = []
    created = parse_api_time((job.get("metadata") or {}).get("creationTimestamp"))
    if created is not None:
        steps.append(TimelineStep(created, "submitted", _job_name(job), JOB_NOUN))
    if workload is not None:
        wl_created = parse_api_time((workload.get("metadata") or {}).get("creationTimestamp"))
        queue = (workload.get("spec") or {}).get("queueName")
        if wl_created is not None:
            where = f"in LocalQueue {queue}" if queue else ""
            steps.append(TimelineStep(wl_created, "queued", where, "Workload"))
    steps += [step for step in map(_from_event, events) if step is not None]
    if workload is not None:
        steps += _conditions(workload, _WORKLOAD_CONDITIONS, "Workload", steps)
    steps += _conditions(job, _JOB_CONDITIONS, JOB_NOUN, steps)
    return sorted(steps, key=lambda step: step.at)


def _from_event(event: Mapping[str, Any]) -> TimelineStep | None:
    reason = str(event.get("reason") or "")
    if not reason or reason in NOISY_REASONS:
        return None
    at = parse_api_time(event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp"))
    if at is None:
        return None
    count = int(event.get("count") or 1)
    detail = str(event.get("message") or "") + (f" ({count} times)" if count > 1 else "")
    kind = str((event.get("involvedObject") or {}).get("kind") or "")
    return TimelineStep(at, _words(reason), detail, kind, warning=event.get("type") == "Warning")


def _conditions(
    obj: Mapping[str, Any], types: tuple[str, ...], source: str, known: list[TimelineStep]
) -> list[TimelineStep]:
    steps = []
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") not in types or cond.get("status") != "True":
            continue
        at = parse_api_time(cond.get("lastTransitionTime"))
        if at is None:
            continue
        what = _words(str(cond["type"]))
        if any(s.what.startswith(what) and abs(s.at - at) <= _SAME_MOMENT for s in known):
            continue  # an event already says it
        reason, message = cond.get("reason") or "", cond.get("message") or ""
        detail = f"{reason}: {message}" if reason and message else str(reason or message)
        warning = cond["type"] in ("Evicted", "Preempted", "Failed")
        steps.append(TimelineStep(at, what, detail, source, warning=warning))
    return steps


def _words(camel: str) -> str:
    """``QuotaReserved`` -> ``quota reserved``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", camel).lower()


def _job_name(job: Mapping[str, Any]) -> str:
    metadata = job.get("metadata") or {}
    return f"Job {metadata.get('namespace')}/{metadata.get('name')}"
