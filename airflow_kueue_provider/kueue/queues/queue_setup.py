"""Queue set-up as code: Kueue objects declared next to the DAGs, read, converted and compared (pure).

A declaration is YAML with the kinds a platform team owns: Topology, ResourceFlavor, WorkloadPriorityClass,
Cohort, ClusterQueue and LocalQueue. Each is written as ``kueue.x-k8s.io/v1beta2``: a ``v1beta1`` document
(the seed's, and what Kueue up to 0.19 also serves; 0.20 no longer does) is converted as Kueue's own
conversion does it (ClusterQueue ``cohort`` -> ``cohortName``, ``admissionChecks`` ->
``admissionChecksStrategy``, flavor fungibility ``Borrow``/``Preempt`` -> ``MayStopSearch``). The hook applies
them (server-side apply, in dependency order); ``drift`` says where a live object differs from its
declaration, field by declared field.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import KueueProviderError
from ..k8s_names import is_dns1123_label, is_dns1123_subdomain

GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"
ACCEPTED_VERSIONS = (f"{GROUP}/v1beta2", f"{GROUP}/v1beta1")
PLURALS = {
    "Topology": "topologies",
    "ResourceFlavor": "resourceflavors",
    "WorkloadPriorityClass": "workloadpriorityclasses",
    "Cohort": "cohorts",
    "ClusterQueue": "clusterqueues",
    "LocalQueue": "localqueues",
}
"""The kinds a declaration may hold, in the order they are applied (what refers to another comes after it)."""
NAMESPACED = frozenset({"LocalQueue"})
TOP_LEVEL_FIELDS = {"WorkloadPriorityClass": ("value", "description")}
"""Kinds whose declared fields sit beside ``metadata`` rather than in ``spec``."""
_FUNGIBILITY = {"Borrow": "MayStopSearch", "Preempt": "MayStopSearch"}


class InvalidQueueDeclaration(ValueError, KueueProviderError):
    """A declared document cannot be applied; the message names it and says what to change."""


@dataclass(frozen=True)
class QueueObject:
    """One declared Kueue object, as v1beta2."""

    kind: str
    name: str
    namespace: str | None
    body: Mapping[str, Any]

    @property
    def plural(self) -> str:
        return PLURALS[self.kind]

    @property
    def ref(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"

    def declared(self) -> dict[str, Any]:
        """The fields the declaration owns (compared with the live object)."""
        keys = TOP_LEVEL_FIELDS.get(self.kind, ("spec",))
        return {key: self.body[key] for key in keys if key in self.body}


def read_declarations(documents: Iterable[Any], source: str = "declaration") -> list[QueueObject]:
    """Every document of ``documents`` (parsed YAML; None for an empty one) as a ``QueueObject``, checked,
    in apply order. Refuses unknown kinds and versions, missing names, and one object declared twice."""
    objects = [
        _one(doc, f"{source}, document {number}")
        for number, doc in enumerate(documents, 1)
        if doc is not None
    ]
    return in_apply_order(objects)


def in_apply_order(objects: Iterable[QueueObject]) -> list[QueueObject]:
    """``objects`` (from one or several sources) in apply order; refuses one object declared twice."""
    listed: list[QueueObject] = []
    seen: set[str] = set()
    for obj in objects:
        if obj.ref in seen:
            raise InvalidQueueDeclaration(f"{obj.ref} is declared twice; keep one")
        seen.add(obj.ref)
        listed.append(obj)
    order = list(PLURALS)
    return sorted(listed, key=lambda o: (order.index(o.kind), _cohort_depth(o, listed), o.ref))


def _one(doc: Any, where: str) -> QueueObject:
    if not isinstance(doc, Mapping):
        raise InvalidQueueDeclaration(
            f"{where}: not a Kubernetes object (a mapping with apiVersion and kind)"
        )
    version, kind = doc.get("apiVersion"), doc.get("kind")
    if kind not in PLURALS:
        raise InvalidQueueDeclaration(
            f"{where}: kind {kind!r} is not declared here; use one of {', '.join(PLURALS)}"
        )
    if version not in ACCEPTED_VERSIONS:
        raise InvalidQueueDeclaration(
            f"{where}: {kind} apiVersion {version!r}: use {GROUP}/v1beta2 (v1beta1 is converted)"
        )
    metadata = doc.get("metadata") or {}
    name, namespace = metadata.get("name"), metadata.get("namespace")
    if not is_dns1123_subdomain(name):
        raise InvalidQueueDeclaration(
            f"{where}: {kind} needs metadata.name (a lowercase DNS name), got {name!r}"
        )
    if kind in NAMESPACED and not is_dns1123_label(namespace):
        raise InvalidQueueDeclaration(f"{where}: LocalQueue {name} needs metadata.namespace")
    if kind not in NAMESPACED and namespace:
        raise InvalidQueueDeclaration(f"{where}: {kind} {name} is cluster-scoped; drop metadata.namespace")
    body = to_v1beta2(doc)
    return QueueObject(str(kind), str(name), str(namespace) if kind in NAMESPACED else None, body)


def to_v1beta2(doc: Mapping[str, Any]) -> dict[str, Any]:
    """``doc`` as a v1beta2 object with only what a declaration sets (name, namespace, labels, annotations,
    its fields); v1beta1 converted."""
    metadata = doc.get("metadata") or {}
    kept_meta = {
        k: copy.deepcopy(metadata[k]) for k in ("name", "namespace", "labels", "annotations") if k in metadata
    }
    body: dict[str, Any] = {"apiVersion": f"{GROUP}/{VERSION}", "kind": doc["kind"], "metadata": kept_meta}
    for key, value in doc.items():
        if key not in ("apiVersion", "kind", "metadata", "status"):
            body[key] = copy.deepcopy(value)
    if doc.get("apiVersion") == f"{GROUP}/v1beta1":
        _convert_v1beta1(body)
    return body


def _convert_v1beta1(body: dict[str, Any]) -> None:
    spec = body.get("spec")
    if not isinstance(spec, dict):
        return
    if body["kind"] == "ClusterQueue":
        if "cohort" in spec:
            spec["cohortName"] = spec.pop("cohort")
        checks = spec.pop("admissionChecks", None)
        if checks:
            spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": name} for name in checks]}
        fungibility = spec.get("flavorFungibility")
        if isinstance(fungibility, dict):
            for key in ("whenCanBorrow", "whenCanPreempt"):
                if fungibility.get(key) in _FUNGIBILITY:
                    fungibility[key] = _FUNGIBILITY[fungibility[key]]
    if body["kind"] == "Cohort" and "parent" in spec:  # v1alpha1's name, seen in older declarations
        spec["parentName"] = spec.pop("parent")


def _cohort_depth(obj: QueueObject, objects: list[QueueObject]) -> int:
    """Parents before children: a Cohort's depth in the declared tree (0 for the others and roots)."""
    if obj.kind != "Cohort":
        return 0
    parents = {o.name: (o.body.get("spec") or {}).get("parentName") for o in objects if o.kind == "Cohort"}
    depth, parent, seen = 0, parents.get(obj.name), {obj.name}
    while parent and parent in parents and parent not in seen:
        seen.add(parent)
        depth, parent = depth + 1, parents.get(parent)
    return depth


def drift(declared: Mapping[str, Any], live: Mapping[str, Any], path: str = "") -> list[str]:
    """Where ``live`` differs from ``declared``, for every field ``declared`` sets (what the server adds, such
    as defaults, is not drift). Lists are compared whole; scalars as text (``"80"`` and ``80`` agree)."""
    out: list[str] = []
    for key, want in declared.items():
        here = f"{path}.{key}" if path else key
        have = live.get(key) if isinstance(live, Mapping) else None
        out += _differences(want, have, here)
    return out


def _differences(want: Any, have: Any, here: str) -> list[str]:
    """The paths below ``here`` where ``have`` differs from ``want`` (lists of the same length item by item,
    so a changed quota is named exactly: ``spec.resourceGroups[0].flavors[0].resources[0].nominalQuota``)."""
    if isinstance(want, Mapping) and isinstance(have, Mapping):
        return drift(want, have, here)
    if isinstance(want, list) and isinstance(have, list) and len(want) == len(have):
        pairs = enumerate(zip(want, have, strict=True))
        return [line for i, (w, h) in pairs for line in _differences(w, h, f"{here}[{i}]")]
    return [] if _same(want, have) else [f"{here}: declared {_short(want)}, live {_short(have)}"]


def _same(want: Any, have: Any) -> bool:
    if isinstance(want, Mapping):
        return isinstance(have, Mapping) and not drift(want, have)
    if isinstance(want, list):
        return isinstance(have, list) and len(want) == len(have) and all(map(_same, want, have))
    if want is None or have is None:
        return want is have
    return str(want) == str(have)


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
