"""The pod policy's allow-lists of what a pod may mount and read: volume types, and the Secrets, ConfigMaps
and PersistentVolumeClaims it names (used by ``pod_policy.violations``; pure functions over dicts).

Volume types are an allow-list, as the Pod Security *restricted* profile's: a type not listed is refused,
so a type the API grows later (or one a denylist forgot: ``gitRepo`` runs git on the node, CVE-2024-10220;
``nfs``; ``flexVolume`` runs a node binary) never passes unseen. ``hostPath`` stays under its own switch.

References: in a namespace shared by teams the operator cannot know who owns a Secret, ConfigMap or PVC, so
the platform says it per namespace (``allowed_secrets``, ``allowed_config_maps``,
``allowed_persistent_volume_claims``: ``team-a:team-a-*``). Unset, any name passes (a namespace per team
needs no list); set, every reference is named in the refusal of one the list lacks.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..spec.job_template import as_mapping
from .policy_allowlists import NamespacedNames, allows

# Pod Security Standards, restricted profile: the volume types it allows (pod-security-admission's
# restrictedVolumes check). hostPath is governed by [kueue] allow_host_path_volumes, never by the list.
RESTRICTED_VOLUME_TYPES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)
HOST_PATH = "hostPath"
_WHY_NOT = {
    "gitRepo": "git runs on the node as root (CVE-2024-10220); clone in an init container into an emptyDir",
    "flexVolume": "it runs a driver binary on the node",
    "nfs": "the node mounts any server the pod names",
}
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
POD = "spec.template.spec"


@dataclass(frozen=True)
class Reference:
    """One name a pod reads: ``kind`` is Secret, ConfigMap or PersistentVolumeClaim; ``where`` its field."""

    kind: str
    name: str
    where: str


def volume_type_breaches(
    pod: Mapping[str, Any], extra_types: frozenset[str], allow_host_path: bool
) -> list[str]:
    """Each volume whose type is neither restricted-safe nor added by ``[kueue] allowed_volume_types``."""
    allowed = RESTRICTED_VOLUME_TYPES | extra_types
    listed = ", ".join(sorted(allowed - {"*"}))
    found: list[str] = []
    volumes = pod.get("volumes")
    for volume in volumes if isinstance(volumes, list) else []:
        volume = as_mapping(volume)
        name = volume.get("name")
        for kind in sorted(str(k) for k in volume if k != "name"):
            if kind == HOST_PATH:
                if not allow_host_path:
                    path = as_mapping(volume.get(kind)).get("path")
                    found.append(
                        f"volume {name!r} is a hostPath ({path}): pods may not mount the node's filesystem; "
                        "use a PVC, emptyDir, ConfigMap or Secret ([kueue] allow_host_path_volumes allows it)"
                    )
            elif not allows(allowed, kind):
                why = f" ({_WHY_NOT[kind]})" if kind in _WHY_NOT else ""
                found.append(
                    f"{POD}.volumes[{name}] is a {kind} volume{why}: only {listed} volumes may be used; "
                    f"use one of them, or have the platform team add {kind!r} to [kueue] allowed_volume_types"
                )
    return found


def pod_references(pod: Mapping[str, Any]) -> Iterator[Reference]:
    """Every Secret, ConfigMap and PVC the pod names in volumes, env, envFrom and imagePullSecrets."""
    volumes = pod.get("volumes")
    for volume in volumes if isinstance(volumes, list) else []:
        volume = as_mapping(volume)
        where = f"{POD}.volumes[{volume.get('name')}]"
        yield from _named("Secret", as_mapping(volume.get("secret")).get("secretName"), f"{where}.secret")
        yield from _named("ConfigMap", as_mapping(volume.get("configMap")).get("name"), f"{where}.configMap")
        claim = as_mapping(volume.get("persistentVolumeClaim")).get("claimName")
        yield from _named("PersistentVolumeClaim", claim, f"{where}.persistentVolumeClaim")
        sources = as_mapping(volume.get("projected")).get("sources")
        for source in sources if isinstance(sources, list) else []:
            source = as_mapping(source)
            yield from _named(
                "Secret", as_mapping(source.get("secret")).get("name"), f"{where}.projected.sources.secret"
            )
            yield from _named(
                "ConfigMap",
                as_mapping(source.get("configMap")).get("name"),
                f"{where}.projected.sources.configMap",
            )
    pulls = pod.get("imagePullSecrets")
    for item in pulls if isinstance(pulls, list) else []:
        yield from _named("Secret", as_mapping(item).get("name"), f"{POD}.imagePullSecrets")
    for kind in CONTAINER_LISTS:
        items = pod.get(kind)
        for container in items if isinstance(items, list) else []:
            container = as_mapping(container)
            yield from _container_references(f"{kind}[{container.get('name', '?')}]", container)


def _container_references(where: str, container: Mapping[str, Any]) -> Iterator[Reference]:
    env = container.get("env")
    for item in env if isinstance(env, list) else []:
        item = as_mapping(item)
        source = as_mapping(item.get("valueFrom"))
        field = f"{where}: env[{item.get('name')}].valueFrom"
        ref = as_mapping(source.get("secretKeyRef")).get("name")
        yield from _named("Secret", ref, f"{field}.secretKeyRef")
        ref = as_mapping(source.get("configMapKeyRef")).get("name")
        yield from _named("ConfigMap", ref, f"{field}.configMapKeyRef")
    env_from = container.get("envFrom")
    for item in env_from if isinstance(env_from, list) else []:
        item = as_mapping(item)
        yield from _named(
            "Secret", as_mapping(item.get("secretRef")).get("name"), f"{where}: envFrom.secretRef"
        )
        ref = as_mapping(item.get("configMapRef")).get("name")
        yield from _named("ConfigMap", ref, f"{where}: envFrom.configMapRef")


def _named(kind: str, name: object, where: str) -> Iterator[Reference]:
    if isinstance(name, str) and name:
        yield Reference(kind, name, where)


def reference_breaches(
    pod: Mapping[str, Any], namespace: object, allowed: Mapping[str, NamespacedNames]
) -> list[str]:
    """Each reference whose kind has an allow-list (``allowed``: kind to its option) that lacks the name."""
    found: list[str] = []
    for ref in pod_references(pod):
        names = allowed.get(ref.kind)
        if names is not None and (refused := names.refusal(f"{ref.where}: {ref.kind}", namespace, ref.name)):
            found.append(
                f"{refused} (a shared namespace's {ref.kind}s may be another team's; the list says whose)"
            )
    return found
