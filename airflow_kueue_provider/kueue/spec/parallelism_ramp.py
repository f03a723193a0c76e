"""Parallelism ramp-up (pure): start few pods and add more step by step, against image-pull storms.

A thousand pods that start at once pull the same image and read the same cold caches at once. A ramp starts
the Job at ``start`` pods and raises ``spec.parallelism`` by ``step`` every ``every_seconds`` while it runs,
up to the target. The Job is marked elastic (``kueue.x-k8s.io/elastic-job``), so Kueue admits each raise as
a new Workload slice (feature gate ElasticJobsViaWorkloadSlices, beta and on by default since Kueue 0.18)
instead of treating the changed Job as a different workload.

The pods a raise adds must wait for their slice's admission: Kueue holds them behind the
``kueue.x-k8s.io/elastic-job`` scheduling gate and lifts it up to the admitted count. Kueue's mutating
webhook puts that gate into the pod template only when the Job is created, so a Job created while the
webhook is gone (an outage, a retry during it) would start every raised pod at once, outside the quota.
The provider puts the gate in the template itself (``with_slice_gate``), as it sets ``suspend: true``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..names import ELASTIC_JOB_ANNOTATION

ELASTIC_JOB_SCHEDULING_GATE = "kueue.x-k8s.io/elastic-job"
"""Kueue's pod scheduling gate for elastic Jobs (``kueue.ElasticJobSchedulingGate``): its ElasticJobUngater
lifts it from as many pods as the admitted Workload slice grants."""


def with_slice_gate(job: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``job`` whose pod template carries Kueue's elastic-job scheduling gate (once), so a raise's
    pods wait for their slice's admission even when Kueue's webhook did not add the gate."""
    gated = copy.deepcopy(dict(job))
    pod_spec = gated.setdefault("spec", {}).setdefault("template", {}).setdefault("spec", {})
    gates = list(pod_spec.get("schedulingGates") or [])
    if not _has_slice_gate(gates):
        gates.append({"name": ELASTIC_JOB_SCHEDULING_GATE})
    pod_spec["schedulingGates"] = gates
    return gated


def _has_slice_gate(gates: Sequence[Mapping[str, Any]] | None) -> bool:
    return any(g.get("name") == ELASTIC_JOB_SCHEDULING_GATE for g in gates or [])


def gate_never_lifted(pods: Sequence[Mapping[str, Any]]) -> str | None:
    """Why an admitted Job's pods cannot start when every unfinished pod still waits behind the elastic-job
    gate (asked once ``start_timeout`` passed with no pod ready): Kueue lifts it within seconds of admission,
    from an elastic Job's pods only, and only with its ElasticJobsViaWorkloadSlices feature gate on. A raise
    past the quota keeps only its own pods gated while the admitted ones run, so it never looks like this."""
    live = [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    gated = [p for p in live if _has_slice_gate((p.get("spec") or {}).get("schedulingGates"))]
    if not live or len(gated) < len(live):
        return None
    name = (gated[0].get("metadata") or {}).get("name", "?")
    return (
        f"pod {name} and the Job's {len(gated) - 1} other pod(s) still wait behind Kueue's "
        f"{ELASTIC_JOB_SCHEDULING_GATE} scheduling gate although the Workload was admitted; Kueue lifts it "
        f'only from a Job annotated {ELASTIC_JOB_ANNOTATION}: "true", and only with its '
        "ElasticJobsViaWorkloadSlices feature gate on: turn the feature gate on, or drop parallelism_ramp"
    )


@dataclass(frozen=True)
class ParallelismRamp:
    start: int
    step: int
    every_seconds: float = 60.0

    @classmethod
    def from_param(cls, value: ParallelismRamp | Mapping[str, Any] | None) -> ParallelismRamp | None:
        if value is None or isinstance(value, ParallelismRamp):
            return value
        return cls(**dict(value))

    def problems(self, target: int) -> list[str]:
        """What is wrong with this ramp for a Job whose parallelism should reach ``target``."""
        found = []
        if not isinstance(self.start, int) or self.start < 1:
            found.append(f"start must be a whole number >= 1, got {self.start!r}")
        elif self.start >= target:
            found.append(
                f"start ({self.start}) must be below the target parallelism ({target}); drop the ramp"
            )
        if not isinstance(self.step, int) or self.step < 1:
            found.append(f"step must be a whole number >= 1, got {self.step!r}")
        if not isinstance(self.every_seconds, (int, float)) or self.every_seconds <= 0:
            found.append(f"every_seconds must be positive, got {self.every_seconds!r}")
        return found

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def toward(self, target: int) -> RampPlan:
        return RampPlan(self, target)


@dataclass(frozen=True)
class RampPlan:
    """A ramp toward one Job's ``target`` parallelism (capped by what that Job runs: a retry may run fewer
    shards), as the trigger carries it: its dict form is the trigger's ``ramp`` kwarg."""

    ramp: ParallelismRamp
    target: int

    def next_parallelism(self, current: int) -> int:
        """The parallelism after one more step from ``current`` (never past the target)."""
        return min(self.target, current + self.ramp.step)

    def reached(self, current: int) -> bool:
        return current >= self.target

    @property
    def every_seconds(self) -> float:
        return float(self.ramp.every_seconds)

    def to_dict(self) -> dict[str, Any]:
        return {**self.ramp.to_dict(), "target": self.target}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RampPlan:
        """The trigger's ``ramp`` kwarg, as every version so far wrote it."""
        ramp = ParallelismRamp(int(data["start"]), int(data["step"]), float(data["every_seconds"]))
        return cls(ramp, int(data["target"]))
