"""The soak's own corner of the shared cluster: namespaces, Kueue queues, two KWOK Spot nodes of its own,
and the process nodes when the bed runs them; how to heal everything after the faults; and the done
markers read back from Blob at the end.

Queues (quota is what the checker holds Kueue to):

- ``proc``: one ClusterQueue over the process nodes' flavor, 2 CPU, for both DAGs' real shard programs;
- ``research`` and ``risk``: two ClusterQueues of 4 CPU in one cohort over the soak's KWOK nodes (each may
  borrow the other's idle 4 CPU: limit 8); risk reclaims by preemption, as in the Monte Carlo example.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client.rest import ApiException

from devcluster.manifests import SPOT_POOL, fake_node

from ..cluster import SPOT_TOLERATION, Cluster, is_true, short_id, wait_for

PROC_CPU, PROC_MEMORY = "2", "8Gi"
TEAM_CPU, TEAM_MEMORY = "4", "16Gi"
KWOK_NODES = 2


def _quota(flavor: str, cpu: str, memory: str) -> dict[str, Any]:
    resources = [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": memory}]
    return {"coveredResources": ["cpu", "memory"], "flavors": [{"name": flavor, "resources": resources}]}


@dataclass
class SoakBed:
    cluster: Cluster
    sid: str = field(default_factory=short_id)
    process_nodes: list[str] = field(default_factory=list)
    created: list[tuple[str, str]] = field(default_factory=list)  # (kueue plural, name), in creation order

    @property
    def genomics_namespace(self) -> str:
        return f"soak-gen-{self.sid}"

    @property
    def monte_carlo_namespace(self) -> str:
        return f"soak-mc-{self.sid}"

    @property
    def namespaces(self) -> list[str]:
        return [self.genomics_namespace, self.monte_carlo_namespace]

    @property
    def kwok_nodes(self) -> list[str]:
        return [f"aks-spot-soak-{self.sid}-{i}" for i in range(KWOK_NODES)]

    def cq(self, team: str) -> str:
        return f"soak-{team}-{self.sid}"

    def priority(self, team: str) -> str:
        return f"soak-{team}-{self.sid}"

    @property
    def limits(self) -> dict[str, dict[str, float]]:
        """nominal + borrowing limit per ClusterQueue (a cohort member may borrow all its peer's quota)."""
        team = {"cpu": 2 * float(TEAM_CPU), "memory": 2 * 16 * 2**30}
        return {
            self.cq("proc"): {"cpu": float(PROC_CPU), "memory": 8 * 2**30},
            self.cq("research"): team,
            self.cq("risk"): team,
        }

    def _create(self, plural: str, body: dict[str, Any]) -> None:
        self.cluster.kueue_create(plural, body, namespace=body["metadata"].get("namespace"))
        if "namespace" not in body["metadata"]:
            self.created.append((plural, body["metadata"]["name"]))

    def create(self) -> None:
        for name in self.kwok_nodes:
            self.cluster.core.create_node(fake_node(name, SPOT_POOL, extra_labels={"soak-pool": self.sid}))
        for namespace in self.namespaces:
            self.cluster.core.create_namespace(
                {"metadata": {"name": namespace, "labels": {"devcluster/test": "true"}}}
            )
        kwok_flavor = f"soak-kwok-{self.sid}"
        self._create(
            "resourceflavors",
            {
                "kind": "ResourceFlavor",
                "metadata": {"name": kwok_flavor},
                "spec": {"nodeLabels": {"soak-pool": self.sid}, "tolerations": [SPOT_TOLERATION]},
            },
        )
        for team, value in (("research", 100), ("risk", 1000)):
            self._create(
                "workloadpriorityclasses",
                {"kind": "WorkloadPriorityClass", "metadata": {"name": self.priority(team)}, "value": value},
            )
            self._create(
                "clusterqueues",
                {
                    "kind": "ClusterQueue",
                    "metadata": {"name": self.cq(team)},
                    "spec": {
                        "cohortName": f"soak-{self.sid}",
                        "namespaceSelector": self._selector([self.monte_carlo_namespace]),
                        "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
                        "resourceGroups": [_quota(kwok_flavor, TEAM_CPU, TEAM_MEMORY)],
                    },
                },
            )
            self._local_queue(self.monte_carlo_namespace, team, self.cq(team))
        if self.process_nodes:
            from ..process_node import process_flavor

            proc_flavor = f"soak-proc-{self.sid}"
            self._create("resourceflavors", process_flavor(proc_flavor))
            self._create(
                "clusterqueues",
                {
                    "kind": "ClusterQueue",
                    "metadata": {"name": self.cq("proc")},
                    "spec": {
                        "namespaceSelector": self._selector(self.namespaces),
                        "resourceGroups": [_quota(proc_flavor, PROC_CPU, PROC_MEMORY)],
                    },
                },
            )
            self._local_queue(self.genomics_namespace, "lq", self.cq("proc"))
            self._local_queue(self.monte_carlo_namespace, "proc", self.cq("proc"))

    @staticmethod
    def _selector(namespaces: list[str]) -> dict[str, Any]:
        return {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": namespaces}
            ]
        }

    def _local_queue(self, namespace: str, name: str, cq: str) -> None:
        body = {
            "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cq},
        }
        self._create("localqueues", body)
        wait_for(
            f"LocalQueue {namespace}/{name} active",
            lambda: is_true(self.cluster.kueue_get("localqueues", name, namespace), "Active"),
            timeout=60,
        )

    def heal_nodes(self) -> None:
        """The soak's KWOK nodes exist, and every node of the soak is schedulable and without the eviction
        taint (a fault may have left one deleted, or cordoned)."""
        from .faults import EVICTION_TAINT

        for name in self.kwok_nodes:
            with contextlib.suppress(ApiException):
                self.cluster.core.create_node(
                    fake_node(name, SPOT_POOL, extra_labels={"soak-pool": self.sid})
                )
        for name in self.kwok_nodes + self.process_nodes:
            with contextlib.suppress(ApiException):
                node = self.cluster.core.read_node(name)
                taints = [t for t in node.spec.taints or [] if t.key != EVICTION_TAINT["key"]]
                if node.spec.unschedulable or len(taints) != len(node.spec.taints or []):
                    body = [{"key": t.key, "value": t.value, "effect": t.effect} for t in taints]
                    self.cluster.core.patch_node(name, {"spec": {"unschedulable": False, "taints": body}})

    def delete(self) -> None:
        for namespace in self.namespaces:
            with contextlib.suppress(ApiException):
                self.cluster.core.delete_namespace(namespace, propagation_policy="Background")
        for plural, name in reversed(self.created):
            with contextlib.suppress(ApiException):
                self.cluster.kueue_delete(plural, name)
        for name in self.kwok_nodes:
            with contextlib.suppress(ApiException):
                self.cluster.core.delete_node(name)

    def delete_containers(self, connection_string: str) -> None:
        """Delete the soak's Blob containers (its DAGs keep the shards' checkpoints for the checker)."""
        from azure.storage.blob import BlobServiceClient

        service = BlobServiceClient.from_connection_string(connection_string)
        for container in service.list_containers(name_starts_with=f"soak-{self.sid}"):
            with contextlib.suppress(Exception):
                service.delete_container(container.name)


def read_done_markers(connection_string: str, jobs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``<prefix>/<shard>`` -> the shard's done.json, for every checkpointed Job's shards (Job views)."""
    from azure.core.exceptions import ResourceNotFoundError
    from azure.storage.blob import BlobServiceClient

    from airflow_kueue_provider.worker.naming import done_name

    service = BlobServiceClient.from_connection_string(connection_string)
    shards: dict[tuple[str, str], int] = {}  # the first try's Job runs every shard: the most completions
    for view in jobs:
        url, prefix = view.get("checkpoint_url"), view.get("checkpoint_prefix")
        if url and prefix:
            shards[(url, prefix)] = max(shards.get((url, prefix), 0), int(view.get("completions") or 0))
    found: dict[str, dict[str, Any]] = {}
    for (url, prefix), count in shards.items():
        container = service.get_container_client(url.rstrip("/").rsplit("/", 1)[-1])
        for shard in range(count):
            with contextlib.suppress(ResourceNotFoundError):
                raw = container.get_blob_client(done_name(prefix, shard)).download_blob().readall()
                found[f"{prefix}/{shard}"] = dict(json.loads(raw).get("output") or {})
    return found
