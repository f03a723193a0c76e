"""Validation of an ``IndexedJobSpec``: what the API server or Kueue would reject, caught before submission.

Every problem names the operator parameter to change and how, and all problems are reported at once. The
checks live by concern: names and identity (``job_identity_checks``), counts and retries
(``job_count_checks``), the container (``container_checks``), labels and annotations
(``job_metadata_checks``), the ``job_template`` manifest (``job_template_checks``) and the pod-spec inputs
(``pod_spec_checks``).
"""

from __future__ import annotations

from airflow_kueue_provider.kueue.pods.pod_spec_checks import check_pod_spec_inputs
from airflow_kueue_provider.kueue.spec.container_checks import check_container, check_resources
from airflow_kueue_provider.kueue.spec.job_count_checks import check_counts
from airflow_kueue_provider.kueue.spec.job_identity_checks import check_identity, check_names
from airflow_kueue_provider.kueue.spec.job_metadata_checks import check_metadata
from airflow_kueue_provider.kueue.spec.job_spec import IndexedJobSpec, InvalidJobSpec
from airflow_kueue_provider.kueue.spec.job_template_checks import check_job_template


class _Problems:
    """Every problem found, as (parameter, what to change): all are reported at once."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def add(self, parameter: str, text: str) -> None:
        self.items.append((parameter, text))


def validate(spec: IndexedJobSpec) -> None:
    """Raise ``InvalidJobSpec`` listing every problem, each naming the parameter and what to change."""
    problems = _Problems()
    check_names(spec, problems.add)
    check_counts(spec, problems.add)
    check_container(spec, problems.add)
    check_resources(spec.resources, problems.add)
    check_metadata(spec, problems.add)
    check_identity(spec.identity, problems.add)
    check_job_template(spec.job_template, problems.add)
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
    check_counts(spec, problems.add)
    check_resources(spec.resources, problems.add)
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
