"""What a task may run on a shared cluster: checks and safe defaults for the merged Job (template included).

A platform team sets the policy in Airflow's ``[kueue]`` config section, read so that a DAG file cannot loosen
it (``hooks.kueue_config``): allowed namespaces, ServiceAccounts (none by default: a pod running as a
namespace's ServiceAccount gets its rights, e.g. the worker's), LocalQueues and priority classes per
namespace, runtime classes, volume types beyond the restricted profile's and the Secrets, ConfigMaps and PVCs
a pod may name per namespace (``pod_references``), and whether privileged pods, host namespaces, hostPath
volumes or added capabilities may run at all (by default: no). ``violations`` lists every breach with what to
change; the operator fails before anything is created when there is one (``pod_isolation`` has the fields a
tenant could use against another). ``with_restricted_defaults`` fills in what the Kubernetes *restricted* Pod
Security profile asks where an ordinary image still runs: no service account token unless a service account is
asked for, ``allowPrivilegeEscalation: false`` and the RuntimeDefault seccomp profile (it does not force
``runAsNonRoot`` or drop all capabilities: many images run as root). Pure functions over dicts, no I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..names import PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL
from ..spec.job_template import as_mapping
from .pod_isolation import (
    container_secret_breaches,
    pod_breaches,
    priority_class_breach,
    security_profile_breaches,
)
from .pod_references import HOST_PATH, reference_breaches, volume_type_breaches
from .policy_allowlists import NamespacedNames, PolicyConfigError, allows, name_list

__all__ = ["POD_POLICY_OPTIONS", "PodPolicy", "PolicyConfigError", "violations", "with_restricted_defaults"]

POD_SPEC = "spec.template.spec"
HOST_NAMESPACE_FIELDS = ("hostNetwork", "hostPID", "hostIPC")
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
POD_POLICY_OPTIONS = (
    "allowed_namespaces",
    "allowed_service_accounts",
    "allowed_local_queues",
    "allowed_priority_classes",
    "allowed_pod_priority_classes",
    "allowed_runtime_classes",
    "allow_privileged_pods",
    "allow_host_namespaces",
    "allow_host_path_volumes",
    "allowed_capabilities",
    "allowed_volume_types",
    "allowed_secrets",
    "allowed_config_maps",
    "allowed_persistent_volume_claims",
)
DEFAULT_SERVICE_ACCOUNT = "default"


@dataclass(frozen=True)
class PodPolicy:
    """The ``[kueue]`` pod policy. ``"*"`` in a name list means "any"; the defaults are the options'."""

    allowed_namespaces: frozenset[str] = frozenset({"*"})
    allowed_service_accounts: frozenset[str] = frozenset()
    allow_privileged: bool = False
    allow_host_namespaces: bool = False
    allow_host_path: bool = False
    allowed_capabilities: frozenset[str] = frozenset()
    allowed_runtime_classes: frozenset[str] = frozenset()
    local_queues: NamespacedNames = field(default_factory=lambda: NamespacedNames.any("allowed_local_queues"))
    priority_classes: NamespacedNames = field(
        default_factory=lambda: NamespacedNames.any("allowed_priority_classes")
    )
    pod_priority_classes: NamespacedNames = field(
        default_factory=lambda: NamespacedNames("allowed_pod_priority_classes")
    )
    allowed_volume_types: frozenset[str] = frozenset()
    secrets: NamespacedNames = field(default_factory=lambda: NamespacedNames.any("allowed_secrets"))
    config_maps: NamespacedNames = field(default_factory=lambda: NamespacedNames.any("allowed_config_maps"))
    claims: NamespacedNames = field(
        default_factory=lambda: NamespacedNames.any("allowed_persistent_volume_claims")
    )

    @classmethod
    def from_options(cls, options: Mapping[str, str | None]) -> PodPolicy:
        """From ``[kueue]`` options as strings (formats in ``policy_allowlists``; booleans true/false).

        Raises PolicyConfigError on a malformed option."""

        def flag(key: str) -> bool:
            return (options.get(key) or "false").strip().lower() in ("1", "true", "yes", "on")

        def namespaced(key: str, default_any: bool) -> NamespacedNames:
            return NamespacedNames.parse(key, options.get(key), default_any)

        volume_types = name_list("allowed_volume_types", options.get("allowed_volume_types"), False)
        if HOST_PATH in volume_types:
            raise PolicyConfigError(
                "[kueue] allowed_volume_types lists hostPath: hostPath has its own switch; remove it from "
                "the list and set allow_host_path_volumes = true if the node's filesystem is really meant"
            )

        return cls(
            allowed_namespaces=name_list("allowed_namespaces", options.get("allowed_namespaces"), True),
            allowed_service_accounts=name_list(
                "allowed_service_accounts", options.get("allowed_service_accounts"), False
            ),
            allow_privileged=flag("allow_privileged_pods"),
            allow_host_namespaces=flag("allow_host_namespaces"),
            allow_host_path=flag("allow_host_path_volumes"),
            allowed_capabilities=name_list(
                "allowed_capabilities", options.get("allowed_capabilities"), False
            ),
            allowed_runtime_classes=name_list(
                "allowed_runtime_classes", options.get("allowed_runtime_classes"), False
            ),
            local_queues=namespaced("allowed_local_queues", True),
            priority_classes=namespaced("allowed_priority_classes", True),
            pod_priority_classes=namespaced("allowed_pod_priority_classes", False),
            allowed_volume_types=volume_types,
            secrets=namespaced("allowed_secrets", True),
            config_maps=namespaced("allowed_config_maps", True),
            claims=namespaced("allowed_persistent_volume_claims", True),
        )

    def queue_problems(
        self, namespace: object, queue_name: object, priority_class: object, what: str = "queue_name"
    ) -> list[str]:
        """The LocalQueue and Kueue WorkloadPriorityClass a task asks for, against the allowlists."""
        found = [
            self.local_queues.refusal(f"{what} (LocalQueue)", namespace, queue_name),
            self.priority_classes.refusal(
                "priority_class (WorkloadPriorityClass)", namespace, priority_class
            ),
        ]
        return [problem for problem in found if problem]


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
    if not account or allows(allowed, account):
        return None
    listed = ", ".join(sorted(allowed)) or "empty: no ServiceAccount is allowed"
    return (
        f"{field} {account!r} is not in [kueue] allowed_service_accounts ({listed}): a pod runs with its "
        "ServiceAccount's rights in the namespace; use a listed one, or have the platform team add this one "
        "(never the Airflow worker's)"
    )


def violations(job: Mapping[str, Any], policy: PodPolicy) -> list[str]:
    """Every way the Job breaks ``policy``, each naming the field and what to do; [] when it complies."""
    found: list[str] = []
    metadata = as_mapping(job.get("metadata"))
    namespace = metadata.get("namespace")
    if not allows(policy.allowed_namespaces, namespace):
        found.append(
            f"namespace {namespace!r} is not in [kueue] allowed_namespaces "
            f"({', '.join(sorted(policy.allowed_namespaces))}): run the task in one of them"
        )
    labels = as_mapping(metadata.get("labels"))
    found += policy.queue_problems(namespace, labels.get(QUEUE_NAME_LABEL), labels.get(PRIORITY_CLASS_LABEL))
    template = as_mapping(as_mapping(job.get("spec")).get("template"))
    pod = _pod_spec(job)
    if refused := service_account_violation(
        pod.get("serviceAccountName") or pod.get("serviceAccount"), policy
    ):
        found.append(refused)
    found += _priority_violations(namespace, pod.get("priorityClassName"), policy)
    found += pod_breaches(
        pod,
        as_mapping(as_mapping(template.get("metadata")).get("annotations")),
        policy.allowed_runtime_classes,
    )
    if not policy.allow_host_namespaces:
        found += [
            f"spec.template.spec.{key} is true: pods may not share the node's namespaces; remove it"
            for key in HOST_NAMESPACE_FIELDS
            if pod.get(key) is True
        ]
    found += volume_type_breaches(pod, policy.allowed_volume_types, policy.allow_host_path)
    references = {"Secret": policy.secrets, "ConfigMap": policy.config_maps}
    found += reference_breaches(pod, namespace, {**references, "PersistentVolumeClaim": policy.claims})
    found += _token_violations(pod, policy)
    found += _security_context_violations(pod, policy)
    for where, container in _containers(pod):
        found += _container_violations(where, container, policy)
    return found


def _token_violations(pod: Mapping[str, Any], policy: PodPolicy) -> list[str]:
    """``automountServiceAccountToken: true`` asks for the account's token even where the account (or the
    restricted defaults) turned it off: only for an allowed ServiceAccount."""
    if pod.get("automountServiceAccountToken") is not True:
        return []
    account = pod.get("serviceAccountName") or pod.get("serviceAccount") or DEFAULT_SERVICE_ACCOUNT
    if allows(policy.allowed_service_accounts, account):
        return []
    listed = ", ".join(sorted(policy.allowed_service_accounts)) or "none"
    return [
        f"{POD_SPEC}.automountServiceAccountToken is true for ServiceAccount {account!r}, which is not in "
        f"[kueue] allowed_service_accounts ({listed}): the token carries that account's rights in the "
        "namespace; remove it (or set it false), or run as an allowed ServiceAccount"
    ]


def _priority_violations(namespace: object, priority_class: object, policy: PodPolicy) -> list[str]:
    if not priority_class:
        return []
    if system := priority_class_breach(priority_class):
        return [system]
    refused = policy.pod_priority_classes.refusal(
        "spec.template.spec.priorityClassName (PriorityClass)", namespace, priority_class
    )
    return [refused] if refused else []


def _security_context_violations(pod: Mapping[str, Any], policy: PodPolicy) -> list[str]:
    found: list[str] = []
    context = as_mapping(pod.get("securityContext"))
    if as_mapping(context.get("seccompProfile")).get("type") == "Unconfined":
        found.append("spec.template.spec.securityContext.seccompProfile is Unconfined: use RuntimeDefault")
    if as_mapping(context.get("windowsOptions")).get("hostProcess") is True and not policy.allow_privileged:
        found.append("spec.template.spec.securityContext.windowsOptions.hostProcess is true: remove it")
    found += security_profile_breaches("spec.template.spec.securityContext", context)
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
    found += security_profile_breaches(f"{where}: securityContext", context)
    found += container_secret_breaches(where, container)
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
