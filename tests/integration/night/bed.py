"""The cluster side of one night: two AKS-shaped node pools of its own (Spot and on-demand), two teams'
namespaces and ClusterQueues in one cohort, the steps' WorkloadPriorityClasses, and an identity for
Airflow whose every apiserver request one APF FlowSchema counts.

Genomics' ClusterQueue holds ``genomics_cpu`` of Spot quota and borrows the risk team's on-demand quota
while it is idle; the risk team's ClusterQueue reclaims it when its run starts (Kueue preempts the
borrowers: ``reclaimWithinCohort: Any``). Within a ClusterQueue nothing is preempted: the priorities only
order the queue. The nodes carry this night's label and taint, so no other pod of the bed lands on them and
deleting them evicts nobody else.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cluster import Cluster, is_true, token_kubeconfig, wait_for
from .dags import STEP_ORDERS, NightQueues
from .workload import NODE_CPU, Night

POOL_LABEL = "night.airflow-kueue.io/pool"
RUN_LABEL = "night.airflow-kueue.io/run"
BREAKDOWN = tuple(
    (resource, verb)
    for resource in (
        "jobs",
        "workloads",
        "pods",
        "secrets",
        "localqueues",
        "localqueues/pendingworkloads",
        "clusterqueues",
        "events",
        "jobsets",
    )
    for verb in ("get", "list", "watch", "create", "update", "patch", "delete")
)
"""Airflow's requests counted apart by resource and verb (one FlowSchema each, ``breakdown_name``); what
none of them matches is counted as ``other``."""


def breakdown_name(schema: str, resource: str, verb: str) -> str:
    """``<schema>--<resource>.<verb>`` (a subresource's ``/`` as ``.``)."""
    return f"{schema}--{resource.replace('/', '.')}.{verb}"


TAINT = "night.airflow-kueue.io/run"
SPOT_TAINT = {"key": "kubernetes.azure.com/scalesetpriority", "value": "spot", "effect": "NoSchedule"}
COHORT_PREFIX = "night"


def _pool(run_id: str, kind: str) -> dict[str, Any]:
    spot = kind == "spot"
    labels = {POOL_LABEL: f"{run_id}-{kind}", RUN_LABEL: run_id, "workload": "batch"}
    if spot:
        labels |= {"kubernetes.azure.com/scalesetpriority": "spot", "tier": "spot"}
    else:
        labels |= {"tier": "on-demand"}
    taints = [{"key": TAINT, "value": run_id, "effect": "NoSchedule"}] + ([SPOT_TAINT] if spot else [])
    return {
        "prefix": f"aks-night{kind}-{run_id}",
        "instance_type": "Standard_D16ds_v5",
        "cpu": str(NODE_CPU),
        "memory": "64Gi",
        "labels": labels,
        "taints": taints,
    }


@dataclass
class NightBed:
    """Everything one night made in the cluster; ``teardown()`` removes it, whatever happened."""

    cluster: Cluster
    run_id: str
    spot_nodes: list[str] = field(default_factory=list)
    on_demand_nodes: list[str] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)
    cluster_queues: list[str] = field(default_factory=list)
    flavors: list[str] = field(default_factory=list)
    priority_classes: list[str] = field(default_factory=list)
    flow_schemas: list[str] = field(default_factory=list)
    cluster_role_bindings: list[str] = field(default_factory=list)

    # --- nodes ---
    def create_nodes(self, night: Night) -> None:
        from devcluster.manifests import fake_node

        for kind, count, into in (
            ("spot", night.spot_nodes, self.spot_nodes),
            ("ondemand", night.on_demand_nodes, self.on_demand_nodes),
        ):
            pool = _pool(self.run_id, kind)
            for i in range(count):
                name = f"{pool['prefix']}-{i:03d}"
                self.cluster.core.create_node(fake_node(name, pool, zone=1 + i % 3))
                into.append(name)

        def ready() -> bool:
            nodes = self.cluster.core.list_node(label_selector=f"{RUN_LABEL}={self.run_id}").items
            up = [
                n
                for n in nodes
                if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
            ]
            return len(up) == len(self.spot_nodes) + len(self.on_demand_nodes)

        wait_for("the night's nodes Ready", ready, timeout=120)

    # --- queues ---
    def create_queues(self, night: Night, system: str, night_number: int = 1) -> NightQueues:
        """Both teams' namespaces and queues for one system's phase (fresh names per phase). The checkpoint
        container is the system's across its nights: a later night reads the shard history of the earlier."""
        tag = f"{self.run_id}-{system}" + (f"{night_number}" if night_number > 1 else "")
        flavors = {}
        for kind in ("spot", "ondemand"):
            name = f"night-{tag}-{kind}"
            spec: dict[str, Any] = {
                "nodeLabels": {POOL_LABEL: f"{self.run_id}-{kind}"},
                "tolerations": [
                    {"key": TAINT, "operator": "Equal", "value": self.run_id, "effect": "NoSchedule"}
                ]
                + ([{**SPOT_TAINT, "operator": "Equal"}] if kind == "spot" else []),
            }
            self.cluster.kueue_create(
                "resourceflavors", {"kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}
            )
            self.flavors.append(name)
            flavors[kind] = name
        cohort = f"{COHORT_PREFIX}-{tag}"
        teams = {
            "genomics": {"spot": night.shape.genomics_cpu, "ondemand": 0},
            "risk": {"spot": 0, "ondemand": night.shape.risk_cpu},
        }
        made: dict[str, tuple[str, str]] = {}
        for team, quota in teams.items():
            namespace, cq = f"night-{team}-{tag}", f"night-{team}-{tag}"
            self.cluster.core.create_namespace(
                {"metadata": {"name": namespace, "labels": {"devcluster/test": "true"}}}
            )
            self.namespaces.append(namespace)
            resource_flavors = [
                {
                    "name": flavors[kind],
                    "resources": [
                        {"name": "cpu", "nominalQuota": str(quota[kind])},
                        {"name": "memory", "nominalQuota": f"{quota[kind]}Gi"},
                    ],
                }
                for kind in ("spot", "ondemand")
            ]
            spec = {
                "cohortName": cohort,
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "queueingStrategy": "BestEffortFIFO",
                "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": resource_flavors}],
                "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "Never"},
            }
            self.cluster.kueue_create(
                "clusterqueues", {"kind": "ClusterQueue", "metadata": {"name": cq}, "spec": spec}
            )
            self.cluster_queues.append(cq)
            self.cluster.kueue_create(
                "localqueues",
                {
                    "kind": "LocalQueue",
                    "metadata": {"name": "night", "namespace": namespace},
                    "spec": {"clusterQueue": cq},
                },
                namespace=namespace,
            )
            made[team] = (namespace, cq)
        for team in teams:
            namespace = made[team][0]
            wait_for(
                f"LocalQueue night in {namespace} active",
                lambda ns=namespace: is_true(self.cluster.kueue_get("localqueues", "night", ns), "Active"),
                timeout=60,
            )
        prefix = f"night-{tag}"
        for step, value in STEP_ORDERS[night.shape.step_order].items():
            name = f"{prefix}-{step}"
            self.cluster.kueue_create(
                "workloadpriorityclasses",
                {
                    "kind": "WorkloadPriorityClass",
                    "metadata": {"name": name},
                    "value": value,
                    "description": "night",
                },
            )
            self.priority_classes.append(name)
        container = f"night-{self.run_id}-{system}"
        return NightQueues(made["genomics"][0], "night", made["risk"][0], "night", prefix, container)

    # --- Airflow's identity, counted ---
    def airflow_identity(self, tmpdir: Path, system: str, account: str = "airflow") -> tuple[str, str]:
        """A ServiceAccount bound to cluster-admin (what it may do is not under test here; how often it asks
        is), and one FlowSchema (exempt priority, so no more throttled than the admin cert) that matches it
        alone: ``apiserver_flowcontrol_dispatched_requests_total`` of that schema counts every request made
        with it, on the server. Returns (the FlowSchema's name, an Airflow connection to the account).
        The workers and triggerers use ``airflow``; the API server's Kueue pages ``airflow-ui``, so the
        night's UI probe is counted apart from the night's work."""
        from kubernetes import client

        name = f"night-{account}-{self.run_id}-{system}"
        namespace = self.namespaces[0]
        self.cluster.core.create_namespaced_service_account(namespace, {"metadata": {"name": account}})
        rbac = client.RbacAuthorizationV1Api(self.cluster.api)
        rbac.create_cluster_role_binding(
            {
                "metadata": {"name": name},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "cluster-admin",
                },
                "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
            }
        )
        self.cluster_role_bindings.append(name)
        token = self.cluster.core.create_namespaced_service_account_token(
            account, namespace, {"spec": {"expirationSeconds": 6 * 3600}}
        ).status.token
        kubeconfig = token_kubeconfig(tmpdir / f"{name}.kubeconfig", account, token)
        subject = {"kind": "ServiceAccount", "serviceAccount": {"name": account, "namespace": namespace}}
        every_resource = {"verbs": ["*"], "resources": ["*"]}
        self._flow_schema(name, 50, subject, every_resource, {"verbs": ["*"], "nonResourceURLs": ["*"]})
        for resource, verb in BREAKDOWN if account == "airflow" else ():  # the UI's: one count
            # ahead of ``name``'s: what it dispatches is that part of the identity's (the probe sums them)
            self._flow_schema(
                breakdown_name(name, resource, verb), 40, subject, {"verbs": [verb], "resources": [resource]}
            )
        conn = json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}})
        return name, conn

    def _flow_schema(
        self,
        name: str,
        precedence: int,
        subject: dict[str, Any],
        resources: dict[str, list[str]],
        non_resource: dict[str, list[str]] | None = None,
    ) -> None:
        """A FlowSchema at the exempt priority level matching ``subject``'s requests of ``resources`` (verbs
        and resources, any group and namespace) and ``non_resource`` URLs."""
        from kubernetes import client

        rule: dict[str, Any] = {
            "subjects": [subject],
            "resourceRules": [{**resources, "apiGroups": ["*"], "namespaces": ["*"], "clusterScope": True}],
        }
        if non_resource:
            rule["nonResourceRules"] = [non_resource]
        client.FlowcontrolApiserverV1Api(self.cluster.api).create_flow_schema(
            {
                "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
                "kind": "FlowSchema",
                "metadata": {"name": name, "labels": {"devcluster/test": "true"}},
                "spec": {
                    "matchingPrecedence": precedence,
                    "priorityLevelConfiguration": {"name": "exempt"},
                    "rules": [rule],
                },
            }
        )
        self.flow_schemas.append(name)

    # --- the end ---
    def drop_phase(self) -> None:
        """What ``create_queues`` and ``airflow_identity`` made (the nodes stay for the next phase)."""
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        def quietly(fn: Any, *args: Any) -> None:
            with contextlib.suppress(ApiException):
                fn(*args)

        for ns in self.namespaces:
            quietly(self.cluster.core.delete_namespace, ns)
        deadline = time.monotonic() + 300
        nudged = False
        while self.namespaces and time.monotonic() < deadline:
            names = {n.metadata.name for n in self.cluster.core.list_namespace().items}
            left = names & set(self.namespaces)
            if not left:
                break
            if not nudged and time.monotonic() > deadline - 240:
                # Seen on 2026-12-04: two nights' namespaces Terminating for two hours with their Jobs still
                # there (the namespace controller said "All content successfully removed") and the pod GC
                # deleting pods of deleted Spot nodes in a loop; the bed started pods 5x slower until
                # the Jobs were deleted by hand. Delete them ourselves.
                nudged = True
                batch = client.BatchV1Api(self.cluster.api)
                for ns in left:
                    with contextlib.suppress(ApiException):
                        batch.delete_collection_namespaced_job(ns, propagation_policy="Background")
            time.sleep(2)
        for cq in self.cluster_queues:
            quietly(self.cluster.kueue_delete, "clusterqueues", cq)
        for rf in self.flavors:
            quietly(self.cluster.kueue_delete, "resourceflavors", rf)
        for pc in self.priority_classes:
            quietly(self.cluster.kueue_delete, "workloadpriorityclasses", pc)
        flow = client.FlowcontrolApiserverV1Api(self.cluster.api)
        for fs in self.flow_schemas:
            quietly(flow.delete_flow_schema, fs)
        rbac = client.RbacAuthorizationV1Api(self.cluster.api)
        for crb in self.cluster_role_bindings:
            quietly(rbac.delete_cluster_role_binding, crb)
        for made in (
            self.namespaces,
            self.cluster_queues,
            self.flavors,
            self.priority_classes,
            self.flow_schemas,
            self.cluster_role_bindings,
        ):
            made.clear()

    def teardown(self) -> None:
        from kubernetes.client.rest import ApiException

        self.drop_phase()
        for node in self.cluster.core.list_node(label_selector=f"{RUN_LABEL}={self.run_id}").items:
            with contextlib.suppress(ApiException):
                self.cluster.core.delete_node(node.metadata.name)
