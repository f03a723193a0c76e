"""The batch/v1 Indexed Job the provider submits to a Kueue LocalQueue.

``build_indexed_job`` validates an ``IndexedJobSpec`` (``job_validation``: what the API server or Kueue would
reject, caught before anything is submitted) and turns it into a Job dict, merged over ``job_template`` when
one is given (``job_template``).

The Job is created suspended (``spec.suspend: true``), as Kueue's own webhook would make it: where Kueue
manages the namespace it admits the Job and unsuspends it; where it does not (a namespace outside Kueue's
``managedJobsNamespaceSelector``, a missing webhook), the Job stays without pods instead of running outside
every quota, and the trigger deletes it (``quota_guard``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from airflow_kueue_provider.kueue.spec.job_spec import (
    CONTAINER_NAME,
    IGNORE_DISRUPTIONS_RULE,
    SPOT_TOLERATION,
    EnvInput,
    IndexedJobSpec,
)
from airflow_kueue_provider.kueue.spec.job_template import merge_job_template
from airflow_kueue_provider.kueue.spec.job_validation import validate
from airflow_kueue_provider.kueue.spec.retry_policy import fail_index_rule

from ..names import (
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    MIN_PARALLELISM_ANNOTATION,
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
)


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
        "suspend": True,
        "completionMode": "Indexed",
        "completions": spec.completions,
        "parallelism": spec.effective_parallelism,
        # A stopped pod's next pod starts once it ended (its checkpoint flushed, its pack's rest released
        # for the Job's running pods: worker/pack_handoff), never beside it.
        "podReplacementPolicy": "Failed",
    }
    if spec.ttl_seconds_after_finished is not None:
        job_spec["ttlSecondsAfterFinished"] = spec.ttl_seconds_after_finished
    if spec.backoff_limit_per_index is not None:
        job_spec["backoffLimitPerIndex"] = spec.backoff_limit_per_index
    if spec.max_failed_indexes is not None:
        job_spec["maxFailedIndexes"] = spec.max_failed_indexes
    rules = [copy.deepcopy(dict(IGNORE_DISRUPTIONS_RULE))] if spec.spot else []
    if spec.non_retriable_exit_codes:
        rules.append(fail_index_rule(spec.non_retriable_exit_codes))  # after Ignore: first match wins
    if rules:
        job_spec["podFailurePolicy"] = {"rules": rules}

    pod_spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [_container(spec)]}
    if spec.service_account_name:
        pod_spec["serviceAccountName"] = spec.service_account_name
    if spec.node_selector:
        pod_spec["nodeSelector"] = dict(spec.node_selector)
    tolerations = [copy.deepcopy(dict(t)) for t in spec.tolerations or ()]
    if spec.spot and dict(SPOT_TOLERATION) not in tolerations:
        tolerations.append(dict(SPOT_TOLERATION))
    if tolerations:
        pod_spec["tolerations"] = tolerations
    if spec.affinity:
        pod_spec["affinity"] = copy.deepcopy(dict(spec.affinity))
    if spec.volumes:
        pod_spec["volumes"] = [copy.deepcopy(dict(v)) for v in spec.volumes]
    if spec.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": name} for name in spec.image_pull_secrets]
    if spec.security_context:
        pod_spec["securityContext"] = copy.deepcopy(dict(spec.security_context))
    if spec.init_containers:
        pod_spec["initContainers"] = [copy.deepcopy(dict(c)) for c in spec.init_containers]
    if spec.termination_grace_period is not None:
        pod_spec["terminationGracePeriodSeconds"] = spec.termination_grace_period
    if spec.active_deadline_seconds is not None:
        pod_spec["activeDeadlineSeconds"] = spec.active_deadline_seconds
    if spec.priority_class_name:
        pod_spec["priorityClassName"] = spec.priority_class_name
    pod_metadata: dict[str, Any] = {"labels": pod_labels}
    if spec.annotations:
        pod_metadata["annotations"] = dict(spec.annotations)
    job_spec["template"] = {"metadata": pod_metadata, "spec": pod_spec}

    metadata: dict[str, Any] = {"name": spec.name, "namespace": spec.namespace, "labels": job_labels}
    annotations = {**(spec.job_annotations or {}), **identity_annotations}
    if spec.min_parallelism is not None:
        annotations[MIN_PARALLELISM_ANNOTATION] = str(spec.min_parallelism)
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
    if spec.env_from:
        container["envFrom"] = [copy.deepcopy(dict(e)) for e in spec.env_from]
    if spec.volume_mounts:
        container["volumeMounts"] = [copy.deepcopy(dict(m)) for m in spec.volume_mounts]
    if spec.image_pull_policy:
        container["imagePullPolicy"] = spec.image_pull_policy
    if spec.container_security_context:
        container["securityContext"] = copy.deepcopy(dict(spec.container_security_context))
    return container


def _env_list(env: EnvInput) -> list[dict[str, Any]]:
    if isinstance(env, Mapping):
        return [{"name": name, "value": value} for name, value in env.items()]
    return [copy.deepcopy(dict(item)) for item in env]
