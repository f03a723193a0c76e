"""``KueueHook``'s Workload reads: a Job's Workload (by the uid label Kueue sets, then by owner) and a
WorkloadPriorityClass."""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Iterator
from typing import Any

from kubernetes import client, watch
from urllib3.exceptions import ReadTimeoutError

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

    def workload_changes(
        self, namespace: str, job_uid: str, quiet_seconds: float, seconds: float
    ) -> Iterator[dict[str, Any] | None]:
        """The Job's Workload as it is, then as it changes, for at most ``seconds``: one WATCH without a
        resourceVersion (the apiserver sends what exists first), selected by the uid label and bound by its
        controller owner. ``None`` after ``quiet_seconds`` with no change; the caller may go on reading (a
        new WATCH). Errors are the caller's (no retry: a wait that can be given up)."""
        custom = client.CustomObjectsApi(self.api)
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            stream = watch.Watch()
            try:
                for event in stream.stream(
                    custom.list_namespaced_custom_object,
                    kueue_api.KUEUE_GROUP,
                    self.kueue_version,
                    namespace,
                    "workloads",
                    label_selector=f"{JOB_UID_LABEL}={job_uid}",
                    timeout_seconds=max(1, math.ceil(left)),
                    _request_timeout=(10, quiet_seconds),
                ):
                    found = kueue_api.first_owned_by([event.get("raw_object") or {}], job_uid)
                    if found is not None and event.get("type") in ("ADDED", "MODIFIED"):
                        yield found
            except ReadTimeoutError:
                yield None
            finally:
                stream.stop()
