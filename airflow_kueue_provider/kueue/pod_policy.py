"""What a task may run on a shared cluster: checks and safe defaults for the merged Job (template included).

A platform team sets the policy in Airflow's ``[kueue]`` config section (DAG authors cannot loosen it):
allowed namespaces and service accounts, and whether privileged pods, host namespaces, hostPath volumes or
added capabilities may run at all (by default: no). ``violations`` lists every breach with what to change;
the operator fails before anything is created when there is one. ``with_restricted_defaults`` fills in what
the Kubernetes *restricted* Pod Security profile asks where an ordinary image still runs: no service account
token unless a service account is asked for, ``allowPrivilegeEscalation: false`` and the RuntimeDefault
seccomp profile (it does not force ``runAsNonRoot`` or drop all capabilities: many images run as root).
Pure functions over dicts, no I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .job_template import as_mapping

HOST_NAMESPACE_FIELDS = ("hostNetwork", "hostPID", "hostIPC")
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


@dataclass(frozen=True)
class PodPolicy:
    """The ``[kueue]`` pod policy. ``None`` in an allow-list means "any"."""

    allowed_namespaces: frozenset[str] | None = None
    allowed_service_accounts: frozenset[str] | None = None
    allow_privileged: bool = False
    allow_host_namespaces: bool = False
    allow_host_path: bool = False
    allowed_capabilities: frozenset[str] = frozenset()

    @classmethod
    def from_options(cls, options: Mapping[str, str | None]) -> PodPolicy:
        """From ``[kueue]`` options as strings: comma-separated lists, booleans as true/false."""

        def names(key: str) -> frozenset[str] | None:
            raw = (options.get(key) or "").strip()
            return frozenset(n.strip() for n in raw.split(",") if n.strip()) if raw else None

        def flag(key: str) -> bool:
            return (options.get(key) or "false").strip().lower() in ("1", "true", "yes", "on")

        return cls(
            allowed_namespaces=names("allowed_namespaces"),
            allowed_service_accounts=names("allowed_service_accounts"),
            allow_privileged=flag("allow_privileged_pods"),
            allow_host_namespaces=flag("allow_host_namespaces"),
            allow_host_path=flag("allow_host_path_volumes"),
            allowed_capabilities=names("allowed_capabilities") or frozenset(),
        )


def _pod_spec(job: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_mapping(as_mapping(as_mapping(job.get("spec")).get("template")).get("spec"))


def _containers(pod: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for kind in CONTAINER_LISTS:
        items = pod.get(kind)
        for container in items if isinstance(items, list) else []:
            container = as_mapping(container)
            yield f"{kind}[{container.get('name', '?')}]", container


def service_account_violation(
    account: object, policy: PodPolicy, field: str = "serviceAccountName"
) -> str | None:
    """Why the pods may not run as ``account`` (None: they may, or none is asked for)."""
    allowed = policy.allowed_service_accounts
    if not account or allowed is None or account in allowed:
        return None
    return (
        f"{field} {account!r} is not in [kueue] allowed_service_accounts ({', '.join(sorted(allowed))}): "
        "use one of them"
    )


def violations(job: Mapping[str, Any], policy: PodPolicy) -> list[str]:
    """Every way the Job breaks ``policy``, each naming the field and what to do; [] when it complies."""
    found: list[str] = []
    namespace = as_mapping(job.get("metadata")).get("namespace")
    if policy.allowed_namespaces is not None and namespace not in policy.allowed_namespaces:
        found.append(
            f"namespace {namespace!r} is not in [kueue] allowed_namespaces "
            f"({', '.join(sorted(policy.allowed_namespaces))}): run the task in one of them"
        )
    pod = _pod_spec(job)
    if refused := service_account_violation(
        pod.get("serviceAccountName") or pod.get("serviceAccount"), policy
    ):
        found.append(refused)
    if not policy.allow_host_namespaces:
        found += [
            f"spec.template.spec.{key} is true: pods may not share the node's namespaces; remove it"
            for key in HOST_NAMESPACE_FIELDS
            if pod.get(key) is True
        ]
    volumes = pod.get("volumes")
    for volume in volumes if isinstance(volumes, list) and not policy.allow_host_path else []:
        host_path = as_mapping(volume).get("hostPath")
        if host_path is not None:
            name, path = as_mapping(volume).get("name"), as_mapping(host_path).get("path")
            found.append(
                f"volume {name!r} is a hostPath ({path}): "
                "pods may not mount the node's filesystem; use a PVC, emptyDir, ConfigMap or Secret"
            )
    found += _security_context_violations(pod, policy)
    for where, container in _containers(pod):
        found += _container_violations(where, container, policy)
    return found


def _security_context_violations(pod: Mapping[str, Any], policy: PodPolicy) -> list[str]:
    found: list[str] = []
    context = as_mapping(pod.get("securityContext"))
    if as_mapping(context.get("seccompProfile")).get("type") == "Unconfined":
        found.append("spec.template.spec.securityContext.seccompProfile is Unconfined: use RuntimeDefault")
    if as_mapping(context.get("windowsOptions")).get("hostProcess") is True and not policy.allow_privileged:
        found.append("spec.template.spec.securityContext.windowsOptions.hostProcess is true: remove it")
    return found


def _container_violations(where: str, container: Mapping[str, Any], policy: PodPolicy) -> list[str]:
    found: list[str] = []
    context = as_mapping(container.get("securityContext"))
    if context.get("privileged") is True and not policy.allow_privileged:
        found.append(
            f"{where}: securityContext.privileged is true: privileged pods are not allowed; remove it"
        )
    if context.get("allowPrivilegeEscalation") is True and not policy.allow_privileged:
        found.append(f"{where}: securityContext.allowPrivilegeEscalation is true: set it false or remove it")
    added = as_mapping(context.get("capabilities")).get("add")
    extra = sorted(set(added) - policy.allowed_capabilities) if isinstance(added, list) else []
    if extra:
        found.append(
            f"{where}: securityContext.capabilities.add {extra} is not allowed "
            "([kueue] allowed_capabilities); remove them"
        )
    if context.get("procMount") not in (None, "Default"):
        found.append(f"{where}: securityContext.procMount is {context.get('procMount')!r}: remove it")
    if as_mapping(context.get("seccompProfile")).get("type") == "Unconfined":
        found.append(f"{where}: securityContext.seccompProfile is Unconfined: use RuntimeDefault")
    if as_mapping(context.get("windowsOptions")).get("hostProcess") is True and not policy.allow_privileged:
        found.append(f"{where}: securityContext.windowsOptions.hostProcess is true: remove it")
    ports = container.get("ports")
    if not policy.allow_host_namespaces and isinstance(ports, list):
        found += [
            f"{where}: port {as_mapping(p).get('containerPort')} sets hostPort: pods may not bind node ports"
            for p in ports
            if as_mapping(p).get("hostPort")
        ]
    return found


def with_restricted_defaults(job: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``job`` with the restricted-profile defaults filled in where the user set nothing."""
    out: dict[str, Any] = copy.deepcopy(dict(job))
    pod = out.setdefault("spec", {}).setdefault("template", {}).setdefault("spec", {})
    if "automountServiceAccountToken" not in pod and not pod.get("serviceAccountName"):
        pod["automountServiceAccountToken"] = False
    context = pod.setdefault("securityContext", {})
    context.setdefault("seccompProfile", {"type": "RuntimeDefault"})
    for kind in ("initContainers", "containers"):
        for container in pod.get(kind) or []:
            if isinstance(container, dict):
                container.setdefault("securityContext", {}).setdefault("allowPrivilegeEscalation", False)
    return out
