"""What each attempt of a task instance cost and how long it waited and ran, and the task instance's totals
(pure).

A task instance may run several Jobs: a retry's Job (with checkpointing, of the unfinished shards only) and a
deadline's spill Job. The result's ``queued_seconds``, ``running_seconds`` and ``estimated_cost_usd`` are the
sums over all of them, each Job counted at its own pod count and time; ``attempt_figures`` keeps one entry per
Job. See docs/results.md for which result keys are per attempt and which per task instance.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal
from typing import Any, Protocol

from ..api_time import parse_api_time
from ..kinds import finished_condition
from ..wording import counted
from .cost import VmPrice, vm_share

RunTimes = tuple[float | None, float | None]
"""(queued seconds, running seconds); None where not known."""


@dataclass(frozen=True)
class AttemptFigures:
    """One Job of a task instance: ``pods`` it ran (admitted parallelism, else its parallelism capped by its
    completions), seconds from creation to admission and from admission to its end, and its estimated cost
    at the Spot or on-demand price."""

    job_name: str
    pods: int
    queued_seconds: float | None
    running_seconds: float | None
    spot: bool
    cost_usd: float
    try_number: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_name": self.job_name,
            "try_number": self.try_number,
            "pods": self.pods,
            "queued_seconds": self.queued_seconds,
            "running_seconds": self.running_seconds,
            "spot": self.spot,
            "estimated_cost_usd": self.cost_usd,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AttemptFigures:
        return cls(
            job_name=str(data["job_name"]),
            pods=int(data.get("pods") or 0),
            queued_seconds=_number(data.get("queued_seconds")),
            running_seconds=_number(data.get("running_seconds")),
            spot=bool(data.get("spot")),
            cost_usd=float(data.get("estimated_cost_usd") or 0.0),
            try_number=int(data["try_number"]) if data.get("try_number") is not None else None,
        )


@dataclass(frozen=True)
class CostModel:
    """What every Job of one task costs per pod-hour: the pods' requests against one VM's price."""

    requests: Mapping[str, Any] | None
    vm: VmPrice

    def figures(
        self,
        job_name: str,
        pods: int,
        queued_seconds: float | None,
        running_seconds: float | None,
        spot: bool,
        try_number: int | None = None,
    ) -> AttemptFigures:
        share = vm_share(self.requests, self.vm) * max(pods, 0)
        return _priced(self.vm, share, job_name, pods, (queued_seconds, running_seconds), spot, try_number)

    def figures_of(
        self, job: Mapping[str, Any], times: RunTimes, spot: bool, try_number: int | None
    ) -> AttemptFigures:
        """A Job at the pods its spec runs: its parallelism capped by its completions."""
        spec = job.get("spec") or {}
        completions = int(spec.get("completions") or 0)
        pods = min(int(spec.get("parallelism") or completions), completions)
        return self.figures(_name(job), pods, times[0], times[1], spot, try_number)

    def basis(self, attempts: Sequence[AttemptFigures]) -> str:
        """How the total was made, one term per Job: ``30 pods x 45.0 s + 2 pods x 4.0 s of 0.250
        Standard_D16ds_v5 at $0.181/h (Spot)``."""
        share = f"{float(vm_share(self.requests, self.vm)):.3f} {self.vm.name}"
        prices = sorted({f"${self._rate(a.spot)}/h ({'Spot' if a.spot else 'on-demand'})" for a in attempts})
        terms = (
            " + ".join(f"{counted(a.pods, 'pod')} x {a.running_seconds or 0:.1f} s" for a in attempts)
            or "nothing ran"
        )
        return f"{terms} of {share} at {', '.join(prices) or 'no price (nothing ran)'}"

    def _rate(self, spot: bool) -> Decimal:
        return _rate(self.vm, spot)


class Pricing(Protocol):
    """A kind's cost model (``CostModel``, ``GangCostModel``)."""

    def figures_of(
        self, obj: Mapping[str, Any], times: RunTimes, spot: bool, try_number: int | None
    ) -> AttemptFigures:
        """The object's figures from its (queued, running) seconds."""

    def basis(self, attempts: Sequence[AttemptFigures]) -> str: ...


@dataclass(frozen=True)
class PodSetPrice:
    """One replicated job of a JobSet: its pods (replicas x parallelism) and each pod's requests."""

    name: str
    pods: int
    requests: Mapping[str, Any] | None


@dataclass(frozen=True)
class GangCostModel:
    """What a JobSet costs: each replicated job's pods at its own requests, for as long as the JobSet ran
    (Kueue admits it whole and releases it whole)."""

    pod_sets: tuple[PodSetPrice, ...]
    vm: VmPrice

    @property
    def pods(self) -> int:
        return sum(p.pods for p in self.pod_sets)

    def figures(
        self,
        job_name: str,
        queued_seconds: float | None,
        running_seconds: float | None,
        spot: bool,
        try_number: int | None = None,
    ) -> AttemptFigures:
        share = sum((vm_share(p.requests, self.vm) * max(p.pods, 0) for p in self.pod_sets), Decimal(0))
        return _priced(
            self.vm, share, job_name, self.pods, (queued_seconds, running_seconds), spot, try_number
        )

    def figures_of(
        self, obj: Mapping[str, Any], times: RunTimes, spot: bool, try_number: int | None
    ) -> AttemptFigures:
        """The object (a JobSet) at the pods of every part (replicated job)."""
        return self.figures(_name(obj), times[0], times[1], spot, try_number)

    def basis(self, attempts: Sequence[AttemptFigures]) -> str:
        """``(1 coordinator pod of 0.062 + 8 workers pods of 0.250) Standard_D16ds_v5 x 45.0 s at $0.181/h
        (Spot)``."""
        shares = " + ".join(
            f"{p.pods} {p.name} pod{'s' if p.pods != 1 else ''} of {float(vm_share(p.requests, self.vm)):.3f}"
            for p in self.pod_sets
        )
        terms = " + ".join(f"{a.running_seconds or 0:.1f} s" for a in attempts) or "nothing ran"
        prices = sorted(
            {f"${_rate(self.vm, a.spot)}/h ({'Spot' if a.spot else 'on-demand'})" for a in attempts}
        )
        return f"({shares}) {self.vm.name} x {terms} at {', '.join(prices) or 'no price (nothing ran)'}"


def status_figures(
    obj: Mapping[str, Any],
    model: Pricing,
    spot: bool,
    try_number: int | None = None,
    now: datetime | None = None,
) -> AttemptFigures:
    """An object's figures from its own status, for one whose trigger's figures were not recorded (an
    earlier try's without checkpointing; the first Job of a spill, read as it is deleted): queued from
    creation until it started (a Job's ``status.startTime``, or its ``Suspended`` condition turning False,
    which is when a JobSet's controller resumed it: Kueue admitted it; one never started waited until it
    ended, or until ``now``), running from then to its Complete/Completed/Failed condition (or a Job's
    ``completionTime``). An object evicted and admitted again counts from its last start: a lower bound."""
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    created = parse_api_time(meta.get("creationTimestamp"))
    started = parse_api_time(status.get("startTime"))
    for cond in status.get("conditions") or []:
        if started is None and cond.get("type") == "Suspended" and cond.get("status") == "False":
            started = parse_api_time(cond.get("lastTransitionTime"))
    ended = _ended_at(obj)
    queued = _seconds(created, started or ended or now)
    running = _seconds(started, ended)
    return model.figures_of(obj, (queued, running), spot, try_number)


def totals(attempts: Sequence[AttemptFigures], model: Pricing) -> dict[str, Any]:
    """The result keys over every attempt: sums where known (None when no attempt knows), the cost basis
    term by term, and ``attempt_figures``."""
    queued = [a.queued_seconds for a in attempts if a.queued_seconds is not None]
    running = [a.running_seconds for a in attempts if a.running_seconds is not None]
    return {
        "queued_seconds": round(sum(queued), 3) if queued else None,
        "running_seconds": round(sum(running), 3) if running else None,
        "estimated_cost_usd": round(sum(a.cost_usd for a in attempts), 6),
        "cost_basis": model.basis(attempts),
        "attempt_figures": [a.to_dict() for a in attempts],
    }


def merged(recorded: Iterable[AttemptFigures], from_jobs: Iterable[AttemptFigures]) -> list[AttemptFigures]:
    """Every Job once, by try and then in the order they came (the ledger's, the Jobs' creation): what was
    recorded when its attempt ended wins over what its object says now, but for the try that made the Job,
    which its label says (a cleared try that reattached to an earlier try's Job reports it too)."""
    by_name = {a.job_name: a for a in from_jobs}
    for a in recorded:
        listed = by_name.get(a.job_name)
        made_by = listed.try_number if listed is not None and listed.try_number else a.try_number
        by_name[a.job_name] = replace(a, try_number=made_by)
    return sorted(by_name.values(), key=lambda a: a.try_number or 0)


def _priced(
    vm: VmPrice, share: Decimal, job_name: str, pods: int, times: RunTimes, spot: bool, try_number: int | None
) -> AttemptFigures:
    """One attempt at ``share`` of a VM (all its pods together) for its running time, at the Spot or on-demand
    price: the one cost formula of every kind."""
    cost = share * Decimal(str(times[1] or 0)) / 3600 * _rate(vm, spot)
    return AttemptFigures(job_name, pods, times[0], times[1], spot, round(float(cost), 6), try_number)


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _rate(vm: VmPrice, spot: bool) -> Decimal:
    return Decimal(str(vm.spot_per_hour if spot else vm.on_demand_per_hour))


def _ended_at(job: Mapping[str, Any]) -> datetime | None:
    condition = finished_condition(job)
    if condition is not None:
        return parse_api_time(condition.get("lastTransitionTime"))
    return parse_api_time((job.get("status") or {}).get("completionTime"))


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return round(max((end - start).total_seconds(), 0.0), 3)


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
