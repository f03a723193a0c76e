"""Synchronous JobSet calls for ``KueueJobSetOperator`` (submit, reattach, delete), over ``KueueHook``."""

from __future__ import annotations

import functools
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from ..kueue.airflow_identity import AirflowIdentity
from ..kueue.identity_seal import sealed_only
from ..kueue.job_ownership import belongs_to_task_instance, delete_unless_finished_step
from ..kueue.jobset import JOBSET_GROUP, JOBSET_PLURAL, JOBSET_VERSION
from ..kueue.kinds.jobset import JOBSET
from ..kueue.names import DAG_ID_LABEL, RUN_ID_LABEL, TASK_ID_LABEL
from . import kueue_api
from .identity_key import identity_seal
from .kueue_hook import DELETE_ATTEMPTS, KueueApiError, KueueHook
from .retry import call_with_retry


class JobSetHook(KueueHook):
    """``KueueHook`` plus a namespace's ``jobset.x-k8s.io/v1alpha2`` JobSets (dicts, as the API's JSON)."""

    @property
    def _custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    def create_jobset(self, body: dict[str, Any]) -> dict[str, Any]:
        """Create the JobSet; a 409 (it exists) goes to the caller, which decides whether to reattach."""
        namespace = body["metadata"]["namespace"]
        create = functools.partial(
            self._custom.create_namespaced_custom_object,
            JOBSET_GROUP,
            JOBSET_VERSION,
            namespace,
            JOBSET_PLURAL,
            body,
        )
        return dict(call_with_retry(create, "create JobSet"))

    def get_jobset(self, namespace: str, name: str) -> dict[str, Any] | None:
        get = functools.partial(
            self._custom.get_namespaced_custom_object,
            JOBSET_GROUP,
            JOBSET_VERSION,
            namespace,
            JOBSET_PLURAL,
            name,
        )
        try:
            return dict(call_with_retry(get, "read JobSet"))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def task_instance_jobsets(
        self, namespace: str, identity: AirflowIdentity, *, unsealed_too: bool = False
    ) -> list[dict[str, Any]]:
        """This provider's JobSets of one task instance (any try), oldest first; ones being deleted left out
        (the labels pre-select, the full identity in the annotations decides), and so are JobSets without the
        task's seal (docs/tenancy.md) unless ``unsealed_too`` (reattach sorts them itself)."""
        labels = identity.labels()
        selector = kueue_api.label_selector(
            {k: labels[k] for k in (DAG_ID_LABEL, TASK_ID_LABEL, RUN_ID_LABEL)}
        )
        listed = call_with_retry(
            functools.partial(
                self._custom.list_namespaced_custom_object,
                JOBSET_GROUP,
                JOBSET_VERSION,
                namespace,
                JOBSET_PLURAL,
                label_selector=selector,
            ),
            "list JobSets",
        )
        jobsets = [
            js
            for js in listed.get("items") or []
            if belongs_to_task_instance(js, identity) and js["metadata"].get("deletionTimestamp") is None
        ]
        jobsets = jobsets if unsealed_too else sealed_only(jobsets, identity_seal(), JOBSET.kind)
        return sorted(jobsets, key=lambda js: js["metadata"].get("creationTimestamp") or "")

    def delete_jobset_unless_finished(self, namespace: str, name: str, uid: str | None = None) -> str:
        """Delete the JobSet (and with it its Jobs, pods and Workload) if it is still queued or running:
        "deleted", "finished" (kept: it holds nothing and is the run's record) or "gone"."""
        for attempt in range(1, DELETE_ATTEMPTS + 1):
            step = delete_unless_finished_step(
                self.get_jobset(namespace, name), uid, attempt == DELETE_ATTEMPTS
            )
            if isinstance(step, str):
                return step
            delete = functools.partial(
                self._custom.delete_namespaced_custom_object,
                JOBSET_GROUP,
                JOBSET_VERSION,
                namespace,
                JOBSET_PLURAL,
                name,
                body=step,
            )
            try:
                call_with_retry(delete, "delete JobSet")
                return "deleted"
            except ApiException as exc:
                if exc.status == 404:
                    return "gone"
                if exc.status != 409:  # it changed since the read: look again
                    raise
        raise KueueApiError(
            f"JobSet {namespace}/{name} could not be deleted: it kept changing (409 Conflict)"
        )
