"""Checks of the labels, annotations and node selector a user gives a Job and its pods: valid keys and
values, and none of the labels the provider sets itself (queue, priority, ownership)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from airflow_kueue_provider.kueue.k8s_names import is_qualified_name, is_valid_label_value
from airflow_kueue_provider.kueue.pods.pod_spec_checks import Problem
from airflow_kueue_provider.kueue.spec.job_spec import IndexedJobSpec

from ..names import MANAGED_BY_LABEL, PRIORITY_CLASS_LABEL, PROVIDER_LABEL_PREFIX, QUEUE_NAME_LABEL


def check_metadata(spec: IndexedJobSpec, add: Problem) -> None:
    """Report invalid label/annotation keys and values, and labels only the provider may set."""
    for parameter, key, value in _entries(spec, ("labels", "job_labels", "node_selector"), add):
        if not is_qualified_name(key):
            add(parameter, f"{key!r} is not a valid label key: use [prefix/]name, name <= 63 chars")
        if not is_valid_label_value(value):
            add(
                parameter,
                f"value {value!r} of {key!r} is not a valid label value: use at most 63 letters, digits, "
                "'-', '_' or '.', starting and ending with a letter or digit",
            )
        if parameter != "node_selector" and _is_reserved_label(key):
            add(parameter, f"{key!r} is set by the provider: remove it (use the matching parameter)")
    for parameter, key, value in _entries(spec, ("annotations", "job_annotations"), add):
        if not is_qualified_name(key):
            add(parameter, f"{key!r} is not a valid annotation key: use [prefix/]name")
        if not isinstance(value, str):
            add(parameter, f"value of {key!r} is {value!r}: annotation values must be strings")


def _entries(
    spec: IndexedJobSpec, parameters: Sequence[str], add: Problem
) -> Iterator[tuple[str, object, object]]:
    """(parameter, key, value) of each dict parameter that is set; one that is not a dict is a problem."""
    for parameter in parameters:
        mapping = getattr(spec, parameter)
        if mapping is None:
            continue
        if not isinstance(mapping, Mapping):
            add(parameter, f"got {mapping!r}: pass a dict of key -> value")
            continue
        for key, value in mapping.items():
            yield parameter, key, value


def _is_reserved_label(key: object) -> bool:
    return isinstance(key, str) and (
        key in (QUEUE_NAME_LABEL, PRIORITY_CLASS_LABEL, MANAGED_BY_LABEL)
        or key.startswith(PROVIDER_LABEL_PREFIX)
    )
