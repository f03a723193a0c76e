"""Merging the Job the provider builds over a user's base Job (``job_template``): the built values win."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_kueue_provider.kueue.spec.job_spec import CONTAINER_NAME

_SERVER_SET_METADATA = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
)
_CONTROLLER_LABELS = (
    "controller-uid",
    "job-name",
    "batch.kubernetes.io/controller-uid",
    "batch.kubernetes.io/job-name",
)


def merge_job_template(template: Mapping[str, Any], job: Mapping[str, Any]) -> dict[str, Any]:
    """Merge the built ``job`` over a base Job ``template``: the built values win.

    Dicts merge recursively; lists from ``job`` replace the template's, except:

    - the built container merges into the template container named ``main`` (else the first one), other
      containers (sidecars) are kept; its ``env`` merges by name;
    - tolerations are the template's plus the built ones not already present;
    - ``podFailurePolicy.rules``: the built rules come first (first match wins), then the template's.

    Server-set fields of a template copied from a live Job (status, uid, selector, controller labels) and
    ``spec.suspend`` (Kueue's webhook owns it) are dropped.
    """
    base = _clean_template(template)
    merged = _deep_merge(base, job)
    base_spec = as_mapping(base.get("spec"))
    job_spec = as_mapping(job.get("spec"))
    merged_spec = merged["spec"]

    base_pod = as_mapping(as_mapping(base_spec.get("template")).get("spec"))
    job_pod = as_mapping(as_mapping(job_spec.get("template")).get("spec"))
    merged_pod = merged_spec["template"]["spec"]
    merged_pod["containers"] = _merge_containers(base_pod.get("containers"), job_pod.get("containers", []))
    if "tolerations" in base_pod or "tolerations" in job_pod:
        tolerations = list(base_pod.get("tolerations") or [])
        tolerations += [t for t in job_pod.get("tolerations") or [] if t not in tolerations]
        merged_pod["tolerations"] = copy.deepcopy(tolerations)

    base_rules = as_mapping(base_spec.get("podFailurePolicy")).get("rules") or []
    job_rules = as_mapping(job_spec.get("podFailurePolicy")).get("rules") or []
    if base_rules or job_rules:
        rules = list(job_rules) + [rule for rule in base_rules if rule not in job_rules]
        merged_spec.setdefault("podFailurePolicy", {})["rules"] = copy.deepcopy(rules)
    return merged


def _clean_template(template: Mapping[str, Any]) -> dict[str, Any]:
    base: dict[str, Any] = copy.deepcopy(dict(template))
    base.pop("status", None)
    metadata = base.get("metadata")
    if isinstance(metadata, dict):
        for key in _SERVER_SET_METADATA:
            metadata.pop(key, None)
    spec = base.get("spec")
    if isinstance(spec, dict):
        spec.pop("suspend", None)
        if not spec.get("manualSelector"):
            spec.pop("selector", None)
        labels = as_mapping(as_mapping(spec.get("template")).get("metadata")).get("labels")
        if isinstance(labels, dict):
            for key in _CONTROLLER_LABELS:
                labels.pop(key, None)
    return base


def main_container(containers: object) -> int | None:
    """Which of a pod's ``containers`` runs the shards: the one named ``main``, else the first (the others
    are sidecars). The one rule for the merge, the image and the resources a template gives."""
    if not isinstance(containers, list) or not containers:
        return None
    named = [i for i, c in enumerate(containers) if as_mapping(c).get("name") == CONTAINER_NAME]
    return named[0] if named else 0


def template_main_container(template: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The shard container of a ``job_template`` (empty when it has none)."""
    pod = as_mapping(as_mapping(as_mapping(as_mapping(template).get("spec")).get("template")).get("spec"))
    position = main_container(pod.get("containers"))
    return as_mapping(pod["containers"][position]) if position is not None else {}


def _merge_containers(base: object, built: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    containers = [copy.deepcopy(dict(c)) for c in base] if isinstance(base, list) else []
    for container in built:
        position = next((i for i, c in enumerate(containers) if c.get("name") == container.get("name")), None)
        if position is None:
            position = main_container(containers)
        if position is None:
            containers.append(copy.deepcopy(dict(container)))
            continue
        target = containers[position]
        env = _merge_env(target.get("env"), container.get("env"))
        merged = _deep_merge(target, container)
        if "name" in target:
            # Keep the template's container name: its podFailurePolicy rules may refer to it.
            merged["name"] = target["name"]
        if env is not None:
            merged["env"] = env
        containers[position] = merged
    return containers


def _merge_env(base: object, built: object) -> list[dict[str, Any]] | None:
    if not isinstance(base, list) or not isinstance(built, list):
        return None
    names = {item.get("name") for item in built if isinstance(item, Mapping)}
    kept = [
        copy.deepcopy(item) for item in base if not (isinstance(item, Mapping) and item.get("name") in names)
    ]
    return kept + copy.deepcopy(built)


def _deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged: dict[str, Any] = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def values_turned_structure(before: object, after: object, path: str = "job_template") -> list[str]:
    """Where a rendered string of a parsed template became a mapping or a list (a native Jinja environment
    turns ``"{'volumes': ...}"`` into a dict): the paths, so a rendered value cannot add structure."""
    if isinstance(before, str):
        return [path] if isinstance(after, (Mapping, list, tuple, set)) else []
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        return [p for k, v in before.items() for p in values_turned_structure(v, after.get(k), f"{path}.{k}")]
    if isinstance(before, list) and isinstance(after, list):
        return [
            p
            for i, (b, a) in enumerate(zip(before, after, strict=False))
            for p in values_turned_structure(b, a, f"{path}[{i}]")
        ]
    return []


def as_mapping(value: object) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else an empty one: for walking user-supplied Job dicts."""
    return value if isinstance(value, Mapping) else {}
