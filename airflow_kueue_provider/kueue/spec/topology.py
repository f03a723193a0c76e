"""Topology-aware scheduling (Kueue TAS): what a task asks for, and where Kueue placed its pods (pure).

A task asks for its pods to share a topology domain at one level of the ResourceFlavor's ``Topology`` (a node
label key: ``topology.kubernetes.io/zone``, a rack-like placement group, ``kubernetes.io/hostname``),
``required`` (admitted only if one domain fits them all) or ``preferred`` (the fewest domains that fit). Kueue
reads it from the pod template's annotations and records the placement in the Workload's
``status.admission.podSetAssignments[].topologyAssignment`` (v1beta2: levels and compressed slices).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import KueueProviderError
from ..k8s_names import is_qualified_name
from ..names import PREFERRED_TOPOLOGY_ANNOTATION, REQUIRED_TOPOLOGY_ANNOTATION, TOPOLOGY_ANNOTATIONS

MAX_DOMAINS_SHOWN = 8


class InvalidTopology(ValueError, KueueProviderError):
    """``topology=`` could not be used; the message says what to change."""


@dataclass(frozen=True)
class TopologyRequest:
    """``topology=``: the pods share one domain of ``level`` (a node label key of the flavor's Topology);
    ``required`` (default) or only preferred."""

    level: str
    required: bool = True

    def __post_init__(self) -> None:
        if not is_qualified_name(self.level):
            raise InvalidTopology(
                f"topology level {self.level!r} is not a node label key (e.g. topology.kubernetes.io/zone or "
                "kubernetes.io/hostname): name a level of the ResourceFlavor's Topology"
            )
        if not isinstance(self.required, bool):
            raise InvalidTopology(f"topology required={self.required!r}: give True or False")

    @classmethod
    def from_param(cls, value: TopologyRequest | str | Mapping[str, Any] | None) -> TopologyRequest | None:
        """A ``TopologyRequest``, a level (required), ``{"required": level}`` or ``{"preferred": level}``."""
        if value is None or isinstance(value, TopologyRequest):
            return value
        if isinstance(value, str):
            return cls(value)
        if isinstance(value, Mapping) and len(value) == 1 and set(value) <= {"required", "preferred"}:
            ((mode, level),) = value.items()
            return cls(str(level), required=mode == "required")
        raise InvalidTopology(
            f"topology={value!r}: give a node label key (required), {{'required': key}}, "
            "{'preferred': key} or TopologyRequest(key, required=...)"
        )

    def pod_annotations(self) -> dict[str, str]:
        key = REQUIRED_TOPOLOGY_ANNOTATION if self.required else PREFERRED_TOPOLOGY_ANNOTATION
        return {key: self.level}

    def describe(self) -> str:
        return f"{'required' if self.required else 'preferred'} {self.level}"


@dataclass(frozen=True)
class TopologyPlacement:
    """Where Kueue's TAS put the pods: one entry per domain of the assignment's lowest level."""

    levels: tuple[str, ...]
    domains: tuple[tuple[tuple[str, ...], int], ...]
    """(the domain's value at each level, its pod count)."""

    def describe(self) -> str:
        """``kubernetes.io/hostname: aks-spot-0 (3), aks-spot-1 (1)`` (at most MAX_DOMAINS_SHOWN listed)."""
        shown = [f"{'/'.join(values)} ({pods})" for values, pods in self.domains[:MAX_DOMAINS_SHOWN]]
        more = len(self.domains) - MAX_DOMAINS_SHOWN
        return f"{'/'.join(self.levels)}: {', '.join(shown)}" + (f" and {more} more" if more > 0 else "")


def with_topology(
    annotations: Mapping[str, str] | None, request: TopologyRequest | None
) -> Mapping[str, str] | None:
    """Pod template ``annotations`` with ``request``'s Kueue annotation: set through ``topology=`` only."""
    if request is None:
        return annotations
    if set(annotations or {}) & set(TOPOLOGY_ANNOTATIONS):
        raise InvalidTopology(
            "annotations sets a Kueue topology annotation and topology= is given: use topology= alone"
        )
    return {**(annotations or {}), **request.pod_annotations()}


def placements_of(status: Mapping[str, Any]) -> tuple[tuple[str, TopologyPlacement], ...]:
    """Every pod set's TAS placement in a Workload's ``status``, as (pod set name, placement): a JobSet's
    pod sets are its replicated jobs. A pod set whose assignment cannot be read is left out."""
    admission = status.get("admission")
    assignments = admission.get("podSetAssignments") if isinstance(admission, Mapping) else None
    placements: list[tuple[str, TopologyPlacement]] = []
    for assignment in assignments if isinstance(assignments, list) else []:
        topology = assignment.get("topologyAssignment") if isinstance(assignment, Mapping) else None
        if isinstance(topology, Mapping):
            try:
                placements.append((str(assignment.get("name") or ""), _decode(topology)))
            except (KeyError, TypeError, ValueError, IndexError):
                continue
    return tuple(placements)


def _decode(topology: Mapping[str, Any]) -> TopologyPlacement:
    levels = tuple(str(level) for level in topology["levels"])
    domains: list[tuple[tuple[str, ...], int]] = []
    for piece in topology.get("slices") or []:
        count = int(piece["domainCount"])
        per_level = [_values(v, count) for v in piece["valuesPerLevel"]]
        if len(per_level) != len(levels):
            raise ValueError("valuesPerLevel does not match levels")
        pods = _counts(piece["podCounts"], count)
        domains += [(tuple(values[i] for values in per_level), pods[i]) for i in range(count)]
    return TopologyPlacement(levels, tuple(domains))


def _values(level: Mapping[str, Any], count: int) -> list[str]:
    if level.get("universal") is not None:
        return [str(level["universal"])] * count
    individual = level["individual"]
    prefix, suffix = individual.get("prefix") or "", individual.get("suffix") or ""
    roots = [f"{prefix}{root}{suffix}" for root in individual["roots"]]
    if len(roots) != count:
        raise ValueError("roots do not match domainCount")
    return roots


def _counts(pod_counts: Mapping[str, Any], count: int) -> list[int]:
    if pod_counts.get("universal") is not None:
        return [int(pod_counts["universal"])] * count
    counts = [int(c) for c in pod_counts["individual"]]
    if len(counts) != count:
        raise ValueError("podCounts do not match domainCount")
    return counts
