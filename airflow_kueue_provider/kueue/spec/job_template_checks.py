"""Checks of ``job_template``, the batch/v1 Job manifest a user starts from: its kind, an Indexed completion
mode, container list shape, and none of the labels and annotations that decide which task instance owns a
Job (a template that forged them could adopt or delete another task's Job)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_kueue_provider.kueue.pods.pod_spec_checks import Problem
from airflow_kueue_provider.kueue.spec.job_template import as_mapping

from ..names import MANAGED_BY_LABEL, PROVIDER_LABEL_PREFIX


def _is_identity_key(key: object) -> bool:
    """Keys that decide ownership. (A template's queue-name label is simply replaced by ``queue_name``.)"""
    return isinstance(key, str) and (key == MANAGED_BY_LABEL or key.startswith(PROVIDER_LABEL_PREFIX))


def check_job_template(template: Mapping[str, Any] | None, add: Problem) -> None:
    """Report a template that is no Indexed batch/v1 Job, or that sets the provider's identity keys."""
    if template is None:
        return
    if not isinstance(template, Mapping):
        add("job_template", f"got {type(template).__name__}: pass a batch/v1 Job as a dict")
        return
    if template.get("apiVersion") != "batch/v1" or template.get("kind") != "Job":
        add(
            "job_template",
            f"is apiVersion={template.get('apiVersion')!r} kind={template.get('kind')!r}: "
            "it must be a batch/v1 Job (apiVersion: batch/v1, kind: Job)",
        )
    spec = template.get("spec", {})
    if not isinstance(spec, Mapping):
        add("job_template", "spec is not a dict")
        return
    pod_metadata = as_mapping(as_mapping(spec.get("template")).get("metadata"))
    for where, metadata in (
        ("metadata", as_mapping(template.get("metadata"))),
        ("pod metadata", pod_metadata),
    ):
        for kind in ("labels", "annotations"):
            reserved = sorted(k for k in as_mapping(metadata.get(kind)) if _is_identity_key(k))
            if reserved:
                add(
                    "job_template",
                    f"{where}.{kind} sets {', '.join(reserved)}, which only the provider sets (they say "
                    "which task instance a Job belongs to, and what it may adopt or delete): remove them",
                )
    mode = spec.get("completionMode")
    if mode is not None and mode != "Indexed":
        add(
            "job_template",
            f"spec.completionMode is {mode!r}: remove it or set 'Indexed' (this operator runs Indexed Jobs)",
        )
    pod_spec = as_mapping(as_mapping(spec.get("template")).get("spec"))
    containers = pod_spec.get("containers")
    if containers is not None and (
        not isinstance(containers, list) or not all(isinstance(c, Mapping) for c in containers)
    ):
        add("job_template", "spec.template.spec.containers must be a list of container dicts")
