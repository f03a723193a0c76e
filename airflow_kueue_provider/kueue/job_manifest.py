"""The batch/v1 Indexed Job the provider submits to a Kueue LocalQueue: inputs, validation, builder.

``validate`` catches what the API server or Kueue would reject, before anything is submitted, and says which
operator parameter to change. ``build_indexed_job`` turns a valid ``IndexedJobSpec`` into a Job dict.

The Job is *not* created suspended: Kueue's mutating webhook sets ``spec.suspend=true`` on create, and a
user-set ``suspend: true`` does not hold a Job anyway (Kueue admits and unsuspends it).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from airflow_kueue_provider.kueue.airflow_identity import (
    DAG_ID_LABEL,
    MAP_INDEX_LABEL,
    PROVIDER_LABEL_PREFIX,
    RUN_ID_LABEL,
    TASK_ID_LABEL,
    TRY_NUMBER_LABEL,
    AirflowIdentity,
    deterministic_job_name,
)
from airflow_kueue_provider.kueue.k8s_names import (
    MAX_JOB_NAME_LENGTH,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_env_var_name,
    is_qualified_name,
    is_valid_label_value,
    safe_label_value,
)
from airflow_kueue_provider.kueue.quantity import parse_quantity

__all__ = [
    "CONTAINER_NAME",
    "DAG_ID_LABEL",
    "DEFAULT_TTL_SECONDS_AFTER_FINISHED",
    "IGNORE_DISRUPTIONS_RULE",
    "MANAGED_BY_LABEL",
    "MANAGED_BY_VALUE",
    "MAP_INDEX_LABEL",
    "MAX_COMPLETIONS",
    "MAX_JOB_NAME_LENGTH",
    "MAX_PARALLELISM",
    "PRIORITY_CLASS_LABEL",
    "PROVIDER_LABEL_PREFIX",
    "QUEUE_NAME_LABEL",
    "RUN_ID_LABEL",
    "SPOT_TOLERATION",
    "TASK_ID_LABEL",
    "TRY_NUMBER_LABEL",
    "AirflowIdentity",
    "EnvInput",
    "IndexedJobSpec",
    "InvalidJobSpec",
    "build_indexed_job",
    "deterministic_job_name",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_qualified_name",
    "is_valid_label_value",
    "merge_job_template",
    "safe_label_value",
    "validate",
]
"""Also re-exported here: the Airflow identity (``airflow_identity``) and the name checks (``k8s_names``)."""

# -- label keys and limits --------------------------------------------------------------------------

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "airflow-kueue-provider"

SPOT_TOLERATION: Mapping[str, str] = {
    "key": "kubernetes.azure.com/scalesetpriority",
    "operator": "Equal",
    "value": "spot",
    "effect": "NoSchedule",
}
IGNORE_DISRUPTIONS_RULE: Mapping[str, Any] = {
    "action": "Ignore",
    "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
}
"""A spot eviction (or node drain / pod GC) marks pods ``DisruptionTarget``; ignoring it keeps it from
counting against ``backoffLimit`` / ``backoffLimitPerIndex``."""

CONTAINER_NAME = "main"
MAX_COMPLETIONS = 100_000
MAX_PARALLELISM = 10_000
DEFAULT_TTL_SECONDS_AFTER_FINISHED = 86_400

_RESOURCES_KEYS = ("requests", "limits", "claims")
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


# -- the inputs ---------------------------------------------------------------------------------------

EnvInput: TypeAlias = Mapping[str, str] | Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class IndexedJobSpec:
    """Everything the provider needs to build an Indexed Job. Field names follow the operator parameters."""

    name: str
    namespace: str
    queue_name: str
    image: str
    completions: int
    cmds: Sequence[str] | None = None
    """The container ``command`` (entrypoint), as in KubernetesPodOperator."""
    arguments: Sequence[str] | None = None
    """The container ``args``."""
    env: EnvInput | None = None
    """``{"NAME": "value"}`` or a list of Kubernetes EnvVar dicts (for ``valueFrom``)."""
    parallelism: int | None = None
    """Defaults to ``completions``."""
    resources: Mapping[str, Any] | None = None
    """``{"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {...}}``."""
    priority_class: str | None = None
    """A Kueue WorkloadPriorityClass name."""
    spot: bool = False
    backoff_limit_per_index: int | None = None
    max_failed_indexes: int | None = None
    ttl_seconds_after_finished: int | None = DEFAULT_TTL_SECONDS_AFTER_FINISHED
    labels: Mapping[str, str] | None = None
    """Pod template labels."""
    annotations: Mapping[str, str] | None = None
    """Pod template annotations."""
    job_labels: Mapping[str, str] | None = None
    """Extra labels on the Job object itself."""
    job_annotations: Mapping[str, str] | None = None
    """Extra annotations on the Job object itself."""
    service_account_name: str | None = None
    node_selector: Mapping[str, str] | None = None
    job_template: Mapping[str, Any] | None = None
    """A base batch/v1 Job; the parameters above are merged over it and win."""
    identity: AirflowIdentity | None = None

    @property
    def effective_parallelism(self) -> int:
        return self.completions if self.parallelism is None else self.parallelism


# -- validation ---------------------------------------------------------------------------------------


class InvalidJobSpec(ValueError):
    """The parameters cannot make a valid Indexed Job. ``problems`` lists (parameter, what to change)."""

    def __init__(self, problems: Sequence[tuple[str, str]]) -> None:
        self.problems: tuple[tuple[str, str], ...] = tuple(problems)
        lines = "\n".join(f"  - {parameter}: {text}" for parameter, text in self.problems)
        super().__init__(f"invalid KueueIndexedJob parameters:\n{lines}")

    @property
    def parameters(self) -> tuple[str, ...]:
        return tuple(parameter for parameter, _ in self.problems)


class _Problems:
    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def add(self, parameter: str, text: str) -> None:
        self.items.append((parameter, text))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate(spec: IndexedJobSpec) -> None:
    """Raise ``InvalidJobSpec`` listing every problem, each naming the parameter and what to change."""
    problems = _Problems()
    _check_names(spec, problems)
    _check_counts(spec, problems)
    _check_container(spec, problems)
    _check_resources(spec.resources, problems)
    _check_metadata(spec, problems)
    _check_identity(spec.identity, problems)
    _check_job_template(spec.job_template, problems)
    if problems.items:
        raise InvalidJobSpec(problems.items)


def _check_names(spec: IndexedJobSpec, problems: _Problems) -> None:
    if not is_dns1123_label(spec.name, MAX_JOB_NAME_LENGTH):
        problems.add(
            "name",
            f"{spec.name!r} is not a valid Indexed Job name: use 1-{MAX_JOB_NAME_LENGTH} lowercase letters, "
            "digits or '-', starting and ending with a letter or digit (deterministic_job_name() makes one)",
        )
    if not is_dns1123_label(spec.namespace):
        problems.add(
            "namespace",
            f"{spec.namespace!r} is not a valid namespace: use 1-63 lowercase letters, digits or '-', "
            "starting and ending with a letter or digit",
        )
    if not spec.queue_name:
        problems.add("queue_name", "is empty: set it to the name of a Kueue LocalQueue in the namespace")
    elif not (is_dns1123_subdomain(spec.queue_name) and is_valid_label_value(spec.queue_name)):
        problems.add(
            "queue_name",
            f"{spec.queue_name!r} is not a valid LocalQueue name: use at most 63 lowercase letters, digits, "
            "'-' or '.', starting and ending with a letter or digit",
        )
    if spec.priority_class is not None and not (
        is_dns1123_subdomain(spec.priority_class) and is_valid_label_value(spec.priority_class)
    ):
        problems.add(
            "priority_class",
            f"{spec.priority_class!r} is not a valid WorkloadPriorityClass name: use at most 63 lowercase "
            "letters, digits, '-' or '.', or leave it unset",
        )
    if spec.service_account_name is not None and not is_dns1123_subdomain(spec.service_account_name):
        problems.add(
            "service_account_name",
            f"{spec.service_account_name!r} is not a valid ServiceAccount name: "
            "use lowercase letters, digits, '-' or '.', or leave it unset",
        )


def _check_counts(spec: IndexedJobSpec, problems: _Problems) -> None:
    completions_ok = _is_int(spec.completions) and 1 <= spec.completions <= MAX_COMPLETIONS
    if not completions_ok:
        problems.add(
            "completions",
            f"got {spec.completions!r}: set an integer from 1 to {MAX_COMPLETIONS} (one index per shard)",
        )
    if spec.parallelism is not None:
        if not (_is_int(spec.parallelism) and 0 <= spec.parallelism <= MAX_PARALLELISM):
            problems.add(
                "parallelism",
                f"got {spec.parallelism!r}: set an integer from 0 to {MAX_PARALLELISM}, or leave it unset "
                "to run all completions at once",
            )
        elif completions_ok and spec.parallelism > spec.completions:
            problems.add(
                "parallelism",
                f"{spec.parallelism} is greater than completions={spec.completions}: lower it to at most "
                "completions (more pods than indexes would never start)",
            )
    if spec.backoff_limit_per_index is not None and not (
        _is_int(spec.backoff_limit_per_index) and spec.backoff_limit_per_index >= 0
    ):
        problems.add(
            "backoff_limit_per_index",
            f"got {spec.backoff_limit_per_index!r}: "
            "set a non-negative integer (retries per index) or leave it unset",
        )
    if spec.max_failed_indexes is not None:
        if spec.backoff_limit_per_index is None:
            problems.add(
                "max_failed_indexes",
                "requires backoff_limit_per_index (as in Kubernetes): set backoff_limit_per_index too, "
                "or leave max_failed_indexes unset",
            )
        if not (_is_int(spec.max_failed_indexes) and spec.max_failed_indexes >= 0):
            problems.add("max_failed_indexes", f"got {spec.max_failed_indexes!r}: set a non-negative integer")
        elif completions_ok and spec.max_failed_indexes > spec.completions:
            problems.add(
                "max_failed_indexes",
                f"{spec.max_failed_indexes} is greater than completions={spec.completions}: "
                "lower it to at most completions",
            )
    ttl = spec.ttl_seconds_after_finished
    if ttl is not None and not (_is_int(ttl) and ttl >= 0):
        problems.add(
            "ttl_seconds_after_finished",
            f"got {ttl!r}: set a non-negative number of seconds, or None to keep finished Jobs",
        )
    if not isinstance(spec.spot, bool):
        problems.add("spot", f"got {spec.spot!r}: set True or False")


def _check_container(spec: IndexedJobSpec, problems: _Problems) -> None:
    if not isinstance(spec.image, str) or not spec.image.strip():
        problems.add("image", "is empty: set the container image, e.g. 'ghcr.io/org/worker:1.2'")
    elif any(character.isspace() for character in spec.image):
        problems.add("image", f"{spec.image!r} contains whitespace: remove it")
    for parameter, value in (("cmds", spec.cmds), ("arguments", spec.arguments)):
        if value is None:
            continue
        if isinstance(value, str) or not isinstance(value, Sequence):
            problems.add(parameter, f"got {value!r}: pass a list of strings, e.g. ['python', 'run.py']")
        elif not all(isinstance(item, str) for item in value):
            problems.add(parameter, f"got {list(value)!r}: every item must be a string (quote numbers)")
    _check_env(spec.env, problems)


def _check_env(env: EnvInput | None, problems: _Problems) -> None:
    if env is None:
        return
    if isinstance(env, Mapping):
        for name, value in env.items():
            _check_env_name(name, problems)
            if not isinstance(value, str):
                problems.add("env", f"value of {name!r} is {value!r}: environment values must be strings")
        return
    if isinstance(env, str) or not isinstance(env, Sequence):
        problems.add("env", f"got {env!r}: pass a dict of name -> value or a list of EnvVar dicts")
        return
    for position, item in enumerate(env):
        if not isinstance(item, Mapping) or "name" not in item:
            problems.add("env", f"item {position} ({item!r}) is not an EnvVar dict with a 'name'")
            continue
        _check_env_name(item["name"], problems)
        if "value" in item and "valueFrom" in item:
            problems.add("env", f"{item['name']!r} sets both 'value' and 'valueFrom': keep one")
        if "value" in item and not isinstance(item["value"], str):
            problems.add(
                "env", f"value of {item['name']!r} is {item['value']!r}: environment values must be strings"
            )


def _check_env_name(name: object, problems: _Problems) -> None:
    if not is_env_var_name(name):
        problems.add(
            "env",
            f"{name!r} is not a valid variable name: use letters, digits, '_', '-' or '.', "
            "not starting with a digit",
        )


def _check_resources(resources: Mapping[str, Any] | None, problems: _Problems) -> None:
    if resources is None:
        return
    if not isinstance(resources, Mapping):
        problems.add("resources", f"got {resources!r}: pass a dict like {{'requests': {{'cpu': '1'}}}}")
        return
    unknown = sorted(str(key) for key in resources if key not in _RESOURCES_KEYS)
    if unknown:
        problems.add("resources", f"unknown keys {unknown}: use only 'requests', 'limits' and 'claims'")
    parsed: dict[str, dict[str, Any]] = {}
    for kind in ("requests", "limits"):
        section = resources.get(kind)
        if section is None:
            continue
        if not isinstance(section, Mapping):
            problems.add("resources", f"{kind} is {section!r}: pass a dict of resource name -> quantity")
            continue
        parsed[kind] = {}
        for resource, raw in section.items():
            if not is_qualified_name(resource):
                problems.add("resources", f"{kind} has an invalid resource name {resource!r}")
                continue
            try:
                quantity = parse_quantity(raw)
            except ValueError as error:
                problems.add("resources", f"{kind}.{resource}: {error}")
                continue
            if quantity < 0:
                problems.add("resources", f"{kind}.{resource}={raw!r} is negative: quantities must be >= 0")
                continue
            parsed[kind][resource] = quantity
    requests, limits = parsed.get("requests", {}), parsed.get("limits", {})
    for resource in sorted(set(requests) & set(limits)):
        if limits[resource] < requests[resource]:
            problems.add(
                "resources",
                f"limits.{resource} ({resources['limits'][resource]!r}) is below requests.{resource} "
                f"({resources['requests'][resource]!r}): raise the limit or lower the request",
            )
    claims = resources.get("claims")
    if claims is not None and (
        isinstance(claims, str)
        or not isinstance(claims, Sequence)
        or not all(isinstance(claim, Mapping) and isinstance(claim.get("name"), str) for claim in claims)
    ):
        problems.add("resources", f"claims is {claims!r}: pass a list of {{'name': <resource claim name>}}")


def _check_metadata(spec: IndexedJobSpec, problems: _Problems) -> None:
    for parameter in ("labels", "job_labels", "node_selector"):
        mapping = getattr(spec, parameter)
        if mapping is None:
            continue
        if not isinstance(mapping, Mapping):
            problems.add(parameter, f"got {mapping!r}: pass a dict of key -> value")
            continue
        for key, value in mapping.items():
            if not is_qualified_name(key):
                problems.add(
                    parameter, f"{key!r} is not a valid label key: use [prefix/]name, name <= 63 chars"
                )
            if not is_valid_label_value(value):
                problems.add(
                    parameter,
                    f"value {value!r} of {key!r} is not a valid label value: use at most 63 letters, digits, "
                    "'-', '_' or '.', starting and ending with a letter or digit",
                )
            if parameter != "node_selector" and _is_reserved_label(key):
                problems.add(
                    parameter, f"{key!r} is set by the provider: remove it (use the matching parameter)"
                )
    for parameter in ("annotations", "job_annotations"):
        mapping = getattr(spec, parameter)
        if mapping is None:
            continue
        if not isinstance(mapping, Mapping):
            problems.add(parameter, f"got {mapping!r}: pass a dict of key -> value")
            continue
        for key, value in mapping.items():
            if not is_qualified_name(key):
                problems.add(parameter, f"{key!r} is not a valid annotation key: use [prefix/]name")
            if not isinstance(value, str):
                problems.add(parameter, f"value of {key!r} is {value!r}: annotation values must be strings")


def _is_reserved_label(key: object) -> bool:
    return isinstance(key, str) and (
        key in (QUEUE_NAME_LABEL, PRIORITY_CLASS_LABEL, MANAGED_BY_LABEL)
        or key.startswith(PROVIDER_LABEL_PREFIX)
    )


def _check_identity(identity: AirflowIdentity | None, problems: _Problems) -> None:
    if identity is None:
        return
    if not isinstance(identity, AirflowIdentity):
        problems.add("identity", f"got {identity!r}: pass an AirflowIdentity")
        return
    for attribute in ("dag_id", "task_id", "run_id"):
        value = getattr(identity, attribute)
        if not isinstance(value, str) or not value:
            problems.add("identity", f"{attribute} is {value!r}: it must be a non-empty string")
    if not (_is_int(identity.try_number) and identity.try_number >= 0):
        problems.add("identity", f"try_number is {identity.try_number!r}: it must be an integer >= 0")
    if not (_is_int(identity.map_index) and identity.map_index >= -1):
        problems.add("identity", f"map_index is {identity.map_index!r}: it must be an integer >= -1")


def _check_job_template(template: Mapping[str, Any] | None, problems: _Problems) -> None:
    if template is None:
        return
    if not isinstance(template, Mapping):
        problems.add("job_template", f"got {type(template).__name__}: pass a batch/v1 Job as a dict")
        return
    if template.get("apiVersion") != "batch/v1" or template.get("kind") != "Job":
        problems.add(
            "job_template",
            f"is apiVersion={template.get('apiVersion')!r} kind={template.get('kind')!r}: "
            "it must be a batch/v1 Job (apiVersion: batch/v1, kind: Job)",
        )
    spec = template.get("spec", {})
    if not isinstance(spec, Mapping):
        problems.add("job_template", "spec is not a dict")
        return
    mode = spec.get("completionMode")
    if mode is not None and mode != "Indexed":
        problems.add(
            "job_template",
            f"spec.completionMode is {mode!r}: remove it or set 'Indexed' (this operator runs Indexed Jobs)",
        )
    pod_spec = _mapping(_mapping(spec.get("template")).get("spec"))
    containers = pod_spec.get("containers")
    if containers is not None and (
        not isinstance(containers, list) or not all(isinstance(c, Mapping) for c in containers)
    ):
        problems.add("job_template", "spec.template.spec.containers must be a list of container dicts")


# -- building -----------------------------------------------------------------------------------------


def build_indexed_job(spec: IndexedJobSpec) -> dict[str, Any]:
    """Validate ``spec`` and return the batch/v1 Job dict to create."""
    validate(spec)
    identity_labels = spec.identity.labels() if spec.identity else {}
    identity_annotations = spec.identity.annotations() if spec.identity else {}

    job_labels: dict[str, str] = {
        **(spec.job_labels or {}),
        **identity_labels,
        MANAGED_BY_LABEL: MANAGED_BY_VALUE,
    }
    job_labels[QUEUE_NAME_LABEL] = spec.queue_name
    if spec.priority_class:
        job_labels[PRIORITY_CLASS_LABEL] = spec.priority_class
    pod_labels = {**(spec.labels or {}), **identity_labels, MANAGED_BY_LABEL: MANAGED_BY_VALUE}

    job_spec: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": spec.completions,
        "parallelism": spec.effective_parallelism,
    }
    if spec.ttl_seconds_after_finished is not None:
        job_spec["ttlSecondsAfterFinished"] = spec.ttl_seconds_after_finished
    if spec.backoff_limit_per_index is not None:
        job_spec["backoffLimitPerIndex"] = spec.backoff_limit_per_index
    if spec.max_failed_indexes is not None:
        job_spec["maxFailedIndexes"] = spec.max_failed_indexes
    if spec.spot:
        job_spec["podFailurePolicy"] = {"rules": [copy.deepcopy(dict(IGNORE_DISRUPTIONS_RULE))]}

    pod_spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [_container(spec)]}
    if spec.service_account_name:
        pod_spec["serviceAccountName"] = spec.service_account_name
    if spec.node_selector:
        pod_spec["nodeSelector"] = dict(spec.node_selector)
    if spec.spot:
        pod_spec["tolerations"] = [dict(SPOT_TOLERATION)]
    pod_metadata: dict[str, Any] = {"labels": pod_labels}
    if spec.annotations:
        pod_metadata["annotations"] = dict(spec.annotations)
    job_spec["template"] = {"metadata": pod_metadata, "spec": pod_spec}

    metadata: dict[str, Any] = {"name": spec.name, "namespace": spec.namespace, "labels": job_labels}
    annotations = {**(spec.job_annotations or {}), **identity_annotations}
    if annotations:
        metadata["annotations"] = annotations
    job: dict[str, Any] = {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": job_spec}
    if spec.job_template is not None:
        job = merge_job_template(spec.job_template, job)
    return job


def _container(spec: IndexedJobSpec) -> dict[str, Any]:
    container: dict[str, Any] = {"name": CONTAINER_NAME, "image": spec.image}
    if spec.cmds is not None:
        container["command"] = list(spec.cmds)
    if spec.arguments is not None:
        container["args"] = list(spec.arguments)
    if spec.env:
        container["env"] = _env_list(spec.env)
    if spec.resources:
        container["resources"] = copy.deepcopy(dict(spec.resources))
    return container


def _env_list(env: EnvInput) -> list[dict[str, Any]]:
    if isinstance(env, Mapping):
        return [{"name": name, "value": value} for name, value in env.items()]
    return [copy.deepcopy(dict(item)) for item in env]


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
    base_spec = _mapping(base.get("spec"))
    job_spec = _mapping(job.get("spec"))
    merged_spec = merged["spec"]

    base_pod = _mapping(_mapping(base_spec.get("template")).get("spec"))
    job_pod = _mapping(_mapping(job_spec.get("template")).get("spec"))
    merged_pod = merged_spec["template"]["spec"]
    merged_pod["containers"] = _merge_containers(base_pod.get("containers"), job_pod.get("containers", []))
    if "tolerations" in base_pod or "tolerations" in job_pod:
        tolerations = list(base_pod.get("tolerations") or [])
        tolerations += [t for t in job_pod.get("tolerations") or [] if t not in tolerations]
        merged_pod["tolerations"] = copy.deepcopy(tolerations)

    base_rules = _mapping(base_spec.get("podFailurePolicy")).get("rules") or []
    job_rules = _mapping(job_spec.get("podFailurePolicy")).get("rules") or []
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
        labels = _mapping(_mapping(spec.get("template")).get("metadata")).get("labels")
        if isinstance(labels, dict):
            for key in _CONTROLLER_LABELS:
                labels.pop(key, None)
    return base


def _merge_containers(base: object, built: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    containers = [copy.deepcopy(dict(c)) for c in base] if isinstance(base, list) else []
    for container in built:
        position = next((i for i, c in enumerate(containers) if c.get("name") == container.get("name")), None)
        if position is None and containers and not any(c.get("name") == CONTAINER_NAME for c in containers):
            position = 0
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


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
