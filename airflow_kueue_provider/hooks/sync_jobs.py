"""``KueueHook``'s Job calls: finding Jobs by label, a task instance's Jobs for the UI (only the sealed ones
and the children a sealed parent proves, docs/tenancy.md), and deleting a Job."""

from __future__ import annotations

import functools
import logging
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from ..kueue.identity.airflow_identity import AirflowIdentity
from ..kueue.identity.identity_seal import sealed_only
from ..kueue.identity.job_ownership import belongs_to_task_instance
from ..kueue.kinds import KindDescription, child_kind, parent_names
from ..kueue.names import DAG_ID_LABEL, RUN_ID_LABEL, TASK_ID_LABEL
from . import kueue_api
from .identity_key import identity_seal
from .retry import call_with_retry
from .sync_client import SyncKueueClient

log = logging.getLogger(__name__)


class SyncJobCalls(SyncKueueClient):
    """Jobs, and the parents that prove a child Job is a task's (mixed into ``KueueHook``)."""

    def find_jobs(self, namespace: str | None, labels: dict[str, str]) -> list[dict[str, Any]]:
        """Jobs with ``labels`` in ``namespace``, or in every namespace when it is None."""
        batch = client.BatchV1Api(self.api)
        selector = kueue_api.label_selector(labels)
        if namespace is None:
            return self._items(
                functools.partial(batch.list_job_for_all_namespaces, label_selector=selector), "list Jobs"
            )
        return self._items(
            functools.partial(batch.list_namespaced_job, namespace, label_selector=selector), "list Jobs"
        )

    def task_instance_jobs(
        self, namespace: str | None, identity: AirflowIdentity, *, unsealed_too: bool = False
    ) -> list[dict[str, Any]]:
        """This provider's Jobs of one (dag, task, run, map index), oldest first; namespace None: all.

        The labels pre-select on the server; the full identity in the annotations decides (labels are hashed
        and can collide between run ids). Jobs being deleted are left out, and so are Jobs without the task's
        seal (docs/tenancy.md) unless ``unsealed_too`` (reattach sorts them itself)."""
        labels = identity.labels()
        selector = {k: labels[k] for k in (DAG_ID_LABEL, TASK_ID_LABEL, RUN_ID_LABEL)}
        jobs = [
            j
            for j in self.find_jobs(namespace, selector)
            if belongs_to_task_instance(j, identity) and j["metadata"].get("deletionTimestamp") is None
        ]
        jobs = jobs if unsealed_too else self._sealed_or_proven_children(namespace, selector, jobs)
        return sorted(jobs, key=lambda j: j["metadata"].get("creationTimestamp") or "")

    def _sealed_or_proven_children(
        self, namespace: str | None, selector: dict[str, str], jobs: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """The Jobs sealed as the task's, and the child Jobs of its sealed parents (a JobSet's). A child
        carries its parent's seal and labels, which anyone who reads it can copy: it counts only when a
        sealed parent of the task controls it by uid (``KindDescription.owns_child``). One more LIST per
        parent kind, only when there are children."""
        seal, noun = identity_seal(), child_kind().kind
        sealed = [j for j in jobs if seal.is_sealed(noun, j)]
        children = [j for j in jobs if not seal.is_sealed(noun, j) and seal.is_sealed_child(j)]
        proven: list[dict[str, Any]] = []
        for parent in {kind.kind: kind for j in children for kind, _ in parent_names(j)}.values():
            parents = sealed_only(self._task_objects(parent, namespace, selector), seal, parent.kind)
            proven += [j for j in children if any(parent.owns_child(j, p) for p in parents)]
        return sealed + proven

    def _task_objects(
        self, kind: KindDescription, namespace: str | None, selector: dict[str, str]
    ) -> list[dict[str, Any]]:
        """The objects of ``kind`` with the task's labels; none when this identity may not list them (no
        child Job is shown then: deploy/rbac/ui.yaml grants the read)."""
        custom, labels = client.CustomObjectsApi(self.api), kueue_api.label_selector(selector)
        api = kind.api
        if namespace is None:
            call = functools.partial(
                custom.list_cluster_custom_object, api.group, api.version, api.plural, label_selector=labels
            )
        else:
            call = functools.partial(
                custom.list_namespaced_custom_object,
                api.group, api.version, namespace, api.plural, label_selector=labels,
            )  # fmt: skip
        try:
            return self._items(call, f"list {kind.kind}s")
        except ApiException as exc:
            if exc.status not in (403, 404):  # 404: no such API on this cluster
                raise
            log.warning(
                "cannot list %ss (HTTP %s): a %s task's Jobs are not shown; grant get/list on %s "
                "(deploy/rbac/ui.yaml)",
                kind.kind,
                exc.status,
                kind.kind,
                api.resource,
            )
            return []

    def delete_job(
        self,
        namespace: str,
        name: str,
        propagation_policy: str = "Background",
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> bool:
        """Delete the Job (Kueue then removes its Workload; never delete the Workload itself). With ``uid``
        only that object, never a namesake that replaced it; with ``resource_version`` only if it has not
        changed since it was read. False when it was already gone, or (preconditions) is another object or
        has changed."""
        batch = client.BatchV1Api(self.api)
        preconditions = (
            client.V1Preconditions(uid=uid, resource_version=resource_version)
            if uid or resource_version
            else None
        )
        options = client.V1DeleteOptions(propagation_policy=propagation_policy, preconditions=preconditions)
        try:
            call_with_retry(lambda: batch.delete_namespaced_job(name, namespace, body=options), "delete Job")
            return True
        except ApiException as exc:
            if exc.status == 404 or (exc.status == 409 and preconditions is not None):
                return False
            raise
