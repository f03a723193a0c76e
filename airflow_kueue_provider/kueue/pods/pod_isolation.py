"""Pod fields that reach past the pod's own sandbox or queue, refused by the pod policy (``pod_policy``).

Each check returns the breaches as sentences naming the field and the fix. The reference for what is safe
is the Kubernetes Pod Security **baseline** profile (AppArmor, SELinux types, sysctls); the rest are what a
tenant could use against another on a shared cluster:

- ``nodeName`` skips the scheduler, and with it the ResourceFlavor's node selector and taints Kueue set;
- ``priorityClassName`` lets kube-scheduler preempt other tenants' admitted pods outside Kueue
  (``system-*`` classes never, others only from ``[kueue] allowed_pod_priority_classes``);
- ``runtimeClassName`` picks another sandbox (only from ``[kueue] allowed_runtime_classes``);
- a reference to a Secret the provider creates for another Job's pods (their checkpoint credential), and a
  projected ServiceAccount token (a credential for an audience the task does not choose).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from ..checkpoints.checkpoint_access import ACCESS_ID_HEX, SAS_SECRET_INFIX, sas_secret_kind_tags
from ..spec.job_template import as_mapping

# Pod Security Standards, baseline profile (Kubernetes 1.29+).
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    }
)
SAFE_SELINUX_TYPES = frozenset(
    {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
)
APPARMOR_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/"
SAFE_APPARMOR_ANNOTATION = ("runtime/default", "localhost/")
SYSTEM_PRIORITY_PREFIX = "system-"
# The Secrets the provider creates for a Job's pods (``checkpoint_access.sas_secret_name``:
# ``<job>-checkpoint-<access id>``, ``<jobset>-checkpoint-jobset-<access id>``; ``<job>-checkpoint``
# before the access id). Their names are not derivable, but a tenant who can read Jobs reads them off
# another Job's pod template.
_PROVIDER_SECRET = re.compile(
    rf"(?:{re.escape(SAS_SECRET_INFIX)}(?:{'|'.join(map(re.escape, sas_secret_kind_tags()))})"
    rf"[0-9a-f]{{{ACCESS_ID_HEX}}}|-checkpoint)$"
)
POD = "spec.template.spec"


def is_provider_secret(name: object) -> bool:
    """A Secret the provider creates for one Job's pods: no other pod may name it."""
    return isinstance(name, str) and _PROVIDER_SECRET.search(name) is not None


def security_profile_breaches(where: str, context: Mapping[str, Any]) -> list[str]:
    """AppArmor and SELinux settings of a pod's or container's securityContext beyond baseline."""
    found: list[str] = []
    if as_mapping(context.get("appArmorProfile")).get("type") == "Unconfined":
        found.append(f"{where}.appArmorProfile is Unconfined: use RuntimeDefault (or a Localhost profile)")
    selinux = as_mapping(context.get("seLinuxOptions"))
    if (kind := selinux.get("type") or "") not in SAFE_SELINUX_TYPES:
        found.append(
            f"{where}.seLinuxOptions.type is {kind!r}: use one of "
            f"{', '.join(sorted(t for t in SAFE_SELINUX_TYPES if t))} or remove it"
        )
    found += [
        f"{where}.seLinuxOptions.{key} is set: remove it (only the type may be set)"
        for key in ("user", "role")
        if selinux.get(key)
    ]
    return found


def pod_breaches(
    pod: Mapping[str, Any], annotations: Mapping[str, Any], runtime_classes: frozenset[str]
) -> list[str]:
    """The pod-level fields: placement, sandbox, AppArmor annotations, sysctls, Secrets and tokens."""
    found: list[str] = []
    if pod.get("nodeName"):
        found.append(
            f"{POD}.nodeName is set ({pod['nodeName']!r}): it bypasses Kueue's flavor placement; remove it "
            "and use node_selector / tolerations within the queue's flavors"
        )
    runtime = pod.get("runtimeClassName")
    if runtime and "*" not in runtime_classes and runtime not in runtime_classes:
        found.append(
            f"{POD}.runtimeClassName {runtime!r} is not in [kueue] allowed_runtime_classes "
            f"({', '.join(sorted(runtime_classes)) or 'none'}): remove it, or have the platform team list it"
        )
    for key, value in annotations.items():
        if str(key).startswith(APPARMOR_ANNOTATION_PREFIX) and not str(value).startswith(
            SAFE_APPARMOR_ANNOTATION
        ):
            found.append(
                f"spec.template.metadata.annotations[{key}] is {value!r}: use runtime/default "
                "(or localhost/<profile>)"
            )
    context = as_mapping(pod.get("securityContext"))
    sysctls = context.get("sysctls")
    for sysctl in sysctls if isinstance(sysctls, list) else []:
        name = as_mapping(sysctl).get("name")
        if name not in SAFE_SYSCTLS:
            found.append(
                f"{POD}.securityContext.sysctls {name!r} is not a Pod Security baseline sysctl: remove it "
                f"(allowed: {', '.join(sorted(SAFE_SYSCTLS))})"
            )
    found += _volume_breaches(pod)
    return found


def priority_class_breach(name: object) -> str | None:
    """A ``system-*`` PriorityClass: never, whatever the allowlist says."""
    if isinstance(name, str) and name.startswith(SYSTEM_PRIORITY_PREFIX):
        return (
            f"{POD}.priorityClassName {name!r} is a system class: kube-scheduler would preempt other "
            "tenants' pods for it; remove it (set the Workload's priority with priority_class instead)"
        )
    return None


def container_secret_breaches(where: str, container: Mapping[str, Any]) -> list[str]:
    """``env[].valueFrom.secretKeyRef`` and ``envFrom[].secretRef`` naming a provider Secret."""
    names: list[tuple[str, object]] = []
    env = container.get("env")
    for item in env if isinstance(env, list) else []:
        ref = as_mapping(as_mapping(as_mapping(item).get("valueFrom")).get("secretKeyRef"))
        names.append((f"env[{as_mapping(item).get('name')}].valueFrom.secretKeyRef", ref.get("name")))
    env_from = container.get("envFrom")
    for item in env_from if isinstance(env_from, list) else []:
        names.append(("envFrom.secretRef", as_mapping(as_mapping(item).get("secretRef")).get("name")))
    return [_secret_refusal(f"{where}: {field}", name) for field, name in names if is_provider_secret(name)]


def _volume_breaches(pod: Mapping[str, Any]) -> list[str]:
    found: list[str] = []
    volumes = pod.get("volumes")
    for volume in volumes if isinstance(volumes, list) else []:
        volume = as_mapping(volume)
        where = f"{POD}.volumes[{volume.get('name')}]"
        if is_provider_secret(name := as_mapping(volume.get("secret")).get("secretName")):
            found.append(_secret_refusal(f"{where}.secret", name))
        for source in _projected_sources(volume):
            if is_provider_secret(name := as_mapping(source.get("secret")).get("name")):
                found.append(_secret_refusal(f"{where}.projected.sources.secret", name))
            if source.get("serviceAccountToken") is not None:
                found.append(
                    f"{where}.projected.sources.serviceAccountToken is set: pods may not mint "
                    "ServiceAccount tokens; remove it (checkpoints reach Blob through the provider's SAS)"
                )
    return found


def _projected_sources(volume: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    sources = as_mapping(volume.get("projected")).get("sources")
    for source in sources if isinstance(sources, list) else []:
        yield as_mapping(source)


def _secret_refusal(where: str, name: object) -> str:
    return (
        f"{where} names {name!r}, a Secret the provider creates for one Job's pods (its checkpoint "
        "credential): remove it; the provider hands this task's own pods theirs"
    )
