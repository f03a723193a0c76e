"""Checks of the shard container's inputs: the image, the command and its arguments, the environment and
the resources (requests, limits, claims); the shapes the API server would reject, caught before anything is
submitted."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow_kueue_provider.kueue.k8s_names import is_env_var_name, is_qualified_name
from airflow_kueue_provider.kueue.pods.pod_spec_checks import Problem
from airflow_kueue_provider.kueue.quantity import parse_quantity
from airflow_kueue_provider.kueue.spec.job_spec import EnvInput, IndexedJobSpec

RESOURCES_KEYS = ("requests", "limits", "claims")


def check_container(spec: IndexedJobSpec, add: Problem) -> None:
    """Report an empty or spaced image, a command that is no list of strings, and a malformed env."""
    if not isinstance(spec.image, str) or not spec.image.strip():
        add("image", "is empty: set the container image, e.g. 'ghcr.io/org/worker:1.2'")
    elif any(character.isspace() for character in spec.image):
        add("image", f"{spec.image!r} contains whitespace: remove it")
    for parameter, value in (("cmds", spec.cmds), ("arguments", spec.arguments)):
        if value is None:
            continue
        if isinstance(value, str) or not isinstance(value, Sequence):
            add(parameter, f"got {value!r}: pass a list of strings, e.g. ['python', 'run.py']")
        elif not all(isinstance(item, str) for item in value):
            add(parameter, f"got {list(value)!r}: every item must be a string (quote numbers)")
    _check_env(spec.env, add)


def _check_env(env: EnvInput | None, add: Problem) -> None:
    if env is None:
        return
    if isinstance(env, Mapping):
        for name, value in env.items():
            _check_env_name(name, add)
            if not isinstance(value, str):
                add("env", f"value of {name!r} is {value!r}: environment values must be strings")
        return
    if isinstance(env, str) or not isinstance(env, Sequence):
        add("env", f"got {env!r}: pass a dict of name -> value or a list of EnvVar dicts")
        return
    for position, item in enumerate(env):
        if not isinstance(item, Mapping) or "name" not in item:
            add("env", f"item {position} ({item!r}) is not an EnvVar dict with a 'name'")
            continue
        _check_env_name(item["name"], add)
        if "value" in item and "valueFrom" in item:
            add("env", f"{item['name']!r} sets both 'value' and 'valueFrom': keep one")
        if "value" in item and not isinstance(item["value"], str):
            add("env", f"value of {item['name']!r} is {item['value']!r}: environment values must be strings")


def _check_env_name(name: object, add: Problem) -> None:
    if not is_env_var_name(name):
        add(
            "env",
            f"{name!r} is not a valid variable name: use letters, digits, '_', '-' or '.', "
            "not starting with a digit",
        )


def check_resources(resources: Mapping[str, Any] | None, add: Problem) -> None:
    """Report unknown keys, unparsable or negative quantities, and a limit below its request."""
    if resources is None:
        return
    if not isinstance(resources, Mapping):
        add("resources", f"got {resources!r}: pass a dict like {{'requests': {{'cpu': '1'}}}}")
        return
    unknown = sorted(str(key) for key in resources if key not in RESOURCES_KEYS)
    if unknown:
        add("resources", f"unknown keys {unknown}: use only 'requests', 'limits' and 'claims'")
    parsed: dict[str, dict[str, Any]] = {}
    for kind in ("requests", "limits"):
        section = resources.get(kind)
        if section is None:
            continue
        if not isinstance(section, Mapping):
            add("resources", f"{kind} is {section!r}: pass a dict of resource name -> quantity")
            continue
        parsed[kind] = {}
        for resource, raw in section.items():
            if not is_qualified_name(resource):
                add("resources", f"{kind} has an invalid resource name {resource!r}")
                continue
            try:
                quantity = parse_quantity(raw)
            except ValueError as error:
                add("resources", f"{kind}.{resource}: {error}")
                continue
            if quantity < 0:
                add("resources", f"{kind}.{resource}={raw!r} is negative: quantities must be >= 0")
                continue
            parsed[kind][resource] = quantity
    requests, limits = parsed.get("requests", {}), parsed.get("limits", {})
    for resource in sorted(set(requests) & set(limits)):
        if limits[resource] < requests[resource]:
            add(
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
        add("resources", f"claims is {claims!r}: pass a list of {{'name': <resource claim name>}}")
