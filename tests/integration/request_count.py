"""Requests of one client, counted by the API server itself: a ServiceAccount of its own, and API Priority
and Fairness FlowSchemas that match only it (``apiserver_flowcontrol_dispatched_requests_total`` by
``flow_schema``). Other clients of the shared test cluster do not blur the count, which a cluster-wide
``apiserver_request_total`` delta would."""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

from .cluster import Cluster, short_id, token_kubeconfig, wait_for

DISPATCHED = "apiserver_flowcontrol_dispatched_requests_total"
READ = ["get", "list", "watch"]
KUEUE_READ = {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads", "localqueues", "clusterqueues"]}
RULES = [
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": READ},
    {**KUEUE_READ, "verbs": READ},
    {
        "apiGroups": ["visibility.kueue.x-k8s.io"],
        "resources": ["localqueues/pendingworkloads"],
        "verbs": READ,
    },
    {"apiGroups": [""], "resources": ["pods", "events"], "verbs": READ},
]


@dataclass
class CountedClient:
    conn_id: str
    """An Airflow connection (set in this process's environment) that acts as the ServiceAccount."""
    schemas: dict[str, str]  # FlowSchema name -> what it counts ("pods", "other")
    cluster: Cluster

    def counts(self) -> Counter[str]:
        text = self.cluster.get_text("/metrics")
        out: Counter[str] = Counter()
        for line in str(text).splitlines():
            if line.startswith(DISPATCHED + "{"):
                schema = re.search(r'flow_schema="([^"]*)"', line)
                if schema and schema.group(1) in self.schemas:
                    out[self.schemas[schema.group(1)]] += int(float(line.rsplit(" ", 1)[1]))
        return out


@contextlib.contextmanager
def counted_client(cluster: Cluster, namespace: str, tmpdir: Path) -> Iterator[CountedClient]:
    """A ServiceAccount that may read Jobs, Workloads, queues, pods and Events in ``namespace``; its
    requests to pods and to everything else are counted apart."""
    name = f"counted-{short_id()}"
    rbac = client.RbacAuthorizationV1Api(cluster.api)
    cluster.core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    rbac.create_namespaced_role(namespace, {"metadata": {"name": name}, "rules": RULES})
    subject = {"kind": "ServiceAccount", "name": name, "namespace": namespace}
    role_ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}
    rbac.create_namespaced_role_binding(
        namespace, {"metadata": {"name": name}, "roleRef": role_ref, "subjects": [subject]}
    )
    cluster_role = {"metadata": {"name": name}, "rules": [RULES[1]]}  # ClusterQueues are cluster-scoped
    rbac.create_cluster_role(cluster_role)
    rbac.create_cluster_role_binding(
        {"metadata": {"name": name}, "roleRef": {**role_ref, "kind": "ClusterRole"}, "subjects": [subject]}
    )
    token = cluster.core.create_namespaced_service_account_token(
        name, namespace, {"spec": {"expirationSeconds": 3600}}
    ).status.token
    kubeconfig = token_kubeconfig(tmpdir / f"{name}.kubeconfig", name, token)
    flow = client.FlowcontrolApiserverV1Api(cluster.api)
    sa = {"kind": "ServiceAccount", "serviceAccount": {"name": name, "namespace": namespace}}
    everything: dict[str, Any] = {
        "verbs": ["*"],
        "apiGroups": ["*"],
        "namespaces": ["*"],
        "clusterScope": True,
    }
    specs = [
        ("pods", 40, [{**everything, "apiGroups": [""], "resources": ["pods"]}], None),
        ("other", 41, [{**everything, "resources": ["*"]}], [{"verbs": ["*"], "nonResourceURLs": ["*"]}]),
    ]
    schemas = {}
    for key, precedence, resource_rules, non_resource in specs:
        rule: dict[str, Any] = {"subjects": [sa], "resourceRules": resource_rules}
        if non_resource:
            rule["nonResourceRules"] = non_resource
        schema = f"{name}-{key}"
        flow.create_flow_schema(
            {
                "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
                "kind": "FlowSchema",
                "metadata": {"name": schema, "labels": {"devcluster/test": "true"}},
                "spec": {
                    "matchingPrecedence": precedence,
                    "priorityLevelConfiguration": {"name": "exempt"},
                    "rules": [rule],
                },
            }
        )
        schemas[schema] = key
    conn_id = name.replace("-", "_")
    env_key = f"AIRFLOW_CONN_{conn_id.upper()}"
    os.environ[env_key] = json.dumps(
        {"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}}
    )
    counted = CountedClient(conn_id, schemas, cluster)
    try:
        probe = client.BatchV1Api(_api(kubeconfig))
        wait_for(  # RBAC and the FlowSchemas take a moment to apply
            "the counted client through RBAC and APF",
            lambda: (_list_ok(probe, namespace) and counted.counts()["other"] > 0) or None,
            timeout=60,
            interval=0.5,
        )
        yield counted
    finally:
        os.environ.pop(env_key, None)
        for schema in schemas:
            with contextlib.suppress(client.ApiException):
                flow.delete_flow_schema(schema)
        for delete in (rbac.delete_cluster_role_binding, rbac.delete_cluster_role):
            with contextlib.suppress(client.ApiException):
                delete(name)


def _api(kubeconfig: Path) -> client.ApiClient:
    from kubernetes import config

    return config.new_client_from_config(config_file=str(kubeconfig))


def _list_ok(batch: client.BatchV1Api, namespace: str) -> bool:
    try:
        batch.list_namespaced_job(namespace, limit=1)
        return True
    except client.ApiException:
        return False
