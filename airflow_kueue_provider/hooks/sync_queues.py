"""``KueueHook``'s queue reads: LocalQueues, ClusterQueues and a LocalQueue's pending Workloads in Kueue's
order (the visibility API), for the operators' checks and the UI's queue pages."""

from __future__ import annotations

from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from . import kueue_api
from .retry import call_with_retry
from .sync_client import SyncKueueClient


class SyncQueueCalls(SyncKueueClient):
    """Reading Kueue's queues (mixed into ``KueueHook``)."""

    def list_local_queues(self, namespace: str | None) -> list[dict[str, Any]]:
        """LocalQueues in ``namespace``, or in every namespace when it is None."""
        custom = client.CustomObjectsApi(self.api)
        group, version = kueue_api.KUEUE_GROUP, self.kueue_version
        res = call_with_retry(
            lambda: (
                custom.list_cluster_custom_object(group, version, "localqueues")
                if namespace is None
                else custom.list_namespaced_custom_object(group, version, namespace, "localqueues")
            ),
            "list LocalQueues",
        )
        return list(res.get("items", []))

    def list_cluster_queues(self) -> list[dict[str, Any]]:
        custom = client.CustomObjectsApi(self.api)
        group, version = kueue_api.KUEUE_GROUP, self.kueue_version
        res = call_with_retry(
            lambda: custom.list_cluster_custom_object(group, version, "clusterqueues"),
            "list ClusterQueues",
        )
        return list(res.get("items", []))

    def get_local_queue(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get_custom("localqueues", name, namespace)

    def pending_position(
        self, namespace: str, local_queue: str, workload_name: str
    ) -> tuple[int, int] | None:
        pending = self.pending_workloads(namespace, local_queue)
        return None if pending is None else kueue_api.position_of(pending, workload_name)

    def pending_workloads(self, namespace: str, local_queue: str) -> dict[str, Any] | None:
        """The LocalQueue's pending Workloads in Kueue's order (its visibility API); None where that API is
        not served (feature gate VisibilityOnDemand) or the read fails."""
        try:
            return self._get_raw(kueue_api.pending_workloads_path(self.kueue_version, namespace, local_queue))
        except ApiException:
            return None
