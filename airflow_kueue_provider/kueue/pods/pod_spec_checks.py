"""Checks of the pod-spec inputs a KubernetesPodOperator user brings (tolerations, affinity, volumes and
mounts, env_from, image pull secrets and policy, security contexts, init containers, the grace period, the
active deadline, the PriorityClass): the shape the API server would reject,
caught before anything is submitted. Whether a setting is *allowed* on the cluster (hostPath, privileged)
is the pod policy's question (``pod_policy``), asked of the merged Job."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from airflow_kueue_provider.kueue.k8s_names import is_dns1123_label, is_dns1123_subdomain
from airflow_kueue_provider.kueue.spec.job_spec import CONTAINER_NAME, IndexedJobSpec
from airflow_kueue_provider.kueue.spec.job_template import as_mapping

IMAGE_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
TOLERATION_OPERATORS = ("Equal", "Exists")
TOLERATION_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
AFFINITY_KEYS = ("nodeAffinity", "podAffinity", "podAntiAffinity")

Problem = Callable[[str, str], None]


def check_pod_spec_inputs(spec: IndexedJobSpec, add: Problem) -> None:
    """Report every malformed pod-spec input through ``add(parameter, what to change)``."""
    tolerations = _dicts("tolerations", spec.tolerations, add)
    for position, toleration in enumerate(tolerations):
        _check_toleration(position, toleration, add)
    if spec.affinity is not None:
        if not isinstance(spec.affinity, Mapping):
            add("affinity", f"got {spec.affinity!r}: pass a V1Affinity or its dict")
        elif unknown := sorted(str(k) for k in spec.affinity if k not in AFFINITY_KEYS):
            add("affinity", f"unknown keys {unknown}: use {', '.join(AFFINITY_KEYS)}")
    volumes = _dicts("volumes", spec.volumes, add)
    names = [v.get("name") for v in volumes]
    for name in names:
        if not is_dns1123_label(name):
            add("volumes", f"volume name {name!r} is not a DNS-1123 label (lowercase letters, digits, '-')")
    if duplicates := sorted({str(n) for n in names if names.count(n) > 1}):
        add("volumes", f"volume names {duplicates} appear more than once: each volume needs its own name")
    declared = set(names) | _template_volume_names(spec.job_template)
    for mount in _dicts("volume_mounts", spec.volume_mounts, add):
        path = mount.get("mountPath")
        if mount.get("name") not in declared:
            add(
                "volume_mounts",
                f"mount of {mount.get('name')!r} names no volume: add it to volumes (or job_template)",
            )
        if not isinstance(path, str) or not path.startswith("/"):
            add("volume_mounts", f"mountPath {path!r} of {mount.get('name')!r} must be an absolute path")
    for position, source in enumerate(_dicts("env_from", spec.env_from, add)):
        if not any(key in source for key in ("configMapRef", "secretRef")):
            add("env_from", f"item {position} ({source!r}) needs a configMapRef or a secretRef")
    _check_pull(spec, add)
    _check_pod_fields(spec, add)
    for parameter in ("security_context", "container_security_context"):
        value = getattr(spec, parameter)
        if value is not None and not isinstance(value, Mapping):
            add(
                parameter,
                f"got {value!r}: pass a V1{'Pod' if parameter == 'security_context' else ''}"
                "SecurityContext or its dict",
            )


def _check_pod_fields(spec: IndexedJobSpec, add: Problem) -> None:
    """init_containers, termination_grace_period, active_deadline_seconds, priority_class_name."""
    names: list[object] = []
    for position, container in enumerate(_dicts("init_containers", spec.init_containers, add)):
        name, image = container.get("name"), container.get("image")
        names.append(name)
        if not is_dns1123_label(name) or name == CONTAINER_NAME:
            add(
                "init_containers",
                f"item {position}: name {name!r} must be a DNS-1123 label (lowercase letters, digits, '-') "
                f"other than {CONTAINER_NAME!r} (the shard container)",
            )
        if not isinstance(image, str) or not image.strip():
            add("init_containers", f"item {position} ({name!r}) needs an image")
    if duplicates := sorted({str(n) for n in names if names.count(n) > 1}):
        add("init_containers", f"names {duplicates} appear more than once: each container needs its own name")
    grace = spec.termination_grace_period
    if grace is not None and not (isinstance(grace, int) and not isinstance(grace, bool) and grace >= 0):
        add(
            "termination_grace_period",
            f"got {grace!r}: set the seconds a shard has from SIGTERM to flush its checkpoint (0 or more)",
        )
    deadline = spec.active_deadline_seconds
    if deadline is not None and not (
        isinstance(deadline, int) and not isinstance(deadline, bool) and deadline > 0
    ):
        add(
            "active_deadline_seconds",
            f"got {deadline!r}: set a positive number of seconds a pod may run, or leave it unset (the "
            "task's deadline is deadline=, its timeout execution_timeout=)",
        )
    priority = spec.priority_class_name
    if priority is not None and not is_dns1123_subdomain(priority):
        add(
            "priority_class_name",
            f"{priority!r} is not a valid PriorityClass name: use lowercase letters, digits, '-' and '.' "
            "(a Kueue WorkloadPriorityClass is workload_priority_class=)",
        )


def _check_pull(spec: IndexedJobSpec, add: Problem) -> None:
    if spec.image_pull_policy is not None and spec.image_pull_policy not in IMAGE_PULL_POLICIES:
        add(
            "image_pull_policy",
            f"got {spec.image_pull_policy!r}: use one of {', '.join(IMAGE_PULL_POLICIES)}",
        )
    secrets = spec.image_pull_secrets
    if secrets is None:
        return
    if isinstance(secrets, str) or not isinstance(secrets, Sequence):
        add(
            "image_pull_secrets",
            f"got {secrets!r}: pass Secret names (a list, or one comma-separated string)",
        )
        return
    for name in secrets:
        if not is_dns1123_subdomain(name):
            add("image_pull_secrets", f"{name!r} is not a valid Secret name")


def _check_toleration(position: int, toleration: Mapping[str, Any], add: Problem) -> None:
    operator = toleration.get("operator", "Equal")
    if operator not in TOLERATION_OPERATORS:
        add("tolerations", f"item {position}: operator {operator!r} must be Equal or Exists")
    if operator == "Exists" and toleration.get("value"):
        add("tolerations", f"item {position}: operator Exists takes no value: remove it")
    effect = toleration.get("effect")
    if effect is not None and effect not in TOLERATION_EFFECTS:
        add(
            "tolerations",
            f"item {position}: effect {effect!r} must be one of {', '.join(TOLERATION_EFFECTS)}",
        )
    if not toleration.get("key") and operator != "Exists":
        add("tolerations", f"item {position}: a toleration without a key must use operator Exists")


def _dicts(parameter: str, value: object, add: Problem) -> list[Mapping[str, Any]]:
    """The items of a list-of-dicts parameter (none when unset); each malformed item is a problem."""
    if value is None:
        return []
    if isinstance(value, (str, Mapping)) or not isinstance(value, Sequence):
        add(parameter, f"got {value!r}: pass a list (of Kubernetes models or their dicts)")
        return []
    items = []
    for position, item in enumerate(value):
        if isinstance(item, Mapping):
            items.append(item)
        else:
            add(parameter, f"item {position} ({item!r}) is not a Kubernetes model or dict")
    return items


def _template_volume_names(template: Mapping[str, Any] | None) -> set[Any]:
    pod = as_mapping(as_mapping(as_mapping(as_mapping(template).get("spec")).get("template")).get("spec"))
    volumes = pod.get("volumes")
    return {as_mapping(v).get("name") for v in volumes} if isinstance(volumes, list) else set()
