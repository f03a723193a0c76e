"""``KueueHook``'s Workload reads: a Job's Workload (by the uid label Kueue sets, then by owner) and a
WorkloadPriorityClass."""

from __future__ import annotations

import functools
from typing import Any

from kubernetes import client

from ..kueue.names import JOB_UID_LABEL
from . import kueue_api
from .retry import call_with_retry
from .sync_client import SyncKueueClient


class SyncWorkloadCalls(SyncKueueClient):
    """Kueue's Workloads and their priority classes (mixed into ``KueueHook``)."""

    def get_workload_priority_class(self, name: str) -> dict[str, Any] | None:
        return self._get_custom("workloadpriorityclasses", name)

    def workloads_page(self, namespace: str, limit: int) -> list[dict[str, Any]]:
        """At most ``limit`` of the namespace's Workloads (one page: a bound on what one read costs)."""
        custom = client.CustomObjectsApi(self.api)
        call = functools.partial(
            custom.list_namespaced_custom_object,
            kueue_api.KUEUE_GROUP,
            self.kueue_version,
            namespace,
            "workloads",
            limit=limit,
        )
        return self._items(call, "list Workloads")

    def workload_for_job(self, namespace: str, job_uid: str) -> dict[str, Any] | None:
        custom = client.CustomObjectsApi(self.api)
        res = call_with_retry(
            lambda: custom.list_namespaced_custom_object(
                kueue_api.KUEUE_GROUP,
                self.kueue_version,
                namespace,
                "workloads",
                label_selector=f"{JOB_UID_LABEL}={job_uid}",
            ),
            "list Workloads",
        )
        return kueue_api.first_owned_by(list(res.get("items", [])), job_uid)
