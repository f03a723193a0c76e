"""Validation of an ``IndexedJobSpec``: what the API server or Kueue would reject, caught before submission.

Every problem names the operator parameter to change and how, and all problems are reported at once.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from airflow_kueue_provider.kueue.airflow_identity import AirflowIdentity
from airflow_kueue_provider.kueue.job_spec import (
    MAX_COMPLETIONS,
    MAX_PARALLELISM,
    EnvInput,
    IndexedJobSpec,
    InvalidJobSpec,
)
from airflow_kueue_provider.kueue.job_template import as_mapping
from airflow_kueue_provider.kueue.k8s_names import (
    MAX_JOB_NAME_LENGTH,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_env_var_name,
    is_qualified_name,
    is_valid_label_value,
)
from airflow_kueue_provider.kueue.pod_spec_checks import check_pod_spec_inputs
from airflow_kueue_provider.kueue.quantity import parse_quantity
from airflow_kueue_provider.kueue.retry_policy import exit_code_problems

from .names import MANAGED_BY_LABEL, PRIORITY_CLASS_LABEL, PROVIDER_LABEL_PREFIX, QUEUE_NAME_LABEL

_RESOURCES_KEYS = ("requests", "limits", "claims")


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
    check_pod_spec_inputs(spec, problems.add)
    if problems.items:
        raise InvalidJobSpec(problems.items)


UNTEMPLATED_POD_INPUTS = (
    "tolerations",
    "affinity",
    "image_pull_secrets",
    "image_pull_policy",
    "security_context",
    "container_security_context",
    "init_containers",
    "termination_grace_period",
    "active_deadline_seconds",
    "priority_class_name",
)
"""Pod-spec inputs no operator renders with Jinja: checked when the DAG is parsed."""


def validate_untemplated(spec: IndexedJobSpec) -> None:
    """The checks of ``validate`` that no template can change (counts, retries, resources, the pod-spec
    inputs of ``UNTEMPLATED_POD_INPUTS``), for an operator to run when the DAG is parsed: a bad value then
    fails the DAG's import (``airflow dags list-import-errors``, a DagBag test) instead of a run."""
    problems = _Problems()
    _check_counts(spec, problems)
    _check_resources(spec.resources, problems)
    check_pod_spec_inputs(
        IndexedJobSpec(
            name=spec.name,
            namespace=spec.namespace,
            queue_name=spec.queue_name,
            image=spec.image,
            completions=spec.completions,
            **{name: getattr(spec, name) for name in UNTEMPLATED_POD_INPUTS},
        ),
        problems.add,
    )
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
    if spec.min_parallelism is not None:
        low, high = 1, spec.effective_parallelism - 1
        if not (_is_int(spec.min_parallelism) and _is_int(high) and low <= spec.min_parallelism <= high):
            problems.add(
                "min_parallelism",
                f"got {spec.min_parallelism!r}: set an integer from 1 to parallelism - 1 ({high}), the "
                "fewest pods Kueue may start the Job with when all of them do not fit (Kueue's partial "
                "admission), or leave it unset",
            )
    if spec.backoff_limit_per_index is not None and not (
        _is_int(spec.backoff_limit_per_index) and spec.backoff_limit_per_index >= 0
    ):
        problems.add(
            "backoff_limit_per_index",
            f"got {spec.backoff_limit_per_index!r}: "
            "set a non-negative integer (retries per index) or leave it unset",
        )
    for problem in exit_code_problems(spec.non_retriable_exit_codes, spec.backoff_limit_per_index):
        problems.add("non_retriable_exit_codes", problem)
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
    for parameter, key, value in _entries(spec, ("labels", "job_labels", "node_selector"), problems):
        if not is_qualified_name(key):
            problems.add(parameter, f"{key!r} is not a valid label key: use [prefix/]name, name <= 63 chars")
        if not is_valid_label_value(value):
            problems.add(
                parameter,
                f"value {value!r} of {key!r} is not a valid label value: use at most 63 letters, digits, "
                "'-', '_' or '.', starting and ending with a letter or digit",
            )
        if parameter != "node_selector" and _is_reserved_label(key):
            problems.add(parameter, f"{key!r} is set by the provider: remove it (use the matching parameter)")
    for parameter, key, value in _entries(spec, ("annotations", "job_annotations"), problems):
        if not is_qualified_name(key):
            problems.add(parameter, f"{key!r} is not a valid annotation key: use [prefix/]name")
        if not isinstance(value, str):
            problems.add(parameter, f"value of {key!r} is {value!r}: annotation values must be strings")


def _entries(
    spec: IndexedJobSpec, parameters: Sequence[str], problems: _Problems
) -> Iterator[tuple[str, object, object]]:
    """(parameter, key, value) of each dict parameter that is set; one that is not a dict is a problem."""
    for parameter in parameters:
        mapping = getattr(spec, parameter)
        if mapping is None:
            continue
        if not isinstance(mapping, Mapping):
            problems.add(parameter, f"got {mapping!r}: pass a dict of key -> value")
            continue
        for key, value in mapping.items():
            yield parameter, key, value


def _is_reserved_label(key: object) -> bool:
    return isinstance(key, str) and (
        key in (QUEUE_NAME_LABEL, PRIORITY_CLASS_LABEL, MANAGED_BY_LABEL)
        or key.startswith(PROVIDER_LABEL_PREFIX)
    )


def _is_identity_key(key: object) -> bool:
    """Keys that decide ownership. (A template's queue-name label is simply replaced by ``queue_name``.)"""
    return isinstance(key, str) and (key == MANAGED_BY_LABEL or key.startswith(PROVIDER_LABEL_PREFIX))


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
    pod_metadata = as_mapping(as_mapping(spec.get("template")).get("metadata"))
    for where, metadata in (
        ("metadata", as_mapping(template.get("metadata"))),
        ("pod metadata", pod_metadata),
    ):
        for kind in ("labels", "annotations"):
            reserved = sorted(k for k in as_mapping(metadata.get(kind)) if _is_identity_key(k))
            if reserved:
                problems.add(
                    "job_template",
                    f"{where}.{kind} sets {', '.join(reserved)}, which only the provider sets (they say "
                    "which task instance a Job belongs to, and what it may adopt or delete): remove them",
                )
    mode = spec.get("completionMode")
    if mode is not None and mode != "Indexed":
        problems.add(
            "job_template",
            f"spec.completionMode is {mode!r}: remove it or set 'Indexed' (this operator runs Indexed Jobs)",
        )
    pod_spec = as_mapping(as_mapping(spec.get("template")).get("spec"))
    containers = pod_spec.get("containers")
    if containers is not None and (
        not isinstance(containers, list) or not all(isinstance(c, Mapping) for c in containers)
    ):
        problems.add("job_template", "spec.template.spec.containers must be a list of container dicts")
