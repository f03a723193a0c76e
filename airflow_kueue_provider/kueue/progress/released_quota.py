"""The quota Kueue took back from a running Job before it ended, added up over time.

In a sharded Job's tail fewer indexes are left than pods may run; Kueue (ReclaimablePods, on by default since
v0.15) then reports ``status.reclaimablePods`` on the Workload and stops counting those pods against the
ClusterQueue, so other queues in the cohort are admitted while the last long shards finish. The trigger
sees each change of that count; this meter integrates it into pod-seconds (and CPU-seconds, from the
admission's CPU per pod) for the task's result, so the quota a run handed back is a figure, not a claim.

A re-deferral (the deadline hand-back, a spill) carries the totals to the next trigger
(``job_progress.released_so_far`` and ``carried``), so the figure spans the task's Jobs; the seconds between
the hand-back and the next trigger's first look are not counted. After a triggerer restart the count starts
again (trigger kwargs are fixed at the deferral), so the figure is then a lower bound.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ReleasedQuota:
    """Pod- and CPU-seconds of quota released so far, and the reclaimable pods in force since ``since``."""

    pod_seconds: float = 0.0
    cpu_seconds: float | None = 0.0
    """None once a span's CPU per pod was unknown (no CPU in the admission's resource usage)."""
    pods: int = 0
    cpu_per_pod: float | None = None
    since: float | None = None
    """When the current count was seen (epoch seconds); None before the first observation."""

    @classmethod
    def carried(cls, totals: Mapping[str, Any] | None) -> ReleasedQuota:
        """A meter that starts from an earlier trigger's ``totals`` (None: from zero)."""
        if not totals:
            return cls()
        cpu = totals.get("cpu_seconds")
        return cls(float(totals.get("pod_seconds") or 0.0), None if cpu is None else float(cpu))

    def observe(self, at: float, pods: int, cpu_per_pod: float | None) -> ReleasedQuota:
        """Close the span that ends at ``at`` and start one with ``pods`` reclaimable pods."""
        closed = self.closed_at(at)
        return ReleasedQuota(closed.pod_seconds, closed.cpu_seconds, max(pods, 0), cpu_per_pod, at)

    def closed_at(self, at: float) -> ReleasedQuota:
        """The totals with the current span counted up to ``at`` (the Job's end); no span left open."""
        if self.since is None or not self.pods or at <= self.since:
            return ReleasedQuota(self.pod_seconds, self.cpu_seconds, 0, None, None)
        span = self.pods * (at - self.since)
        cpu = (
            self.cpu_seconds + span * self.cpu_per_pod
            if self.cpu_seconds is not None and self.cpu_per_pod is not None
            else None
        )
        return ReleasedQuota(self.pod_seconds + span, cpu, 0, None, None)
