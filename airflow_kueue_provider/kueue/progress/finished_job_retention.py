"""Which finished Jobs a sweep may delete (pure).

``ttlSecondsAfterFinished`` (86400 s by default) normally removes a finished Job and, through owner
references, its pods and its Kueue Workload. The sweep is the backstop: Jobs submitted with the TTL turned
off, a retention shorter than the TTL, or a cluster where the TTL controller lags. A Job is finished when its
Complete or Failed condition is True, and stale once it finished longer ago than the retention. Queued,
suspended and running Jobs are never stale, however old. Nor is a JobSet's Job: its JobSet would create it
again while it runs (a finished coordinator would run twice); the JobSet's own TTL removes it with its Jobs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..api_time import parse_api_time
from ..kinds import finished_condition, parent_names


@dataclass(frozen=True)
class FinishedJob:
    namespace: str
    name: str
    outcome: str
    """``Complete`` or ``Failed``."""
    finished_at: datetime
    uid: str | None = None
    """The object listed: a namesake created since is never the one deleted."""

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def finished_job(job: Mapping[str, Any]) -> FinishedJob | None:
    """The Job's finish, or None while it is not finished (or is already being deleted, or another object's
    child: its parent's TTL removes it, a JobSet's)."""
    metadata = job.get("metadata") or {}
    if metadata.get("deletionTimestamp") or parent_names(job):
        return None
    cond = finished_condition(job)
    if cond is None:
        return None
    raw = (job.get("status") or {}).get("completionTime") if cond["type"] == "Complete" else None
    at = parse_api_time(raw or cond.get("lastTransitionTime"))
    if at is None:
        return None
    return FinishedJob(
        str(metadata.get("namespace")), str(metadata.get("name")), cond["type"], at, metadata.get("uid")
    )


def stale_finished_jobs(
    jobs: Iterable[Mapping[str, Any]], now: datetime, older_than: timedelta
) -> list[FinishedJob]:
    """The Jobs among ``jobs`` that finished more than ``older_than`` before ``now``, oldest first."""
    finished = (f for f in map(finished_job, jobs) if f is not None)
    return sorted((f for f in finished if now - f.finished_at > older_than), key=lambda f: f.finished_at)
