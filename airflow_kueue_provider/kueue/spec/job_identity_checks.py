"""Checks of who a Job is and where it runs: its name, namespace, LocalQueue, priority class and
ServiceAccount, and the task instance it belongs to (``identity``): names the API server or Kueue would
refuse, caught before anything is submitted."""

from __future__ import annotations

from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.kueue.k8s_names import (
    MAX_JOB_NAME_LENGTH,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_valid_label_value,
)
from airflow_kueue_provider.kueue.pods.pod_spec_checks import Problem
from airflow_kueue_provider.kueue.spec.job_count_checks import is_int
from airflow_kueue_provider.kueue.spec.job_spec import IndexedJobSpec


def check_names(spec: IndexedJobSpec, add: Problem) -> None:
    """Report each name that is no valid Kubernetes name of its kind, or an empty queue."""
    if not is_dns1123_label(spec.name, MAX_JOB_NAME_LENGTH):
        add(
            "name",
            f"{spec.name!r} is not a valid Indexed Job name: use 1-{MAX_JOB_NAME_LENGTH} lowercase letters, "
            "digits or '-', starting and ending with a letter or digit (deterministic_job_name() makes one)",
        )
    if not is_dns1123_label(spec.namespace):
        add(
            "namespace",
            f"{spec.namespace!r} is not a valid namespace: use 1-63 lowercase letters, digits or '-', "
            "starting and ending with a letter or digit",
        )
    if not spec.queue_name:
        add("queue_name", "is empty: set it to the name of a Kueue LocalQueue in the namespace")
    elif not (is_dns1123_subdomain(spec.queue_name) and is_valid_label_value(spec.queue_name)):
        add(
            "queue_name",
            f"{spec.queue_name!r} is not a valid LocalQueue name: use at most 63 lowercase letters, digits, "
            "'-' or '.', starting and ending with a letter or digit",
        )
    if spec.priority_class is not None and not (
        is_dns1123_subdomain(spec.priority_class) and is_valid_label_value(spec.priority_class)
    ):
        add(
            "priority_class",
            f"{spec.priority_class!r} is not a valid WorkloadPriorityClass name: use at most 63 lowercase "
            "letters, digits, '-' or '.', or leave it unset",
        )
    if spec.service_account_name is not None and not is_dns1123_subdomain(spec.service_account_name):
        add(
            "service_account_name",
            f"{spec.service_account_name!r} is not a valid ServiceAccount name: "
            "use lowercase letters, digits, '-' or '.', or leave it unset",
        )


def check_identity(identity: AirflowIdentity | None, add: Problem) -> None:
    """Report an ``AirflowIdentity`` whose fields could not label a Job (ownership is decided by them)."""
    if identity is None:
        return
    if not isinstance(identity, AirflowIdentity):
        add("identity", f"got {identity!r}: pass an AirflowIdentity")
        return
    for attribute in ("dag_id", "task_id", "run_id"):
        value = getattr(identity, attribute)
        if not isinstance(value, str) or not value:
            add("identity", f"{attribute} is {value!r}: it must be a non-empty string")
    if not (is_int(identity.try_number) and identity.try_number >= 0):
        add("identity", f"try_number is {identity.try_number!r}: it must be an integer >= 0")
    if not (is_int(identity.map_index) and identity.map_index >= -1):
        add("identity", f"map_index is {identity.map_index!r}: it must be an integer >= -1")
